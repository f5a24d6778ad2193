"""The kernel proof replays every passing case, not only the largest (red-team finding): a
function that launches its kernel on every call, but puts the answer into `out` from the host
on the cases its kernel gets wrong, earned those cases while the proof replayed only the
largest passing case, which its kernel got right. Here: lab 6's master with its split-K
reduction broken (the last block adds only its own partial sums: right wherever a row is one
block, wrong wherever d is split), the host's answer copied into `out` after the kernel on the
split cases. The largest case of the simulator's run (public T=4 d=64 h=12) is one block per
row; the split ones (public T=5 d=2056 h=3, the hidden split cases) are smaller. Graded by the
real CLI in the simulator (one hidden case)."""

from __future__ import annotations

import json
import subprocess

import pytest

from grading_runs import (
    REPO, correctness_only, env, gpu_env, grade_cmd, one_hidden_case, results,
)

from autograder.labs.edits import Derived, Edit
from autograder.master import derive

pytestmark = pytest.mark.slow   # one grading run of one submission in the simulator (~1 min)

LAB = "lab6_decode_mlp_up"

HOST_WHEN_SPLIT = Derived(
    "hostile", "host_result_when_split",
    "host result on some cases: the master with its split-K reduction broken (the last block "
    "adds only its own partial sums), its kernel launched on every call, and on the cases it "
    "splits d the answer computed on the host and copied into `out`; every correctness point "
    "withdrawn by the kernel proof",
    [Edit("                for q in range(splits):\n",
          "                for q in range(s, s + 1):\n", "lab6-03")],
    append='''
_kernel_path = decode_swiglu


def _host(x, wg, bg, wu, bu):
    X = x.copy_to_host().astype(np.float64)
    g = X @ wg.copy_to_host().astype(np.float64).T + bg.copy_to_host()
    u = X @ wu.copy_to_host().astype(np.float64).T + bu.copy_to_host()
    return (g / (1 + np.exp(-g)) * u).astype(np.float16)


def decode_swiglu(x, wg, bg, wu, bu, out):
    _kernel_path(x, wg, bg, wu, bu, out)   # the kernel runs (and is recorded) on every call
    if choose_splits(wg.shape[0], x.shape[1]) > 1:   # where it is wrong: the host's answer
        cuda.synchronize()
        out.copy_to_device(_host(x, wg, bg, wu, bu))
    return out
''')


def test_a_host_answer_on_the_cases_the_kernel_gets_wrong_earns_nothing(tmp_path):
    sub = tmp_path / "host_result_when_split.py"
    sub.write_text(derive(LAB, HOST_WHEN_SPLIT))
    out = tmp_path / "out"
    p = subprocess.run(grade_cmd("lab6", [sub], out, "--simulator",
                                 "--rubric", one_hidden_case(LAB, tmp_path / "rubric.toml")),
                       cwd=REPO, env=env(), capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    r = results(out, sub.stem)
    tests = [t for t in r["tests"] if t["name"] != "performance"]
    # every call of every case had the right values in `out` (the host's where split)
    assert all("correct for" in t["output"] for t in tests), [t["output"][:200] for t in tests]
    assert sum(t["score"] for t in tests) == 0, [(t["name"], t["score"]) for t in tests]
    shown = next(t for t in tests if t["name"] == "public T=5 d=2056 h=3")["output"]
    assert "did not compute the answer" in shown and "x [5, 2056]" in shown, shown
    proof = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    proof = [x for x in proof if x.get("kind") == "kernel_proof"][-1]
    by_case = {c["case"]: c["reproduced"] for c in proof["cases"]}
    assert by_case["public T=4 d=64 h=12"] is True       # the largest: one block per row
    assert by_case["public T=5 d=2056 h=3"] is False     # split: the host's answer
    assert by_case["hidden 1"] is False                  # split (every seed), said to no one
    # the student reads of the hidden case only that it failed, its details after the due date
    feedback = (out / sub.stem / "feedback.md").read_text()
    assert "### hidden 1\n\n```\nfailed: details of hidden cases" in feedback, feedback


# Replaying every case puts hidden shapes into the simulator's proof child, which runs the
# notebook's code: a simulated kernel is Python and may remember them. The public cases are
# replayed first, so no public comparison (which the student reads) can carry one.
SPY = Derived(
    "hostile", "remembers_hidden_shapes",
    "the master and a one-thread kernel that remembers (a simulated kernel is Python) every "
    "d it was launched on that is not a public case's, and on a public case launched after "
    "one writes that d into out[0, 0]: in the graded child the public cases run first (it "
    "never writes); a proof child replaying a hidden case before a public one would show the "
    "hidden d as the public case's `got`",
    append='''
_SEEN = []
_PUBLIC_D = (64, 136, 2056)


@cuda.jit
def _spy(x, out):
    d = x.shape[1]
    if d not in _PUBLIC_D:
        _SEEN.append(d)
    elif len(_SEEN) > 0:
        out[0, 0] = _SEEN[0]


_master = decode_swiglu


def decode_swiglu(x, wg, bg, wu, bu, out):
    _master(x, wg, bg, wu, bu, out)
    _spy[1, 1](x, out)
    return out
''')
SEED = 0   # the simulator's hidden cases (1, 1512, 3), (11, 72, 7), (3, 1056, 3): hidden 2 is
HIDDEN_D = (1512, 72, 1056)   # the largest case of the run (T h = 77 > the public 48)


def test_no_public_replay_follows_a_hidden_one_in_the_proof_child(tmp_path):
    import numpy as np

    from autograder.labs import get

    cases = get(LAB).hidden_cases(np.random.default_rng(SEED), True, 3)
    assert tuple(c["d"] for c in cases) == HIDDEN_D
    sub = tmp_path / "remembers_hidden_shapes.py"
    sub.write_text(derive(LAB, SPY))
    out = tmp_path / "out"
    p = subprocess.run(grade_cmd("lab6", [sub], out, "--simulator"), cwd=REPO,
                       env=dict(env(), AUTOGRADER_SEED=str(SEED)), capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    feedback = (out / sub.stem / "feedback.md").read_text()
    r = results(out, sub.stem)
    shown = feedback + r["output"] + "".join(t["output"] for t in r["tests"]
                                             if t["visibility"] == "visible")
    for d in HIDDEN_D:
        assert f"got {d}" not in shown, shown
    proof = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    proof = [x for x in proof if x.get("kind") == "kernel_proof"][-1]
    order = [c["case"].startswith("hidden") for c in proof["cases"]]
    assert order == sorted(order), proof["cases"]          # every public case before any hidden
    assert all(c["reproduced"] for c in proof["cases"]), proof["cases"]


@pytest.mark.gpu
def test_on_a_gpu_the_trusted_replay_of_every_case_withdraws_the_points(tmp_path):
    """The same submission on a GPU (correctness only): the trusted replay process replays every
    passing case, one request each; the split cases' replays are wrong, every correctness point
    goes. (Written without a GPU at hand: the GPU lane runs it.)"""
    sub = tmp_path / "host_result_when_split.py"
    sub.write_text(derive(LAB, HOST_WHEN_SPLIT))
    out = tmp_path / "out"
    p = subprocess.run(grade_cmd("lab6", [sub], out,
                                 "--rubric", correctness_only(LAB, tmp_path / "rubric.toml")),
                       cwd=REPO, env=gpu_env(), capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    tests = [t for t in results(out, sub.stem)["tests"] if t["name"] != "performance"]
    assert tests and sum(t["score"] for t in tests) == 0, [(t["name"], t["score"]) for t in tests]
    proof = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    proof = [x for x in proof if x.get("kind") == "kernel_proof"][-1]
    verdicts = [c["reproduced"] for c in proof["cases"]]
    assert len(verdicts) > 1 and True in verdicts and False in verdicts, proof["cases"]
