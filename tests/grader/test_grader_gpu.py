"""The grader on a GPU (marker `gpu`: `make test-gpu`; skipped in the simulator): identical
copies of lab 2's master, graded in one run as shipped, are scored against the master timed
beside each of them and all earn full marks within 2% of each other (issue 18)."""

import json
import shutil
import subprocess
import sys

import pytest
from grading_runs import gpu_env
from repo import ROOT as REPO



@pytest.mark.gpu
def test_identical_copies_of_the_master_get_the_same_full_marks(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for i in range(4):
        shutil.copy(REPO / "solutions" / "lab2_packed_swiglu.ipynb", subs / f"copy_{i}.ipynb")
    out = tmp_path / "graded"
    env = gpu_env()   # (a GPU machine's own path keeps its pinned wheels: numba-cuda 0.30.4 needs numpy < 2.5)
    r = subprocess.run([sys.executable, "-m", "autograder", "grade", "lab2", str(subs), "--out",
                        str(out), "--quiet"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    res = [json.loads((out / f"copy_{i}" / "results.json").read_text()) for i in range(4)]
    perf = [x["extra_data"]["performance"] for x in res]
    assert all(x["score"] == x["extra_data"]["max_score"] for x in res), [x["tests"] for x in res]
    assert all(p["basis"] == "master" and p["verified"] for p in perf)
    fr = [p["fraction"] for p in perf]
    assert max(fr) - min(fr) <= 0.02 and all(0.95 <= f <= 1.05 for f in fr), fr
    out_text = next(t["output"] for t in res[0]["tests"] if t["name"] == "performance")
    assert "of the lab's reference solution measured on this GPU in this run" in out_text
    log = [json.loads(ln) for ln in (out / "measurements.jsonl").read_text().splitlines()]
    master = [x for x in log if x.get("kind") == "master"]
    assert len(master) == 1 and master[0].get("fraction_of_reference"), master
