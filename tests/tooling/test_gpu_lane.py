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
