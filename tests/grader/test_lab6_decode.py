"""Lab 6, the decode MLP-up (issue 31), in Numba's CUDA simulator, beyond what
tests/grader/test_lab_steps.py checks of every staged lab (each step passes on the master and
its check catches the step's PlantedBug): the graded function passes its public checks on the
master; a lost partial sum in the graded kernel is caught by its check; the master compiles for
sm_75 (Colab's T4), sm_80 and sm_90; the master and the hostile and unusual
fixtures (tests/fixtures/lab6) graded by `python -m autograder grade` in the lab's one run
(grading_runs.lab_run: the shipped rubric with one hidden case, its point totals read from it;
the untouched lab is test_autograder's), each judged as its first line says."""

from __future__ import annotations

import json
import re

import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from repo import ROOT as REPO

from autograder import labs as L
from autograder.master import namespace
from tools.lab_fixtures import control
from grading_runs import correctness, full_correctness, grade_with_the_lab, lab_rubric, lab_run

LAB = "lab6_decode_mlp_up"
SPEC = L.get(LAB)
STEPS = [s.name for s in SPEC.all_steps]
FIX = REPO / "tests" / "fixtures" / "lab6"


def _namespace(edits=()) -> dict:
    """The master's graded cells (autograder.master: check cells, setup and hidden tests
    skipped), ``edits`` made."""
    return namespace(SPEC, edits)


def test_the_graded_function_passes_on_the_master(capsys):
    from autograder.check import check

    assert check(_namespace()[SPEC.function], perf=False) is True
    out = capsys.readouterr().out
    assert out.count("PASS ") == len(SPEC.public_cases) and "FAIL" not in out
    assert "access pattern: not traced for this lab" in out


def test_a_lost_partial_sum_in_the_graded_kernel_is_caught(capsys):
    # the graded kernel always split in 2, its last block adding only its own partial sums
    from autograder.check import check

    fn = _namespace(SPEC.derived_named("split_k_no_reduction").edits)[SPEC.function]
    with pytest.raises(AssertionError):
        check(fn, perf=False, access=False)
    assert re.search(r"first bad index .*expected .*got ", capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.extended
def test_the_master_compiles_for_a_t4_an_a100_and_an_h100():
    """Every kernel the master launches compiles with the simulator off, for sm_75, sm_80 and
    sm_90, with no GPU (tools/lab_ptx.py)."""
    from tools import lab_ptx

    results = lab_ptx.check([LAB], ccs=((7, 5), (8, 0), (9, 0)))
    assert not lab_ptx.failures(results), "\n\n".join(r.describe() for r in lab_ptx.failures(results))
    assert {(r.cc, r.step) for r in results} == {(cc, s) for cc in ((7, 5), (8, 0), (9, 0))
                                                 for s in STEPS}


# ---------------------------------------------------------------------------------------
# Fixtures (tests/fixtures/lab6): the master with one edit or one addition each, which the lab
# module derives (its `derived`, kind "hostile"; `python -m tools.lab_fixtures --write`).
SUBMISSIONS = ("split_k_no_reduction", "reads_weights_twice", "cached_by_pointer", "atomics")
# the lab's "lesson not learned" control, which its rubric names
CONTROL = control(LAB)


def test_every_fixture_is_graded_here_and_said_in_the_readme():
    assert CONTROL.stem == "lab6_one_thread_per_output"
    on_disk = {p.stem for p in FIX.glob("*.py")}
    assert on_disk == set(SUBMISSIONS)
    readme = (FIX / "README.md").read_text()
    for name in SUBMISSIONS:
        assert f"`{name}.py`" in readme, f"{name}.py is not in tests/fixtures/lab6/README.md"
        first = (FIX / f"{name}.py").read_text().split("\n")[0]
        assert first.startswith("# ") and ":" in first, f"{name}.py: first line says what it is"


# the fixtures join the lab's one simulated run (grading_runs.lab_run: the shipped rubric with
# one hidden case, the master beside them; what the untouched lab earns is test_autograder's)
grade_with_the_lab(LAB, [*(FIX / f"{n}.py" for n in SUBMISSIONS), CONTROL])


@pytest.fixture(scope="module")
def rubric():
    """The rubric of the lab's run: as shipped, one hidden case (what each submission earns is
    judged here, not how many cases the grader draws)."""
    return lab_rubric(LAB)


@pytest.fixture(scope="module")
def full(rubric) -> int:
    """The correctness points a right answer earns under ``rubric``."""
    return full_correctness(LAB, len(SPEC.public_cases), rubric)


@pytest.fixture(scope="module")
def graded():
    """{submission id: results.json} of the lab's one run (the master's id is the lab's name)."""
    return lab_run(LAB)


@pytest.mark.slow
def test_the_master_earns_full_correctness_beside_the_fixtures(graded, full):
    got, top, _ = correctness(graded[LAB])
    assert got == top == full and graded[LAB]["extra_data"]["flags"] == []


@pytest.mark.slow
def test_a_split_k_without_its_reduction_is_a_wrong_answer(graded):
    # every test fails; the public ones name the first bad index (a hidden one, with twice
    # the master's blocks, may instead run out of the simulator's time: 0 points either way)
    got, _, tests = correctness(graded["split_k_no_reduction"])
    assert got == 0
    public = [t for t in tests if t["name"].startswith("public")]
    assert public and all("first bad index" in t["output"] for t in public)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["reads_weights_twice", "atomics", CONTROL.stem])
def test_correct_but_slow_or_unusual_kernels_earn_full_correctness(graded, full, name):
    # their speed is the GPU run's to judge (tools/grader_report.py lists them)
    got, top, _ = correctness(graded[name])
    assert got == top == full, [t["output"][:300] for t in graded[name]["tests"]]
    assert graded[name]["extra_data"]["flags"] == []


@pytest.mark.slow
def test_a_cache_by_pointer_loses_every_case(graded, full):
    """Issue 41: each case is called again on the same arrays with new contents, so a cache by
    pointer, right on each first call, loses every case (before, it kept them and only the
    timing call's check flagged it), said as a dependence on an earlier call."""
    r = graded["cached_by_pointer"]
    got, top, _ = correctness(r)
    assert got == 0 and top == full
    shown = [t for t in r["tests"] if t["name"] != "performance" and t["visibility"] == "visible"]
    assert shown and all("the first call of this case was right; call 2 of" in t["output"]
                         for t in shown), [t["output"][:300] for t in shown]


def test_the_full_marks_line_is_the_one_the_h100_measurement_suggests():
    """The rubric's full_at comes from the master measured on a GPU against cuBLAS float16 +
    a compiled SwiGLU (benchmarks/lab_master_probe.py --lab 6), not from a guess."""
    from autograder.rubric import load_rubric

    path = REPO / "records" / "labs" / "lab6_master_h100.json"
    if not path.exists():
        pytest.skip("not measured yet: benchmarks/lab_master_probe.py --lab 6 writes "
                    "records/labs/lab6_master_h100.json on an H100")
    rec = json.loads(path.read_text())
    perf = load_rubric(LAB)["performance"]
    assert rec["timing_case_correct"]["ok"] and "H100" in rec["gpu"]
    assert perf["basis"] == "master"
    assert perf["full_at"] == pytest.approx(rec["suggested"]["full_at_master_units"])
    assert perf["zero_at"] < perf["full_at"]
