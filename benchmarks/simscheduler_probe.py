"""The simulator's block scheduler, numba-cuda's spinning loop against book/simscheduler.py's
pausing one: ``check()`` of every kernel lab's master in Numba's CUDA simulator, on the CPU.

Record: `records/simulator/simscheduler_cpu.json`.

Each lab's master runs in a fresh process twice, once with numba-cuda's ``BlockManager.run``
put back and once with the course's; both must pass, and the script prints the times and the
ratio. No GPU: it forces the simulator.

    python3 benchmarks/simscheduler_probe.py --out records/simulator/simscheduler_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = r'''
import contextlib, io, json, sys, time
import book
from book import numba_compat
if sys.argv[2] == "numba":
    cls = numba_compat.sim_block_manager_class()
    cls.run = cls._numba_run
from autograder import labs
from autograder.check import check
from tools.lab_ptx import master_cells
spec = labs.get(sys.argv[1])
ns = {"__name__": "__main__"}
for cid, src in master_cells(sys.argv[1]):  # the master's code, without setup, checks, hidden tests
    exec(compile(src, f"<{sys.argv[1]} {cid}>", "exec"), ns)
t0 = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    ok = check(ns[spec.function], perf=False, access=False)
print(json.dumps({"ok": bool(ok), "seconds": time.perf_counter() - t0}))
'''


def time_check(lab: str, loop: str) -> dict:
    env = dict(os.environ, BOOK_SIMULATOR="1", BOOK_QUIET="1", PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, "-c", ONE, lab, loop], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"{lab} with {loop}'s loop failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "records/simulator/simscheduler_cpu.json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder import labs
    from book.provenance import provenance

    rows = []
    print(f"{'lab':32s} {'numba s':>8s} {'course s':>9s} {'ratio':>6s}")
    for lab in labs.names():
        if not getattr(labs.get(lab), "function", None) or not (ROOT / "solutions" / f"{lab}.ipynb").exists():
            continue
        spun, paused = time_check(lab, "numba"), time_check(lab, "course")
        assert spun["ok"] and paused["ok"], (lab, spun, paused)
        rows.append({"lab": lab, "numba_seconds": spun["seconds"],
                     "course_seconds": paused["seconds"],
                     "ratio": spun["seconds"] / paused["seconds"]})
        print(f"{lab:32s} {spun['seconds']:8.1f} {paused['seconds']:9.1f} {rows[-1]['ratio']:5.1f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "provenance": provenance("python3 benchmarks/simscheduler_probe.py"),
        "what": "check() of each kernel lab's master in the simulator (public cases, no "
                "performance, no access trace), numba-cuda's block loop vs book/simscheduler.py's",
        "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
