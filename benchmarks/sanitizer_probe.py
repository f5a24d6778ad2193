"""Record what compute-sanitizer says about planted bugs, for book.sanitizer's parser and tests.

Record: `records/sanitizer/h100.json`, `records/sanitizer/grade_h100.json` (`--grade`),
`records/sanitizer/hazards_h200.json` (`--hazards`).

Three small Numba programs, each run under memcheck and racecheck through book.sanitizer.run:
an off-by-one store past the end of an array, a shared-memory tile read with no
cuda.syncthreads() after it is filled (the values usually come out right), and the same tile
with the barrier (no finding expected). The raw output, the parsed findings and provenance go
to one JSON record.

Usage on a GPU machine:  python benchmarks/sanitizer_probe.py --out records/sanitizer/h100.json

``--grade``: instead, grade lab 4's planted-race fixture and its honest control
(tests/fixtures/sanitizer/) with ``python -m autograder grade lab4 ... --sanitize`` (the
sandboxed route of the grader), and run ``autograder.sanitizer.sanitize`` (the route of a
student's ``check(..., sanitize=True)``) on both files; the results.json of each, the
sentences, the run's log and provenance go to one JSON record:

    COURSE_COMMIT=<sha> python3 benchmarks/sanitizer_probe.py --grade --out $OUT/sanitizer_grade_h100.json

``--hazards``: instead, the raw reports the grader's hazard findings are parsed from (issue 41):
lab 6's master and its hazard fixtures (tests/fixtures/sanitizer/lab6_*.py) and lab 4's planted
race, each called once on its lab's sanitized public case with exact-size arrays, under
racecheck, synccheck and memcheck (with and without ``--padding``), each run timed; and a
few barriers that not every thread reaches, under synccheck. The tool's help lines for the flags the grader
passes, its version, and provenance go to one record:

    COURSE_COMMIT=<sha> python3 benchmarks/sanitizer_probe.py --hazards --out $OUT/hazards_h200.json

Safe to kill: the probe is the subreaper of everything it starts; a SIGTERM/SIGINT/SIGHUP
stops the grader (which kills its sandboxed children whole), writes the record as far as it
got (``interrupted``), and kills whatever is still below it. After each step the record says
what was left running (``left_running_then_killed``: [] expected). Under an outer
``timeout N``, pass ``--budget-s`` about N - 30 so that the probe finishes by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import tempfile
import textwrap
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROGRAMS = {
    "out_of_bounds": """
        import numpy as np
        from numba import cuda

        @cuda.jit
        def off_by_one(a, out):
            i = cuda.grid(1)
            if i <= out.size:          # the bug: <= lets one thread write past the end
                out[i] = a[i % a.size] * 2

        a = cuda.to_device(np.arange(256, dtype=np.float32))
        out = cuda.device_array(256, np.float32)
        off_by_one[2, 256](a, out)
        cuda.synchronize()
        print("values ok:", bool((out.copy_to_host() == np.arange(256) * 2).all()))
    """,
    "missing_syncthreads": """
        import numpy as np
        from numba import cuda, float32

        @cuda.jit
        def reverse_tile(a, out):
            tile = cuda.shared.array(256, float32)
            t = cuda.threadIdx.x
            tile[t] = a[t]
            # the bug: no cuda.syncthreads() here, so a thread may read a word
            # another warp has not written yet
            out[t] = tile[255 - t]

        a = cuda.to_device(np.arange(256, dtype=np.float32))
        out = cuda.device_array(256, np.float32)
        reverse_tile[1, 256](a, out)
        cuda.synchronize()
        print("values ok:", bool((out.copy_to_host() == np.arange(256)[::-1]).all()))
    """,
    "with_syncthreads": """
        import numpy as np
        from numba import cuda, float32

        @cuda.jit
        def reverse_tile(a, out):
            tile = cuda.shared.array(256, float32)
            t = cuda.threadIdx.x
            tile[t] = a[t]
            cuda.syncthreads()
            out[t] = tile[255 - t]

        a = cuda.to_device(np.arange(256, dtype=np.float32))
        out = cuda.device_array(256, np.float32)
        reverse_tile[1, 256](a, out)
        cuda.synchronize()
        print("values ok:", bool((out.copy_to_host() == np.arange(256)[::-1]).all()))
    """,
}


FIXTURES = ROOT / "tests" / "fixtures" / "sanitizer"

# --hazards: barriers not every thread reaches (what synccheck reports on this GPU), and each
# lab fixture called on one public case with exact-size arrays, as the grader's sanitized case is
_BARRIER = """
import numpy as np
from numba import cuda, float32

@cuda.jit
def kernel(a, out):
    tile = cuda.shared.array(64, float32)
    t = cuda.threadIdx.x
    tile[t] = a[t]
    {body}
    out[t] = tile[63 - t]

a = cuda.to_device(np.arange(64, dtype=np.float32))
out = cuda.device_array(64, np.float32)
kernel[1, 64](a, out)
cuda.synchronize()
print("values ok:", bool((out.copy_to_host() == np.arange(64)[::-1]).all()))
"""
BARRIERS = {   # the bug in each: a barrier some threads of the block never reach
    "barrier_warp1_skips": "if t < 32:\n        cuda.syncthreads()",
    "barrier_half_warp": "if t < 16:\n        cuda.syncthreads()",
    "barrier_two_sites": ("if t < 32:\n        cuda.syncthreads()\n    else:\n"
                          "        cuda.syncthreads()"),
    "syncwarp_bad_mask": "cuda.syncwarp(0xFFFF)\n    cuda.syncthreads()",
}

CALL_CASE = """
import book  # noqa: F401  (GPU or simulator, before numba.cuda)
import runpy
import sys
from autograder import labs
lab = labs.get(sys.argv[1])
case = next(c for c in lab.public_cases if c["name"] == sys.argv[2])
fn = runpy.run_path(sys.argv[3])[lab.function]
got, note = lab.call_here(fn, case, guard=False)   # exact allocations, as the grader's
print("values:", lab.check(got, case)[0], note, flush=True)
"""

# run: (fixture, its lab, the public case (None: the sanitized one), the tools), in the order
# they run (the budget may end it)
HAZARD_FILES = {
    "lab6_reads_x_past_end": ("lab6_reads_x_past_end", "lab6", None,
                              ("memcheck", "memcheck_no_padding")),
    "lab6_reads_x_past_end@T=4": ("lab6_reads_x_past_end", "lab6", "public T=4 d=64 h=12",
                                  ("memcheck", "memcheck_no_padding")),
    "lab6_missing_syncthreads": ("lab6_missing_syncthreads", "lab6", None,
                                 ("racecheck", "synccheck")),
    "lab6_control": ("lab6_control", "lab6", None, ("racecheck", "synccheck", "memcheck")),
    "lab4_missing_syncthreads": ("lab4_missing_syncthreads", "lab4", None, ("racecheck",)),
}
GRADED = {"planted_race": "lab4_missing_syncthreads.py", "control": "lab4_honest.py"}


def fd_probe() -> dict:
    """Does a pipe the parent passes reach the process compute-sanitizer starts? The grader's
    sandbox speaks to its driver over two such pipes; if they do not pass, grade --sanitize
    cannot work and this says why."""
    from book import sanitizer

    exe = sanitizer.find()
    if exe is None:
        return {"skipped": "compute-sanitizer not found"}
    r, w = os.pipe()
    code = f"import os; os.write({w}, b'inherited')"
    try:
        p = subprocess.run([exe, "--tool", "memcheck", sys.executable, "-c", code],
                           pass_fds=(w,), capture_output=True, text=True, timeout=120)
        out = {"returncode": p.returncode, "output": (p.stdout + p.stderr)[-2000:]}
    except subprocess.TimeoutExpired:
        out = {"timed_out": 120}
    os.close(w)
    got = os.read(r, 64)
    os.close(r)
    out["fd_passed"] = got == b"inherited"
    return out


# ------------------------------------------------------------------ safe to kill
# The probe is the subreaper of everything it starts (PR_SET_CHILD_SUBREAPER): compute-
# sanitizer's own subreaper, a grader's sandbox launcher, anything that leaves its session is
# re-parented here, not to the machine's init, so that sweep() finds and kills it. A SIGTERM
# (`timeout` ending the device command), SIGINT or SIGHUP stops the grader first (it kills its
# children whole and logs the stop), writes the record as far as it got, and sweeps.
_STATE = {"rec": None, "out": None, "grader": None, "collect": None}


def _become_subreaper() -> bool:
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(36, 1) == 0   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def sweep(grace_s: float = 3.0) -> list[dict]:
    """Kill every process still below this one after ``grace_s`` (a launcher tearing its
    tree down takes a moment); what was left, for the record ([] when everything this probe
    started had ended on its own)."""
    from autograder.sandbox import alive, descendants, kill_tree, process_info

    me = os.getpid()
    deadline = time.monotonic() + grace_s
    while True:
        try:   # reap what ended (orphans re-parented here are this probe's to reap)
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        left = [p for p in sorted(descendants(me)) if p != me and alive(p)]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    left = [process_info(p) for p in left]
    if left:
        kill_tree(me)
    return left


def _stop(signum, _frame):
    name = signal.Signals(signum).name
    grader = _STATE["grader"]
    if grader is not None and grader.poll() is None:
        grader.send_signal(signal.SIGTERM)   # the grader kills its children and logs the stop
        try:
            grader.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pass
    left = sweep()
    if _STATE.get("collect"):
        try:
            _STATE["collect"]()
        except Exception as e:   # a half-written file: the record says so and is still written
            _STATE["rec"]["collect_error"] = f"{type(e).__name__}: {e}"
    rec, out = _STATE["rec"], _STATE["out"]
    if rec is not None and out is not None:
        rec["interrupted"] = {"signal": name, "left_running_then_killed": left}
        out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"sanitizer_probe: stopped by {name}; {len(left)} process(es) were left and killed",
          file=sys.stderr, flush=True)
    os._exit(128 + signum)


def safe_to_kill(rec: dict, out: Path) -> None:
    _STATE.update(rec=rec, out=out)
    rec["subreaper"] = _become_subreaper()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stop)


def _collect_fixtures(rec: dict, work: Path) -> None:
    """Each fixture's results.json, sanitizer feedback and feedback.md, and the run's log,
    from the grading folder as it is now."""
    from autograder import sanitize as sanitizer

    for name, f in GRADED.items():
        sid = Path(f).stem
        rj = work / sid / "results.json"
        r = json.loads(rj.read_text()) if rj.exists() else None
        tests = r["tests"] if r else []
        san = [t for t in tests if t["name"] == sanitizer.SANITIZE_TEST]
        rec["fixtures"][name] = {
            "file": f"tests/fixtures/sanitizer/{f}",
            "results": r,
            "public_tests_passed": [t["score"] >= t["max_score"] for t in tests
                                    if t["name"].startswith("public")],
            "sanitizer_feedback": san[0]["output"] if san else None,
            "feedback_md": (work / sid / "feedback.md").read_text()
            if (work / sid / "feedback.md").exists() else None,
        }
    log = work / "measurements.jsonl"
    if log.exists():
        rec["sanitizer_log"] = [e for e in map(json.loads, log.read_text().splitlines())
                                if e.get("kind") in ("sanitizer", "sandbox", "test", "after_exit",
                                                      "stopped")]


def run_grader(args: list, timeout: float) -> dict:
    """``python -m autograder grade ARGS`` from the repository, stopped after ``timeout``
    seconds (SIGTERM first: the grader kills its children whole and logs the stop); what it
    printed, how it ended, and what it left running (none expected: its sandbox's duty)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    env.pop("BOOK_SIMULATOR", None)
    cmd = [sys.executable, "-m", "autograder", "grade", *args]
    t0 = time.time()
    logs = Path(tempfile.mkdtemp(prefix="sanitizer-grade-out-"))
    with open(logs / "stdout", "w") as so, open(logs / "stderr", "w") as se:
        p = subprocess.Popen(cmd, stdout=so, stderr=se, text=True, cwd=ROOT, env=env)
        _STATE["grader"] = p
        try:
            p.wait(timeout=timeout)
            timed_out = None
        except subprocess.TimeoutExpired:
            timed_out = timeout
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        _STATE["grader"] = None
    out = {"command": " ".join(cmd[1:]).replace(str(ROOT) + "/", ""),
           "returncode": p.returncode, "seconds": round(time.time() - t0, 1),
           "stdout": (logs / "stdout").read_text(errors="replace")[-6000:],
           "stderr": (logs / "stderr").read_text(errors="replace")[-6000:],
           "left_running_then_killed": sweep()}
    if timed_out:
        out["timed_out"] = timed_out
    shutil.rmtree(logs, ignore_errors=True)
    return out


def grade_record(out: Path, budget_s: float = 560) -> dict:
    """Grade the planted race and its control with --sanitize; both routes, every output."""
    from autograder import sanitize as sanitizer
    from book.provenance import provenance

    cmd_line = "python benchmarks/sanitizer_probe.py --grade --out " + str(out)
    rec = {"provenance": provenance(cmd_line), "fixtures": {}, "check_route": {}}
    safe_to_kill(rec, out)
    # the grading folder stays out of $OUT: its recordings hold the hidden cases' arrays
    work = Path(tempfile.mkdtemp(prefix="sanitizer-grade-"))
    # what was graded, read again by _stop: a kill of the probe loses none of it
    _STATE["collect"] = lambda: _collect_fixtures(rec, work)
    deadline = time.time() + budget_s   # one device command: everything within its limit
    rec["fd_probe"] = fd_probe()
    rec["fd_probe"]["left_running_then_killed"] = sweep()
    subs = [FIXTURES / f for f in GRADED.values()]
    rec["grade"] = run_grader(["lab4", *map(str, subs), "--out", str(work), "--sanitize",
                               "--regrade"], 0.7 * budget_s)
    _collect_fixtures(rec, work)
    _STATE["collect"] = None
    shutil.rmtree(work, ignore_errors=True)
    for name, f in GRADED.items():   # the check() route: the file re-run under the tool
        t0 = time.time()
        left = (deadline - t0) / 2   # two tools
        if left < 30:
            rec["check_route"][name] = {"skipped": "no time left within the command's budget"}
            continue
        try:
            lines = sanitizer.sanitize("lab4", source=(FIXTURES / f).read_text(),
                                       timeout_s=min(150, left))
        except Exception as e:  # recorded, not raised: the grade route's record still counts
            lines = [f"raised {type(e).__name__}: {e}"]
        rec["check_route"][name] = {"sentences": lines, "seconds": round(time.time() - t0, 1),
                                    "left_running_then_killed": sweep()}
    for name in GRADED:
        print(f"{name:14s} grade: {rec['fixtures'][name]['sanitizer_feedback']!r}"[:600])
        print(f"{name:14s} check: {rec['check_route'][name]!r}"[:600])
    return rec


def _sanitized_case(lab) -> dict:
    """The public case the grader sanitizes where the master's paths are not known here: the
    largest (autograder.sanitize.fallback_case)."""
    from autograder import sanitize

    return sanitize.fallback_case(lab, list(lab.public_cases))


def hazards_record(out: Path, budget_s: float) -> dict:
    """Raw racecheck, synccheck and memcheck reports of the lab-6 hazard fixtures, lab 6's
    master and lab 4's planted race on their sanitized case; every run timed."""
    from autograder import labs
    from book import sanitizer
    from book.provenance import provenance

    rec = {"provenance": provenance("python benchmarks/sanitizer_probe.py --hazards --out " +
                                    str(out)), "runs": {}}
    safe_to_kill(rec, out)
    exe = sanitizer.find()
    rec["tool"] = {"path": exe}
    if exe:
        for what, args in (("version", ["--version"]), ("help", ["--help"])):
            p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
            text = p.stdout + p.stderr
            rec["tool"][what] = text if what == "version" else "\n".join(
                ln for ln in text.splitlines() if any(k in ln for k in (
                    "padding", "report-api-errors", "racecheck-report", "print-limit",
                    "log-file", "show-backtrace", "--tool")))
    if exe is None:
        rec["tool"]["missing"] = "compute-sanitizer was not found: nothing to record"
        return rec
    deadline = time.time() + budget_s
    variants = {"racecheck": sanitizer.command("racecheck"),
                "synccheck": sanitizer.command("synccheck"),
                "memcheck": sanitizer.command("memcheck"),
                "memcheck_no_padding": [a for a in sanitizer.command("memcheck")]}
    if "--padding" in variants["memcheck_no_padding"]:
        i = variants["memcheck_no_padding"].index("--padding")
        del variants["memcheck_no_padding"][i:i + 2]
    env = dict(os.environ, NUMBA_CUDA_DEBUGINFO="1", PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    env.pop("BOOK_SIMULATOR", None)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        progs = {}
        for name, body in BARRIERS.items():
            (tmp / f"{name}.py").write_text(_BARRIER.replace("{body}", body))
            progs[name] = ([sys.executable, str(tmp / f"{name}.py")], None, ("synccheck",))
        (tmp / "call_case.py").write_text(CALL_CASE)
        for name, (fixture, lab_name, case_name, tools) in HAZARD_FILES.items():
            lab = labs.get(lab_name)
            case_name = case_name or _sanitized_case(lab)["name"]
            progs[name] = ([sys.executable, str(tmp / "call_case.py"), lab.name, case_name,
                            str(FIXTURES / f"{fixture}.py")], case_name, tools)
        for name, (argv, case_name, tools) in progs.items():
            rec["runs"][name] = {"case": case_name, "tools": {}}
            for tool in tools:
                flags = variants[tool]
                if time.time() > deadline - 30:
                    rec["runs"][name]["tools"][tool] = {"skipped": "out of budget"}
                    continue
                t0 = time.time()
                try:
                    p = subprocess.run([exe, *flags, *argv], capture_output=True, text=True,
                                       timeout=max(30, min(300, deadline - time.time())),
                                       env=env, cwd=ROOT)
                    got = {"output": (p.stdout + p.stderr).replace(str(tmp), "<tmp>")[-20000:],
                           "returncode": p.returncode}
                except subprocess.TimeoutExpired:
                    got = {"timed_out": True}
                got["seconds"] = round(time.time() - t0, 1)
                got["flags"] = flags
                rec["runs"][name]["tools"][tool] = got
                print(f"{name:26s} {tool:20s} {got['seconds']:6.1f} s rc={got.get('returncode')}",
                      flush=True)
                out.write_text(json.dumps(rec, indent=1, default=str))
    rec["left_running_then_killed"] = sweep()
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--grade", action="store_true",
                    help="grade lab 4's planted race and its control with --sanitize")
    ap.add_argument("--budget-s", type=float, default=560,
                    help="--grade: seconds for everything (the grade gets 0.7 of it); keep it "
                    "under the command's own limit (`timeout`) so the probe ends itself")
    ap.add_argument("--hazards", action="store_true",
                    help="raw racecheck, synccheck and memcheck reports of the hazard fixtures")
    args = ap.parse_args(argv)
    if args.hazards:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        rec = hazards_record(args.out, args.budget_s)
        args.out.write_text(json.dumps(rec, indent=1, default=str))
        return 0
    if args.grade:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        rec = grade_record(args.out, args.budget_s)
        args.out.write_text(json.dumps(rec, indent=1, default=str))
        return 0
    from book import sanitizer
    from book.provenance import provenance

    rec = {"provenance": provenance("python benchmarks/sanitizer_probe.py --out " +
                                    str(args.out)), "programs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, src in PROGRAMS.items():
            path = Path(tmp) / f"{name}.py"
            path.write_text(textwrap.dedent(src))
            res = sanitizer.run([sys.executable, str(path)], timeout=240)
            rec["programs"][name] = {
                "source": textwrap.dedent(src),
                "tools": {t: {"output": r["output"].replace(tmp, "<tmp>"),
                              "returncode": r["returncode"],
                              "findings": [asdict(f) for f in r["findings"]]}
                          for t, r in res.items()},
                "sentences": sanitizer.explain(res, own_files=[path]),
            }
            print(f"{name:22s}", {t: len(r["findings"]) for t, r in res.items()},
                  rec["programs"][name]["sentences"][:2])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
