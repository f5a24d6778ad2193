"""The autograder end to end, in the simulator, through the same CLI an instructor runs:
solutions earn full marks, untouched labs earn no correctness points, labs/ is not stale,
re-runs skip finished work, a killed run loses nothing, shards merge."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from grading_runs import LABS, REPO, env, finished, full_marks, grade_cmd, results
from repo import FIXTURES



@pytest.mark.parametrize("calls, reader", [(("start_all", "finished"), "test_autograder.py"),
                                            (("lab_run", "grade_with_the_lab"),
                                             "test_bounds_grading.py")])
def test_every_file_reading_the_shared_runs_is_one_work_unit(calls, reader):
    """grading_runs.start_all and lab_run start their runs once per test process: a file that
    reads them outside the unit of tests/conftest.py's SERIAL_UNITS would start them again on
    the other worker (minutes of simulator), and a file that gives lab_run a submission outside
    it would not find it graded there."""
    import conftest

    readers = sorted(f"tests/grader/{p.name}" for p in (REPO / "tests" / "grader").glob("test_*.py")
                     if any(f"{w}(" in p.read_text() for w in calls))
    assert f"tests/grader/{reader}" in readers
    units = {conftest.work_unit(f) for f in readers}
    assert len(units) == 1 and units != {readers[0]}, (readers, units)


def test_labs_are_generated_from_the_masters_and_not_stale():
    r = subprocess.run([sys.executable, "-m", "autograder", "assign", "--check"], cwd=REPO, env=env(),
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    for lab in LABS:
        text = (REPO / "labs" / f"{lab}.ipynb").read_text()
        assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
        assert "NotImplementedError" in text or lab.startswith("lab1")


def test_assign_markers():
    from autograder.assign import MarkerError, strip_source

    src = ("def f(x):\n    # BEGIN SOLUTION add one\n    return x + 1\n    # END SOLUTION\n"
           "# BEGIN SOLUTION\ny = 2\n# END SOLUTION\n### BEGIN HIDDEN TESTS\nassert f(1) == 2\n"
           "### END HIDDEN TESTS\nz = 3\n")
    out = strip_source(src)
    assert "raise NotImplementedError('add one')" in out and "return x + 1" not in out
    assert "# YOUR CODE HERE: write this part" in out and "y = 2" not in out
    assert "assert f(1)" not in out and "z = 3" in out
    compile(out, "<lab>", "exec")
    with pytest.raises(MarkerError, match="no END SOLUTION"):
        strip_source("# BEGIN SOLUTION\nx = 1\n")
    with pytest.raises(MarkerError, match="without BEGIN"):
        strip_source("x = 1\n# END SOLUTION\n")


def test_stale_lab_is_detected(tmp_path, monkeypatch):
    import autograder.assign as assign

    (tmp_path / "solutions").mkdir()
    (tmp_path / "labs").mkdir()
    for lab in LABS:
        m = REPO / "solutions" / f"{lab}.ipynb"
        (tmp_path / "solutions" / m.name).write_text(m.read_text())
    for lab in LABS[:-1]:
        m = REPO / "labs" / f"{lab}.ipynb"
        (tmp_path / "labs" / m.name).write_text(m.read_text())
    m = REPO / "solutions" / "lab2_packed_swiglu.ipynb"
    monkeypatch.setattr(assign, "REPO", tmp_path)
    assert assign.assign_all(check_only=True) == [f"{LABS[-1]}.ipynb"]   # missing counts as stale
    assign.assign_all()
    assert assign.assign_all(check_only=True) == []
    lab = tmp_path / "labs" / m.name
    lab.write_text(lab.read_text().replace("silu", "SILU"))     # hand-edited
    assert assign.assign_all(check_only=True) == [m.name]
    (tmp_path / "solutions" / "lab9_no_module.ipynb").write_text(m.read_text())
    with pytest.raises(SystemExit, match="lab9_no_module.ipynb"):   # a master without its lab
        assign.assign_all(check_only=True)
    (tmp_path / "solutions" / "lab9_no_module.ipynb").unlink()
    (tmp_path / "solutions" / m.name).unlink()
    with pytest.raises(SystemExit, match="no master .* for lab2_packed_swiglu"):
        assign.assign_all(check_only=True)


@pytest.mark.slow
@pytest.mark.parametrize("lab", LABS)
def test_solution_full_marks_and_untouched_lab_no_correctness_points(lab):
    out = finished(lab)
    sol = results(out, f"solutions_{lab}")
    blank = results(out, f"labs_{lab}")
    assert full_marks(sol), json.dumps(sol["tests"], indent=1)[:3000]
    assert blank["score"] == 0
    assert all("NotImplementedError" in t["output"] or "not written" in t["output"]
               for t in blank["tests"] if t["max_score"] > 0 and t["name"] != "performance")
    for t in sol["tests"]:
        if t["name"] == "performance":  # nothing can be timed in the simulator: pending, said
            assert t["max_score"] == sol["extra_data"]["pending_points"] > 0 and t["score"] == 0
            assert t["status"] == "failed" and t["output"].startswith("PENDING: these ")
            assert "not measured: no GPU" in t["output"]
    assert not [f for f in sol["extra_data"]["flags"] if "withheld" in f or "tamper" in f.lower()]
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert {r["id"] for r in rows} == {f"solutions_{lab}", f"labs_{lab}"}
    assert (out / f"solutions_{lab}" / "feedback.md").read_text().startswith("# Feedback")
    log = [json.loads(l) for l in open(out / "measurements.jsonl")]
    assert {"run", "test", "result"} <= {r["kind"] for r in log}


@pytest.mark.slow
def test_gradescope_results_format():
    out = finished("lab2_packed_swiglu")
    r = results(out, "solutions_lab2_packed_swiglu")
    assert set(r) >= {"score", "tests", "output", "visibility", "execution_time"}
    for t in r["tests"]:
        assert set(t) >= {"name", "score", "max_score", "output", "visibility", "status"}
        assert t["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    assert abs(r["score"] - sum(t["score"] for t in r["tests"])) < 1e-9


def _lab1_copies(tmp_path, n):
    src = (REPO / "solutions" / "lab1_bytes_and_roofline.ipynb").read_text()
    d = tmp_path / "subs"
    d.mkdir()
    for i in range(n):
        (d / f"student{i}.ipynb").write_text(src)
    return d


@pytest.mark.slow
def test_rerun_skips_finished_and_a_killed_run_loses_nothing(tmp_path):
    subs = _lab1_copies(tmp_path, 3)
    out = tmp_path / "out"
    p = subprocess.Popen(grade_cmd("lab1", [subs], out, "--workers", "1"), cwd=REPO, env=env(),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first = out / "student0" / "results.json"
    deadline = time.time() + 180

    def first_in_csv():  # grades.csv is rewritten right after each results.json: wait for both
        try:
            return any(r["id"] == "student0" for r in csv.DictReader(open(out / "grades.csv")))
        except (FileNotFoundError, KeyError):
            return False

    while not (first.exists() and first_in_csv()) and time.time() < deadline:
        time.sleep(0.2)
    assert first.exists(), "the first submission was never graded"
    os.killpg(p.pid, signal.SIGKILL)   # the whole grader, mid-run
    p.wait()
    stamp = first.stat().st_mtime_ns
    assert list(csv.DictReader(open(out / "grades.csv")))  # what was graded is already in the CSV
    r = subprocess.run(grade_cmd("lab1", [subs], out), cwd=REPO, env=env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-2000:]
    assert first.stat().st_mtime_ns == stamp           # finished work was not redone
    rows = list(csv.DictReader(open(out / "grades.csv")))
    assert sorted(r["id"] for r in rows) == ["student0", "student1", "student2"]
    assert all(float(r["total"]) == float(r["max"]) for r in rows)
    t0 = time.time()
    r = subprocess.run(grade_cmd("lab1", [subs], out), cwd=REPO, env=env(), capture_output=True, text=True)
    assert r.returncode == 0 and time.time() - t0 < 30
    runs = [json.loads(l) for l in open(out / "measurements.jsonl") if '"kind": "run"' in l]
    assert runs[-1]["todo"] == 0


@pytest.mark.slow
def test_shards_and_merge(tmp_path):
    subs = _lab1_copies(tmp_path, 2)
    outs = []
    procs = []
    for i in range(2):
        outs.append(tmp_path / f"shard{i}")
        procs.append(subprocess.Popen(grade_cmd("lab1", [subs], outs[-1], "--shard", f"{i}/2"), cwd=REPO,
                                      env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stdout.read()[-2000:]
    assert [len(list(o.glob("*/results.json"))) for o in outs] == [1, 1]
    r = subprocess.run([sys.executable, "-m", "autograder", "merge", "--out", str(tmp_path / "all"),
                        *map(str, outs)], cwd=REPO, env=env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(tmp_path / "all" / "grades.csv")))
    assert sorted(r["id"] for r in rows) == ["student0", "student1"]
    bad = subprocess.run(grade_cmd("lab1", [subs], tmp_path / "x", "--shard", "2/2"), cwd=REPO, env=env(),
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "--shard" in (bad.stderr + bad.stdout)


def test_list_names_the_labs():
    r = subprocess.run([sys.executable, "-m", "autograder", "list"], cwd=REPO, env=env(),
                       capture_output=True, text=True)
    assert r.returncode == 0
    for lab in LABS:
        assert lab in r.stdout
    assert "swiglu_interleaved(x, out)" in r.stdout


def test_check_in_the_notebook_says_what_is_wrong(capsys):
    import book  # noqa: F401  (simulator here)
    from numba import cuda

    from autograder import check

    ns = {}
    exec((FIXTURES / "submissions" / "honest_simple.py").read_text(), ns)
    assert check(ns["swiglu_interleaved"]) is True
    out = capsys.readouterr().out
    assert out.count("PASS") == 2 and "not measured: no GPU" in out

    exec((FIXTURES / "submissions" / "unwritten_output.py").read_text(), ns)
    with pytest.raises(AssertionError) as e:
        check(ns["swiglu_interleaved"])
    msg = str(e.value)
    assert "never written" in msg and "first bad index" in msg and "expected" in msg and "got nan" in msg

    def wrong_dtype(x, out):  # writes float64 into a new array and returns it
        return cuda.to_device(x.copy_to_host().astype("float64"))
    wrong_dtype.__name__ = "swiglu_interleaved"
    with pytest.raises(AssertionError, match="nothing was written"):
        check(wrong_dtype)

    ns2 = {}
    exec("def bytes_fused(T, h, in_bytes, out_bytes):\n    return T * h * (2 * in_bytes + out_bytes) * 8\n", ns2)
    with pytest.raises(AssertionError, match="factor of 8"):
        check(ns2["bytes_fused"])


def test_performance_scoring_flags_the_impossible():
    from autograder.rubric import score_performance

    # the torch-reference basis (the rule before issue 18); the master basis: tests/grader/test_rubric.py
    perf = {"points": 4, "zero_at": 0.3, "full_at": 0.8, "physical_limit": 1.08, "basis": "reference"}
    ok = score_performance("bandwidth", perf, per_s=1.0, bandwidth=2.5e12, reference_s=0.9,
                           copy_bandwidth=2.9e12, verified=True)
    assert ok["points"] == 4 and not ok["flags"]
    half = score_performance("bandwidth", perf, per_s=1.0, bandwidth=1.6e12, reference_s=0.55,
                             copy_bandwidth=2.9e12, verified=True)
    assert half["points"] == 2.0
    fast = score_performance("bandwidth", perf, per_s=0.5, bandwidth=5.0e12, reference_s=0.9,
                             copy_bandwidth=2.9e12, verified=True)
    assert fast["points"] == 0 and "faster than physically possible" in fast["flags"][0]
    skipped = score_performance("bandwidth", perf, per_s=1.0, bandwidth=2.5e12, reference_s=0.9,
                                copy_bandwidth=2.9e12, verified=False)
    assert skipped["points"] == 0
    gemm = score_performance("flops", dict(perf, physical_limit=1.5), per_s=1.0, bandwidth=1e9,
                             reference_s=3.0, copy_bandwidth=2.9e12, verified=True)
    assert gemm["points"] == 0 and "plausible" in gemm["flags"][0]


def test_export_gradescope_bundle(tmp_path):
    import json
    import zipfile

    z = tmp_path / "autograder.zip"
    r = subprocess.run([sys.executable, "-m", "autograder", "export", "gradescope", "lab2", "--out", str(z)],
                       cwd=REPO, env=env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    names = zipfile.ZipFile(z).namelist()
    # Gradescope unpacks the zip into /autograder/source: setup.sh and run_autograder at its root
    assert {"setup.sh", "run_autograder", "autograder/grade.py", "autograder/replay.py",
            "autograder/rubrics/lab2_packed_swiglu.toml", "requirements.txt", "gradescope.json"} <= set(names)
    assert not [n for n in names if n.startswith(("source/", "solutions"))]
    assert not [n for n in names if "reports" in n or n.startswith("records")]  # records stay out
    run = zipfile.ZipFile(z).read("run_autograder").decode()
    assert "AUTOGRADER_ROOT:-/autograder" in run and "autograder.gradescope run" in run
    # a seed drawn at export time, the same for the whole class (tests/grader/test_gradescope.py runs it)
    seed = json.loads(zipfile.ZipFile(z).read("gradescope.json"))["seed"]
    r2 = subprocess.run([sys.executable, "-m", "autograder", "export", "gradescope", "lab2", "--out",
                         str(tmp_path / "b.zip")], cwd=REPO, env=env(), capture_output=True, text=True)
    assert r2.returncode == 0, r2.stderr
    assert json.loads(zipfile.ZipFile(tmp_path / "b.zip").read("gradescope.json"))["seed"] != seed


def test_replay_refuses_what_it_cannot_replay_and_marshals_scalars_as_numba_does(tmp_path):
    """The trusted replay process's reading of a recording (no GPU needed for this part):
    a recording without launches, or one whose recording failed, is refused with the reason;
    scalar parameters get the C types numba passes (int64 for Python ints and array fields,
    the float16 bits as 2 bytes, bool as 1 byte)."""
    import ctypes
    import json

    from autograder.replay import Recording, ReplayError, ctype_scalar

    def write(**rec):
        (tmp_path / "launches.json").write_text(json.dumps(
            dict({"launches": [], "images": {}, "scratch": [], "error": None}, **rec)))

    write()
    with pytest.raises(ReplayError, match="launched no CUDA kernel"):
        Recording(tmp_path)
    write(error="TypeError: a kernel parameter of type dict cannot be replayed")
    with pytest.raises(ReplayError, match="could not be recorded: TypeError"):
        Recording(tmp_path)
    (tmp_path / "img_a.cubin").write_bytes(b"\x7fELF")
    (tmp_path / "s0.bin").write_bytes(b"\x01\x02")
    write(launches=[{"image": "a", "entry": "k", "grid": [1, 1, 1], "block": [32, 1, 1], "shmem": 0,
                     "params": [{"t": "ptr", "buf": "out", "off": 0}]}],
          images={"a": "img_a.cubin"}, scratch=[{"name": "s0", "size": 2, "file": "s0.bin"}])
    rec = Recording(tmp_path)
    assert rec.images == {"a": b"\x7fELF"} and rec.scratch == [("s0", 2, b"\x01\x02")]
    sizes = {t: ctypes.sizeof(ctype_scalar({"t": t, "v": v})) for t, v in
             [("c_int64", 5), ("c_double", 1.5), ("bool", True), ("c_float", 2.0), ("c_ushort", 15360),
              ("c_int", -3), ("np:<f2", 1.0)]}
    assert sizes == {"c_int64": 8, "c_double": 8, "bool": 1, "c_float": 4, "c_ushort": 2, "c_int": 4,
                     "np:<f2": 2}
    assert ctype_scalar({"t": "np:<f2", "v": 1.0}).value == 15360   # float16 1.0, as its bits
