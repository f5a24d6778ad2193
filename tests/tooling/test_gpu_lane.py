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
