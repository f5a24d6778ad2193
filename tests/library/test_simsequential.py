"""book/simulator/sequential.py: a simulated block whose threads never meet runs them one after another
on the launching Python thread, with the values, exceptions and hazards of the threaded path;
a kernel with a barrier, a warp exchange or a while loop keeps the threaded path."""

from __future__ import annotations

import numpy as np
import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from numba import config, cuda, float32, int32

from book import numba_compat as nc
from book.simulator import hazard_recorder, sequential
from book.simulator.addressing import installed

pytestmark = pytest.mark.skipif(not config.ENABLE_CUDASIM,
                                reason="the simulator's block scheduler: a GPU has none")


@pytest.fixture
def starts(monkeypatch):
    """How many simulated threads were started as Python threads."""
    cls = nc.sim_block_thread_class()
    count = [0]
    start = cls.start

    def counted(self):
        count[0] += 1
        return start(self)

    monkeypatch.setattr(cls, "start", counted)
    return count


def _both(run):
    """``run()`` with the sequential path on, then off (the threaded path)."""
    was = sequential.enabled()
    try:
        sequential.set_enabled(True)
        on = run()
        sequential.set_enabled(False)
        off = run()
    finally:
        sequential.set_enabled(was)
    return on, off


@cuda.jit(device=True)
def _silu(g):
    return g / (float32(1.0) + np.exp(-g))


@cuda.jit
def _swiglu(gate, up, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = _silu(gate[i]) * up[i]


@cuda.jit
def _grid_stride_2d(x, out):
    r, c = cuda.grid(2)
    for j in range(c, x.shape[1], cuda.gridsize(2)[0]):
        if r < x.shape[0]:
            out[r, j] = x[r, j] * (cuda.threadIdx.x + 10 * cuda.threadIdx.y + 100 * cuda.blockIdx.y)


def test_a_barrier_free_kernel_runs_on_one_python_thread_with_the_same_values(starts):
    rng = np.random.default_rng(0)
    g, u = rng.standard_normal(300).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    x = rng.standard_normal((5, 70)).astype(np.float32)
    assert sequential.verdict(_swiglu.fn) == (True, "")

    def run():
        before = starts[0]
        out = np.zeros(300, np.float32)
        _swiglu[3, 128](g, u, out)
        out2 = np.zeros_like(x)
        _grid_stride_2d[(2, 3), (8, 2)](x, out2)
        return out, out2, starts[0] - before

    (a, a2, started_on), (b, b2, started_off) = _both(run)
    assert started_on == 0                       # no Python thread started
    assert started_off == 3 * 128 + 6 * 16       # one per simulated thread
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a2, b2)
    np.testing.assert_allclose(a, g / (1 + np.exp(-g)) * u, rtol=1e-6)


@cuda.jit
def _uses_barrier(out):
    s = cuda.shared.array(64, float32)
    s[cuda.threadIdx.x] = cuda.threadIdx.x
    cuda.syncthreads()
    out[cuda.threadIdx.x] = s[63 - cuda.threadIdx.x]


@cuda.jit(device=True)
def _helper_with_barrier():
    cuda.syncthreads()


@cuda.jit
def _calls_a_barrier(out):
    out[cuda.threadIdx.x] = 1
    _helper_with_barrier()


@cuda.jit
def _shuffles(out):
    out[cuda.threadIdx.x] = cuda.shfl_down_sync(0xFFFFFFFF, cuda.threadIdx.x, 1)


@cuda.jit
def _votes(out):
    out[cuda.threadIdx.x] = cuda.ballot_sync(0xFFFFFFFF, cuda.threadIdx.x > 3)


@cuda.jit
def _spins(flag, out):
    if cuda.threadIdx.x == 0:
        flag[0] = 1
    while flag[0] == 0:   # waits for thread 0 of its block: a sequential order could hang
        pass
    out[cuda.threadIdx.x] = 1


@cuda.jit
def _warp_exchange(out):
    from book.kernels.instructions.tensorcore import shfl_xor  # noqa: F401  (not reached: a local import)
    out[0] = 1


def test_a_kernel_whose_threads_meet_keeps_the_threaded_path(starts):
    for k, word in ((_uses_barrier, "syncthreads"), (_calls_a_barrier, "syncthreads"),
                    (_shuffles, "shfl_down_sync"), (_votes, "ballot_sync"),
                    (_spins, "while loop"), (_warp_exchange, "shfl_xor")):
        ok, why = sequential.verdict(k.fn)
        assert not ok and word in why, (k.fn.__name__, why)
    out = np.zeros(64, np.float32)
    _uses_barrier[1, 64](out)
    assert starts[0] == 64
    np.testing.assert_array_equal(out, np.arange(64)[::-1])
    flag, out = np.zeros(1, np.int32), np.zeros(32, np.int32)
    _spins[1, 32](flag, out)     # runs threaded: terminates
    assert out.tolist() == [1] * 32


def test_the_course_warp_exchange_keeps_the_threaded_path():
    from book.kernels.gemv import cuda_core_gemv
    from book.kernels.instructions import tensorcore

    @cuda.jit
    def reduce_warp(x, out):
        out[cuda.threadIdx.x] = tensorcore.shfl_xor(x[cuda.threadIdx.x], 1)

    ok, why = sequential.verdict(reduce_warp.fn)
    assert not ok and "shfl_xor" in why
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    reduce_warp[1, 32](x, out)
    np.testing.assert_array_equal(out, x.reshape(16, 2)[:, ::-1].ravel())
    assert cuda_core_gemv   # the module that reaches it the same way


def _make_caller():
    @cuda.jit(device=True)
    def helper(i):
        return i + 1

    @cuda.jit
    def kernel(out):
        out[cuda.threadIdx.x] = helper(cuda.threadIdx.x)
    return kernel


def test_a_verdict_is_read_again_when_a_name_it_rests_on_changes():
    k = _make_caller()
    assert sequential.verdict(k.fn)[0]
    g = _calls_a_barrier.fn.__globals__
    old = g["_helper_with_barrier"]
    try:
        @cuda.jit(device=True)
        def no_barrier():
            return 0
        g["_helper_with_barrier"] = no_barrier
        assert sequential.verdict(_calls_a_barrier.fn)[0]
    finally:
        g["_helper_with_barrier"] = old
    assert not sequential.verdict(_calls_a_barrier.fn)[0]


@cuda.jit
def _out_of_bounds(out):
    out[cuda.threadIdx.x + 1] = 1.0   # the last thread writes past the end


@cuda.jit
def _divides(x, out):
    out[cuda.threadIdx.x] = x[cuda.threadIdx.x] / x[0]


def test_exceptions_and_numpy_error_state_are_the_threaded_paths():
    def run():
        with pytest.raises(IndexError) as e:
            _out_of_bounds[1, 8](np.zeros(8, np.float32))
        with np.errstate(all="raise"):   # a new thread starts with NumPy's default state
            out = np.zeros(4, np.float32)
            with pytest.warns(RuntimeWarning):
                _divides[1, 4](np.zeros(4, np.float32), out)
        return str(e.value), np.isnan(out).all()

    on, off = _both(run)
    assert on == off
    assert on[0].startswith("tid=[7, 0, 0] ctaid=[0, 0, 0]")


@cuda.jit
def _racy(count, out):
    # no barrier: warps race on shared memory, blocks on count[0]
    s = cuda.shared.array(64, int32)
    t = cuda.threadIdx.x
    s[t] = t
    out[cuda.blockIdx.x * 64 + t] = s[(t + 32) % 64]
    if t == 0:
        count[0] = count[0] + 1


def test_the_hazard_recorder_names_the_same_races_in_a_sequential_block(starts):
    def run():
        count = cuda.to_device(np.zeros(1, np.int32))
        out = cuda.to_device(np.zeros(128, np.int32))
        with hazard_recorder.recording([(out, "out")]) as rec, installed():
            _racy[2, 64](count, out)
        return rec.hazards(), count.copy_to_host().tolist()

    (found, count), (found_off, count_off) = _both(run)
    assert starts[0] == 128  # the threaded run only
    assert found == found_off
    kinds = sorted((h["kind"], h["array"]) for h in found)
    assert kinds == [("race_global", "count"), ("race_shared", "shared array `s`")], found
    assert count == count_off == [2]


def test_each_function_a_module_gives_is_looked_into():
    from book.kernels.instructions import tensorcore

    @cuda.jit(device=True)
    def multiply(a, b, c):
        return tensorcore.mma_f16_16816(a, b, c)   # its lanes meet (the warp's exchange)

    @cuda.jit
    def kernel(x, out):
        out[0] = tensorcore.unpack(x[0])[0]       # the module, for a harmless function
        out[1] = multiply(x, x, x)[0]             # ... then named again, for another

    ok, why = sequential.verdict(kernel.fn)
    assert not ok and "_exchange" in why, why
