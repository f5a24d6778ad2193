"""How fast each way of bringing the decode weights on chip reads them, with no math: the
ceilings the decode GEMVs (:mod:`book.kernels.decode_mlp`, :mod:`book.kernels.wgmma_gemv`)
work under. ``benchmarks/weight_stream.py`` times them on a GPU beside the GEMVs themselves.

Each probe reads wg and wu [h, d] (16-bit, row-major, as nn.Linear stores them) once and
does nothing with the bytes but let them land:

- :func:`ldg_kernel`: every thread 16-byte loads, as the CUDA-core GEMV reads (``rows`` rows
  of both weights a block, ``threads`` threads walking each row; ``2 rows`` loads a thread
  in flight). The words are XORed and stored only if they make an impossible value, so the
  loads cannot be dropped and nothing is written.
- :func:`tma_kernel`: the wgmma GEMV's producer (one thread, an mbarrier ring of ``stages``
  stages, each ``kblocks`` boxes of each weight along k; each block walks the steps the GEMV's
  block would, :func:`book.kernels.stream_k.walk`) with a consumer that only waits for each
  stage and hands it back. Box shape and swizzle come from the tensor maps:
  the GEMV's 64 x 64 boxes of 128-byte rows, or wider rows without a swizzle.
- :func:`cpasync_kernel`: the same ring and walk, each box copied by a warp's (or a few
  warps') 16-byte ``cp.async`` into the swizzled layout TMA would leave: the ldg probe's load
  path with the TMA probe's bytes in flight.
- :func:`bulk_kernel`: the same ring filled by ``cp.async.bulk`` (:func:`book.kernels.hopper.
  bulk_load`): each block reads one contiguous span of each weight (its share of whole rows)
  in ``chunk``-byte copies, the longest runs of DRAM addresses a reader can ask for.

sm_90a only (TMA); the ldg probe runs anywhere Numba does.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, int32, uint8, uint32, uint64

from ..instructions.hopper import SWIZZLE_PERIOD
from ..gemms.stream_k import ENTRY, next_step, rotated, step_at

__all__ = ["ldg_kernel", "tma_kernel", "cpasync_kernel", "bulk_kernel", "ring_layout", "bulk_spans"]

ALIGN = SWIZZLE_PERIOD
MASK = uint32(0xFFFFFC00)
THREADS = 64  # the TMA probes' blocks: a producer warp and a consumer warp


def ring_layout(stages: int, stage_bytes: int) -> dict:
    """Byte offsets from a 1024-aligned base: full barriers, empty barriers, the ring; and
    the dynamic shared memory a block asks for (``shared``, with room to align)."""
    ring = -(-16 * stages // ALIGN) * ALIGN
    end = ring + stages * stage_bytes
    return {"full": 0, "empty": 8 * stages, "ring": ring, "end": end, "shared": end + ALIGN}


def bulk_spans(h: int, row_bytes: int, blocks: int) -> np.ndarray:
    """int64 [blocks + 1]: block b reads bytes [spans[b], spans[b + 1]) of each weight, whole
    rows, the rows shared out as evenly as they divide."""
    rows = [b * h // blocks for b in range(blocks + 1)]
    return np.asarray(rows, dtype=np.int64) * row_bytes


@functools.lru_cache(maxsize=None)
def ldg_kernel(rows: int, threads: int):
    """``k(wg, wu, out, d, h)``: block i reads rows [rows i, rows (i + 1)) of both weights
    (d a multiple of 8); launch ``h / rows`` blocks of ``threads``."""
    from ..instructions.wide import load_words4

    R, NTH = rows, threads

    def k(wg, wu, out, d, h):
        tid = cuda.threadIdx.x
        j0 = cuda.blockIdx.x * R
        acc = uint32(0)
        for c in range(tid, d >> 3, NTH):
            for r in range(R):  # every load of the step first: 2 R x 16 bytes in flight
                row = min(j0 + r, h - 1) * d + (c << 3)
                a = load_words4(wg, row)
                b = load_words4(wu, row)
                acc ^= a[0] ^ a[1] ^ a[2] ^ a[3] ^ b[0] ^ b[1] ^ b[2] ^ b[3]
        if acc == uint32(0x9E3779B9) and tid == 1023:  # never true: the loads stay
            out[0] = acc

    return cuda.jit(k)


def _ring(stages, stage_bytes, arrivals=1):
    """What the ring probes share: the ring's offsets (full, empty, ring), the barriers' set-up
    (``init``: every thread gets the aligned base; a full barrier waits for ``arrivals``
    producer arrivals) and the consumer's walk (``consume``: wait for each stage, hand it
    back at once)."""
    from ..instructions.hopper import (fence_mbarrier_init, mbar_arrive, mbar_init, mbar_wait, ring_next,
                         shared_address)

    ST = stages
    lay = ring_layout(stages, stage_bytes)

    @cuda.jit(device=True, inline="always")
    def init(smem, full, empty):
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        if cuda.threadIdx.x == 0:
            for s in range(ST):
                mbar_init(base + full + 8 * s, arrivals)
                mbar_init(base + empty + 8 * s, 1)
            fence_mbarrier_init()
        cuda.syncthreads()
        return base

    @cuda.jit(device=True, inline="always")
    def consume(base, full, empty, n):
        s = 0
        ph = 0
        for q in range(n):
            mbar_wait(base + full + 8 * s, ph)  # the stage's bytes have landed
            mbar_arrive(base + empty + 8 * s)  # and it is free again at once
            s, ph = ring_next(s, ph, ST)

    return lay["full"], lay["empty"], lay["ring"], init, consume


@cuda.jit(device=True, inline="always")
def walk_of_block(sk, nk):
    """This block's walk in a GEMV's stream-K table (:func:`book.kernels.stream_k.stream_k`):
    its first row tile and k-block, its range's length, its first whole tile, and every step
    it reads."""
    e = ENTRY * cuda.blockIdx.x
    n = sk[e + 2]
    return sk[e], sk[e + 1], n, sk[e + 3], n + sk[e + 4] * nk


step = cuda.jit(device=True, inline="always")(step_at)
advance = cuda.jit(device=True, inline="always")(next_step)
rotate_k = cuda.jit(device=True, inline="always")(rotated)


@functools.lru_cache(maxsize=None)
def tma_kernel(stages: int, kblocks: int, box: tuple[int, int], rotate: int = 0):
    """``k(maps, sk, d)``: ``maps`` the tensor maps of wg and wu (16 uint64 each) for boxes
    of ``box = (columns, rows)``; ``sk`` the GEMV's table (:func:`book.kernels.stream_k.
    stream_k`) over ``h / rows`` row tiles of ``d / (columns kblocks)`` steps. Launch one
    block of :data:`THREADS` an SM with ``ring_layout(stages, 2 kblocks columns rows
    2)["shared"]`` bytes. ``rotate``: row tile m read from its step ``m rotate`` on, wrapping
    (:class:`book.kernels.wgmma_gemv.WgmmaGemvTile`'s ``rotate``)."""
    from ..instructions.hopper import global_address, mbar_arrive_expect_tx, mbar_wait, ring_next, tma_load_2d

    ST, KB, ROT = stages, kblocks, rotate
    BW, BH = box
    WB = BW * BH * 2
    SB = 2 * KB * WB
    FULL, EMPTY, RING, init, consume = _ring(ST, SB)

    def k(maps, sk, d):
        smem = cuda.shared.array(0, uint8)
        base = init(smem, FULL, EMPTY)
        tid = cuda.threadIdx.x
        nk = d // (BW * KB)
        pw = 1 << (31 - cuda.clz(int32(nk)))  # the largest power of two <= nk
        m, kb, n, w0, steps = walk_of_block(sk, nk)
        if tid == 0:
            map_g = global_address(maps, 0)
            map_u = global_address(maps, 16)
            s = 0
            ph = 0
            for q in range(steps):
                m, kb = step(q, m, kb, n, w0)
                mbar_wait(base + EMPTY + 8 * s, ph ^ 1)
                full = base + FULL + 8 * s
                mbar_arrive_expect_tx(full, SB)
                st = base + RING + s * SB
                kr = rotate_k(kb, m, ROT, pw, nk) if ROT else kb
                for kk in range(KB):
                    kc = (kr * KB + kk) * BW
                    tma_load_2d(st + kk * WB, map_g, kc, m * BH, full)
                    tma_load_2d(st + (KB + kk) * WB, map_u, kc, m * BH, full)
                m, kb = advance(m, kb, nk)
                s, ph = ring_next(s, ph, ST)
        elif tid == 32:
            consume(base, FULL, EMPTY, steps)

    return cuda.jit(k)


@functools.lru_cache(maxsize=None)
def cpasync_kernel(stages: int, kblocks: int, warps: int = 1):
    """``k(wg, wu, sk, d, h)``: the TMA probe's walk and ring (64 x 64 boxes, ``kblocks`` of
    each weight a stage, :func:`tma_kernel`'s ``sk``), each box copied by ``warps`` warps'
    16-byte ``cp.async`` into the layout TMA's 128B swizzle leaves
    (:func:`book.kernels.hopper.make_cp_async_box`, the weights ``evict_first``): the
    load path every thread has, bytes in flight held by the ring, not by registers. Launch
    one block of ``32 (warps + 1)`` threads an SM with ``ring_layout(stages, 32768
    kblocks)["shared"]`` bytes."""
    from ..instructions.hopper import (cp_async_arrive_noinc, global_address, l2_evict_first,
                         make_cp_async_box, mbar_wait, ring_next)

    ST, KB, P = stages, kblocks, 32 * warps
    WB = 64 * 64 * 2
    SB = 2 * KB * WB
    FULL, EMPTY, RING, init, consume = _ring(ST, SB, P)
    box = make_cp_async_box(P)

    def k(wg, wu, sk, d, h):
        smem = cuda.shared.array(0, uint8)
        base = init(smem, FULL, EMPTY)
        tid = cuda.threadIdx.x
        nk = d // (64 * KB)
        m, kb, n, w0, steps = walk_of_block(sk, nk)
        if tid < P:
            ga = global_address(wg, 0)
            ua = global_address(wu, 0)
            once = l2_evict_first()
            s = 0
            ph = 0
            for q in range(steps):
                m, kb = step(q, m, kb, n, w0)
                mbar_wait(base + EMPTY + 8 * s, ph ^ 1)
                st = base + RING + s * SB
                for kk in range(KB):
                    kc = (kb * KB + kk) * 64
                    box(st + kk * WB, ga, d, m * 64, kc, h, d, tid, once)
                    box(st + (KB + kk) * WB, ua, d, m * 64, kc, h, d, tid, once)
                cp_async_arrive_noinc(base + FULL + 8 * s)
                m, kb = advance(m, kb, nk)
                s, ph = ring_next(s, ph, ST)
        elif tid == P:
            consume(base, FULL, EMPTY, steps)

    return cuda.jit(k)


@functools.lru_cache(maxsize=None)
def bulk_kernel(stages: int, chunk: int):
    """``k(wg, wu, spans)``: block b reads bytes [spans[b], spans[b + 1]) of each weight
    (:func:`bulk_spans`) in copies of ``chunk`` bytes (a multiple of 16; the last of a span
    shorter). Launch one block of :data:`THREADS` an SM with ``ring_layout(stages, 2
    chunk)["shared"]`` bytes."""
    if chunk % 16:
        raise ValueError(f"chunk must be a multiple of 16 bytes, got {chunk}")
    from ..instructions.hopper import (bulk_load, global_address, mbar_arrive_expect_tx, mbar_wait,
                         ring_next)

    ST, C = stages, chunk
    SB = 2 * C
    FULL, EMPTY, RING, init, consume = _ring(ST, SB)

    def k(wg, wu, spans):
        smem = cuda.shared.array(0, uint8)
        base = init(smem, FULL, EMPTY)
        tid = cuda.threadIdx.x
        b = cuda.blockIdx.x
        lo = spans[b]
        hi = spans[b + 1]
        n = (hi - lo + (C - 1)) // C  # no wgmma here: a 64-bit division costs nothing that matters
        if tid == 0:
            ga = global_address(wg, 0)
            ua = global_address(wu, 0)
            s = 0
            ph = 0
            off = lo
            for q in range(n):
                size = min(C, hi - off)
                mbar_wait(base + EMPTY + 8 * s, ph ^ 1)
                full = base + FULL + 8 * s
                mbar_arrive_expect_tx(full, 2 * size)
                st = base + RING + s * SB
                bulk_load(st, ga + uint64(off), size, full)
                bulk_load(st + C, ua + uint64(off), size, full)
                off += C
                s, ph = ring_next(s, ph, ST)
        elif tid == 32:
            consume(base, FULL, EMPTY, n)

    return cuda.jit(k)
