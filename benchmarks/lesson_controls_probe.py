"""Each lab's master against its "lesson not learned" control, timed by the grader on a GPU:
the figures every rubric's performance lines are set from (issue 28).

Record: `records/labs/lesson_controls_<gpu>.json` (any GPU of book.specs; the H100's so far).

A control is a correct solution that misses what the lab teaches (lab 2's two kernels, lab 3's
two-byte loads, lab 4's and lab 5's unfused two passes: the ``derived`` of each lab module,
written to tests/fixtures/controls/ by ``python -m tools.lab_fixtures --write``); each rubric
names its own ([performance] control, by name). For every kernel lab this runs `python -m
autograder grade` as shipped on a copy of the master and every control of that lab, so each
fraction is exactly what the grader scores: the master's time over the submission's, timed in
alternating windows on the same GPU in the same run. From the named control's fraction,
``autograder.rubric.lines_from_control`` gives the lines (full marks at 80% of the master or
halfway from the control to the master, whichever is higher; the control earning a quarter of
the points); chapters/appendix_instructors.md states the rule.

    python3 -m benchmarks.lesson_controls_probe --out $OUT/lesson_controls_<gpu>.json
    python3 -m benchmarks.lesson_controls_probe --out ... --from-report $OUT/h100/summary.json
        (no GPU time: the fractions of a grader report that graded the controls,
         `python -m tools.grader_report`, steps hostile and labs)
    python3 -m benchmarks.lesson_controls_probe --apply records/labs/lesson_controls_h100.json
        (no GPU: writes each rubric's zero_at and full_at from the committed record)

Prints one row per lab and control; writes every figure with provenance.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SEED = "20281"   # every lab's run draws the same hidden and timing cases


def kernel_labs() -> list[str]:
    from autograder import labs

    return [n for n, s in labs.registry().items() if s.kernel]


def controls_of(lab: str) -> list[Path]:
    """The lab's controls' files, as its module derives them."""
    from tools.lab_fixtures import fixtures

    return fixtures("controls", lab)


def named_control(lab: str, rubric_dir: Path | None = None) -> str:
    """The name (the file's stem) of the control the lab's rubric names."""
    from autograder.rubric import load_rubric

    path = (rubric_dir / f"{lab}.toml") if rubric_dir else None
    return load_rubric(lab, path)["performance"]["control"]


def _row(res: dict | None) -> dict | None:
    """What the record keeps of one graded submission (a results.json, or the grader report's
    summary of one)."""
    if res is None:
        return None
    if "extra_data" in res:   # a results.json
        e = res["extra_data"]
        perf = e.get("performance") or {}
        tests = [t for t in res["tests"] if t["name"] != "performance"
                 and not t["name"].startswith("compute-sanitizer")]
        correct = all(t["score"] == t["max_score"] for t in tests)
        return {"score": res["score"], "max": e["max_score"], "correct": correct,
                "fraction": perf.get("fraction"), "fraction_of_reference": perf.get("fraction_of_reference"),
                "verified": perf.get("verified"), "remeasured": bool(perf.get("remeasured")),
                "performance": next((t["output"] for t in res["tests"] if t["name"] == "performance"), "")}
    said = [s for s in res.get("said") or [] if s[0] != "performance"]
    return {"score": res["score"], "max": res["max"], "correct": not said,
            "fraction": res.get("fraction"), "fraction_of_reference": res.get("fraction_of_reference"),
            "verified": res.get("verified"), "remeasured": bool(res.get("remeasured")),
            "performance": next((s[3] for s in res.get("said") or [] if s[0] == "performance"), "")}


def grade_lab(lab: str, work: Path, gpus: str) -> dict:
    """{submission stem: row}: the master and the lab's controls, graded in one run."""
    subs = [ROOT / "solutions" / f"{lab}.ipynb", *controls_of(lab)]
    out = work / lab
    cmd = [sys.executable, "-m", "autograder", "grade", lab, *map(str, subs), "--out", str(out),
           "--gpus", gpus, "--quiet"]
    t0 = time.time()
    p = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, AUTOGRADER_SEED=SEED),
                       capture_output=True, text=True, timeout=900)
    print(f"  {lab}: grade exit {p.returncode} in {time.time() - t0:.0f} s", flush=True)
    if p.returncode:
        print((p.stdout + p.stderr)[-2000:], flush=True)
    rows = {}
    for s in subs:
        f = out / s.stem / "results.json"
        rows[s.stem] = _row(json.loads(f.read_text())) if f.exists() else None
    return rows


def from_report(summary: Path, lab: str) -> dict:
    """{submission stem: row} from a grader report's summary.json (steps hostile and labs)."""
    s = json.loads(Path(summary).read_text())
    if lab in (s.get("labs") or {}):
        d = s["labs"][lab]
        rows = {lab: _row(d.get("solution"))}
        rows.update({p.stem: _row(_found(d.get("fixtures"), p)) for p in controls_of(lab)})
        return rows
    h = s.get("hostile") or {}
    rows = {lab: _row((h.get("neighbours") or {}).get(lab))}
    rows.update({p.stem: _row(_found(h.get("hostile"), p)) for p in controls_of(lab)})
    return rows


def _found(results, path):
    """A fixture's result in a report: under its stem, or, where another graded file had the
    same stem, under its folder's name and stem (tools.grader_report.by_id)."""
    results = results or {}
    return results.get(f"{path.parent.name}_{path.stem}") or results.get(path.stem)


def suggest(lab: str, rows: dict, rubric_dir: Path | None = None) -> dict:
    """The lab's entry of the record: its rows, the named control, the suggested lines (or
    why none)."""
    from autograder.rubric import CONTROL_MAX, lines_from_control, load_rubric

    perf = load_rubric(lab, (rubric_dir / f"{lab}.toml") if rubric_dir else None)["performance"]
    name = named_control(lab, rubric_dir)
    c = rows.get(name) or {}
    entry = {"master": rows.get(lab), "controls": {k: v for k, v in rows.items() if k != lab},
             "control": name, "current": {"zero_at": perf["zero_at"], "full_at": perf["full_at"]},
             "suggested": None, "why_not": None}
    if not c or c.get("fraction") is None:
        entry["why_not"] = f"the control {name} was not timed ({(c or {}).get('performance', 'no result')[:300]})"
    elif not c.get("correct"):
        entry["why_not"] = f"the control {name} is not correct: it must be a correct solution"
    else:
        lines = lines_from_control(c["fraction"])
        if lines is None:
            entry["why_not"] = (f"the control {name} ran at {c['fraction']:.3f} of the master, above "
                                f"{CONTROL_MAX}: it does not show the lesson in speed on this GPU; "
                                "name another control in the rubric")
        entry["suggested"] = lines
    return entry


def apply(record: Path, rubric_dir: Path) -> list[str]:
    """Write each rubric's zero_at and full_at from the record's suggestion for the control
    the rubric names (its other lines and comments untouched). Returns what changed."""
    rec = json.loads(Path(record).read_text())
    said = []
    for lab, entry in rec["labs"].items():
        from autograder.rubric import lines_from_control

        name = named_control(lab, rubric_dir)
        c = (entry["controls"].get(name) or {})
        lines = lines_from_control(c["fraction"]) if c.get("fraction") and c.get("correct") else None
        if lines is None:
            said.append(f"{lab}: no lines for control {name} ({entry.get('why_not')})")
            continue
        path = rubric_dir / f"{lab}.toml"
        text = path.read_text()
        for key, value in lines.items():
            text, n = re.subn(rf"(?m)^{key}\s*=\s*[0-9.]+", f"{key} = {value:.2f}", text, count=1)
            if n != 1:
                raise SystemExit(f"{path}: no `{key} = ...` line to set")
        path.write_text(text)
        said.append(f"{lab}: control {name} at {c['fraction']:.3f} of the master -> "
                    f"zero_at {lines['zero_at']:.2f}, full_at {lines['full_at']:.2f}")
    return said


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path)
    ap.add_argument("--from-report", type=Path, help="a grader report's summary.json (no GPU time)")
    ap.add_argument("--apply", type=Path, help="a committed record: write the rubrics' lines from it")
    ap.add_argument("--gpus", default="1")
    ap.add_argument("--labs", help="comma-separated labs to grade (default: every kernel lab)")
    ap.add_argument("--merge", type=Path,
                    help="a committed record: keep its other labs' entries (each names the run "
                         "that measured it) and replace the labs graded now")
    args = ap.parse_args(argv)
    if args.apply:
        for line in apply(args.apply, ROOT / "autograder" / "rubrics"):
            print(line)
        return 0
    if not args.out:
        ap.error("--out is required (or --apply)")
    import book  # noqa: F401  (decides GPU or simulator before numba.cuda)
    from book import gpu
    from book.provenance import provenance
    from autograder.rubric import CONTROL_MAX, CONTROL_SHARE, FULL_AT_FLOOR

    if gpu.SIMULATED and not args.from_report:
        raise SystemExit("this probe times kernels: it needs a CUDA GPU (or --from-report)")
    cmd = "python3 -m benchmarks.lesson_controls_probe " + " ".join(argv or sys.argv[1:])
    rec = {"provenance": provenance(cmd), "rule": {"control_share": CONTROL_SHARE,
                                                  "control_max": CONTROL_MAX,
                                                  "full_at_floor": FULL_AT_FLOOR},
           "source": str(args.from_report) if args.from_report else "grade", "labs": {}}
    if args.merge:   # the other labs as that record measured them, each with its run's provenance
        old = json.loads(args.merge.read_text())
        for lab, entry in old["labs"].items():
            entry.setdefault("provenance", old["provenance"])
            rec["labs"][lab] = entry
    from autograder import labs as lab_registry

    wanted = ([lab_registry.resolve(x.strip()) for x in args.labs.split(",") if x.strip()]
              if args.labs else kernel_labs())
    work = Path(tempfile.mkdtemp(prefix="lesson-controls-"))
    ok = True
    for lab in wanted:
        rows = from_report(args.from_report, lab) if args.from_report else grade_lab(lab, work, args.gpus)
        entry = rec["labs"][lab] = suggest(lab, rows)
        entry["provenance"] = rec["provenance"]
        m = entry["master"] or {}
        print(f"{lab}: master {m.get('score')}/{m.get('max')} at {m.get('fraction') or 0:.3f} of itself")
        for stem, r in entry["controls"].items():
            r = r or {}
            mark = " (the rubric's control)" if stem == entry["control"] else ""
            print(f"  {stem:24s} {r.get('score')}/{r.get('max')} correct={r.get('correct')} "
                  f"fraction {r.get('fraction') or 0:.3f} of the master{mark}")
        if entry["suggested"]:
            s = entry["suggested"]
            print(f"  -> zero_at {s['zero_at']:.2f}, full_at {s['full_at']:.2f} "
                  f"(now {entry['current']['zero_at']}, {entry['current']['full_at']})")
        else:
            ok = False
            print(f"  -> no lines: {entry['why_not']}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
