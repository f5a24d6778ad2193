"""The suite's GPU lane: run the tests marked ``gpu`` on a GPU machine and write a summary
with provenance that is committed whenever kernels or the grader change.

    python -m tools.gpu_tests [--out records/tests/gpu_<gpu>.json] [--under tests/DIR|FILE ...]
                              [--budget SECONDS] [--continue RECORD] [PYTEST_ARGS...]
    make test-gpu                      (the same, with the default --out)

``--budget``: stop before a test that would end past that many seconds from now, and record
what ran and which tests were left (``left``); a device call's hard limit would kill the test
and lose the whole file's report. ``--continue RECORD``: run only the tests RECORD left, at the
same commit, and write a record of both runs together.

The ``gpu`` marker (pyproject.toml) is on every test that needs a CUDA GPU; in the simulator
tests/conftest.py skips them, so CI never runs them and this lane is where they run. The
summary: provenance (book.provenance: GPU, driver, versions, date, command, commit), pytest's
exit status, counts, and each test's outcome, duration and, for a failure, its message
(read from pytest's JUnit XML). A machine without a GPU is refused: the lane would skip
everything and its summary would say nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def outcomes(junit: Path) -> list[dict]:
    """Each test case of a JUnit XML report: name, outcome, seconds, message."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        what, msg = "passed", None
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                what = {"failure": "failed"}.get(tag, tag)
                msg = (el.get("message") or el.text or "")[:2000]
                break
        out.append({"test": f"{case.get('classname', '')}::{case.get('name')}",
                    "outcome": what, "seconds": float(case.get("time") or 0), "message": msg})
    return out


def gpu_test_files(under=("tests",)) -> list[str]:
    """The test files that hold a ``gpu`` test (under the folders or among the files ``under``:
    a device call of ten minutes runs the lane in parts). Only these are collected: the others
    import the book's build and browser stack (anywidget, nbformat, playwright), which a GPU
    machine's image need not have, and a collection error there would stop the lane before any
    GPU test ran."""
    paths = [p for d in under for p in
             ([REPO / d] if (REPO / d).is_file() else sorted((REPO / d).rglob("test_*.py")))]
    return [str(p.relative_to(REPO)) for p in paths if "mark.gpu" in p.read_text()]


def summary(junits: list[Path], rc: int, command: str, prov: dict, left: list[str] = (),
            earlier: dict | None = None) -> dict:
    """The record: each test's outcome, and the node ids of the tests a budget left unstarted.
    ``earlier``, a record this run continued: its tests are kept, each marked with its run."""
    tests = [t for j in junits for t in outcomes(j)]
    if earlier:
        when = earlier["provenance"].get("date")
        tests = [dict(t, run=t.get("run", when)) for t in earlier["tests"]] + tests
    counts = {}
    for t in tests:
        counts[t["outcome"]] = counts.get(t["outcome"], 0) + 1
    s = {"provenance": prov, "command": command, "pytest_exit_status": rc, "counts": counts,
         "tests": tests}
    if left:
        s["left"] = list(left)
    return s


def continuing(record: Path, commit: str) -> tuple[dict, list[str]]:
    """The earlier record and the node ids it left; refused where it was made at another
    commit (two commits' tests in one record would say the code passed what it never ran)."""
    earlier = json.loads(record.read_text())
    if earlier["provenance"].get("commit") != commit:
        raise SystemExit(f"--continue {record}: it was made at commit "
                         f"{earlier['provenance'].get('commit')}, this run is at {commit}; run "
                         "the files again instead of continuing it")
    if not earlier.get("left"):
        raise SystemExit(f"--continue {record}: it left no test to run")
    return earlier, earlier["left"]


def main(argv: list[str]) -> int:
    import book  # noqa: F401  (decides GPU or simulator)
    from book import gpu
    from book.provenance import commit, provenance
    from book.specs import slug

    if gpu.SIMULATED:
        print("make test-gpu needs a CUDA GPU: here Numba runs in its simulator and every `gpu` "
              "test would be skipped. Run it on a GPU machine.", file=sys.stderr)
        return 2
    out = None
    if "--out" in argv:
        i = argv.index("--out")
        out, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    under = []
    while "--under" in argv:
        i = argv.index("--under")
        under.append(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    budget = earlier = None
    if "--budget" in argv:
        i = argv.index("--budget")
        budget, argv = float(argv[i + 1]), argv[:i] + argv[i + 2:]
    if "--continue" in argv:
        i = argv.index("--continue")
        record, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
        earlier, todo = continuing(record, commit())
    start = time.time()
    out = out or REPO / "records" / "tests" / f"gpu_{slug(gpu.device_info().name)}.json"
    # One pytest process per file: a file whose tests make a CUDA context in pytest's own process
    # (the kernels' tests) would otherwise leave that process on the GPU while the isolation and
    # grader tests check that no process but the submission's is there (seen on the H100).
    tmp = Path(tempfile.mkdtemp(prefix="gpu-tests-"))
    rc, junits, left = 0, [], []
    if earlier:     # the tests left, grouped by file, in the order they were collected
        files = {}
        for nodeid in todo:
            files.setdefault(nodeid.split("::")[0], []).append(nodeid)
        runs = list(files.items())
    else:
        runs = [(f, [f]) for f in gpu_test_files(under or ("tests",))]
    for i, (f, targets) in enumerate(runs):
        if budget is not None and time.time() >= start + budget:
            left += [t for t in todo if t.split("::")[0] == f] if earlier else [f]
            continue
        junit, left_file = tmp / f"junit-{i}.xml", tmp / f"left-{i}.txt"
        env = dict(os.environ)
        if budget is not None:
            env.update(GPU_LANE_DEADLINE=str(start + budget), GPU_LANE_LEFT=str(left_file))
        cmd = [sys.executable, "-m", "pytest", "-p", "tools.lane_budget", "-m", "gpu", "-q",
               "-rfEs", f"--junitxml={junit}", *targets, *argv]
        r = subprocess.run(cmd, cwd=REPO, env=env).returncode
        stopped = left_file.exists()
        if stopped:
            left += left_file.read_text().split()
        # 5: no gpu test selected in that file; 2: interrupted, here by the budget
        rc = max(rc, 0 if r == 5 or (stopped and r == 2) else r)
        if junit.exists():
            junits.append(junit)
        else:
            print(f"pytest wrote no report for {f} (exit status {r})", file=sys.stderr)
            rc = rc or 1
    command = "python -m tools.gpu_tests " + " ".join(
        [f"--under {d}" for d in under] + ([f"--budget {budget:g}"] if budget is not None else [])
        + ([f"--continue {record}"] if earlier else []) + argv)
    if not junits and not earlier:
        return rc or 1
    s = summary(junits, rc, command, provenance(command), left, earlier)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(s, indent=1, default=str) + "\n")
    print(f"wrote {out}: {s['counts']} (pytest exit status {rc})"
          + (f"; {len(left)} left by the budget: --continue {out}" if left else ""))
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
