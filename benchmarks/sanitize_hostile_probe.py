"""grade --sanitize over every hostile and unusual lab-2 fixture, on a GPU: does the flag leave
every score as it was, give each submission a sanitizer verdict (or say why not), leave nothing
running, and what does it cost?

The same folder of submissions (tests/fixtures/submissions and tests/fixtures/threats: hangs,
crashes, floods, memory grabs, escaping processes, tampered timers, a malformed notebook) is
graded twice with ``python -m autograder grade lab2``, without and with ``--sanitize``; the
record keeps, per submission, both scores and statuses and the sanitizer test's output, and
for the run: wall times, what the sanitizer log said (calibration, skips), and every process
left behind (none expected). Safe to kill, as benchmarks/sanitizer_probe.py (whose subreaper
and sweep it uses).

    COURSE_COMMIT=<sha> timeout 580 python3 benchmarks/sanitize_hostile_probe.py --budget-s 550 --out $OUT/hostile.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import sanitizer_probe as probe  # noqa: E402  (its subreaper, sweep and stop handler)

SUBS = ROOT / "tests" / "fixtures" / "submissions"
THREATS = ROOT / "tests" / "fixtures" / "threats"


def submissions() -> list[Path]:
    return sorted(p for p in SUBS.iterdir() if p.suffix in (".py", ".ipynb")) + \
        sorted(THREATS.glob("*.py"))


def results(out: Path, subs) -> dict:
    from autograder import sanitizer

    got = {}
    for s in subs:
        rj = out / s.stem / "results.json"
        if not rj.exists():
            got[s.stem] = None
            continue
        r = json.loads(rj.read_text())
        san = [t for t in r["tests"] if t["name"] == sanitizer.SANITIZE_TEST]
        got[s.stem] = {"score": r["score"], "status": r["extra_data"].get("status"),
                       "tests": {t["name"]: t["score"] for t in r["tests"]
                                 if t["name"] != sanitizer.SANITIZE_TEST},
                       "sanitizer": (san[0]["output"][:600], san[0]["status"]) if san else None}
    return got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--budget-s", type=float, default=550)
    args = ap.parse_args(argv)
    from book.provenance import provenance

    rec = {"provenance": provenance("python3 benchmarks/sanitize_hostile_probe.py --out "
                                    + str(args.out))}
    probe.safe_to_kill(rec, args.out)
    subs = submissions()
    rec["submissions"] = [str(s.relative_to(ROOT)) for s in subs]
    work = Path(tempfile.mkdtemp(prefix="hostile-grade-"))
    t_end = time.time() + args.budget_s

    def grade(folder, *flags, timeout):
        return probe.run_grader(["lab2", *map(str, subs), "--out", str(work / folder),
                                 "--regrade", "--quiet", *flags], timeout)

    rec["plain"] = grade("plain", timeout=0.3 * args.budget_s)
    rec["sanitize"] = grade("sanitize", "--sanitize", timeout=max(60, t_end - time.time() - 25))
    plain, san = results(work / "plain", subs), results(work / "sanitize", subs)
    rec["per_submission"] = {s.stem: {"plain": plain[s.stem], "sanitize": san[s.stem]} for s in subs}
    # correctness must be the same test for test; performance points are timed again in each
    # run (phase 2, no submission alive), so they differ by the timing's own noise
    perf = lambda r: {k: v for k, v in r["tests"].items() if k != "performance"}  # noqa: E731
    rec["same_correctness"] = all(plain[k] and san[k] and perf(plain[k]) == perf(san[k])
                                  and plain[k]["status"] == san[k]["status"] for k in plain)
    rec["performance_points_delta"] = max(
        (abs(plain[k]["tests"].get("performance", 0) - san[k]["tests"].get("performance", 0))
         for k in plain if plain[k] and san[k]), default=None)
    log = work / "sanitize" / "measurements.jsonl"
    rec["sanitizer_log"] = [
        {k: (v[-2000:] if isinstance(v, str) else v) for k, v in e.items()}
        for e in map(json.loads, log.read_text().splitlines()) if e.get("kind") == "sanitizer"
    ] if log.exists() else []
    ps = subprocess.run(["ps", "-eo", "pid,ppid,comm"], capture_output=True, text=True).stdout
    rec["ps_after"] = [ln for ln in ps.splitlines()
                       if any(w in ln for w in ("compute-sanit", "TreeLauncher", "agdriver"))]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"plain {rec['plain']['seconds']} s, --sanitize {rec['sanitize']['seconds']} s, "
          f"same correctness: {rec['same_correctness']}, performance points differ by at most "
          f"{rec['performance_points_delta']}, left: {rec['sanitize']['left_running_then_killed']}"
          f" ps: {rec['ps_after']}")
    for sid, r in rec["per_submission"].items():
        p, s = r["plain"] or {}, r["sanitize"] or {}
        print(f"{sid:22s} {p.get('score')!s:>5} {s.get('score')!s:>5} {s.get('status')!s:10s} "
              f"{(s.get('sanitizer') or ['-', ''])[1]:6s} {str((s.get('sanitizer') or ['-'])[0])[:90]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
