"""Lab 5's master on the T4's instructions (issue 30): with the switch COURSE_TARGET_CC=7.5
(book/target.py) its first cell picks m16n8k8 and copies through registers, every step's check
and the graded function pass (`python -m autograder check`), its bfloat16 cell says why it
skips, and on a GPU the grader gives it full marks (`python -m autograder grade`: the switch
reaches the sandboxed child and the master timed beside it alike). In the simulator here; in
the GPU lane on a real, newer GPU held to sm_75."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import book
from repo import ROOT

LAB = "lab5_tensor_core_dual_gemm"
MASTER = ROOT / "solutions" / f"{LAB}.ipynb"


def _env(simulator: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("BOOK_SIMULATOR",
                                                           "NUMBA_ENABLE_CUDASIM")}
    env.update(COURSE_TARGET_CC="7.5", PYTHONPATH=os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    if simulator:
        env["BOOK_SIMULATOR"] = "1"
    return env


def _check_master(simulator: bool) -> str:
    p = subprocess.run([sys.executable, "-m", "autograder", "check", LAB, str(MASTER)], cwd=ROOT,
                       env=_env(simulator), capture_output=True, text=True, timeout=900)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    assert "sm_75 (COURSE_TARGET_CC=7.5, " in out and "float16 with mma.m16n8k8" in out, out[:2000]
    assert "bfloat16 mma needs a GPU of sm_80 or newer: the target is sm_75" in out
    for step in ("fragments", "block", "pipeline"):
        assert f"step {step!r} done" in out, out[-4000:]
    assert "FAIL" not in out and out.count("PASS public") == 2, out[-4000:]
    return out


@pytest.mark.slow
@pytest.mark.extended
def test_the_master_passes_check_on_sm75_in_the_simulator():
    if not book.gpu.SIMULATED:
        pytest.skip("on a GPU: test_the_master_passes_check_and_grade_on_sm75_on_the_gpu")
    _check_master(simulator=True)


@pytest.mark.gpu
def test_the_master_passes_check_and_grade_on_sm75_on_the_gpu(tmp_path):
    out = _check_master(simulator=False)
    assert "on an sm_" in out  # the real GPU, held to sm_75
    graded = tmp_path / "graded"
    p = subprocess.run([sys.executable, "-m", "autograder", "grade", "lab5", str(MASTER), "--out",
                        str(graded), "--quiet"], cwd=ROOT, env=_env(False), capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    [res] = [json.loads(f.read_text()) for f in graded.glob("*/results.json")]
    assert res["score"] == res["extra_data"]["max_score"], res["tests"]
    perf = res["extra_data"]["performance"]
    assert perf["verified"] and perf["basis"] == "master", perf
    assert res["extra_data"]["flags"] == []
