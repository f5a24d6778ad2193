"""Every kernel a lab master launches (labs 2-4: every step and the final function) compiles
for a real GPU (sm_90), not only in Numba's CUDA simulator.

The simulator runs kernels as Python and accepts what the GPU compiler refuses: lab 4's step 2
once used ``cuda.shared.array((S, S + 1), float32)``, which passed every simulator test and
was a TypingError on the H100. tools/lab_ptx.py records each launch's kernel and argument
types in the simulator, then compiles them with ``cuda.compile_ptx`` in a process with the
simulator off (NVVM ships as a wheel: no GPU needed)."""

from __future__ import annotations

import pytest

import book  # first: GPU or simulator, decided before numba.cuda is imported
from autograder import labs as L
from autograder.labs.edits import Edit
from tools import lab_ptx

pytestmark = [pytest.mark.extended, pytest.mark.skipif(
    not book.gpu.SIMULATED,
    reason="on a GPU every launch in test_lab_steps compiles for real; the recording needs "
           "the simulator")]


@pytest.fixture(scope="module")
def results():
    return lab_ptx.check(lab_ptx.STAGED)


@pytest.mark.parametrize("lab", lab_ptx.STAGED)
def test_every_kernel_of_the_master_compiles_for_sm90(results, lab):
    bad = [r.describe() for r in lab_ptx.failures(results) if r.lab == lab]
    assert not bad, "\n\n".join(bad)


def test_every_step_and_the_final_function_were_compiled(results):
    # a step that launched nothing (or was skipped) would pass the test above unseen
    want = {(lab, s.name) for lab in lab_ptx.STAGED for s in L.get(lab).all_steps}
    assert {(r.lab, r.step) for r in results} == want


def test_signatures_are_those_of_the_launch(results):
    # lab 3 launches on its float16 [M, F] arrays flattened to 1-D views; lab 4's final
    # kernel gets 2-D weights and 1-D biases: the types come from the launch, not a table
    lab3 = {r.signature for r in results if r.lab == "lab3_half_precision"}
    assert lab3 == {"(array(float16, 1d, C), array(float16, 1d, C), "
                    "array(float16, 1d, C), int64)"}
    final4 = next(r for r in results if r.lab == "lab4_dual_gemm" and r.step == "final")
    assert final4.kernel == "_linear_swiglu_kernel" and final4.cell == "lab4-03"
    assert final4.signature.count("array(float32, 1d, C)") == 2


def test_the_shared_shape_computed_in_the_kernel_is_caught():
    # the master before commit 4555729: the simulator ran it, the H100 refused it
    old = Edit("cuda.shared.array((S, SP), float32)", "cuda.shared.array((S, S + 1), float32)",
               "lab4-s2-code")
    got = lab_ptx.check(["lab4_dual_gemm"], only={"tiled"}, edits={"lab4_dual_gemm": [old]})
    assert [(r.step, r.kernel, r.ok) for r in got] == [("tiled", "_gemm_tiled_kernel", False)]
    msg = got[0].describe()
    assert "lab4_dual_gemm, step 'tiled': kernel _gemm_tiled_kernel (cell lab4-s2-code)" in msg
    assert "(array(float32, 2d, C), array(float32, 2d, C), array(float32, 2d, C), int64" in msg
    assert "TypingError" in msg and "shared.array" in msg
    assert "of cell lab4-s2-code: sw = cuda.shared.array((S, S + 1), float32)" in msg
