"""book/simulator/hazard_recorder.py: hazards found in simulated launches, whatever the threads' schedule and
the blocks' order; and book/simulator/scheduler.py's seeded block order.

Small kernels of the patterns the course teaches (chapter 7's last-block reduction, a block
reduction through shared memory, a token loop), each right and with one fault: a race between
blocks (a counter without an atomic, partial sums published without a fence), a race on shared
memory (no barrier before the cross-warp read), a barrier in a branch, a read past an input
(in its guard zone, and past its allocation). The lab masters and their faults are graded in
tests/grader/test_hazard_trace.py."""

from __future__ import annotations

import numpy as np
import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from numba import config, cuda, float32, int32

from book.simulator import hazard_recorder, scheduler
from book.simulator.addressing import installed

pytestmark = pytest.mark.skipif(not config.ENABLE_CUDASIM,
                                reason="the simulator's hazard trace (a GPU has compute-sanitizer)")

THREADS = 64   # two warps
SPLITS = 3     # blocks per row


# ---------------------------------------------------------------- a last-block reduction, and faults
@cuda.jit
def _splitk(x, part, count, out, n):
    """Row j's n values summed by SPLITS blocks: each writes its partial, the last to arrive
    adds them (chapter 7's pattern, lab 6's last_block and read_l2)."""
    j = cuda.blockIdx.x // SPLITS
    s = cuda.blockIdx.x % SPLITS
    tid = cuda.threadIdx.x
    red = cuda.shared.array(THREADS, float32)
    flag = cuda.shared.array(1, int32)
    v = float32(0.0)
    for i in range(s * THREADS + tid, n, SPLITS * THREADS):
        v += x[j * n + i]
    red[tid] = v
    cuda.syncthreads()
    if tid == 0:
        t = float32(0.0)
        for q in range(THREADS):
            t += red[q]
        part[j * SPLITS + s] = t
    cuda.threadfence()
    cuda.syncthreads()
    if tid == 0:
        last = cuda.atomic.add(count, j, 1) == SPLITS - 1
        flag[0] = 1 if last else 0
        if last:
            count[j] = 0
    cuda.syncthreads()
    if flag[0] == 1 and tid == 0:
        t = float32(0.0)
        for q in range(SPLITS):
            t += cuda.atomic.add(part, j * SPLITS + q, float32(0.0))
        out[j] = t


@cuda.jit
def _splitk_plain_counter(x, part, count, out, n):
    j = cuda.blockIdx.x // SPLITS
    s = cuda.blockIdx.x % SPLITS
    tid = cuda.threadIdx.x
    flag = cuda.shared.array(1, int32)
    if tid == 0:
        v = float32(0.0)
        for i in range(s, n, SPLITS):
            v += x[j * n + i]
        part[j * SPLITS + s] = v
    cuda.threadfence()
    cuda.syncthreads()
    if tid == 0:
        seen = count[j]                 # the fault: a plain read and write, no atomic
        count[j] = seen + 1
        last = seen == SPLITS - 1
        flag[0] = 1 if last else 0
        if last:
            count[j] = 0
    cuda.syncthreads()
    if flag[0] == 1 and tid == 0:
        t = float32(0.0)
        for q in range(SPLITS):
            t += cuda.atomic.add(part, j * SPLITS + q, float32(0.0))
        out[j] = t


def _splitk_variant(fence: bool, atomic_read: bool):
    """The pattern with its fence (or not) and its read of the partials atomic (or plain)."""

    @cuda.jit
    def kernel(x, part, count, out, n):
        j = cuda.blockIdx.x // SPLITS
        s = cuda.blockIdx.x % SPLITS
        tid = cuda.threadIdx.x
        flag = cuda.shared.array(1, int32)
        if tid == 0:
            v = float32(0.0)
            for i in range(s, n, SPLITS):
                v += x[j * n + i]
            part[j * SPLITS + s] = v
        if fence:
            cuda.threadfence()
        cuda.syncthreads()
        if tid == 0:
            last = cuda.atomic.add(count, j, 1) == SPLITS - 1
            flag[0] = 1 if last else 0
            if last:
                count[j] = 0
        cuda.syncthreads()
        if flag[0] == 1 and tid == 0:
            t = float32(0.0)
            for q in range(SPLITS):
                if atomic_read:
                    t += cuda.atomic.add(part, j * SPLITS + q, float32(0.0))
                else:
                    t += part[j * SPLITS + q]
            out[j] = t
    return kernel


def _run_splitk(kernel, rows=2, n=200, seed=0, **limits):
    """(hazards, notes, out, want) of one launch on device arrays named as the grader names
    them (x and out registered; part and count the kernel's scratch)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(rows * n).astype(np.float32)
    dx, dout = cuda.to_device(x), cuda.to_device(np.zeros(rows, np.float32))
    part = cuda.to_device(np.zeros(rows * SPLITS, np.float32))
    count = cuda.to_device(np.zeros(rows, np.int32))
    with hazard_recorder.recording([(dx, "x"), (dout, "out")], **limits) as rec, installed():
        kernel[rows * SPLITS, THREADS](dx, part, count, dout, n)
    return rec.hazards(), rec.notes, dout.copy_to_host(), x.reshape(rows, n).sum(axis=1)


def _kinds(found):
    return sorted((h["kind"], h["array"], h["index"]) for h in found)


def test_a_last_block_reduction_with_its_fence_and_atomics_has_no_hazard():
    found, notes, out, want = _run_splitk(_splitk)
    assert found == [] and notes == []
    np.testing.assert_allclose(out, want, rtol=1e-5)


def test_a_counter_without_an_atomic_is_a_race_between_blocks():
    found, notes, out, want = _run_splitk(_splitk_plain_counter)
    np.testing.assert_allclose(out, want, rtol=1e-5)  # the values cannot show it here
    assert ("race_global", "count", 0) in _kinds(found)
    count = next(h for h in found if h["array"] == "count")
    assert count["count"] == 2   # both rows' counters
    assert "with no atomic and threadfence ordering them" in count["detail"]
    assert "`count[j] = seen + 1`" in count["detail"] or "`seen = count[j]" in count["detail"]
    assert count["where"].startswith("test_simhazards.py, line ")
    # with no atomic arrival, the partials are not ordered either
    assert ("race_global", "part", 0) in _kinds(found)


@pytest.mark.parametrize("fence,atomic_read,racy", [
    (True, True, False),     # the course's pattern
    (True, False, False),    # a plain read after the acquiring atomic: ordered
    (False, True, True),     # no fence: the partials were never released
    (False, False, True),
])
def test_partials_need_a_fence_before_the_arrival(fence, atomic_read, racy):
    found, notes, out, want = _run_splitk(_splitk_variant(fence, atomic_read))
    np.testing.assert_allclose(out, want, rtol=1e-5)
    if racy:
        assert _kinds(found) == [("race_global", "part", 0)]
        assert found[0]["count"] == 2 * (SPLITS - 1)   # the last block's own is ordered
    else:
        assert found == []


def test_the_verdict_is_the_same_whatever_the_blocks_order():
    said = []
    try:
        for seed in (None, 0, 1, 7):
            scheduler.set_block_order(seed)
            found, _, _, _ = _run_splitk(_splitk_plain_counter)
            said.append([(h["kind"], h["array"], h["index"], h["count"]) for h in found])
    finally:
        scheduler.set_block_order(scheduler._seed_from_env())
    assert said[0] and all(s == said[0] for s in said), said


def test_a_capped_trace_says_so_and_accuses_nothing_it_did_not_see():
    found, notes, _, _ = _run_splitk(_splitk_plain_counter, max_events=50)
    assert found == []   # the counter's accesses come after the first 50
    assert notes and "more than 50 accesses" in notes[0]


def test_an_analysis_past_its_budget_stops_and_says_so():
    full, _, _, _ = _run_splitk(_splitk_plain_counter)
    found, notes, _, _ = _run_splitk(_splitk_plain_counter, max_checks=2)
    assert notes and "race analysis passed 2 steps" in notes[0]
    assert set(_kinds(found)) < set(_kinds(full))   # what it had found before it stopped


# ---------------------------------------------------------------- shared memory
def _block_sum(barrier: bool):
    @cuda.jit
    def kernel(x, out):
        tid = cuda.threadIdx.x
        warp = tid // 32
        sums = cuda.shared.array(2, float32)
        v = x[cuda.blockIdx.x * THREADS + tid]
        if tid % 32 == 0:
            sums[warp] = v
        if barrier:
            cuda.syncthreads()
        if tid == 0:
            out[cuda.blockIdx.x] = sums[0] + sums[1]
    return kernel


@pytest.mark.parametrize("barrier", [True, False])
def test_a_shared_word_written_by_one_warp_and_read_by_another_needs_a_barrier(barrier):
    x = cuda.to_device(np.arange(2 * THREADS, dtype=np.float32))
    out = cuda.to_device(np.zeros(2, np.float32))
    for _ in range(3):   # the same verdict whatever Python's thread schedule did
        with hazard_recorder.recording([(x, "x"), (out, "out")]) as rec, installed():
            _block_sum(barrier)[2, THREADS](x, out)
        if barrier:
            assert rec.hazards() == []
        else:
            (h,) = rec.hazards()
            assert (h["kind"], h["array"], h["index"], h["count"]) == (
                "race_shared", "shared array `sums`", 1, 1)
            assert h["detail"].startswith("written by warp 1 (`sums[warp] = v`) and read by warp "
                                          "0 (`out[cuda.blockIdx.x] = sums[0] + sums[1]`)")


@cuda.jit
def _branch_barrier(out):
    tid = cuda.threadIdx.x
    if tid < 32:
        cuda.syncthreads()
        out[tid] = 1
    else:
        cuda.syncthreads()
        out[tid] = 2


def test_threads_released_from_different_barriers_are_a_barrier_hazard():
    out = cuda.to_device(np.zeros(THREADS, np.int32))
    with hazard_recorder.recording([(out, "out")]) as rec, installed():
        _branch_barrier[1, THREADS](out)
    (h,) = rec.hazards()
    assert h["kind"] == "barrier" and h["index"] is None
    assert "32 at `cuda.syncthreads()`" in h["detail"]


# ---------------------------------------------------------------- reads outside an array
@cuda.jit
def _one_past(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + x[i + 1]    # the last thread reads one past x


def _guarded(a, guard):
    flat = cuda.to_device(np.concatenate([np.full(guard, np.nan, a.dtype), a,
                                          np.full(guard, np.nan, a.dtype)]))
    return flat, flat[guard:guard + a.size]


def test_a_read_into_a_guard_zone_is_a_read_past_the_input():
    x = np.arange(40, dtype=np.float32)
    _, dx = _guarded(x, 8)
    _, dout = _guarded(np.zeros(40, np.float32), 8)
    with hazard_recorder.recording([(dx, "x"), (dout, "out")]) as rec, installed():
        _one_past[2, 32](dx, dout)
    (h,) = rec.hazards()
    assert (h["kind"], h["array"], h["index"], h["count"]) == ("read_past", "x", 40, 1)
    assert h["detail"].startswith("read by block 1, thread 7 (`out[i] = x[i] + x[i + 1]`): "
                                  "1 element(s) past the end (`x` has 40 elements")


def test_a_read_past_the_allocation_is_recorded_before_it_raises():
    dx = cuda.to_device(np.arange(40, dtype=np.float32))
    dout = cuda.to_device(np.zeros(40, np.float32))
    with hazard_recorder.recording([(dx, "x"), (dout, "out")]) as rec, installed():
        with pytest.raises(IndexError, match="out of bounds of the memory"):
            _one_past[2, 32](dx, dout)
    assert _kinds(rec.hazards()) == [("read_past", "x", 40)]


def test_a_16_byte_load_past_the_end_is_read_element_by_element():
    from book.kernels.instructions import wide

    @cuda.jit
    def pairs(x, out):
        i = cuda.grid(1)
        if i < out.size:
            a, b, c, d = wide.load4(x, 4 * i)
            out[i] = a + b + c + d

    _, dx = _guarded(np.ones(30, np.float32), 16)    # 7.5 pieces: the 8th reads 2 past
    _, dout = _guarded(np.zeros(8, np.float32), 16)
    with hazard_recorder.recording([(dx, "x"), (dout, "out")]) as rec, installed():
        pairs[1, 32](dx, dout)
    (h,) = rec.hazards()
    assert (h["kind"], h["array"], h["index"], h["count"]) == ("read_past", "x", 30, 2)
    assert "wide.load4(x, 4 * i)" in h["detail"]


# ---------------------------------------------------------------- what is not a hazard
@cuda.jit
def _histogram(x, bins):
    i = cuda.grid(1)
    local = cuda.shared.array(4, int32)
    if cuda.threadIdx.x < 4:
        local[cuda.threadIdx.x] = 0
    cuda.syncthreads()
    cuda.atomic.add(local, x[i] % 4, 1)
    cuda.syncthreads()
    if cuda.threadIdx.x < 4:
        cuda.atomic.add(bins, cuda.threadIdx.x, local[cuda.threadIdx.x])


@cuda.jit
def _write(a):
    a[cuda.grid(1)] = cuda.grid(1)


@cuda.jit
def _read_neighbour(a, out):
    i = cuda.grid(1)
    out[i] = a[(i + 32) % a.size]   # another block's word, written by the previous launch


def test_atomics_between_blocks_and_consecutive_launches_are_no_race():
    x = cuda.to_device(np.arange(128, dtype=np.int32))
    bins = cuda.to_device(np.zeros(4, np.int32))
    a = cuda.to_device(np.zeros(64, np.float32))
    out = cuda.to_device(np.zeros(64, np.float32))
    with hazard_recorder.recording([(x, "x"), (bins, "bins")]) as rec, installed():
        _histogram[4, 32](x, bins)
        _write[2, 32](a)
        _read_neighbour[2, 32](a, out)
    assert rec.hazards() == [] and rec.launches == 3
    assert bins.copy_to_host().tolist() == [32, 32, 32, 32]


def test_nothing_is_recorded_outside_a_recording():
    out = cuda.to_device(np.zeros(THREADS, np.int32))
    with installed():
        _branch_barrier[1, THREADS](out)
    assert hazard_recorder.ACTIVE is None
    from book import numba_compat as nc

    assert nc.sim_shared_class().array.__module__ != hazard_recorder.__name__


# ---------------------------------------------------------------- the blocks' seeded order
@cuda.jit
def _arrival(order, count):
    if cuda.threadIdx.x == 0:
        k = cuda.atomic.add(count, 0, 1)
        order[k] = cuda.blockIdx.x


def _order(seed, blocks=16):
    scheduler.set_block_order(seed)
    try:
        order = cuda.to_device(np.zeros(blocks, np.int32))
        _arrival[blocks, 1](order, cuda.to_device(np.zeros(1, np.int32)))
        return order.copy_to_host().tolist()
    finally:
        scheduler.set_block_order(scheduler._seed_from_env())


def test_the_blocks_run_in_a_seeded_order_the_same_in_every_process():
    assert _order(None) == list(range(16))
    a = _order(0)
    assert sorted(a) == list(range(16)) and a != list(range(16))
    assert a == scheduler.block_order((16, 1, 1), 0) == _order(0)
    assert _order(1) != a
    # two blocks: never the index order (the reverse, when the draw would give it)
    assert scheduler.block_order((2, 1, 1), 0) == [1, 0]
    # a 2-D grid: every block once, blockIdx as the linear order says
    order = scheduler.block_order((3, 2, 1), 5)
    assert sorted(order) == list(range(6))


def test_a_race_free_kernel_computes_the_same_values_in_any_order():
    got = []
    for seed in (None, 0, 3):
        scheduler.set_block_order(seed)
        try:
            _, _, out, want = _run_splitk(_splitk, rows=3, n=300)
        finally:
            scheduler.set_block_order(scheduler._seed_from_env())
        got.append(out)
    np.testing.assert_allclose(got[0], want, rtol=1e-5)
    assert all(np.array_equal(g, got[0]) for g in got)


def test_only_words_two_warps_or_blocks_use_with_a_plain_write_are_looked_at():
    from book.simulator.happens_before import R, W, _shared_words

    E = np.array([[W, 100, 0, 0, 0, 0, 1],    # word 100: warp 0 writes, warp 1 reads
                  [R, 200, 0, 0, 0, 0, 1],    # word 200: two warps, reads only
                  [R, 200, 0, 33, 0, 0, 1],
                  [R, 100, 0, 40, 0, 0, 1],
                  [W, 300, 0, 1, 0, 0, 1],    # word 300: one warp
                  [R, 300, 0, 2, 0, 0, 1],
                  [W, 100, 1, 0, 0, 0, 1]])   # word 100 of another block: one warp
    warps = _shared_words(E, (2, 4, 1), lambda S: S[:, 3] >> 5)
    assert warps.tolist() == [0, 3]
    blocks = _shared_words(E, (1,), lambda S: S[:, 2])
    assert blocks.tolist() == [0, 3, 6]
