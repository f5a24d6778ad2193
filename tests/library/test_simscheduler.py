"""book/simulator/scheduler.py: the simulator's block loop, pausing between passes, does what
numba-cuda's does (barriers, shared memory, exceptions), and is the one the simulator runs."""

from __future__ import annotations

import hashlib
import inspect

import numba
import numpy as np
import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from numba import cuda

from book import numba_compat as nc
from book.simulator import scheduler

pytestmark = pytest.mark.skipif(not numba.config.ENABLE_CUDASIM,
                                reason="the simulator's block scheduler: a GPU has none")

# sha256 of numba-cuda 0.30.4's BlockManager.run source, the loop book/simulator/scheduler.py copies
NUMBA_RUN_SHA256 = "54626c6819f55d514a598517b1467ed1cc2e7c3bf1f3b9814e13ef2a4ba3541f"


def test_the_simulator_runs_the_pausing_loop_and_keeps_numbas():
    cls = nc.sim_block_manager_class()
    assert cls.run is scheduler.run_block
    src = inspect.getsource(cls._numba_run)
    assert hashlib.sha256(src.encode()).hexdigest() == NUMBA_RUN_SHA256, (
        "numba-cuda's BlockManager.run changed: copy the new loop into "
        "book/simulator/scheduler.py's run_block (adding only its time.sleep(0)), then set "
        "NUMBA_RUN_SHA256 here")
    assert "time.sleep(0)" in inspect.getsource(scheduler.run_block)


@cuda.jit
def _reverse_in_steps(a, out):
    # three barriers per thread: every thread writes, waits, reads its mirror, waits, writes
    s = cuda.shared.array(64, np.float32)
    i = cuda.threadIdx.x
    g = cuda.blockIdx.x * 64 + i
    s[i] = a[g]
    cuda.syncthreads()
    v = s[63 - i]
    cuda.syncthreads()
    s[i] = v * 2
    cuda.syncthreads()
    out[g] = s[i] + s[(i + 1) % 64]


@cuda.jit
def _out_of_bounds(out):
    out[cuda.threadIdx.x + 1] = 1.0  # the last thread writes past the end


def _with(loop, fn):
    cls = nc.sim_block_manager_class()
    ours = cls.run
    cls.run = loop
    try:
        return fn()
    finally:
        cls.run = ours


def test_barriers_and_shared_memory_give_what_numbas_loop_gives():
    a = np.random.default_rng(0).standard_normal(64 * 3).astype(np.float32)
    s = (a.reshape(3, 64)[:, ::-1] * 2).ravel()
    want = s + np.roll(s.reshape(3, 64), -1, axis=1).ravel()

    def go():
        out = np.zeros_like(a)
        _reverse_in_steps[3, 64](a, out)
        return out

    ours = go()
    theirs = _with(nc.sim_block_manager_class()._numba_run, go)
    np.testing.assert_array_equal(ours, want)
    np.testing.assert_array_equal(theirs, ours)


def test_a_thread_that_raises_stops_the_launch_with_its_error():
    with pytest.raises(IndexError):
        _out_of_bounds[1, 32](np.zeros(32, np.float32))
    # and the next launch runs normally
    out = np.zeros(33, np.float32)
    _out_of_bounds[1, 32](out)
    assert out[1:].sum() == 32
