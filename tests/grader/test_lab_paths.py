"""Every path graded everywhere (issue 41): each kernel lab declares the paths of its problem a
kernel must get right (autograder/labs/spec.py LabPath; lab 6: d split over blocks and not,
several pieces per thread, several warps per row, T = 1 and T > 1, a ragged share), and every
grader's cases make the lab's master take each of them. Read from the launches the grader
recorded while it graded the master (measurements.jsonl, kind "test": the case's launch
shapes and the paths they took): in the simulator (CI; what Gradescope runs) from the master's
run of tests/grader/grading_runs.py, with the shipped rubric but one hidden case (each hidden
case drawn for the simulator spans two of the largest blocks in every dimension, so one takes
every path a hidden case takes); on a GPU (marker `gpu`) from a
run of its own. Lab 6's simulated hidden cases split d whatever the seed (the first test,
over many seeds, without grading)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest
from grading_runs import correctness_only, finished, gpu_env, master
from repo import ROOT as REPO

import book  # GPU or simulator, decided before numba.cuda is imported
from autograder import labs

PATH_LABS = [n for n, s in labs.registry().items() if s.kernel and s.paths]


def test_every_kernel_lab_declares_its_paths():
    assert PATH_LABS == [n for n, s in labs.registry().items() if s.kernel]
    six = labs.get("lab6_decode_mlp_up")
    assert {"split-K", "one block per row", "several pieces per thread", "several warps per row",
            "T = 1", "T > 1", "a ragged share"} <= {p.name for p in six.paths}


def test_lab6s_simulated_hidden_cases_split_d_whatever_the_seed():
    from autograder.labs import lab6_decode_mlp_up as six

    for seed in range(50):
        cases = six.hidden_cases(np.random.default_rng(seed), True, 3)
        split = [c for c in cases if six.sim_blocks(c)[0] > c["h"]]
        assert split and any(c["T"] == 1 for c in split) and any(c["T"] > 1 for c in split), cases
        assert any(six.sim_blocks(c)[0] == c["h"] for c in cases), cases
        assert all(c["d"] % six.PIECE == 0 and c["T"] <= six.T_MAX for c in cases)


def test_a_path_is_read_from_the_launches_not_assumed():
    six = labs.get("lab6_decode_mlp_up")
    case = {"T": 4, "d": 2056, "h": 3}
    split = [{"grid": [6, 1, 1], "block": [64, 1, 1], "scalars": [2056, 3, 2]}]
    whole = [{"grid": [3, 1, 1], "block": [64, 1, 1], "scalars": [2056, 3, 1]}]
    assert "split-K" in six.paths_taken(case, split) and "split-K" not in six.paths_taken(case, whole)
    assert "several pieces per thread" in six.paths_taken(case, split)
    # a launch the path's test cannot read takes no path (a student's own grid, say)
    assert six.paths_taken(case, [{"grid": [], "block": []}]) == ["T > 1"]


def _paths(out: Path, sid: str) -> dict:
    """{case name: paths} of submission ``sid``'s graded cases, from measurements.jsonl."""
    got = {}
    for line in (out / "measurements.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r.get("kind") == "test" and r.get("id") == sid:
            got[r["test"]] = r.get("paths", [])
    return got


def _assert_every_path_taken(lab: str, out: Path, sid: str):
    spec = labs.get(lab)
    got = _paths(out, sid)
    assert got, f"no graded case of {lab}'s master in {out}"
    taken = {p for ps in got.values() for p in ps}
    missing = [p.name for p in spec.paths if p.name not in taken]
    assert not missing, f"{lab}: no case took {missing}; paths by case: {got}"


@pytest.mark.slow
@pytest.mark.skipif(not book.gpu.SIMULATED, reason="the simulator's cases (CI)")
@pytest.mark.parametrize("lab", PATH_LABS)
def test_the_master_takes_every_declared_path_on_the_simulators_cases(lab):
    # (that run grades the master and the untouched lab, both named after the lab: by folder)
    _assert_every_path_taken(lab, finished(lab), f"solutions_{lab}")


@pytest.mark.gpu
@pytest.mark.parametrize("lab", PATH_LABS)
def test_the_master_takes_every_declared_path_on_a_gpus_cases(lab):
    out = Path(tempfile.mkdtemp(prefix=f"agpaths-{lab}-"))
    env = gpu_env()
    correctness_only(lab, out / "rubric.toml")   # the cases, not the timing
    cmd = [sys.executable, "-m", "autograder", "grade", lab,
           str(master(lab)), "--out", str(out / "graded"), "--quiet",
           "--rubric", str(out / "rubric.toml")]
    done = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    _assert_every_path_taken(lab, out / "graded", lab)
