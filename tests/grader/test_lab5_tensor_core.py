"""Lab 5, the tensor-core dual GEMM (issue 23), in Numba's CUDA simulator, beyond what
tests/grader/test_lab_steps.py checks of every staged lab (each step passes on the master and its
check catches the step's PlantedBug): step 1 draws which lane holds what; a fragment-index bug
in the slab routine is caught by the checks of both steps that use it, and one in the graded
kernel by its check; the master compiles for sm_75, sm_80 and sm_90; the master and the
fixtures (tests/fixtures/lab5) graded by `python -m autograder grade` in the lab's one run
(grading_runs.lab_run: the shipped rubric with one hidden case, its point totals read from it;
the untouched lab is test_autograder's)."""

from __future__ import annotations

import re

import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from repo import ROOT as REPO

from autograder import labs as L
from autograder.labs.edits import Edit
from autograder.master import namespace, notebook
from grading_runs import correctness, full_correctness, grade_with_the_lab, lab_rubric, lab_run

LAB = "lab5_tensor_core_dual_gemm"
SPEC = L.get(LAB)
STEPS = [s.name for s in SPEC.all_steps]


def _namespace(upto: str, where: str = "solutions", edits=()) -> dict:
    """The notebook's graded cells up to the one defining step ``upto``'s function
    (autograder.master: check cells and the instructor's hidden tests skipped), ``edits`` made."""
    return namespace(SPEC, edits, upto=upto, path=notebook(LAB, where))


def test_the_graded_function_passes_on_the_master(capsys):
    from autograder.check import check

    assert check(_namespace("final")[SPEC.function], perf=False) is True
    out = capsys.readouterr().out
    assert out.count("PASS ") == len(SPEC.public_cases) and "FAIL" not in out
    # the tracer would misread cp.async, ldmatrix and paired stores: check says so, no advice
    assert "access pattern: not traced for this lab: the access tracer does not model" in out
    assert "bank conflict" not in out and "sectors" not in out


# Fragment-index bugs planted in a cell other than the step's own (test_lab_steps plants each
# step's PlantedBug in its own cell): A's registers 1 and 2 exchanged in step 1's table; the B
# fragment's two registers (k 0-7, k 8-15) exchanged in the slab routine of step 2's cell,
# which step 3 uses, or in the graded kernel's.
SWAP_A = Edit("return g + 8 * ((e >> 1) & 1), 2 * t + (e & 1) + 8 * (e >> 2)",
              "return g + 8 * (e >> 2), 2 * t + (e & 1) + 8 * ((e >> 1) & 1)", "lab5-s1-code")
SWAP_B = Edit("(fb[2 * q], fb[2 * q + 1])", "(fb[2 * q + 1], fb[2 * q])", "lab5-s2-code")
SWAP_B4 = Edit("(fu[2 * q], fu[2 * q + 1])", "(fu[2 * q + 1], fu[2 * q])", "lab5-03")

WRONG = {
    "pipeline": ([SWAP_B], r"first bad index .*expected .*got "),
    "final": ([SWAP_B4], r"first bad index .*expected .*got "),
}


@pytest.mark.parametrize("step", sorted(WRONG))
def test_step_check_catches_a_fragment_index_bug(step, capsys):
    from autograder.check import check

    st = SPEC.step(step)
    edits, words = WRONG[step]
    kw = {"step": step} if not st.graded else {"perf": False, "access": False}
    with pytest.raises(AssertionError):
        check(_namespace(step, edits=edits)[st.function], **kw)
    out = capsys.readouterr().out
    assert re.search(words, out), out[-3000:]


def test_step_one_draws_the_lanes_of_a_wrong_fragment(capsys):
    from autograder.check import check

    with pytest.raises(AssertionError):
        check(_namespace("fragments", edits=[SWAP_A])["mma_tile"], step="fragments")
    out = capsys.readouterr().out
    assert "B: every element right" in out
    grid = out[out.index("A (16 x 16)"):].splitlines()
    # row 8 holds lanes 0 0 1 1 2 2 3 3 then 0 0 1 1 ... (register 1 for k 0-7): all marked
    assert "128 of 256 elements wrong" in grid[0]  # rows 8-15 x k 0-7 and rows 0-7 x k 8-15
    row8 = grid[2 + 8].split()
    assert row8[0] == "8" and row8[1] == "0*" and row8[3] == "1*"
    row0 = grid[2].split()
    assert row0[1] == "0" and row0[3] == "1"  # rows 0-7, k 0-7: register 0, right


def test_the_untouched_lab_says_not_written_yet(capsys):
    from autograder.check import check

    ns = _namespace("fragments", where="labs")
    with pytest.raises(AssertionError, match="not written yet"):
        check(ns["mma_tile"], step="fragments")


@pytest.mark.slow
@pytest.mark.extended
def test_the_master_compiles_for_a_t4_an_a100_and_an_h100():
    """Every kernel the master launches compiles with the simulator off, for sm_75 (the T4's
    m16n8k8 path, no cp.async), sm_80 and sm_90, with no GPU (tools/lab_ptx.py)."""
    from tools import lab_ptx

    results = lab_ptx.check([LAB], ccs=((7, 5), (8, 0), (9, 0)))
    assert not lab_ptx.failures(results), "\n\n".join(r.describe() for r in lab_ptx.failures(results))
    assert {(r.cc, r.step) for r in results} == {(cc, s) for cc in ((7, 5), (8, 0), (9, 0))
                                                 for s in STEPS}


# ---------------------------------------------------------------------------------------
# Fixtures (tests/fixtures/lab5): three written by hand, two the lab module derives from the
# master (missing_cp_async_wait, transposed_fragments: `python -m tools.lab_fixtures --write`).
FIX = REPO / "tests" / "fixtures" / "lab5"


# the fixtures join the lab's one simulated run (grading_runs.lab_run: the shipped rubric with
# one hidden case, the master beside them; what the untouched lab earns is test_autograder's)
# `make test` grades the two refused ones (seconds each: they stop at loading); the three that
# run the whole simulated dual GEMM (a minute or more each on two cores) are `make test-all`'s,
# in a run of their own beside the master: a planted bug's detection is also every CI run's,
# by the step checks (tests/grader/test_lab_steps.py)
WHOLE_RUNS = ("float32_cuda_cores", "missing_cp_async_wait", "transposed_fragments")
grade_with_the_lab(LAB, [p for p in sorted(FIX.glob("*.py")) if p.stem not in WHOLE_RUNS])
grade_with_the_lab(LAB, [FIX / f"{n}.py" for n in WHOLE_RUNS], extended=True)


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


@pytest.fixture(scope="module")
def graded_whole():
    """The same of the run of WHOLE_RUNS (`make test-all`'s), the master beside them."""
    return lab_run(LAB, extended=True)


@pytest.mark.slow
def test_the_master_earns_full_correctness_beside_the_fixtures(graded, full):
    got, top, _ = correctness(graded[LAB])
    assert got == top == full and graded[LAB]["extra_data"]["flags"] == []


@pytest.mark.slow
def test_cublas_through_ctypes_earns_nothing(graded):
    r = graded["cublas_ctypes"]
    assert r["score"] == 0
    assert any("ctypes" in f for f in r["extra_data"]["flags"])


@pytest.mark.slow
def test_the_instructions_may_be_imported_the_course_gemm_may_not(graded):
    # book.kernels.instructions.tensorcore loads in the sandbox (the master uses it: full marks above);
    # book.kernels.gemms.mma_gemm, the course's own dual GEMM, is refused
    r = graded["uses_mma_gemm"]
    assert r["score"] == 0
    assert all("write this lab's kernel yourself" in t["output"] for t in r["tests"]
               if t["max_score"] > 0 and t["name"] != "performance")   # (pending in the simulator)


@pytest.mark.slow
@pytest.mark.extended
def test_float32_cuda_cores_are_correct_and_graded_as_such(graded_whole, full):
    # correct: full correctness; its speed is the GPU run's to judge (no timing here)
    got, top, _ = correctness(graded_whole["float32_cuda_cores"])
    assert got == top == full


@pytest.mark.slow
@pytest.mark.extended
def test_a_missing_cp_async_wait_is_correct_in_the_simulator(graded_whole, full):
    # the simulator's cp.async copies at once: the race needs a GPU (and racecheck) to show
    got, top, _ = correctness(graded_whole["missing_cp_async_wait"])
    assert got == top == full


@pytest.mark.slow
@pytest.mark.extended
def test_transposed_fragments_are_a_wrong_answer(graded_whole):
    got, _, tests = correctness(graded_whole["transposed_fragments"])
    assert got == 0 and all("first bad index" in t["output"] for t in tests)


def test_the_full_marks_line_is_the_one_the_h100_measurement_suggests():
    """The rubric's full_at comes from the master measured on a GPU against cuBLAS float16 +
    a compiled SwiGLU (benchmarks/lab_master_probe.py --lab 5), not from a guess: the record holds
    the line, measured with the master correct at the grader's timing shape. That line (the
    master 1.25x above full marks, issue 23) is the floor of the rule every rubric's lines
    now follow (issue 28: rubric.lines_from_control), which raises it where the lab's control
    is fast (tests/grader/test_lesson_controls.py holds the rubric to that record)."""
    import json

    from autograder.rubric import FULL_AT_FLOOR, load_rubric

    rec = json.loads((REPO / "records" / "labs" / "lab5_master_h100.json").read_text())
    perf = load_rubric(LAB)["performance"]
    assert rec["timing_case_correct"]["ok"] and "H100" in rec["gpu"]
    assert perf["basis"] == "master"
    assert FULL_AT_FLOOR == pytest.approx(rec["suggested"]["full_at_master_units"])
    assert FULL_AT_FLOOR <= perf["full_at"] <= 0.9
    assert rec["suggested"]["full_at_reference_units"] == pytest.approx(
        rec["suggested"]["fraction_of_reference"] / rec["margin"])
    assert perf["zero_at"] < perf["full_at"]
