"""Guard zones (issue 28): every array the grader hands a submission sits between two
poisoned guard zones (autograder/inputs.py), a simulated kernel's arrays are addressed as on a
GPU (book/simulator/addressing.py), and a store outside `out` or an input is reported in one set of
words (book.answers.guard_message) by check(), the grader (tests/grader/test_bounds_grading.py)
and the GPU replay. In Numba's simulator, with the real allocations and kernels."""

from __future__ import annotations

import math

import numpy as np
import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from numba import cuda, float32  # module level: the simulator swaps a kernel's global `cuda`
from tools.lab_fixtures import fixtures

from autograder import labs
from autograder.inputs import (GUARD_ALIGN_BYTES, guard_bits, guard_damage, guard_elems, guarded,
                               unguarded)
from book.answers import guard_message, guard_notes

# ------------------------------------------------------------------------- the layout
def test_a_guard_holds_a_tile_row_and_keeps_the_array_aligned():
    # 32 rows of a [5, 40] float32 array plus 8192 elements, rounded up to 256 bytes
    assert guard_elems((5, 40), "float32", (32, 8192)) == 32 * 40 + 8192   # 9472: 37 x 256 bytes
    assert guard_elems((5, 41), "float32", (32, 8192)) == 32 * 41 + 8192 + 32  # rounded up
    for shape, dtype in [((3, 70), "float16"), ((17,), "float32"), ((1, 129), "float16")]:
        g = guard_elems(shape, dtype, (256, 256))
        assert (g * np.dtype(dtype).itemsize) % GUARD_ALIGN_BYTES == 0
        assert g >= 256 * (shape[-1] if len(shape) > 1 else 1) + 256


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_stores_outside_an_array_are_found_in_memory_order(dtype):
    body = np.arange(12, dtype=dtype).reshape(3, 4)
    flat = guarded(body, 64, "out")
    assert np.array_equal(unguarded(flat, (3, 4), 64), body)
    assert guard_damage(flat, 64, "out") == {}
    flat[64 + 12] = 0          # one past the end: flat index 12
    flat[64 + 12 + 5] = np.nan  # a kernel's NaN is not the guard's NaN
    flat[64 - 3] = 7           # three before the start
    assert guard_damage(flat, 64, "out") == {"after": [2, 12], "before": [1, -3]}


def test_an_inputs_guard_is_nan_and_an_outputs_is_a_nan_no_kernel_writes():
    for dtype in ("float32", "float16"):
        x = guarded(np.ones(8, dtype), 128, "in")
        assert np.isnan(x[:128]).all() and np.isnan(x[-128:]).all()
        out = guarded(np.ones(8, dtype), 128, "out")
        assert np.isnan(out[:128]).all()
        size = np.dtype(dtype).itemsize
        canonical = int(np.array(np.nan, dtype).view(f"u{size}"))
        assert guard_bits(dtype, "out") != canonical == guard_bits(dtype, "in")
    with pytest.raises(ValueError, match="two guard zones"):
        unguarded(np.zeros(10, np.float32), (3, 4), 64)


def test_the_words():
    said = guard_message("out", {"after": [1, 120]}, 120)
    assert said.startswith("wrote 1 element past the end of `out`, the first at flat index 120 "
                           "(`out` has 120 elements, flat indices 0 to 119)")
    said = guard_message("x", {"before": [3, -3], "after": [5, 240]}, 240)
    assert said.startswith("wrote 5 elements past the end of `x`, the first at flat index 240; "
                           "wrote 3 elements before the start of `x`, the first at flat index -3")
    assert guard_notes([("out", {}, 4)]) == ""
    assert guard_notes([("out", {"after": [1, 4]}, 4)]).startswith("\nwrote 1 element past")


# ------------------------------------------------------------------------- the simulator
def test_a_simulated_kernel_addresses_its_arrays_as_a_gpu_does():
    """An index past a dimension is the next element in memory, a negative index wraps
    once, and only an address outside the allocation raises: here as in compiled code."""
    from book.simulator.addressing import installed

    @cuda.jit
    def stores(out, F):
        out[0, F] = float32(1.0)        # row 0, column F: row 1's first element
        out[2, F] = float32(2.0)        # past the last row: the element after the array
        out[1, -1] = float32(3.0)       # wraps to out[1, F - 1]
        out[0, -F - 1] = float32(4.0)   # wraps once to column -1: before the array

    flat = cuda.to_device(np.full(8 + 12 + 8, np.nan, np.float32))
    out = flat[8:20].reshape(3, 4)
    with installed():
        stores[1, 1](out, 4)
    got = flat.copy_to_host()
    assert got[8 + 4] == 1 and got[8 + 12] == 2 and got[8 + 7] == 3 and got[8 - 1] == 4
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1"):  # NumPy, without
        stores[1, 1](out, 4)

    @cuda.jit
    def far(out):
        out[1000, 0] = float32(1.0)

    with installed(), pytest.raises(IndexError, match="out of bounds of the memory this array "
                                                      "belongs to"):
        far[1, 1](out)


def _function(path):
    lab = labs.get(path.name.split("_")[0])
    ns = {"__name__": "__main__"}
    exec(compile(path.read_text(), str(path), "exec"), ns)
    return lab, ns[lab.function]


def _past_end_at(lab, case) -> int:
    return int(np.prod(lab.out_spec(case)["shape"]))


PAST = [p for p in fixtures("bounds") if "writes_past" in p.stem]


@pytest.mark.parametrize("path", PAST, ids=lambda p: p.stem)
def test_check_says_where_a_store_went(path, capsys):
    """check() in the student's notebook, in the simulator: a store past the end of `out`
    (or of an input) fails every public case, in the grader's words."""
    _check_says_where_a_store_went(path, capsys)


@pytest.mark.gpu
@pytest.mark.parametrize("path", PAST, ids=lambda p: p.stem)
def test_on_a_gpu_check_says_where_a_store_went_in_the_same_words(path, capsys):
    """The same on a GPU, where the store lands in the guard zone without any addressing of
    ours: the words and the first flat index are the simulator's."""
    _check_says_where_a_store_went(path, capsys)


def _check_says_where_a_store_went(path, capsys):
    from autograder.check import check

    lab, fn = _function(path)
    with pytest.raises(AssertionError):
        check(fn, perf=False, access=False)
    out = capsys.readouterr().out
    what = "x" if "input" in path.stem else lab.output
    for case in lab.public_cases:
        size = _past_end_at(lab, case) if what == lab.output else \
            int(np.prod(lab.input_specs(case)["x"]["shape"]))
        assert (f"past the end of `{what}`, the first at flat index {size} (`{what}` has {size} "
                f"elements") in out, out[-2000:]
    assert "PASS" not in out


def test_check_says_a_store_before_the_start_too(capsys):
    from autograder.check import check

    @cuda.jit
    def kernel(x, out, M, F):
        j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
        row = cuda.blockIdx.y
        if j < F:
            g = x[row, 2 * j]
            out[row, j] = g / (float32(1.0) + math.exp(-g)) * x[row, 2 * j + 1]
        if j == 0 and row == 0:
            out[0, -F - 1] = float32(0.0)   # wraps once, to column -1 of row 0: flat index -1

    def swiglu_interleaved(x, out):
        M, F = out.shape
        kernel[((F + 255) // 256, M), 256](x, out, M, F)
        return out

    with pytest.raises(AssertionError):
        check(swiglu_interleaved, perf=False, access=False)
    out = capsys.readouterr().out
    assert out.count("wrote 1 element before the start of `out`, the first at flat index -1 ") == 2


def test_compute_sanitizer_gets_exact_allocations():
    """Under compute-sanitizer the arrays are the exact allocations (memcheck reports a store
    past an allocation's end, not past a guard zone's): check(sanitize=True)'s re-run calls
    call_here(guard=False), grade --sanitize asks for test messages without guards."""
    from autograder.context import RunContext

    sizes = {}

    def fn(x, out):
        for name, a in (("x", x), ("out", out)):
            root = a._ary
            while isinstance(root.base, np.ndarray):
                root = root.base
            sizes[name] = (root.size, a.size)
        return out

    lab = labs.get("lab2")
    case = lab.public_cases[0]
    lab.call_here(fn, case, guard=False)
    assert all(r == n for r, n in sizes.values()), sizes
    lab.call_here(fn, case)
    assert all(r == n + 2 * lab.guard(lab.out_spec(case)["shape"] if k == "out" else
                                      lab.input_specs(case)["x"]["shape"], lab.dtype)
               for k, (r, n) in sizes.items()), sizes
    ctx = RunContext(lab=lab, rubric={}, cases=[], limits={}, perf=None, simulated=True, out=None,
                     secret={}, children=None, log=None, say=None, replays=None)
    msg = ctx.test_message(dict(case, id="t0"), guard=False)
    assert [a["guard"] for a in msg["args"]] == [0, 0]
    assert all(a["guard"] > 0 for a in ctx.test_message(dict(case, id="t0"))["args"])
