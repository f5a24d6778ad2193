"""Bounds, graded (issue 28), per lab, by `python -m autograder grade` as shipped:

- a store past the end of `out` (tests/fixtures/bounds/labN_writes_past_end.py: the master
  with one bounds test dropped) earns no correctness points, every case saying "wrote N
  elements past the end of `out`, the first at flat index ..."; in the simulator (CI, and
  Gradescope, which grades there) and on a GPU (marker `gpu`), in the same words;
- a kernel that forgets `blockIdx` in any dimension of the master's grid
  (labN_forgets_blockidx_x/y.py) loses every hidden case in the simulator, whose hidden cases
  span two blocks of the largest block the lab allows in every grid dimension (the spec's
  ``sim_blocks``), within the simulator's time budget;
- the master, graded in the same run, keeps full marks.

In the simulator the fixtures join the lab's one run (grading_runs.lab_run: its shipped rubric
but one hidden case, the master and every fixture the suite grades of that lab): what every
hidden case drawn looks like is asserted over many seeds without grading (the first test).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

import numpy as np
import pytest
from tools.lab_fixtures import fixtures
from grading_runs import (correctness_only, full_marks, gpu_env, grade_with_the_lab, lab_run, master,
                          start_grade, start_lab_run)

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from autograder import labs
from autograder.labs.spec import odd_multiple
from autograder.sandbox import SIM_MAX_THREADS

KERNEL_LABS = [n for n, s in labs.registry().items() if s.kernel]
PAST_END = re.compile(r"wrote (\d+) elements? past the end of `(\w+)`, the first at flat index "
                      r"(\d+) \(`\2` has \3 elements, flat indices 0 to \d+\): check the bounds "
                      r"test of every store")
_RUNS = {}
# CI's `make test` grades the fixtures of the elementwise lab and the split-K lab in the
# simulator; labs 3-5's (the same checks on other kernels) are `make test-all`'s and the GPU lane's
CI_LABS = (labs.resolve("lab2"), labs.resolve("lab6"))


def ci_labs(names) -> list:
    return [n if n in CI_LABS else pytest.param(n, marks=pytest.mark.extended) for n in names]


def _correctness(r):
    return [t for t in r["tests"] if t["name"] not in ("performance",)
            and not t["name"].startswith("compute-sanitizer")]


def _subs(lab: str, simulated: bool = True) -> list[Path]:
    """The lab's bounds fixtures and its result kept by shape (lab 6's hazards are
    tests/grader/test_split_k_faults.py's); on a GPU only the stores outside the arrays
    (blockIdx is the simulator's)."""
    subs = [*fixtures("bounds", lab)]
    if lab != labs.resolve("lab6"):
        subs += fixtures("hazards", lab)
    return subs if simulated else [s for s in subs if "forgets" not in s.name]


# in the simulator they join the lab's one run (grading_runs.lab_run), beside the master
for _lab in KERNEL_LABS:
    grade_with_the_lab(_lab, _subs(_lab), extended=_lab not in CI_LABS)


def _start_on_gpu(lab: str, rubric: Path | None = None):
    """One grading run on this GPU of the lab's master and its fixtures."""
    if lab not in _RUNS:
        out = Path(tempfile.mkdtemp(prefix=f"agbounds-{lab}-"))
        subs = [master(lab), *_subs(lab, simulated=False)]
        _RUNS[lab] = (start_grade(lab, subs, out / "graded",
                                  *(["--rubric", str(rubric)] if rubric else []), environ=gpu_env()),
                      out / "graded", subs)
    return _RUNS[lab]


def graded(lab: str, simulated: bool = True, rubric: Path | None = None) -> dict:
    """{submission id: results.json} of the lab's run (the master's id is the lab's name): in
    the simulator the lab's one run (grading_runs.lab_run: the shipped rubric, one hidden
    case), on a GPU its own under ``rubric``."""
    if simulated:
        assert rubric is None, "the simulator's run is the lab's one run, under its rubric"
        return lab_run(lab, extended=lab not in CI_LABS)
    proc, out, subs = _start_on_gpu(lab, rubric)
    text, _ = proc.communicate(timeout=2400)
    assert proc.returncode == 0, text.decode(errors="replace")[-3000:]
    return {s.stem: json.loads((out / s.stem / "results.json").read_text()) for s in subs}


# ------------------------------------------------------------------------- fast: the cases
@pytest.mark.parametrize("lab", KERNEL_LABS)
def test_hidden_cases_in_the_simulator_cross_every_block_boundary(lab):
    """Over many classes' seeds: every hidden case drawn for the simulator takes at least two
    of the largest blocks the lab allows in every grid dimension of the master's launch, and
    stays a small launch for the simulator."""
    spec = labs.get(lab)
    assert spec.sim_blocks is not None, f"{lab} declares no sim_blocks"
    for seed in range(200):
        for case in spec.hidden_cases(np.random.default_rng(seed), True, 3):
            blocks = spec.sim_blocks(case)
            assert min(blocks) >= 2, (case, blocks)
            assert spec.out_size(case) <= SIM_MAX_THREADS, case   # one thread per output fits


@pytest.mark.parametrize("simulated", [True, False], ids=["simulator", "gpu"])
@pytest.mark.parametrize("lab", KERNEL_LABS)
def test_every_hidden_case_is_off_every_power_of_two_tile(lab, simulated):
    """Over many classes' seeds, on either grader: every dimension of a hidden case's output
    that a kernel tiles is an odd number of its units (the spec's ``out_units``), so no tile of
    a power of two a student may pick fits it exactly and a dropped bounds test stores past
    the end of `out` in every hidden case (at 68241b7 an H200 gave lab 5's fixture without its
    row test a hidden case, which a T that is a multiple of its 128-row tile would)."""
    spec = labs.get(lab)
    for seed in range(200):
        for case in spec.hidden_cases(np.random.default_rng(seed), simulated, 5):
            shape = spec.out_spec(case)["shape"]
            assert len(shape) == len(spec.out_units), (lab, shape, spec.out_units)
            for size, unit in zip(shape, spec.out_units):
                assert not unit or (size % unit == 0 and size // unit % 2 == 1), (case, shape)


def test_odd_multiple_draws_every_odd_multiple_in_its_range_and_nothing_else():
    rng = np.random.default_rng(0)
    got = {odd_multiple(rng, 2050, 2112, 2) for _ in range(2000)}
    assert got == {2 * k for k in range(1025, 1056, 2)}
    assert {odd_multiple(rng, 3, 4) for _ in range(20)} == {3}
    with pytest.raises(ValueError, match="no odd multiple of 4 in"):
        odd_multiple(rng, 5, 8, 4)


# ------------------------------------------------------------------------- the simulator
@pytest.mark.slow
@pytest.mark.parametrize("lab", ci_labs(KERNEL_LABS))
def test_a_store_past_the_end_of_out_earns_no_correctness_points(lab):
    res = graded(lab)
    r = res[f"{lab.split('_')[0]}_writes_past_end"]
    tests = _correctness(r)
    assert sum(t["score"] for t in tests) == 0
    for t in tests:
        m = PAST_END.search(t["output"])
        assert m and m.group(2) == "out", t["output"][:600]


@pytest.mark.slow
def test_a_store_past_the_end_of_an_input_earns_no_correctness_points():
    r = graded("lab2_packed_swiglu")["lab2_writes_past_input"]
    tests = _correctness(r)
    assert sum(t["score"] for t in tests) == 0
    for t in tests:
        m = PAST_END.search(t["output"])
        assert m and m.group(1) == "1" and m.group(2) == "x", t["output"][:600]
        assert "`out` correct" in t["output"]


@pytest.mark.slow
@pytest.mark.parametrize("lab", ci_labs(KERNEL_LABS))
def test_a_kernel_that_forgets_blockidx_loses_the_hidden_points(lab):
    res = graded(lab)
    master = res[lab]
    assert full_marks(master), _correctness(master)   # performance pending in the simulator
    forgets = [k for k in res if "forgets_blockidx" in k]
    assert forgets, f"{lab} has no forgets_blockidx fixture"
    for k in forgets:
        hidden = [t for t in _correctness(res[k]) if "hidden" in t["name"]]
        assert hidden and all(t["score"] == 0 for t in hidden), (k, hidden)
        assert all("never written" in t["output"] for t in hidden), (k, hidden)


STATE_LABS = [lab for lab in KERNEL_LABS if lab != labs.resolve("lab6")]
LATER_CALL = re.compile(r"the first call of this case was right; call 2 of [23], on the same "
                        r"arrays with new contents .*was not: no CUDA kernel was launched in this "
                        r"call", re.S)


@pytest.mark.slow
@pytest.mark.parametrize("lab", ci_labs(STATE_LABS))
def test_a_result_kept_from_an_earlier_call_earns_no_correctness_points(lab):
    """Issue 41: every case is called again on the same arrays with new contents, and that
    call judged: the master wrapped in a cache by shape (tests/fixtures/hazards/) is right on
    each case's first call and loses every case, said as a dependence on an earlier call."""
    r = graded(lab)[f"{lab.split('_')[0]}_cache_by_shape"]
    tests = _correctness(r)
    assert tests and sum(t["score"] for t in tests) == 0
    assert all(LATER_CALL.search(t["output"]) for t in tests), [t["output"][:500] for t in tests]


@pytest.mark.slow
def test_a_read_past_the_end_of_an_input_earns_no_correctness_points():
    """Issue 41: lab 2's master loading one column past each row (its stores kept in bounds):
    `out` is right, and every case fails, said as a read outside `x` (the simulator's access
    tracer) after the values' verdict."""
    r = graded("lab2_packed_swiglu")["lab2_reads_past_x"]
    tests = _correctness(r)
    assert tests and sum(t["score"] for t in tests) == 0
    for t in tests:
        assert "A READ OUTSIDE AN INPUT on `x`" in t["output"], t["output"][:600]
        assert "`out` correct" in t["output"]


@pytest.mark.gpu
@pytest.mark.parametrize("lab", STATE_LABS)
def test_on_a_gpu_a_result_kept_from_an_earlier_call_is_caught_in_the_same_words(lab, tmp_path):
    gpu = graded(lab, simulated=False, rubric=correctness_only(lab, tmp_path / "rubric.toml"))
    tests = _correctness(gpu[f"{lab.split('_')[0]}_cache_by_shape"])
    assert tests and sum(t["score"] for t in tests) == 0
    assert all(LATER_CALL.search(t["output"]) for t in tests), [t["output"][:500] for t in tests]
    if lab == labs.resolve("lab2"):   # the read past x: the simulator's trace, on a GPU too
        for t in _correctness(gpu["lab2_reads_past_x"]):
            assert t["score"] == 0 and "A READ OUTSIDE AN INPUT on `x`" in t["output"], t["output"][:600]


# ------------------------------------------------------------------------- on a GPU
@pytest.mark.gpu
@pytest.mark.parametrize("lab", KERNEL_LABS)
def test_on_a_gpu_a_store_past_the_end_is_caught_in_the_same_words(lab, tmp_path):
    """The same fixtures on a GPU (correctness only: a rubric without the performance part):
    every case of a store past `out` fails in the simulator's words; the master keeps full
    correctness; and for the labs whose kernels take the same launch on a GPU as in the
    simulator (all but lab 5, whose tile the notebook shrinks there), the public cases' whole
    messages are the simulator's, character for character, but for the lines of the tool only
    a GPU runs (compute-sanitizer's findings on its sanitized case, which the simulator's trace
    says again in its own line: on the H200 at 0ecfd36 memcheck's read past `x` led lab 2's
    message)."""
    correctness_only(lab, tmp_path / "rubric.toml")
    # not lab 5 (the notebook shrinks its tile in the simulator), nor lab 6 (its fixture's
    # extra block races block 0 for out[t + 1, 0]: the values differ run to run on a GPU, and
    # the race is said first on both graders, the simulator's trace's words)
    same_launch = lab not in (labs.resolve("lab5"), labs.resolve("lab6"))
    if same_launch:   # the simulator's run of the same files, meanwhile
        start_lab_run(lab, extended=lab not in CI_LABS)
    gpu = graded(lab, simulated=False, rubric=tmp_path / "rubric.toml")
    master = gpu[lab]
    assert all(t["score"] == t["max_score"] for t in _correctness(master)), _correctness(master)
    for name, r in gpu.items():
        if "writes_past" not in name:
            continue
        tests = _correctness(r)
        # which case scored, its shape and what it was told (an H200 gave lab 5's fixture 2
        # points at 68241b7 and said no more: records/tests/lane_bounds_store_lab45_h200_68241b7.json)
        assert sum(t["score"] for t in tests) == 0, (name, [
            (t["name"], t["score"], t["output"][:600]) for t in tests if t["score"]])
        assert all(PAST_END.search(t["output"]) for t in tests), [t["output"][:400] for t in tests]
    if not same_launch:
        return
    sim = graded(lab)
    for name in gpu:
        if "writes_past" in name:
            for a, b in zip(_correctness(gpu[name]), _correctness(sim[name])):
                if "hidden" not in a["name"]:
                    assert _without_gpu_tools(a["output"]) == b["output"], (name, a["output"], b["output"])


def _without_gpu_tools(message: str) -> str:
    """A case's message less the lines of compute-sanitizer's findings (a GPU's alone)."""
    return "\n".join(line for line in message.split("\n")
                     if "Found by compute-sanitizer's" not in line)
