"""autograder.feedback: the student's access pattern (traced in the simulator), compute-sanitizer
findings (here: "not available on this machine"), and compute-sanitizer in grade (issue 9; issue
41: on a GPU, by default, its findings on one public case cost that case its points)."""

from __future__ import annotations

import json
import re
import runpy
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

import book  # noqa: F401  (simulator decided before numba.cuda is imported)
from grading_runs import FAST_FULL, FAST_RUBRIC, FIX, REPO, THREATS, env, gpu_env, grade_cmd
from autograder import feedback, rerun, sanitize
from autograder.judge import hazard_words
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
    from autograder import master

    ns = master.namespace(lab)   # its graded cells, each named with its lines for the advice
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


def _fake_tool(tmp_path, reports: dict, extra: str = "") -> Path:
    """A stand-in for compute-sanitizer (none runs here): it writes ``reports[tool]`` (a real
    report, or a clean summary) into the log file the grader names, then runs the driver as
    its child, as the tool does; ``extra``: more shell before the driver starts."""
    wrapdir = tmp_path / "wrap"
    wrapdir.mkdir(exist_ok=True)
    for tool in sanitize.GRADE_TOOLS:
        clean = ("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
                 if tool == "racecheck" else "========= ERROR SUMMARY: 0 errors")
        (wrapdir / f"{tool}.txt").write_text(reports.get(tool, clean) + "\n")
    script = wrapdir / "fake-sanitizer"
    script.write_text(f'#!/bin/sh\ncat {wrapdir}/"$1".txt > "$2"\nshift 2\n{extra}"$@"\n'
                      'echo "$NUMBA_CUDA_DEBUGINFO" > wrapped.txt\n')
    script.chmod(0o755)
    for p in (tmp_path, wrapdir, *wrapdir.iterdir()):
        p.chmod(p.stat().st_mode | 0o055)
    return script


def _stand_in_run(tmp_path, monkeypatch, script, **kw):
    from autograder.grade import Run

    monkeypatch.setattr(sanitize, "wrapper_argv", lambda tool, log: [str(script), tool, log])
    monkeypatch.setattr(sanitize, "wrapper_keep", lambda: [str(script.parent)])
    monkeypatch.setattr(sanitize.Sanitizer, "unavailable", lambda self: None)
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    return Run("lab2", tmp_path / "out", rubric_path=rub, simulated=True, quiet=True, **kw)


# The stand-in's report for a submission of the batch below is picked by a comment in its
# cells (the wrapper reads the child's cells.json in its working folder): one grading run for
# the four submissions these tests compare, not one run each.
REPORT_MARK = "# stand-in report: "


def _fake_tool_by_mark(tmp_path, by_mark: dict) -> Path:
    """A stand-in tool like ``_fake_tool``'s whose report for each tool is
    ``by_mark[mark][tool]`` for a submission whose cells hold ``REPORT_MARK + mark``, and a
    clean summary for any other submission or tool."""
    script = _fake_tool(tmp_path, {})
    wrapdir = script.parent
    for mark, reports in by_mark.items():
        (wrapdir / mark).mkdir()
        for tool, text in reports.items():
            (wrapdir / mark / f"{tool}.txt").write_text(text + "\n")
        for p in ((wrapdir / mark), *(wrapdir / mark).iterdir()):
            p.chmod(p.stat().st_mode | 0o055)
    script.write_text(
        "#!/bin/sh\n"
        f"mark=$(grep -o '{REPORT_MARK}[a-z_]*' cells.json | head -n 1 | sed 's/.*: //')\n"
        f'report={wrapdir}/"$1".txt\n'
        f'if [ -n "$mark" ] && [ -f {wrapdir}/"$mark"/"$1".txt ]; then report={wrapdir}/"$mark"/"$1".txt; fi\n'
        'cat "$report" > "$2"\nshift 2\n"$@"\n')
    return script


@pytest.fixture(scope="module")
def stand_in_batch(tmp_path_factory):
    """Four submissions of lab 2 graded in one run (simulator) under a stand-in tool:
    ``honest_simple`` (clean reports), ``raced`` (the same code, the H100's racecheck report
    of a missing barrier), ``forger`` (the same code printing lines that look like findings
    and a refusal; clean reports) and ``forger_caught`` (the forger, the H200's memcheck
    report of lab 6's read past x). {submission id: results.json, with "_out": the run's
    folder}."""
    tmp = tmp_path_factory.mktemp("stand-in")
    rec = json.loads((REPO / "records" / "sanitizer" / "h100.json").read_text())
    race = rec["programs"]["missing_syncthreads"]["tools"]["racecheck"]["output"]
    read = (FIXTURES / "sanitizer" / "memcheck_h200_lab6_reads_x_past_end.txt").read_text()
    honest = (FIX / "honest_simple.py").read_text()
    subs = {"raced": honest + f"\n{REPORT_MARK}raced\n",
            "forger": honest + "\n" + FORGER_CELL,
            "forger_caught": honest + "\n" + FORGER_CELL + f"\n{REPORT_MARK}caught\n"}
    paths = [FIX / "honest_simple.py"]
    for name, text in subs.items():
        paths.append(tmp / f"{name}.py")
        paths[-1].write_text(text)
    script = _fake_tool_by_mark(tmp, {
        "raced": {"racecheck": race.replace("missing_syncthreads.py", "<cell 1>")},
        "caught": {"memcheck": read.replace("lab6_reads_x_past_end.py", "<cell 1>")}})
    with pytest.MonkeyPatch.context() as mp:
        _stand_in_run(tmp, mp, script).grade(paths)
    out = {}
    for p in paths:
        out[p.stem] = json.loads((tmp / "out" / p.stem / "results.json").read_text())
        out[p.stem]["_out"] = tmp / "out"
    return out


def _sanitized(res) -> tuple[dict, dict]:
    """(the sanitized case's test, the 0-point compute-sanitizer test) of a results.json."""
    [san] = [t for t in res["tests"] if t["name"] == sanitize.SANITIZE_TEST]
    lab = get("lab2")
    case = sanitize.fallback_case(lab, list(lab.public_cases))   # a simulated run's choice
    [test] = [t for t in res["tests"] if t["name"] == case["name"]]
    return test, san


def _scores(res, but: str) -> dict:
    return {t["name"]: t["score"] for t in res["tests"] if t["name"] != but}


@pytest.mark.slow
def test_a_race_compute_sanitizer_reports_costs_the_sanitized_case(stand_in_batch):
    """The grader's whole route here, compute-sanitizer replaced by a wrapper that writes the
    H100's racecheck report of a missing barrier into the grader's log file and runs the
    driver as its child, beside the same submission with a clean report: the sanitized public
    case (lab 2's largest) loses its points and says it as a race on shared memory found by
    racecheck, at the student's cell and line, before the values' verdict; every other test
    scores as it did; the 0-point test says which case the tools checked and what they found."""
    clean, raced = stand_in_batch["honest_simple"], stand_in_batch["raced"]
    test, san = _sanitized(raced)
    was, clean_san = _sanitized(clean)
    assert clean_san["output"].startswith(f"no findings in public case {test['name']} "
                                          "(checked by racecheck, memcheck, synccheck)")
    assert "compute-sanitizer" not in was["output"] and clean_san["status"] == "passed"
    assert test["score"] == 0 and test["max_score"] == 1
    assert raced["score"] == clean["score"] - was["score"]
    assert _scores(raced, test["name"]) == _scores(clean, test["name"])
    assert test["output"].startswith("A RACE ON SHARED MEMORY on shared memory, cell 1, line 12")
    assert "Found by compute-sanitizer's racecheck" in test["output"]
    assert "\nThe values of the first call: " + was["output"] in test["output"]
    assert san["max_score"] == 0 and san["status"] == "failed"
    assert san["output"].startswith(f"found in public case {test['name']}: a race on shared memory")
    md = (raced["_out"] / "raced" / "feedback.md").read_text()
    assert "A RACE ON SHARED MEMORY" in md and f"### {sanitize.SANITIZE_TEST}" in md
    logged = [json.loads(ln) for ln in (raced["_out"] / "measurements.jsonl").read_text()
              .splitlines() if '"sanitizer"' in ln]
    # the run says once that the tool is available, then logs each tool's run of the case
    assert [r.get("available") for r in logged if "available" in r] == [True]
    tools = [r for r in logged if "answered" in r and r["id"] == "raced"]
    assert [r["tool"] for r in tools] == list(sanitize.GRADE_TOOLS)
    assert all(r["answered"] and r["case"] == test["name"] for r in tools)
    [said] = [r for r in logged if "hazards" in r and r["id"] == "raced"]
    assert [h["kind"] for h in said["hazards"]] == ["race_shared"]


# What a submission prints is never the tool's report: lines that look like a finding and a
# refusal ("No CUDA-capable device"), printed by the submission, with a clean report in the
# grader's log file: no point lost, and the check not turned into "not available".
FORGER_CELL = """print("========= Invalid __global__ read of size 4 bytes")
print("=========     at kernel+0x10 in <cell 1>:5")
print("=========     by thread (0,0,0) in block (0,0,0)")
print("========= Error: Potential RAW hazard detected at __shared__ 0x0 in block (0,0,0) :")
print("========= No CUDA-capable device is detected")
print("========= ERROR SUMMARY: 7 errors", flush=True)
"""


@pytest.mark.slow
def test_what_the_submission_prints_neither_costs_nor_saves_a_point(stand_in_batch):
    honest, forged = stand_in_batch["honest_simple"], stand_in_batch["forger"]
    test, san = _sanitized(forged)
    assert _scores(forged, "") == _scores(honest, "")
    assert "compute-sanitizer" not in test["output"]
    assert san["output"].startswith(f"no findings in public case {test['name']}")
    assert "not available" not in san["output"] and "for review" not in san["output"]
    # the other way round: the tool's real report in its log, the submission printing a refusal
    # (the report recorded on lab 6, its lines said as this submission's cell 1)
    caught = stand_in_batch["forger_caught"]
    test, san = _sanitized(caught)
    assert test["score"] == 0 and test["output"].startswith("A READ OUTSIDE AN INPUT"), test
    assert "Found by compute-sanitizer's memcheck" in test["output"]
    assert "not available" not in san["output"]


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
    # (the swapped files are the submission's: the grader reads only its own log)
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
    assert san["output"].startswith("no findings in public case") and res["score"] == FAST_FULL


@pytest.mark.slow
def test_a_submission_that_timed_out_is_not_run_again_under_the_tool(tmp_path, monkeypatch):
    """Under compute-sanitizer a case runs several times slower: a submission whose sanitized
    public case did not finish in the graded run is not started under the tool at all (it
    would hold the grader for ten of its time limits per tool); its feedback says so, and
    nothing is taken for it."""
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
    test, san = _sanitized(res)
    assert san["output"].startswith(f"not run: the public test {test['name']} gave no answer")
    assert "in the graded run" in san["output"] and not ran.exists()


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
def test_grade_here_says_once_the_tool_is_not_available_and_grades_the_same(tmp_path):
    """Here (the simulator) compute-sanitizer cannot run: `grade` (on by default) says so once
    in the log (and on the terminal) and grades exactly as `--no-sanitize` does, which says in
    the log that it was turned off; neither adds anything to a submission's feedback here."""
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    sub = FIX / "honest_simple.py"
    runs = {flag: subprocess.Popen(grade_cmd("lab2", [sub], tmp_path / flag, "--rubric", str(rub),
                                             *([f"--{flag}"] if flag == "no-sanitize" else [])),
                                   cwd=REPO, env=env(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
            for flag in ("default", "no-sanitize")}
    got = {}
    for flag, p in runs.items():
        out, _ = p.communicate(timeout=600)
        assert p.returncode == 0, out.decode(errors="replace")[-2000:]
        got[flag] = json.loads((tmp_path / flag / "honest_simple" / "results.json").read_text())
    strip = lambda r: [(t["name"], t["score"], t["max_score"]) for t in r["tests"]]  # noqa: E731
    assert strip(got["default"]) == strip(got["no-sanitize"]) and got["default"]["score"] == FAST_FULL
    assert not any(t["name"] == sanitize.SANITIZE_TEST for r in got.values() for t in r["tests"])
    said = {flag: [json.loads(ln) for ln in (tmp_path / flag / "measurements.jsonl").read_text()
                   .splitlines() if '"sanitizer"' in ln] for flag in got}
    assert len(said["default"]) == 1 and said["default"][0]["available"] is False
    assert "not available on this machine" in said["default"][0]["reason"]
    assert [r.get("enabled") for r in said["no-sanitize"]] == [False]
    assert "--no-sanitize" in said["no-sanitize"][0]["reason"]


def test_no_sanitize_on_a_gpu_says_so_in_each_feedback(tmp_path):
    """On a GPU `--no-sanitize` is said once in the log and in every submission's feedback (a
    0-point test: its case was not checked, nothing was taken for it); no child is started."""
    from autograder.grade import Run
    from autograder.results import Result

    run = Run("lab2", tmp_path / "out", simulated=False, quiet=True, sanitize=False)
    assert run.sanitizer.prepare() is False
    logged = [json.loads(ln) for ln in (tmp_path / "out" / "measurements.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["enabled"]) for e in logged] == [("sanitizer", False)]
    r = Result(id="s", file="s.py", lab=run.lab_name, run=run.run_id)
    run.sanitizer.run(r, cells=None, gpu=0)
    [t] = r.tests
    assert t.name == sanitize.SANITIZE_TEST and t.max_score == 0 and t.output == sanitize.TURNED_OFF


# ----------------------------------------------------------------------------- findings -> hazards
REPORTS = FIXTURES / "sanitizer"


def _report(name, source):
    """A report recorded on the H200, as the grader's sandbox gives it (cell 1 is the file)."""
    return (REPORTS / name).read_text().replace(source, "<cell 1>")


def _lab6_case(T):
    lab = get("lab6")
    return lab, next(c for c in lab.public_cases if c["T"] == T)


def test_memcheck_reads_past_x_cost_the_case_as_a_read_outside_x():
    """The H200's memcheck report of lab 6's token loop over every token slot (records/
    sanitizer/hazards_h200.json): every read past x, said once, by the one nearest to x's end,
    with the array named by its exact size (x is 512 bytes in public T=4 d=64 h=12; wg and wu,
    1536 each, would be named by none)."""
    lab, case = _lab6_case(4)
    arrays = sanitize.case_arrays(lab, case)
    assert arrays["x"] == (512, 2) and arrays["wg"] == arrays["wu"]
    found, notes = sanitize.hazards_from_reports(
        {"memcheck": _report("memcheck_h200_lab6_reads_x_past_end.txt", "lab6_reads_x_past_end.py")},
        arrays)
    assert notes == [] and len(found) == 1
    [h] = found
    assert (h.kind, h.array, h.found_by, h.where) == ("read_past", "x", "memcheck", "cell 1, line 224")
    assert h.index == 4 * 64   # the read nearest to x's end: its first element past it
    assert "thread (0,0,0)" in h.detail
    assert "1 element(s) past the end (`x` has 256 elements, flat indices 0 to 255)" in h.detail
    assert "memcheck counted 96 such accesses" in h.detail
    # the same read past an allocation no array of the case matches names none of them
    found, _ = sanitize.hazards_from_reports(
        {"memcheck": _report("memcheck_h200_lab6_reads_x_past_end.txt", "lab6_reads_x_past_end.py")},
        {k: v for k, v in arrays.items() if k != "x"})
    assert [h.array for h in found] == ["a device array of 512 bytes"]


def test_racecheck_and_synccheck_reports_become_one_hazard_each():
    lab, case = _lab6_case(5)   # the split public case (the report: its T = 16 form)
    arrays = sanitize.case_arrays(lab, case)
    race = _report("racecheck_h200_lab6_missing_syncthreads.txt", "lab6_missing_syncthreads.py")
    sync = _report("synccheck_h200_barrier_two_sites.txt", "barrier_two_sites.py")
    found, notes = sanitize.hazards_from_reports({"racecheck": race, "synccheck": sync}, arrays)
    assert notes == [] and [(h.kind, h.found_by) for h in found] == [("race_shared", "racecheck"),
                                                                      ("barrier", "synccheck")]
    r, b = found
    src = (REPORTS / "lab6_missing_syncthreads.py").read_text().splitlines()
    # said by a hazard between two warps (racecheck's Error), the write and the read it names
    assert r.where == "cell 1, line 234" and "red[0, t, warp] = vg" in src[233]
    assert "(cell 1, line 242)" in r.detail and "red[k, t" in src[241]
    assert "racecheck counted 2352 such hazards" in r.detail and "one warp" not in r.detail
    assert b.where == "cell 1, line 11" and "Divergent thread(s) in block" in b.detail
    words = hazard_words(found, "`out` correct")
    assert words.startswith("A RACE ON SHARED MEMORY on shared memory, cell 1, line 234")
    assert "\nA BARRIER NOT EVERY THREAD REACHES, cell 1, line 11" in words
    assert words.endswith("\nThe values of the first call: `out` correct")
    # two threads of one warp (lab 4's planted race on the H100: warnings only) are a race too
    found, _ = sanitize.hazards_from_reports(
        {"racecheck": _report("racecheck_h100_warp_level.txt", "race_student.py")}, {})
    assert [h.kind for h in found] == ["race_shared"] and "two threads of one warp" in found[0].detail


def test_what_the_grader_cannot_name_costs_nothing_and_is_said_for_review():
    """API errors (cuGetProcAddress) are no finding; errors counted but not printed, a store
    past an allocation (the graded run's guard zones judge those) and a line in no form the
    parser knows are notes for a person, never points."""
    api = (REPORTS / "memcheck_h100_api_errors_first.txt").read_text()
    found, notes = sanitize.hazards_from_reports({"memcheck": api}, {})
    assert found == [] and len(notes) == 1 and "153 errors counted but not printed" in notes[0]
    write = json.loads((REPO / "records" / "sanitizer" / "h100.json").read_text())[
        "programs"]["out_of_bounds"]["tools"]["memcheck"]["output"]
    found, notes = sanitize.hazards_from_reports({"memcheck": write}, {"out": (1024, 4)})
    assert found == [] and notes[0].startswith("memcheck: Invalid __global__ write of size 4 bytes")
    odd = "========= Error: Something the tool says that no pattern knows\n"
    found, notes = sanitize.hazards_from_reports({"racecheck": odd}, {})
    assert found == [] and notes == ["racecheck said: Error: Something the tool says that no "
                                     "pattern knows"]
    assert sanitize.hazards_from_reports({"memcheck": "", "racecheck": ""}, {}) == ([], [])


def test_the_grader_reads_the_tools_log_only(tmp_path):
    class Child:   # what the submission printed, report-like lines and all
        def output_text(self):
            return "========= Invalid __global__ read of size 4 bytes\n========= No CUDA-capable device"

    with sanitize.ToolLog() as log:
        log.path.write_text("========= ERROR SUMMARY: 0 errors\n")
        assert log.report(Child()) == "========= ERROR SUMMARY: 0 errors\n"
        folder = log.folder
    assert not folder.exists()


def test_the_sanitized_case_takes_the_most_declared_paths():
    lab = get("lab6")
    public = list(lab.public_cases)
    one, split = public[1], public[2]
    taken = {c["name"]: [] for c in public}
    taken[split["name"]] = ["split-K", "several pieces per thread", "T > 1"]
    taken[one["name"]] = ["one block per row", "T = 1"]
    assert sanitize.case_by_paths(lab, public, taken) is split
    taken[one["name"]] = ["one block per row", "T = 1", "a ragged share"]   # a tie: the smaller
    assert sanitize.case_by_paths(lab, public, taken) is min(
        (split, one), key=lambda c: sanitize.case_bytes(lab, c))
    assert sanitize.fallback_case(lab, public) is max(public, key=lambda c: sanitize.case_bytes(lab, c))


def test_planted_race_fixture_differs_from_its_control_by_one_barrier():
    d = FIXTURES / "sanitizer"
    race = (d / "lab4_missing_syncthreads.py").read_text()
    control = (d / "lab4_honest.py").read_text()
    code = lambda s: [ln for ln in s.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]  # noqa: E731
    barriers = lambda s: sum("cuda.syncthreads()" in ln for ln in code(s))  # noqa: E731
    assert barriers(control) == 2 and barriers(race) == 1
    assert len(code(control)) - len(code(race)) == 1


def test_the_h100_record_caught_the_planted_race_inside_the_full_sandbox():
    """records/sanitizer/grade_h100.json (the retired sanitizer_probe.py --grade on the H100):
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


@pytest.mark.slow
def test_the_sanitized_case_is_chosen_by_the_masters_paths(tmp_path):
    """Sanitizer.choose_case runs the lab's master (solutions/, trusted) on each public case in
    a sandboxed child (here the simulator's; on a GPU the GPU's, where it is called) and reads
    the paths its launches took: the case taking the most is the one the tools run."""
    from autograder.grade import Run

    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    run = Run("lab2", tmp_path / "out", rubric_path=rub, simulated=True, quiet=True)
    lab = run.lab
    assert lab.paths, "lab 2 declares its paths (spec.LabPath)"
    case = run.sanitizer.choose_case()
    [said] = [json.loads(ln) for ln in (tmp_path / "out" / "measurements.jsonl").read_text()
              .splitlines() if '"chosen_by"' in ln]
    assert said["chosen_by"] == "the master's paths" and said["case"] == case["name"]
    taken = said["paths"]
    assert set(taken) == {c["name"] for c in lab.public_cases}
    assert all(set(v) <= {p.name for p in lab.paths} for v in taken.values())
    assert len(taken[case["name"]]) == max(len(v) for v in taken.values()) > 0


# ----------------------------------------------------------------------------- on a GPU
# The GPU lane (`python -m tools.gpu_tests --under tests/grader -k compute_sanitizer`, or pytest
# -m gpu on this file): `python -m autograder grade` as shipped (compute-sanitizer on by
# default), the lab's rubric with one hidden case and no performance test (nothing here is
# timed), in the grader's full sandbox.
def _gpu_grade(out: Path, lab: str, subs: list) -> tuple[dict, list]:
    """({submission id: results.json}, the run's log) of `grade LAB SUBS` on this GPU."""
    import sys

    from autograder import labs

    name = labs.resolve(lab)
    text = (REPO / "autograder" / "rubrics" / f"{name}.toml").read_text()
    text = re.sub(r"\n\[performance\].*?(?=\n\[)", "\n", text, flags=re.S)
    text = re.sub(r"\nhidden_cases = \d+\n", "\nhidden_cases = 1\n", text)
    out.mkdir(parents=True, exist_ok=True)
    rub = out / f"{name}.toml"
    rub.write_text(text)
    envs = gpu_env()
    r = subprocess.run([sys.executable, "-m", "autograder", "grade", name, *map(str, subs),
                        "--out", str(out / "graded"), "--rubric", str(rub)], cwd=REPO, env=envs,
                       capture_output=True, text=True, timeout=1500)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    graded = out / "graded"
    res = {p.parent.name: json.loads(p.read_text()) for p in graded.glob("*/results.json")}
    log = [json.loads(ln) for ln in (graded / "measurements.jsonl").read_text().splitlines()]
    return res, log


def _on_gpu_case(log) -> str:
    [cal] = [e for e in log if e.get("kind") == "sanitizer" and e.get("calibrate")]
    assert cal["ok"] and cal["isolation"] == {"isolate": True, "drop_uid": True}, cal
    [chose] = [e for e in log if e.get("kind") == "sanitizer" and "chosen_by" in e]
    assert chose["chosen_by"] == "the master's paths", chose
    return chose["case"]


def _case_tests(res, case) -> tuple[dict, dict]:
    [test] = [t for t in res["tests"] if t["name"] == case]
    [san] = [t for t in res["tests"] if t["name"] == sanitize.SANITIZE_TEST]
    return test, san


def _tool_seconds(log, sid) -> dict:
    return {e["tool"]: e["seconds"] for e in log
            if e.get("kind") == "sanitizer" and e.get("id") == sid and "answered" in e}


@pytest.fixture(scope="module")
def lab6_on_gpu(tmp_path_factory):
    """Lab 6's master and its two hazard fixtures graded in one run on this GPU."""
    subs = [REPO / "solutions" / "lab6_decode_mlp_up.ipynb",
            FIXTURES / "sanitizer" / "lab6_missing_syncthreads.py",
            FIXTURES / "sanitizer" / "lab6_reads_x_past_end.py"]
    res, log = _gpu_grade(tmp_path_factory.mktemp("lab6"), "lab6", subs)
    return res, log, _on_gpu_case(log)


@pytest.mark.gpu
def test_compute_sanitizer_finds_nothing_in_lab6s_master_on_a_gpu(lab6_on_gpu):
    """The master on the case the tools run (the one its launches split d on: split-K among its
    paths), every tool answered, nothing found, its points kept, within the 300 s budget."""
    res, log, case = lab6_on_gpu
    [chose] = [e for e in log if e.get("kind") == "sanitizer" and "chosen_by" in e]
    assert "split-K" in chose["paths"][case], chose
    test, san = _case_tests(res["lab6_decode_mlp_up"], case)
    assert san["output"].startswith(f"no findings in public case {case} (checked by racecheck, "
                                    "memcheck, synccheck)"), san
    assert test["score"] == test["max_score"] and "compute-sanitizer" not in test["output"]
    secs = _tool_seconds(log, "lab6_decode_mlp_up")
    assert set(secs) == set(sanitize.GRADE_TOOLS) and sum(secs.values()) < 300, secs


@pytest.mark.gpu
def test_compute_sanitizer_takes_the_case_of_lab6s_missing_barrier_on_a_gpu(lab6_on_gpu):
    res, log, case = lab6_on_gpu
    test, san = _case_tests(res["lab6_missing_syncthreads"], case)
    assert test["score"] == 0, test
    said = [ln for ln in test["output"].splitlines() if "Found by compute-sanitizer's racecheck" in ln]
    assert said and said[0].startswith("A RACE ON SHARED MEMORY on shared memory, cell 1, line "), test
    # where: the store of a warp's sums into shared memory (racecheck's write of the pair)
    assert re.search(r"red\[[01], t, warp\] = v[gu]",
                     _line(FIXTURES / "sanitizer" / "lab6_missing_syncthreads.py", said[0])), said
    assert san["output"].startswith(f"found in public case {case}: a race on shared memory")


@pytest.mark.gpu
def test_compute_sanitizer_takes_the_case_of_lab6s_reads_past_x_on_a_gpu(lab6_on_gpu):
    res, log, case = lab6_on_gpu
    c = next(c for c in get("lab6").public_cases if c["name"] == case)
    T = c["T"]
    assert T < 16, (f"lab 6's sanitized public case ({case}) has T = 16, every token slot: a "
                    "token loop over all 16 slots reads no row past x there, so memcheck has "
                    "nothing to see; the public case the master splits on needs T < 16")
    test, san = _case_tests(res["lab6_reads_x_past_end"], case)
    assert test["score"] == 0, test
    said = [ln for ln in test["output"].splitlines() if "Found by compute-sanitizer's memcheck" in ln]
    # the read nearest to x's end: the first element of the row past it, T * d
    assert said and said[0].startswith(f"A READ OUTSIDE AN INPUT on `x` at flat index {T * c['d']}, "), test


def _line(path, said) -> str:
    """The source line a hazard's words name ("cell 1, line N": the file itself)."""
    n = int(re.search(r"cell 1, line (\d+)", said).group(1))
    return path.read_text().splitlines()[n - 1]


@pytest.mark.gpu
def test_compute_sanitizer_takes_the_case_of_lab4s_planted_race_on_a_gpu(tmp_path):
    """Lab 4's planted race (tests/fixtures/sanitizer: the barrier after each k-step removed)
    loses the sanitized case's points as a race on shared memory; its control keeps them."""
    d = FIXTURES / "sanitizer"
    res, log = _gpu_grade(tmp_path / "lab4", "lab4", [d / "lab4_missing_syncthreads.py",
                                                      d / "lab4_honest.py"])
    case = _on_gpu_case(log)
    test, san = _case_tests(res["lab4_missing_syncthreads"], case)
    assert test["score"] == 0 and "Found by compute-sanitizer's racecheck" in test["output"], test
    assert test["output"].startswith("A RACE ON SHARED MEMORY on shared memory, cell 1, line ")
    test, san = _case_tests(res["lab4_honest"], case)
    assert san["output"].startswith(f"no findings in public case {case}"), san
    assert "compute-sanitizer" not in test["output"]
