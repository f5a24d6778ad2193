"""The autograder on a GPU, as an instructor runs it: one command, one report.

    python -m tools.grader_report OUT_DIR [--only STEP[,STEP]] [--gpus N] [--batch N]

Steps (each a `python -m autograder grade` process, exactly as shipped; a failing step is
recorded and the next one runs):
  clean     lab 2: the solution and four honest neighbours alone (their clean scores)
  hostile   lab 2: the same neighbours graded in ONE run (3 workers, as shipped) beside every
            hostile fixture (tests/fixtures/submissions), the threats of issue 12
            (tests/fixtures/threats), the resource families of issue 18 (tests/fixtures/neighbours)
            and the lab-2 multi-kernel files (tests/fixtures/multikernel), bounds fixtures and
            lesson control (tests/fixtures/bounds, controls); one neighbour's CUDA
            initialisation is made to fail once (the tests' fault injection,
            tests/grader/faults.py, runs this step's grader): it must be graded again
            alone; each neighbour must stay within 2 percentage points of its clean fraction;
            afterwards no process of any submission may be alive or on the GPU
  labs      every other lab (autograder/labs/): solution and untouched lab, and the lab's own
            hostile and unusual files where it has them (tests/fixtures/labN/*.py, e.g. lab 5's),
            its bounds fixtures and its lesson controls (lab_fixtures; lab 2's are in hostile)
  repeat    the lab-2 solution five times in one run (spread of the fraction)
  batch     N copies of the lab-2 solution (default 200), --workers 8, wall time (target 600 s);
            the spread of the identical copies' fractions (of the lab's master, which scores
            them, and of torch's reference), the master's fraction of torch's reference per
            GPU, and how many fractions near a scoring line were re-measured (batch_stats)

Writes OUT_DIR/report.md and OUT_DIR/summary.json (with book.provenance.provenance()).
Commit them under records/grader/<gpu>/.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autograder.labs import names, resolve
from autograder.sandbox import CHILD_MARK

REPO = Path(__file__).resolve().parent.parent
FIX = REPO / "tests" / "fixtures" / "submissions"
THREATS = REPO / "tests" / "fixtures" / "threats"
HARM = REPO / "tests" / "fixtures" / "neighbours"        # storage, threads, a faked init failure
MULTI = REPO / "tests" / "fixtures" / "multikernel"      # honest and hostile multi-kernel lab-2 files



def by_id(out, graded, paths):
    """{key: result} of ``paths`` among the files ``graded`` in one run, each found under the id
    the grader gave it (autograder.grade.collect: the file's stem, or, where two graded files
    share a stem, the folder's name and the stem); the key is the stem where it is unique,
    else that id (two fixtures named alike, e.g. multikernel/ and controls/
    lab2_two_kernels.py, once left both without a result)."""
    from autograder.grade import collect

    ids = {Path(p): sid for sid, p in collect(graded)}
    stems = [Path(p).stem for p in graded]
    return {(p.stem if stems.count(p.stem) == 1 else ids[Path(p)]): result(out, ids[Path(p)])
            for p in map(Path, paths)}

def lab_fixtures(lab: str) -> list:
    """A lab's own hostile and unusual submissions: tests/fixtures/labN/*.py (N its number),
    its bounds fixtures (tests/fixtures/bounds/labN_*.py: a store past the end of `out`, a
    kernel that forgets blockIdx) and its "lesson not learned" controls
    (tests/fixtures/controls/labN_*.py, whose fractions of the master set the rubric's lines:
    python -m benchmarks.lesson_controls_probe --from-report reads them from this report)."""
    short = lab.split("_")[0]
    fix = REPO / "tests" / "fixtures"
    return (sorted((fix / short).glob("*.py")) + sorted((fix / "bounds").glob(f"{short}_*.py"))
            + sorted((fix / "controls").glob(f"{short}_*.py")))
# In the hostile run this neighbour's first child is made to fail in CUDA initialisation (the
# tests' fault injection): it must be graded again alone and keep its clean score.
INJECTED = "neighbour_0"
STEPS = ("clean", "hostile", "labs", "repeat", "batch")
NEIGHBOURS = 4
# the "labs" step: every lab but lab 2, which the other steps grade (autograder/labs/)
OTHER_LABS = tuple(n for n in names() if n != resolve("lab2"))


def grade(work: Path, name: str, lab: str, subs, *extra, timeout=420, faults=None) -> dict:
    """One grading run, as shipped (``faults``: through tests/grader/faults.py, which injects
    them where the grader starts a child)."""
    out = work / name
    shutil.rmtree(out, ignore_errors=True)
    run = [str(REPO / "tests" / "grader" / "faults.py"), faults] if faults else ["-m", "autograder"]
    cmd = [sys.executable, *run, "grade", lab, *map(str, subs), "--out", str(out), *extra]
    t0 = time.time()
    try:
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        rc, text = p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        rc, text = "timeout", str(e.stdout or "")[-3000:]
    wall = time.time() - t0
    print(f"== {name}: rc={rc} wall={wall:.1f} s\n{text[-1200:]}", flush=True)
    return {"step": name, "lab": lab, "rc": rc, "wall_s": wall, "n": len(subs), "out": out,
            "command": " ".join(["python -m autograder grade", lab, f"<{len(subs)} submissions>", *extra]),
            "tail": text[-2000:]}


def result(out: Path, sid: str) -> dict | None:
    p = out / sid / "results.json"
    if not p.exists():
        return None
    r = json.loads(p.read_text())
    e = r["extra_data"]
    perf = e.get("performance") or {}
    return {"score": r["score"], "max": e["max_score"], "status": e["status"],
            "fraction": perf.get("fraction"), "fraction_of_reference": perf.get("fraction_of_reference"),
            "basis": perf.get("basis"), "remeasured": perf.get("remeasured"),
            "bandwidth": perf.get("bandwidth"),
            "flops_per_s": perf.get("flops_per_s"), "verified": perf.get("verified"),
            "launches_per_call": perf.get("launches_per_call"), "flags": e.get("flags", []),
            "said": [(t["name"], t["score"], t["max_score"], t["output"][:240]) for t in r["tests"]
                     if t["score"] < t["max_score"] or t["name"] == "performance"]}


def log_records(out: Path, kinds) -> list:
    p = out / "measurements.jsonl"
    if not p.exists():
        return []
    return [r for r in map(json.loads, open(p)) if r.get("kind") in kinds]


def spread(values) -> dict:
    """min, median, max and max - min of a list of fractions (None where there are none)."""
    import statistics

    v = sorted(x for x in values if x is not None)
    if not v:
        return {"n": 0, "min": None, "median": None, "max": None, "spread": None}
    return {"n": len(v), "min": v[0], "median": statistics.median(v), "max": v[-1],
            "spread": v[-1] - v[0]}


def batch_stats(out: Path, ids) -> dict:
    """What the batch step states about N identical copies graded in one run: the spread of
    their scored fractions (of the lab's master) and of their fractions of torch's reference,
    the master's fraction of torch's reference on each GPU (measurements.jsonl, kind master),
    and how many fractions were re-measured because they lay near a scoring line."""
    res = [result(out, sid) for sid in ids]
    res = [r for r in res if r]
    masters = [{"gpu": m.get("gpu"), "fraction_of_reference": m.get("fraction_of_reference"),
                "bandwidth": m.get("bandwidth"), "error": m.get("error")}
               for m in log_records(out, {"master"})]
    return {"fractions": spread(r["fraction"] for r in res),
            "fractions_of_reference": spread(r["fraction_of_reference"] for r in res),
            "basis": sorted({r["basis"] for r in res if r["basis"]}),
            "masters": masters,
            "remeasured": len(log_records(out, {"remeasure"})),
            "remeasure_due": len(log_records(out, {"remeasure_due"}))}


def ancestors(pid: int) -> set[int]:
    """``pid`` and every process above it: the shell that started this report may name the
    child's entry point in its own command line (a `ps | grep` of it), and is no submission's
    process."""
    out = set()
    while pid > 0 and pid not in out:
        out.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
        except (OSError, ValueError, IndexError):
            break
    return out


def leftovers() -> dict:
    """Processes of any submission still alive (command line names the child's entry point,
    ``CHILD_MARK``, or a threat fixture's tag) and NVML's compute processes, at the end of the run."""
    alive = []
    mine = ancestors(os.getpid())
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) in mine:
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if CHILD_MARK in cmd or "agthreat" in cmd or "nsinit" in cmd:
            alive.append(f"{d.name}: {cmd[:160]}")
    try:
        from autograder import gpuwatch

        gpu = [p.describe() for p in gpuwatch.processes(None, max_age=0)] if gpuwatch.available() else \
            f"NVML unavailable: {gpuwatch.unavailable_reason()}"
    except Exception as e:
        gpu = f"NVML check failed: {e}"
    return {"alive": alive, "gpu_processes": gpu}


def neighbours(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = [REPO / "solutions" / "lab2_packed_swiglu.ipynb"]
    for i in range(NEIGHBOURS):
        q = folder / f"neighbour_{i}.py"
        shutil.copy(FIX / "honest_simple.py", q)
        out.append(q)
    return out


def main(argv) -> int:
    base = Path(argv[0]).resolve()
    only = set(argv[argv.index("--only") + 1].split(",")) if "--only" in argv else set(STEPS)
    gpus = argv[argv.index("--gpus") + 1] if "--gpus" in argv else "1"
    n_batch = int(argv[argv.index("--batch") + 1]) if "--batch" in argv else 200
    from book.provenance import provenance

    summary = {"provenance": provenance("python -m tools.grader_report " + " ".join(argv)), "steps": []}
    if not summary["provenance"].get("commit"):   # every record states the grader it ran
        raise SystemExit("tools.grader_report: no commit to record (no .git here): run it as "
                         "COURSE_COMMIT=<the commit of this tree> python -m tools.grader_report ...")
    base.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="agreport-"))
    save(base, summary)
    subs_n = neighbours(work / "subs")
    ids_n = ["lab2_packed_swiglu"] + [f"neighbour_{i}" for i in range(NEIGHBOURS)]
    if "clean" in only:
        st = grade(work, "clean", "lab2", subs_n, "--gpus", gpus)
        summary["clean"] = {sid: result(st["out"], sid) for sid in ids_n}
        summary["steps"].append(st)
        save(base, summary)
    if "hostile" in only:
        hostile = sorted(FIX.glob("*.py")) + [FIX / "malformed.ipynb"] + sorted(THREATS.glob("*.py"))
        hostile = [p for p in hostile if p.name != "honest_simple.py"]
        hostile += sorted(HARM.glob("*.py")) + sorted(MULTI.glob("lab2_*.py"))
        hostile += lab_fixtures(resolve("lab2"))   # its bounds fixtures and its control
        st = grade(work, "hostile", "lab2", subs_n + hostile, "--gpus", gpus,
                   faults=f"cuda_init:{INJECTED}")
        time.sleep(2)
        summary["hostile"] = {"neighbours": {sid: result(st["out"], sid) for sid in ids_n},
                              "hostile": by_id(st["out"], subs_n + hostile, hostile),
                              "leftovers": leftovers(),
                              "discarded": log_records(st["out"], {"window_discarded"}),
                              "injected": INJECTED,
                              "oom_regrades": log_records(st["out"], {"oom_regrade", "regrade_alone"}),
                              "regrade_outcomes": log_records(st["out"], {"regrade_outcome"}),
                              "after_exit": log_records(st["out"], {"after_exit"})}
        summary["steps"].append(st)
        save(base, summary)
    if "labs" in only:
        summary["labs"] = {}
        for lab in OTHER_LABS:
            extra = lab_fixtures(lab)
            st = grade(work, lab, lab, [REPO / "solutions" / f"{lab}.ipynb", REPO / "labs" / f"{lab}.ipynb"]
                       + extra, "--gpus", gpus)
            summary["labs"][lab] = {"solution": result(st["out"], "solutions_" + lab) or result(st["out"], lab),
                                    "untouched": result(st["out"], "labs_" + lab),
                                    "fixtures": by_id(st["out"], [REPO / "solutions" / f"{lab}.ipynb",
                                                                  REPO / "labs" / f"{lab}.ipynb"] + extra,
                                                      extra),
                                    "references": log_records(st["out"], {"reference"})}
            summary["steps"].append(st)
            save(base, summary)
    if "repeat" in only:
        d = work / "repeat_subs"
        d.mkdir(exist_ok=True)
        for i in range(5):
            shutil.copy(REPO / "solutions" / "lab2_packed_swiglu.ipynb", d / f"same_kernel_{i}.ipynb")
        st = grade(work, "repeat", "lab2", [d], "--gpus", gpus)
        fr = [((result(st["out"], f"same_kernel_{i}") or {}).get("fraction")) for i in range(5)]
        fr = [f for f in fr if f]
        summary["repeat"] = {"fractions": fr, "spread_pp": (max(fr) - min(fr)) * 100 if fr else None,
                             **batch_stats(st["out"], [f"same_kernel_{i}" for i in range(5)])}
        summary["steps"].append(st)
        save(base, summary)
    if "batch" in only:
        d = work / "batch_subs"
        d.mkdir(exist_ok=True)
        for i in range(n_batch):
            shutil.copy(REPO / "solutions" / "lab2_packed_swiglu.ipynb", d / f"student_{i:03d}.ipynb")
        st = grade(work, "batch", "lab2", [d], "--workers", str(8 * int(gpus)), "--gpus", gpus, timeout=900)
        rows = list(csv.DictReader(open(st["out"] / "grades.csv"))) if (st["out"] / "grades.csv").exists() else []
        full = sum(1 for r in rows if r["total"] and float(r["total"]) == float(r["max"]))
        refs = log_records(st["out"], {"reference"})
        summary["batch"] = {"n": n_batch, "graded": len(rows), "full_marks": full, "wall_s": st["wall_s"],
                            "gpus": int(gpus), "references": [{k: r.get(k) for k in
                                                               ("gpu", "reference_bandwidth", "copy_bandwidth")}
                                                              for r in refs],
                            **batch_stats(st["out"], [f"student_{i:03d}" for i in range(n_batch)])}
        summary["steps"].append(st)
        save(base, summary)
    summary["leftovers_at_end"] = leftovers()
    save(base, summary)
    print((base / "report.md").read_text())
    return 0


def save(base: Path, s: dict) -> None:
    clean = json.loads(json.dumps(s, default=str))
    (base / "summary.json").write_text(json.dumps(clean, indent=1))
    try:
        text = render(clean)
    except Exception as e:  # a half-finished run still leaves its summary
        text = f"report could not be rendered yet: {e!r}\n"
    (base / "report.md").write_text(text)


def _pct(x):
    return "-" if x is None else f"{x:.1%}"


def render(s: dict) -> str:
    p = s["provenance"]
    L = ["# The autograder on a GPU", "",
         f"Generated by `{p.get('command')}` on {p.get('date')} (commit {p.get('commit')}).", "",
         f"GPU {p.get('gpu')}, driver {p.get('driver')} (CUDA {p.get('driver_cuda')}), numba "
         f"{p.get('numba')}, numba-cuda {p.get('numba_cuda')}, torch {p.get('torch')}, numpy {p.get('numpy')}.", "",
         "Every figure is read from the grading runs' own results (summary.json). Performance is the "
         "trusted replay of each submission's recorded launches, timed with CUDA events in the "
         "grader's replay process, against the lab's master timed the same way in windows "
         "alternating with the submission's on the same GPU in the same run (records made before "
         "issue 18: against the torch reference timed once per run).", ""]
    if "clean" in s or "hostile" in s:
        L += ["## Honest neighbours: clean run vs graded beside every hostile submission", "",
              "| submission | clean score | clean fraction | hostile-run score | hostile-run fraction | "
              "difference (pp) |", "|---|---|---|---|---|---|"]
        hn = (s.get("hostile") or {}).get("neighbours", {})
        for sid, c in (s.get("clean") or {}).items():
            h = hn.get(sid) or {}
            c = c or {}
            d = ((h.get("fraction") or 0) - (c.get("fraction") or 0)) * 100 if h.get("fraction") and \
                c.get("fraction") else None
            L.append(f"| {sid} | {c.get('score')}/{c.get('max')} | {_pct(c.get('fraction'))} | "
                     f"{h.get('score')}/{h.get('max')} | {_pct(h.get('fraction'))} | "
                     f"{'-' if d is None else f'{d:+.2f}'} |")
        L.append("")
    if "hostile" in s:
        h = s["hostile"]
        L += ["## Hostile and flawed submissions (same run)", "", "| submission | score | what the grader said |",
              "|---|---|---|"]
        for sid, r in h["hostile"].items():
            if not r:
                L.append(f"| {sid} | (no result) | |")
                continue
            said = "; ".join(f"{t[0]}: {t[3]}" for t in r["said"][:2]).replace("|", "/").replace("\n", " ")[:380]
            L.append(f"| {sid} | {r['score']}/{r['max']} | {said} |")
        lo = h["leftovers"]
        L += ["", f"After the run: processes of submissions alive: {len(lo['alive'])} "
              f"({'; '.join(lo['alive'])[:300] or 'none'}); GPU compute processes: "
              f"{lo['gpu_processes'] if lo['gpu_processes'] else 'none'}.",
              f"Replay requests discarded because a foreign process held the GPU: {len(h['discarded'])}; "
              f"submissions graded again alone (out of GPU memory, or a failure in CUDA or OS initialisation, beside others): {len(h['oom_regrades'])}.", ""]
    if "labs" in s:
        L += ["## The other labs", "", "| lab | submission | score | scored fraction (basis) | "
              "fraction of the lab's reference | flags, first failure |", "|---|---|---|---|---|---|"]
        for lab, d in s["labs"].items():
            whos = [(who, d.get(who)) for who in ("solution", "untouched")]
            whos += sorted((d.get("fixtures") or {}).items())
            for who, r in whos:
                r = r or {}
                said = "; ".join(r.get("flags") or [])
                failed = [t for t in r.get("said") or [] if t[0] != "performance"]
                if failed:
                    said += (" " if said else "") + f"{failed[0][0]}: {failed[0][3][:160]}"
                L.append(f"| {lab} | {who} | {r.get('score')}/{r.get('max')} | {_pct(r.get('fraction'))} "
                         f"({r.get('basis') or 'reference'}) | {_pct(r.get('fraction_of_reference'))} | "
                         f"{said.replace('|', '/').replace(chr(10), ' ')} |")
        L.append("")
    if "repeat" in s:
        r = s["repeat"]
        spread = "-" if r["spread_pp"] is None else f"{r['spread_pp']:.2f}"
        fr = r["fractions"]   # each fraction (older reports) or their spread (batch_stats)
        shown = (", ".join(_pct(x) for x in fr) if isinstance(fr, list)
                 else f"min {_pct(fr['min'])}, median {_pct(fr['median'])}, max {_pct(fr['max'])}")
        L += ["## The same kernel five times in one run", "",
              f"Fractions: {shown}; spread {spread} "
              "percentage points (target: within 2).", ""]
        if "fractions_of_reference" in r:
            L += render_batch_stats(r)[2:]
    if "batch" in s:
        b = s["batch"]
        L += ["## Throughput", "",
              f"{b['graded']} of {b['n']} lab-2 submissions graded ({b['full_marks']} with full marks) in "
              f"{b['wall_s']:.0f} s on {b['gpus']} GPU(s) (target: 200 in at most 600 s). References per GPU: "
              + "; ".join(f"GPU {r['gpu']}: {r['reference_bandwidth'] / 1e12:.3f} TB/s" for r in b["references"]
                          if r.get("reference_bandwidth")), ""]
        if "fractions" in b:
            L += render_batch_stats(b)
    L += ["## Steps", "", "| step | rc | wall |", "|---|---|---|"]
    for st in s["steps"]:
        L.append(f"| {st['step']} | {st['rc']} | {float(st['wall_s']):.0f} s |")
    return "\n".join(L) + "\n"


def render_batch_stats(b: dict) -> list:
    def line(what, d):
        if not d["n"]:
            return f"- {what}: none measured."
        return (f"- {what}: min {_pct(d['min'])}, median {_pct(d['median'])}, max {_pct(d['max'])}; "
                f"spread (max - min) {d['spread'] * 100:.2f} percentage points over {d['n']} copies.")

    basis = ", ".join(b.get("basis") or []) or "-"
    L = ["### The identical copies", "",
         line(f"Scored fraction (basis: {basis})", b["fractions"]),
         line("Fraction of torch's reference (information)", b["fractions_of_reference"])]
    for m in b["masters"]:
        L.append(f"- The lab's master on GPU {m['gpu']}: "
                 + (f"could not be timed ({m['error']})" if m.get("error") else
                    f"{_pct(m['fraction_of_reference'])} of torch's reference."))
    L += [f"- Fractions re-measured alone because they lay near a scoring line: {b['remeasured']} "
          f"(due: {b['remeasure_due']}).", ""]
    return L


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
