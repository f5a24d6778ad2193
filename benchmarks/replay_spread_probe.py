"""Why do identical kernels get different performance fractions in one grading run? (issue 18)

Grades N identical copies of the lab's master (default lab 2, 24 copies) in ONE run of
``python -m autograder grade`` as shipped (--workers 8), and prints, per copy in the order
phase 2 timed it: the seconds since phase 2's first timing, the copy's per-call time, the
master's per-call time from the windows paired with it, the fraction against the torch
reference timed once at the start of the run (the rule before issue 18) and the fraction
against the paired master (the rule now). A ``nvidia-smi`` trace (SM and memory clocks,
temperature, power, every 0.5 s) runs beside the grader where nvidia-smi exists.

What it separates:
- heat: the reference is timed before phase 1, phase 2 after every child has run its tests on
  the GPU (eight at once in a batch, for minutes); the trace shows the GPU's (and its HBM's)
  temperature at the reference and at each copy;
- drift: the master is the same kernel in every pair, so its per-call time across phase 2
  (``master_drift``) is the GPU's own drift; a trend of the old fraction with timing order
  (``old_vs_order``, Spearman) against none in the paired one says the reference timed once
  at the start is what spread the grades;
- noise within a pair: the paired fractions' spread is what is left (timing noise, addresses,
  L2 state), which pairing cannot cancel;
- the master's fraction of torch on this GPU (the run's ``master`` record).

Usage on a GPU machine (about 2-3 minutes on an H100; writes one JSON record):

    python3 benchmarks/replay_spread_probe.py --copies 24 --out $OUT/replay_spread_h100.json

Safe to kill (benchmarks/sanitizer_probe.py's subreaper and stop handler): a SIGTERM writes
the record as far as it got.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
import sanitizer_probe as probe  # noqa: E402  (its subreaper, sweep, stop handler, run_grader)


def spearman(xs, ys) -> float | None:
    """Rank correlation (no ties expected in timings), None for fewer than 3 points."""
    n = len(xs)
    if n < 3:
        return None

    def ranks(v):
        order = sorted(range(n), key=lambda i: v[i])
        r = [0] * n
        for k, i in enumerate(order):
            r[i] = k
        return r

    rx, ry = ranks(xs), ranks(ys)
    d2 = sum((a - b) ** 2 for a, b in zip(rx, ry))
    return 1 - 6 * d2 / (n * (n * n - 1))


SMI_FIELDS = ["timestamp", "index", "clocks.sm", "clocks.mem", "temperature.gpu", "power.draw"]


def _smi_knows(fields) -> bool:
    return subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader"],
                          capture_output=True, timeout=30).returncode == 0


def smi_trace(path: Path):
    """nvidia-smi sampling every 0.5 s into ``path`` (a field this driver does not know fails
    the whole query, so each optional one is tried first); None where there is no nvidia-smi.
    HBM temperature matters: hot HBM refreshes more often, and a memory-bound kernel loses
    bandwidth to it."""
    if not shutil.which("nvidia-smi"):
        return None
    fields = list(SMI_FIELDS)
    if _smi_knows(fields + ["temperature.memory"]):
        fields.append("temperature.memory")
    for reasons in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        if _smi_knows(fields + [reasons]):
            fields.append(reasons)
            break
    path.with_suffix(".fields").write_text(",".join(fields))
    f = open(path, "w")
    return subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(fields)}",
                             "--format=csv,noheader,nounits", "-lms", "500"],
                            stdout=f, stderr=subprocess.DEVNULL)


def summarize_smi(path: Path) -> dict | None:
    if not path.exists():
        return None
    fields = path.with_suffix(".fields").read_text().split(",")
    rows = [ln.split(", ") for ln in path.read_text().splitlines() if ln.count(",") >= len(fields) - 1]
    if not rows:
        return None

    def col(i):
        out = []
        for r in rows:
            try:
                out.append(float(r[i]))
            except (ValueError, IndexError):
                pass
        return out

    s = {"fields": fields, "samples": len(rows)}
    for i, name in enumerate(fields):
        if name in ("timestamp", "index") or "reasons" in name:
            continue
        v = col(i)
        if v:
            s[name] = {"min": min(v), "median": statistics.median(v), "max": max(v),
                       "first": v[0], "last": v[-1]}
    reasons = [i for i, n in enumerate(fields) if "reasons" in n]
    if reasons:
        s["event_reasons"] = sorted({r[reasons[0]].strip() for r in rows if len(r) > reasons[0]})
    s["rows"] = rows[-2000:]
    return s


def smi_at(smi: dict | None, when: float) -> dict | None:
    """The nvidia-smi sample nearest to the wall-clock time ``when`` (a copy's timing)."""
    import datetime as dt

    if not smi or not smi.get("rows"):
        return None
    best, best_d = None, None
    for r in smi["rows"]:
        try:
            t = dt.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
        except ValueError:
            continue
        if best_d is None or abs(t - when) < best_d:
            best, best_d = r, abs(t - when)
    if best is None:
        return None
    return {name: best[i].strip() for i, name in enumerate(smi["fields"]) if i < len(best)}


def analyse(out: Path, n: int, smi: dict | None = None) -> dict:
    log = [json.loads(ln) for ln in (out / "measurements.jsonl").read_text().splitlines()]
    refs = {r["gpu"]: r for r in log if r.get("kind") == "reference" and "reference_s" in r}
    masters = {r["gpu"]: r for r in log if r.get("kind") == "master"}
    timed = [r for r in log if r.get("kind") == "timing_windows"]
    rows = []
    t0 = min((w["t"] for r in timed for w in r["windows"] if "t" in w), default=None)
    for order, r in enumerate(timed):
        sid, gpu = r["id"], r["gpu"]
        sub = [w["per_call_s"] for w in r["windows"]]
        mas = [w["per_call_s"] for w in r.get("master_windows", [])]
        ref_s = refs.get(gpu, {}).get("reference_s")
        per, mper = statistics.median(sub), (statistics.median(mas) if mas else None)
        rj = out / sid / "results.json"
        res = json.loads(rj.read_text()) if rj.exists() else {}
        perf = (res.get("extra_data") or {}).get("performance") or {}
        rows.append({"order": order, "id": sid, "gpu": gpu, "pooled": r.get("pooled", False),
                     "t_s": (r["windows"][0]["t"] - t0) if t0 is not None and "t" in r["windows"][0] else None,
                     "per_call_us": per * 1e6, "master_per_call_us": mper * 1e6 if mper else None,
                     "old_fraction": ref_s / per if ref_s else None,
                     "paired_fraction": mper / per if mper else None,
                     "window_spread_pct": (max(sub) - min(sub)) / per * 100,
                     "unprimed_windows": sum(1 for w in r["windows"] + r.get("master_windows", [])
                                             if w.get("primed") is False),
                     "scored_fraction": perf.get("fraction"), "score": res.get("score"),
                     "wall": r.get("time"), "smi": smi_at(smi, r["time"]) if r.get("time") else None,
                     "max_score": (res.get("extra_data") or {}).get("max_score")})
    first = [r for r in rows if not r["pooled"]]

    def spread(key):
        v = [r[key] for r in first if r[key] is not None]
        return {"min": min(v), "median": statistics.median(v), "max": max(v),
                "spread_pp": (max(v) - min(v)) * 100} if v else None

    mv = [r["master_per_call_us"] for r in first if r["master_per_call_us"]]
    return {
        "copies": n, "timed": len(first), "remeasured": sum(r["pooled"] for r in rows),
        "rows": rows,
        "old_fraction": spread("old_fraction"), "paired_fraction": spread("paired_fraction"),
        "scored_fraction": spread("scored_fraction"),
        "old_vs_order": spearman([r["order"] for r in first], [r["old_fraction"] or 0 for r in first]),
        "paired_vs_order": spearman([r["order"] for r in first],
                                    [r["paired_fraction"] or 0 for r in first]),
        "master_drift": {"first_us": mv[0], "last_us": mv[-1], "min_us": min(mv), "max_us": max(mv),
                         "range_pct": (max(mv) - min(mv)) / statistics.median(mv) * 100} if mv else None,
        "master_alone_at_start": {g: {"per_call_us": m.get("per_call_s", 0) * 1e6,
                                      "fraction_of_reference": m.get("fraction_of_reference"),
                                      "error": m.get("error")} for g, m in masters.items()},
        "reference_us": {g: r["reference_s"] * 1e6 for g, r in refs.items()},
        # the GPU as nvidia-smi saw it when the reference was timed (before phase 1) and when the
        # first and last copies were: phase 1's children heat it between the two
        "smi_at_reference": {g: smi_at(smi, r["time"]) for g, r in refs.items() if r.get("time")},
        "smi_first_last_copy": [rows[0]["smi"], rows[-1]["smi"]] if rows else None,
        "full_marks": sum(1 for r in rows if not r["pooled"] and r["score"] is not None
                          and r["score"] == r["max_score"]),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--copies", type=int, default=24)
    ap.add_argument("--lab", default="lab2_packed_swiglu")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=220)
    args = ap.parse_args(argv)
    from book.provenance import provenance

    rec = {"provenance": provenance("python3 benchmarks/replay_spread_probe.py "
                                    + " ".join(argv if argv is not None else sys.argv[1:]))}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    probe.safe_to_kill(rec, args.out)
    work = Path(tempfile.mkdtemp(prefix="replay-spread-"))
    subs = work / "subs"
    subs.mkdir()
    for i in range(args.copies):
        shutil.copy(ROOT / "solutions" / f"{args.lab}.ipynb", subs / f"copy_{i:03d}.ipynb")
    out = work / "graded"
    smi_path = work / "smi.csv"
    smi = smi_trace(smi_path)
    rec["grade"] = probe.run_grader([args.lab, str(subs), "--out", str(out), "--workers",
                                     str(args.workers), "--gpus", str(args.gpus), "--quiet"],
                                    args.budget_s)
    if smi is not None:
        smi.terminate()
        smi.wait()
    rec["smi"] = summarize_smi(smi_path)
    try:
        rec.update(analyse(out, args.copies, rec["smi"]))
    except Exception as e:  # the grader's own record says what happened
        rec["analyse_error"] = f"{type(e).__name__}: {e}"
    args.out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"grader rc={rec['grade']['returncode']} in {rec['grade']['seconds']} s; "
          f"left: {rec['grade']['left_running_then_killed']}")
    if "rows" not in rec:
        print(rec.get("analyse_error"), rec["grade"]["stderr"][-2000:])
        return 1
    print(f"{'order':>5} {'copy':>10} {'t s':>6} {'copy us':>8} {'master us':>9} "
          f"{'old frac':>8} {'paired':>7} {'win spread%':>11} {'score':>6}")
    for r in rec["rows"]:
        f = lambda x, fmt: "-" if x is None else format(x, fmt)  # noqa: E731
        print(f"{r['order']:5d} {r['id']:>10} {f(r['t_s'], '6.1f')} {r['per_call_us']:8.1f} "
              f"{f(r['master_per_call_us'], '9.1f')} {f(r['old_fraction'], '8.3f')} "
              f"{f(r['paired_fraction'], '7.3f')} {r['window_spread_pct']:11.2f} {r['score']!s:>6}"
              + (f"  smi: {' '.join(str(v) for k, v in r['smi'].items() if k not in ('timestamp', 'index'))}"
                 if r["smi"] else "")
              + ("  (re-measure, pooled)" if r["pooled"] else ""))
    for k in ("old_fraction", "paired_fraction", "scored_fraction"):
        print(f"{k}: {rec[k]}")
    print(f"trend with timing order (Spearman): old {rec['old_vs_order']}, paired {rec['paired_vs_order']}")
    print(f"master drift over phase 2: {rec['master_drift']}")
    print(f"master alone at the start: {rec['master_alone_at_start']}; reference us: {rec['reference_us']}")
    print(f"nvidia-smi when the reference was timed: {rec['smi_at_reference']}; at the first and last "
          f"copies: {rec['smi_first_last_copy']}")
    print(f"full marks: {rec['full_marks']} of {args.copies}; re-measured: {rec['remeasured']}")
    if rec["smi"]:
        print({k: v for k, v in rec["smi"].items() if k != "rows"})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
