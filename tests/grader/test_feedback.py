"""autograder.feedback: the student's access pattern (traced in the simulator), compute-sanitizer
findings (here: "not available on this machine"), and grade --sanitize (issue 9)."""

from __future__ import annotations

import json
import runpy
import subprocess
import textwrap
import time

import pytest

import book  # noqa: F401  (simulator decided before numba.cuda is imported)
from grading_runs import FAST_RUBRIC, FIX, REPO, THREATS, env, grade_cmd
from autograder import feedback, rerun, sanitize
from autograder.labs import get
from repo import FIXTURES

STRIDED = '''
from numba import cuda, float32
import math


@cuda.jit
def _gate(x, out, M, F):
    j, i = cuda.grid(2)
    if i < M and j < F:
        g = x[i, 2 * j]
        out[i, j] = g / (float32(1.0) + math.exp(-g))


@cuda.jit
def _up(x, out, M, F):
    j, i = cuda.grid(2)
    if i < M and j < F:
        out[i, j] *= x[i, 2 * j + 1]


def swiglu_interleaved(x, out):
    # two kernels: each reads every other float of x, so each moves every sector for half
    M, F = out.shape
    _gate[((F + 127) // 128, M), (128, 1)](x, out, M, F)
    _up[((F + 127) // 128, M), (128, 1)](x, out, M, F)
    return out
'''

ROWS = '''
import math
from numba import cuda, float32

CHUNK = 16


@cuda.jit
def _k(x, out, M, F):
    t = cuda.grid(1)
    row = cuda.blockIdx.y
    for e in range(CHUNK):     # each thread its own run of 16 columns
        j = t * CHUNK + e
        if row < M and j < F:
            g = x[row, 2 * j]
            out[row, j] = g / (float32(1.0) + math.exp(-g)) * x[row, 2 * j + 1]


def swiglu_interleaved(x, out):
    M, F = out.shape
    n = (F + CHUNK - 1) // CHUNK
    _k[((n + 31) // 32, M), 32](x, out, M, F)
    return out
'''

SHFL = '''
from numba import cuda


@cuda.jit
def _k(x, out, M, F):
    j, i = cuda.grid(2)
    if i < M and j < F:
        out[i, j] = cuda.shfl_xor_sync(0xFFFFFFFF, x[i, 2 * j], 1)


def swiglu_interleaved(x, out):
    M, F = out.shape
    _k[((F + 127) // 128, M), (128, 1)](x, out, M, F)
    return out
'''

FOREVER = '''
from numba import cuda


@cuda.jit
def _k(x, out, M, F):
    j, i = cuda.grid(2)
    s = 0.0
    while s < 1e30:            # never ends: each step reads x
        s += abs(x[0, 0]) * 0.0 + 1e-30
    if i < M and j < F:
        out[i, j] = s


def swiglu_interleaved(x, out):
    M, F = out.shape
    _k[((F + 127) // 128, M), (128, 1)](x, out, M, F)
    return out
'''


def _load(tmp_path, name, src):
    p = tmp_path / f"{name}.py"
    p.write_text(textwrap.dedent(src))
    return runpy.run_path(str(p))


# ----------------------------------------------------------------------------- advice
def test_strided_access_is_named_with_sectors_and_line(tmp_path):
    fn = _load(tmp_path, "strided", STRIDED)["swiglu_interleaved"]
    lines = feedback.access_advice(get("lab2"), fn)
    assert len(lines) == 1, lines
    # the public case's warp 0 reads 32 floats 8 bytes apart: 8 sectors for 4 sectors' worth
    assert "warp 0's loads of x touch 8 sectors where 4 would do" in lines[0]
    assert "`g = x[i, 2 * j]`" in lines[0]


def test_coalesced_kernels_get_no_advice(tmp_path):
    # one thread per output (honest_simple) and the lab's master pattern, whose gate and up
    # loads each touch 8 sectors but together use every byte moved
    for path in (FIX / "honest_simple.py", THREATS / "grid_stride_264.py"):
        ns = runpy.run_path(str(path))
        lines = feedback.access_advice(get("lab2"), ns["swiglu_interleaved"])
        if path.name == "grid_stride_264.py":   # too many threads: the reason, one line
            assert len(lines) == 1 and "8,192" in lines[0], lines
        else:
            assert lines == []


@pytest.mark.parametrize("lab", ["lab2_packed_swiglu", "lab3_half_precision"])
def test_the_masters_patterns_are_not_flagged(lab):
    """Lab 2's gate/up loads each touch 8 sectors for 4 sectors' worth, lab 3's threads read
    runs of halves: per instruction they look wasteful, yet every byte moved is used."""
    import linecache

    from autograder.submission import read_cells

    ns = {"__name__": "__main__", "check": lambda *a, **k: None}
    for c in read_cells(REPO / "solutions" / f"{lab}.ipynb"):
        if "BEGIN HIDDEN TESTS" in c["source"]:
            continue
        name = f"<master cell {c['index']}>"
        linecache.cache[name] = (len(c["source"]), None, c["source"].splitlines(True), name)
        exec(compile(c["source"], name, "exec"), ns)
    one = get(lab)
    assert feedback.access_advice(one, ns[one.function]) == []


def test_a_thread_walking_its_own_run_is_named_as_scattered(tmp_path):
    fn = _load(tmp_path, "rows", ROWS)["swiglu_interleaved"]
    lines = feedback.access_advice(get("lab2"), fn)
    assert len(lines) == 2, lines
    assert lines[0].startswith("warp 0's loads of x touch 17 sectors where")
    assert "each lane touches a sector of its own" in lines[0]
    assert lines[1].startswith("warp 0's stores of out touch 17 sectors")


def test_kernels_the_tracer_cannot_run_get_one_line_naming_the_limit(tmp_path):
    # (an endless kernel stopped at the tracer's limit, which the line names: no hang)
    fn = _load(tmp_path, "shfl", SHFL)["swiglu_interleaved"]
    lines = feedback.access_advice(get("lab2"), fn)
    assert len(lines) == 1 and "shfl_xor_sync" in lines[0] and "simulator" in lines[0], lines
    fn = _load(tmp_path, "forever", FOREVER)["swiglu_interleaved"]
    lines = feedback.access_advice(get("lab2"), fn, timeout_s=2)
    assert len(lines) == 1 and "time limit" in lines[0] and "2 s" in lines[0], lines


def test_a_gpu_session_traces_the_rerun_code_in_a_simulator_process():
    """On a GPU the student's cells re-run in a BOOK_SIMULATOR=1 child (the route taken when
    book.gpu.SIMULATED is false); its lines come back as the student's cell and line."""
    cells = [{"index": "In [1]", "source": "# autograder: setup\nfrom autograder import check"},
             {"index": "In [2]", "source": textwrap.dedent(STRIDED)},
             {"index": "In [3]", "source": "check(swiglu_interleaved)"}]
    lines = feedback._advice_in_child(get("lab2"), None, None, 60, cells=cells)
    assert len(lines) == 1 and "touch 8 sectors where 4 would do" in lines[0], lines
    # line 10 of the cell (STRIDED starts with a blank line): "g = x[i, 2 * j]"
    assert "(In [2], line 10: `g = x[i, 2 * j]`;" in lines[0]


# ----------------------------------------------------------------------------- source
def test_student_source_drops_setup_and_checks_and_maps_lines():
    cells = [{"index": "In [1]", "source": "# autograder: setup (the grader skips this cell)\n"
                                           "from autograder import check"},
             {"index": "In [2]", "source": "a = 1\n%time b = 2\ncheck(f)\nc = 3"},
             {"index": "In [3]", "source": "from autograder import check\nd = 4"}]
    src = rerun.student_source(cells=cells)
    assert "check(" not in src.text and "import check" not in src.text
    assert src.text.splitlines()[3] == "c = 3"          # blanked, not deleted: lines stay put
    assert src.where(4) == "In [2], line 4" and src.where(6) == "In [3], line 2"
    ns = {}
    exec(src.text, ns)
    assert ns["d"] == 4


# ----------------------------------------------------------------------------- sanitize
def test_sanitize_is_not_available_here_in_one_line():
    fn = runpy.run_path(str(FIX / "honest_simple.py"))["swiglu_interleaved"]
    for lines in (sanitize.sanitize(get("lab2"), fn),
                  sanitize.sanitize("lab4", source=(FIXTURES / "sanitizer"
                                                    / "lab4_missing_syncthreads.py").read_text())):
        assert len(lines) == 1 and "not available on this machine" in lines[0], lines


def test_sandbox_findings_point_at_the_cell_and_line():
    """The H100's racecheck report of a missing barrier (records/sanitizer/h100.json), as the
    grader's sandbox would give it: the driver compiles a cell as '<cell N>'."""
    rec = json.loads((REPO / "records" / "sanitizer" / "h100.json").read_text())
    text = rec["programs"]["missing_syncthreads"]["tools"]["racecheck"]["output"]
    text = text.replace("missing_syncthreads.py", "<cell 3>")
    lines = sanitize.sandbox_findings({"racecheck": text})
    assert lines[0].startswith("racecheck: WAR hazard on shared memory at cell 3, line 12"), lines
    assert "write by thread" in lines[0] and "syncthreads" in lines[0]
    assert any("1024 hazards in all" in s for s in lines)
    clean = rec["programs"]["with_syncthreads"]["tools"]["racecheck"]["output"]
    assert sanitize.sandbox_findings({"racecheck": clean}) == []


@pytest.mark.slow
def test_grade_sanitize_through_the_sandbox_with_a_stand_in_wrapper(tmp_path, monkeypatch):
    """grade --sanitize's whole route here, compute-sanitizer replaced by a wrapper that writes
    the H100's racecheck report and runs the driver as its child: the report reaches the
    submission's results.json (a 0-point test) and its flags, and the score is unchanged."""
    from autograder.grade import Run

    rec = json.loads((REPO / "records" / "sanitizer" / "h100.json").read_text())
    report = rec["programs"]["missing_syncthreads"]["tools"]["racecheck"]["output"]
    wrapdir = tmp_path / "wrap"
    wrapdir.mkdir()
    (wrapdir / "report.txt").write_text(report.replace("missing_syncthreads.py", "<cell 1>"))
    script = wrapdir / "fake-sanitizer"
    # like the tool: racecheck writes the report, memcheck finds nothing
    script.write_text(f'#!/bin/sh\nif [ "$1" = racecheck ]; then cat {wrapdir}/report.txt; '
                      'else echo "========= ERROR SUMMARY: 0 errors"; fi > "$2"\n'
                      'shift 2\n"$@"\necho "$NUMBA_CUDA_DEBUGINFO" > wrapped.txt\n')
    script.chmod(0o755)
    for p in (tmp_path, wrapdir, *wrapdir.iterdir()):
        p.chmod(p.stat().st_mode | 0o055)
    monkeypatch.setattr(sanitize, "wrapper_argv", lambda tool, log: [str(script), tool, log])
    monkeypatch.setattr(sanitize, "wrapper_keep", lambda: [str(wrapdir)])
    monkeypatch.setattr(sanitize.Sanitizer, "unavailable", lambda self: None)
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    run = Run("lab2", tmp_path / "out", rubric_path=rub, simulated=True, quiet=True,
              sanitize=True)
    [res] = run.grade([FIX / "honest_simple.py"])
    assert res["score"] == 6 and res["extra_data"]["max_score"] == 6 + res["extra_data"]["pending_points"]
    [san] = [t for t in res["tests"] if t["name"] == sanitize.SANITIZE_TEST]
    assert san["max_score"] == 0 and "WAR hazard" in san["output"]
    assert san["status"] == "failed"   # shown red on Gradescope; no points lost (score above)
    md = (tmp_path / "out" / "honest_simple" / "feedback.md").read_text()
    assert f"| {sanitize.SANITIZE_TEST} | 0/0 | see below |" in md
    assert f"### {sanitize.SANITIZE_TEST}" in md and "cell 1, line 12" in md
    assert "cell 1, line 12" in san["output"]
    assert any("compute-sanitizer: racecheck" in f for f in res["extra_data"]["flags"])
    logged = [json.loads(ln) for ln in (tmp_path / "out" / "measurements.jsonl").read_text()
              .splitlines() if '"sanitizer"' in ln]
    # the run says once that the tool is available, then logs each tool's run
    assert [r.get("available") for r in logged if "available" in r] == [True]
    tools = [r for r in logged if "tool" in r]
    assert {r["tool"] for r in tools} == {"memcheck", "racecheck"}
    assert all(r["tests_passed"] == [True, True] for r in tools)


# A submission that swaps the tool's report for a symlink to a file of the grader's (here a
# stand-in secret; on a real run the hidden cases' seed or another submission's results): the
# tool runs outside the driver's mount namespace with the grader's uid, so a report path in the
# submission's working directory would be read through the link into its feedback.
SWAP_CELL = """import os
for name in ("sanitizer.log", "report.log"):
    try:
        os.remove(name)
    except OSError:
        pass
    os.symlink({secret!r}, name)
print("AG-SWAPPED", sorted(os.listdir(".")), flush=True)
"""


@pytest.mark.slow
def test_a_submission_cannot_point_the_tools_report_at_a_grader_file(tmp_path, monkeypatch):
    from autograder.grade import Run

    secret = tmp_path / "secret.json"
    secret.write_text('{"hidden_seed": 918273645}\n')
    sub = tmp_path / "swapper.py"
    sub.write_text((FIX / "honest_simple.py").read_text() + "\n" +
                   SWAP_CELL.format(secret=str(secret)))
    # the stand-in writes its report where the grader asks, then runs the driver
    script = _stand_in(tmp_path, 'log="$2"; shift 2\n'
                       'echo "========= ERROR SUMMARY: 0 errors" > "$log"\n"$@"\n')
    monkeypatch.setattr(sanitize, "wrapper_argv", lambda tool, log: [str(script), tool, log])
    monkeypatch.setattr(sanitize, "wrapper_keep", lambda: [str(script.parent)])
    monkeypatch.setattr(sanitize.Sanitizer, "unavailable", lambda self: None)
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    run = Run("lab2", tmp_path / "out", rubric_path=rub, simulated=True, quiet=True,
              sanitize=True)
    [res] = run.grade([sub])
    [san] = [t for t in res["tests"] if t["name"] == sanitize.SANITIZE_TEST]
    everything = json.dumps(res) + (tmp_path / "out" / "swapper" / "feedback.md").read_text() + \
        (tmp_path / "out" / "measurements.jsonl").read_text()
    assert "918273645" not in everything
    assert san["output"].startswith("no findings") and res["score"] == 6


@pytest.mark.slow
def test_a_submission_that_timed_out_is_not_run_again_under_the_tool(tmp_path, monkeypatch):
    """Under compute-sanitizer the public tests run about ten times slower: a submission whose
    public tests did not finish in the graded run is not started under the tool at all (it
    would hold the grader for ten of its time limits per tool); its feedback says so."""
    from autograder.grade import Run

    ran = tmp_path / "tool-ran"
    script = _stand_in(tmp_path, f'touch {ran}\nlog="$2"; shift 2\n"$@"\n')
    monkeypatch.setattr(sanitize, "wrapper_argv", lambda tool, log: [str(script), tool, log])
    monkeypatch.setattr(sanitize, "wrapper_keep", lambda: [str(script.parent)])
    monkeypatch.setattr(sanitize.Sanitizer, "unavailable", lambda self: None)
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC.replace("test_s = 20", "test_s = 3"))
    run = Run("lab2", tmp_path / "out", rubric_path=rub, simulated=True, quiet=True,
              sanitize=True)
    t0 = time.monotonic()
    [res] = run.grade([FIX / "infinite_loop.py"])
    assert time.monotonic() - t0 < 60
    [san] = [t for t in res["tests"] if t["name"] == sanitize.SANITIZE_TEST]
    assert san["output"].startswith("not run: the public test(s) public M=3 F=40")
    assert "gave no answer in the graded run" in san["output"] and not ran.exists()


def _stand_in(tmp_path, body):
    d = tmp_path / "wrap"
    d.mkdir(exist_ok=True)
    script = d / "fake-sanitizer"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    for p in (tmp_path, d, script):
        p.chmod(p.stat().st_mode | 0o055)
    return script


def test_calibration_finds_a_working_sandbox_or_turns_sanitize_off(tmp_path, monkeypatch):
    """Sanitizer.calibrate (run once per GPU run): a wrapper that runs the driver and writes a
    summary passes in the grader's own sandbox; one that never starts it fails, --sanitize is
    turned off with the reason logged, and no weaker sandbox is tried (the sanitizer children
    run student code again: never with less isolation than the graded run)."""
    from autograder.grade import Run

    monkeypatch.setattr(sanitize, "wrapper_keep", lambda: [str(tmp_path / "wrap")])
    good = _stand_in(tmp_path, 'log="$1"; shift\n"$@"\necho "========= ERROR SUMMARY: 0 errors" > "$log"\n')
    monkeypatch.setattr(sanitize, "wrapper_argv", lambda tool, log: [str(good), log])
    run = Run("lab2", tmp_path / "out", simulated=True, quiet=True, sanitize=True)
    assert run.sanitizer.calibrate() and run.sanitizer.enabled
    bad = _stand_in(tmp_path, "echo 'refused' > \"$1\"\nexit 1\n")
    monkeypatch.setattr(sanitize, "wrapper_argv", lambda tool, log: [str(bad), log])
    run = Run("lab2", tmp_path / "out2", simulated=True, quiet=True, sanitize=True)
    assert not run.sanitizer.calibrate() and not run.sanitizer.enabled
    logged = [json.loads(ln) for ln in (tmp_path / "out2" / "measurements.jsonl").read_text()
              .splitlines()]
    tried = [e for e in logged if "calibrate" in e]
    assert [e["ok"] for e in tried] == [False]
    assert tried[0]["isolation"] == {"isolate": run.children.isolate,
                                     "drop_uid": run.children.drop_uid}
    assert "could not run a kernel in the grader's sandbox" in logged[-1]["reason"]
    assert "refused" in logged[-1]["reason"]   # what the tool said is in the reason


@pytest.mark.slow
def test_grade_sanitize_here_says_not_available_and_grades_the_same(tmp_path):
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    sub = FIX / "honest_simple.py"
    runs = {flag: subprocess.Popen(grade_cmd("lab2", [sub], tmp_path / flag, "--rubric", str(rub),
                                             *([f"--{flag}"] if flag == "sanitize" else [])),
                                   cwd=REPO, env=env(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
            for flag in ("sanitize", "plain")}
    got = {}
    for flag, p in runs.items():
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out.decode(errors="replace")[-2000:]
        got[flag] = json.loads((tmp_path / flag / "honest_simple" / "results.json").read_text())
    strip = lambda r: [(t["name"], t["score"], t["max_score"]) for t in r["tests"]]  # noqa: E731
    assert strip(got["sanitize"]) == strip(got["plain"]) and got["sanitize"]["score"] == 6
    log = (tmp_path / "sanitize" / "measurements.jsonl").read_text().splitlines()
    said = [json.loads(ln) for ln in log if '"sanitizer"' in ln]
    assert len(said) == 1 and said[0]["available"] is False
    assert "not available on this machine" in said[0]["reason"]
    assert not any('"sanitizer"' in ln for ln in
                   (tmp_path / "plain" / "measurements.jsonl").read_text().splitlines())


def test_planted_race_fixture_differs_from_its_control_by_one_barrier():
    d = FIXTURES / "sanitizer"
    race = (d / "lab4_missing_syncthreads.py").read_text()
    control = (d / "lab4_honest.py").read_text()
    code = lambda s: [ln for ln in s.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]  # noqa: E731
    barriers = lambda s: sum("cuda.syncthreads()" in ln for ln in code(s))  # noqa: E731
    assert barriers(control) == 2 and barriers(race) == 1
    assert len(code(control)) - len(code(race)) == 1


def test_the_h100_record_caught_the_planted_race_inside_the_full_sandbox():
    """records/sanitizer/grade_h100.json (benchmarks/sanitizer_probe.py --grade on the H100):
    grade --sanitize ran compute-sanitizer in the grader's sandbox with full isolation, found
    the planted race at the fixture's lines, found nothing in its control, and left nothing
    running. Re-read from the record, so a new recording that loses any of it fails here."""
    rec = json.loads((REPO / "records" / "sanitizer" / "grade_h100.json").read_text())
    assert "H100" in rec["provenance"]["gpu"] and not rec["provenance"]["simulated"]
    log = rec["sanitizer_log"]
    [cal] = [e for e in log if e.get("calibrate")]
    assert cal["ok"] and cal["isolation"] == {"isolate": True, "drop_uid": True}
    [box] = [e for e in log if e.get("kind") == "sandbox" and e.get("ok")]
    assert box["mode"] == "full isolation" and box["uid"] != 0
    assert all(box["isolation"][k] for k in ("net", "mount", "uid_drop"))
    race = rec["fixtures"]["planted_race"]["sanitizer_feedback"]
    assert race.startswith("racecheck: WAR hazard on shared memory at cell 1, line 55")
    assert "at line 41" in race
    assert rec["fixtures"]["control"]["sanitizer_feedback"].startswith("no findings")
    assert rec["grade"]["returncode"] == 0 and rec["grade"]["left_running_then_killed"] == []
    assert "compute-sanitizer runs in the grader's sandbox" in rec["grade"]["stdout"]


def test_the_h100_record_of_hostile_fixtures_under_sanitize():
    """records/sanitizer/hostile_h100.json (benchmarks/sanitize_hostile_probe.py on the H100):
    every hostile and unusual lab-2 fixture graded with and without --sanitize; the flag
    changed no correctness test, left nothing running, caught the out-of-bounds store at its
    line, and gave every graded submission a sanitizer verdict or a reason."""
    rec = json.loads((REPO / "records" / "sanitizer" / "hostile_h100.json").read_text())
    assert "H100" in rec["provenance"]["gpu"] and rec["same_correctness"] is True
    assert rec["sanitize"]["left_running_then_killed"] == [] and rec["ps_after"] == []
    assert len(rec["per_submission"]) >= 24   # 18 fixtures, a malformed notebook, 5 threats
    [cal] = [e for e in rec["sanitizer_log"] if e.get("calibrate")]
    assert cal["ok"]
    oob = rec["per_submission"]["illegal_access"]["sanitize"]["sanitizer"]
    assert oob[0].startswith("memcheck: Invalid __global__ write") and "cell 1, line 10" in oob[0]
    assert oob[1] == "failed"
    for sid, r in rec["per_submission"].items():
        san = (r["sanitize"] or {}).get("sanitizer")
        if (r["sanitize"] or {}).get("status") == "graded":
            assert san and san[0].startswith(("no findings", "not run: ", "memcheck", "racecheck")), sid


def test_fixture_control_is_correct_in_the_simulator():
    lab = get("lab4")
    ns = runpy.run_path(str(FIXTURES / "sanitizer" / "lab4_honest.py"))
    for case in lab.public_cases:
        got, _ = lab.call_here(ns["linear_swiglu"], case)
        assert lab.check(got, case)[0]



# a compute-sanitizer stand-in that leaves a helper behind (its own session, SIGTERM and
# SIGHUP ignored, like the tool's TreeLauncherSubreaper) and hangs after the driver exits
_HANGING = """{py} -c "import os, signal, time
os.setsid()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
time.sleep(600)" {token} &
touch {started}
"$@" &
trap '' TERM HUP
wait
sleep 600
"""

_GRADER = """import sys
sys.path.insert(0, {repo!r})
from autograder import sanitize, __main__
sanitize.wrapper_argv = lambda tool, log: [{script!r}]
sanitize.wrapper_keep = lambda: [{wrapdir!r}]
sanitize.Sanitizer.unavailable = lambda self: None
sys.exit(__main__.main(["grade", "lab2", {sub!r}, "--out", {out!r}, "--rubric", {rub!r},
                        "--simulator", "--sanitize", "--quiet"]))
"""


@pytest.mark.slow
def test_grade_sanitize_killed_by_sigterm_leaves_nothing_running(tmp_path):
    """`timeout` SIGTERMs `grade --sanitize` while compute-sanitizer runs (the H100 run that
    left the tool and its subreaper alive): the grader kills every open child whole, logs the
    stop, dies by SIGTERM, and no process of the wrapped child is left."""
    import os
    import signal
    import sys

    token = f"ag-stray-{os.getpid()}-{tmp_path.name}"
    started = tmp_path / "started"
    script = _stand_in(tmp_path, _HANGING.format(py=sys.executable, token=token,
                                                 started=started))
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    out = tmp_path / "out"
    prog = tmp_path / "grader.py"
    prog.write_text(_GRADER.format(repo=str(REPO), script=str(script),
                                   wrapdir=str(script.parent), sub=str(FIX / "honest_simple.py"),
                                   out=str(out), rub=str(rub)))
    grader = subprocess.Popen([sys.executable, str(prog)], cwd=REPO, env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def ours():
        got = {}
        for d in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode()
                state = open(f"/proc/{d}/stat").read().rsplit(")", 1)[1].split()[0]
            except (OSError, UnicodeDecodeError):
                continue
            if state not in "ZX" and (token in cmd or str(script) in cmd):
                got[int(d)] = cmd
        return got

    try:
        deadline = time.monotonic() + 300   # the grading child first (simulator), then the tool
        while not started.exists() and grader.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert started.exists(), grader.communicate()[0].decode(errors="replace")[-3000:]
        time.sleep(1.0)
        assert any(token in c for c in ours().values()), ours()
        grader.send_signal(signal.SIGTERM)
        grader.wait(timeout=60)
        assert grader.returncode == -signal.SIGTERM, grader.stdout.read()[-3000:]
        deadline = time.monotonic() + 5
        while ours() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert ours() == {}, f"processes of the sanitized child outlived the grader: {ours()}"
        log = [json.loads(ln) for ln in (out / "measurements.jsonl").read_text().splitlines()]
        stopped = [e for e in log if e.get("kind") == "stopped"]
        assert stopped and stopped[0]["signal"] == "SIGTERM" and stopped[0]["children_killed"] >= 1
    finally:
        if grader.poll() is None:
            grader.kill()
        for pid in ours():   # what this test started and was left behind
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
