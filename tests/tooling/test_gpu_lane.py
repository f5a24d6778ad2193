"""`make test-gpu` (tools/gpu_tests.py): the `gpu` marker's tests are skipped here and the lane
refuses to run where there is no GPU; its summary reads pytest's own report."""

import json
import os
import subprocess
import sys
from repo import ROOT as REPO



def test_the_lane_refuses_a_machine_without_a_gpu():
    env = dict(os.environ, BOOK_SIMULATOR="1", PYTHONPATH=str(REPO))
    r = subprocess.run([sys.executable, "-m", "tools.gpu_tests", "--out", "/nonexistent/x.json"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "needs a CUDA GPU" in r.stderr


def test_the_summary_counts_each_outcome_from_pytests_report(tmp_path):
    from tools.gpu_tests import summary

    (tmp_path / "test_x.py").write_text(
        "import pytest\n"
        "def test_ok():\n    pass\n"
        "def test_bad():\n    assert 1 == 2, 'one is not two'\n"
        "@pytest.mark.skip(reason='no reason')\ndef test_skipped():\n    pass\n")
    junit = tmp_path / "j.xml"
    rc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                         f"--junitxml={junit}", str(tmp_path / "test_x.py")],
                        cwd=tmp_path, capture_output=True, text=True, timeout=120).returncode
    s = summary([junit], rc, "cmd", {"gpu": "test"})
    assert s["counts"] == {"passed": 1, "failed": 1, "skipped": 1} and s["pytest_exit_status"] == 1
    bad = next(t for t in s["tests"] if t["test"].endswith("test_bad"))
    assert bad["outcome"] == "failed" and "one is not two" in bad["message"]
    json.dumps(s)   # what is committed


def test_every_committed_gpu_summary_has_provenance_and_no_failure():
    for f in sorted((REPO / "records" / "tests").glob("gpu_*.json")):
        s = json.loads(f.read_text())
        prov = s["provenance"]
        assert prov.get("gpu") and prov.get("commit") and prov.get("date"), f
        assert not prov.get("simulated"), f
        assert s["counts"].get("passed", 0) > 0, f
        assert not s["counts"].get("failed") and not s["counts"].get("error"), \
            (f, [t for t in s["tests"] if t["outcome"] in ("failed", "error")])


# the T4 path run for real (issue 30): the lane under COURSE_TARGET_CC=7.5 on a newer GPU
T4_TESTS = ("test_chapter_8_runs_on_sm75_on_the_gpu",
            "test_the_master_passes_check_and_grade_on_sm75_on_the_gpu",
            "test_the_t4_branches_of_mma_gemm_run_on_the_gpu")


def test_the_t4_path_has_run_on_a_gpu_under_the_switch():
    """Chapter 8 and the instructors' appendix say the T4's paths run in the GPU lane under the
    switch: a committed summary of that lane (records/tests/t4_path_session.sh) says so, made with
    the switch on (its provenance's target_cc), with the T4 tests passed."""
    found = sorted((REPO / "records" / "tests").glob("gpu_*_sm75.json"))
    assert found, ("no summary of the GPU lane under COURSE_TARGET_CC=7.5 in records/tests/: run "
                   "COURSE_COMMIT=<sha> bash records/tests/t4_path_session.sh $OUT on a GPU and "
                   "commit $OUT/gpu_h100_sm75.json")
    for f in found:
        s = json.loads(f.read_text())
        assert s["provenance"].get("target_cc") == "7.5", f
        passed = {t["test"].rsplit("::", 1)[-1] for t in s["tests"] if t["outcome"] == "passed"}
        assert set(T4_TESTS) <= passed, (f, sorted(set(T4_TESTS) - passed))


def test_the_lane_runs_in_parts_by_folder_or_by_file():
    """A device call has ten minutes: the lane is run a folder or a file at a time, and a file
    named runs alone, only if it holds a gpu test."""
    from tools.gpu_tests import gpu_test_files

    everything = gpu_test_files()
    library = gpu_test_files(["tests/library"])
    assert library and set(library) < set(everything)
    assert all(f.startswith("tests/library/") for f in library)
    one = library[0]
    assert gpu_test_files([one]) == [one]
    assert gpu_test_files(["tests/tooling/test_gpu_lane.py"]) == []   # no gpu test in it


def test_a_budget_stops_before_a_test_that_would_end_late_and_keeps_what_ran(tmp_path):
    """tools/lane_budget.py, the plugin `--budget` loads into each file's pytest: the tests
    that ran are in the report, the unstarted ones in the left file, and pytest says why."""
    import time

    from tools.gpu_tests import outcomes, summary

    (tmp_path / "test_slow.py").write_text(
        "import time\n"
        + "".join(f"def test_{i}():\n    time.sleep(2)\n" for i in range(5)))
    junit, left = tmp_path / "j.xml", tmp_path / "left.txt"
    env = dict(os.environ, PYTHONPATH=str(REPO), GPU_LANE_DEADLINE=str(time.time() + 6.0),
               GPU_LANE_LEFT=str(left))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "tools.lane_budget", "-q",
                        "-p", "no:cacheprovider", f"--junitxml={junit}", "test_slow.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr          # interrupted, not failed
    assert "time budget" in r.stdout + r.stderr
    ran = [t["test"].rsplit("::", 1)[-1] for t in outcomes(junit)]
    not_run = left.read_text().split()
    assert ran and not_run and all(t["outcome"] == "passed" for t in outcomes(junit))
    # every test is either in the report or left, none in both, none lost
    assert sorted(ran + [n.split("::")[1] for n in not_run]) == [f"test_{i}" for i in range(5)]
    s = summary([junit], 0, "cmd", {"gpu": "test", "date": "d1"}, not_run)
    assert s["left"] == not_run and s["counts"] == {"passed": len(ran)}


def test_without_a_deadline_the_budget_plugin_runs_everything(tmp_path):
    (tmp_path / "test_quick.py").write_text("def test_a():\n    pass\ndef test_b():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k != "GPU_LANE_DEADLINE"}
    env["PYTHONPATH"] = str(REPO)
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "tools.lane_budget", "-q",
                        "-p", "no:cacheprovider", "test_quick.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "2 passed" in r.stdout, r.stdout + r.stderr


def test_continuing_a_record_keeps_its_tests_and_refuses_another_commit(tmp_path):
    import pytest

    from tools.gpu_tests import continuing, summary

    earlier = {"provenance": {"commit": "abc1234", "date": "d1"}, "counts": {"passed": 1},
               "tests": [{"test": "t::a", "outcome": "passed", "seconds": 1.0, "message": None}],
               "left": ["tests/x/test_y.py::test_b"]}
    rec = tmp_path / "gpu_x.json"
    rec.write_text(json.dumps(earlier))
    got, todo = continuing(rec, "abc1234")
    assert todo == ["tests/x/test_y.py::test_b"]
    with pytest.raises(SystemExit, match="made at commit abc1234, this run is at def5678"):
        continuing(rec, "def5678")
    rec.write_text(json.dumps(dict(earlier, left=[])))
    with pytest.raises(SystemExit, match="left no test"):
        continuing(rec, "abc1234")
    s = summary([], 0, "cmd", {"commit": "abc1234", "date": "d2"}, [], got)
    assert s["counts"] == {"passed": 1} and s["tests"][0]["run"] == "d1" and "left" not in s
