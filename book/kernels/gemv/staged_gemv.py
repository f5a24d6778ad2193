"""The decode GEMV on tensor cores with its weights staged through shared memory.

The same product as :func:`book.kernels.decode_mlp.swiglu_gemv_tc` (``out = silu(x @ wg.T +
bg) * (x @ wu.T + bu)`` for a few tokens, weights on the M side of ``mma.sync``), read from
HBM the way the fastest CUDA-core GEMV reads it. A fragment of ``mma`` wants eight rows at
the same k in each load instruction (lanes ``g = 0..7`` hold rows ``g`` and ``g + 8``), so
the register path's warps read 64 bytes of each of 8 rows per instruction, and a block of
them reads 16 rows x 2 weights a few hundred bytes at a time. The T = 1 CUDA-core GEMV,
whose warps read 512 contiguous bytes of one row per instruction, reached 3.03 TB/s on the
H100 where that pattern stayed at 2.6-2.7 whatever its warps, unroll or ``cp.async`` ring
(records/bench/decode_tune_*_h100.json). Here the two meet in shared memory:

1. **the block copies a chunk** (``chunk`` halves of k) of each of its rows: thread ``tid``
   loads the 16-byte pieces ``tid, tid + threads, ...`` of the chunk, row by row, so a warp
   reads 32 consecutive pieces (512 bytes) of one row per instruction; the pieces of the
   next chunk are loaded into registers before the mmas of this one (register prefetch), so
   the loads are in flight while the tensor cores work;
2. **the warps read fragments from it**: an m-tile of the mma is 8 rows of ``wg`` (M rows
   0-7) and the same 8 rows of ``wu`` (M rows 8-15), so each lane's accumulators hold the
   gate and the up of the same output row and token; a 32-deep step is one 16-byte
   ``ld.shared`` per row half per lane (the k-permutation of the register path: the lane's
   8 consecutive k, the same on x);
3. **the warps' sums meet** in shared memory, split-K blocks through
   :mod:`book.kernels.splitk`, and the block stores ``silu(gate + bg) * (up + bu)``.

A row of the stage is ``chunk + 32`` halves long: 64 bytes past a multiple of 128, so the
8 lanes of a quarter-warp (rows ``g``, ``g + 1`` at four 16-byte columns) hit 8 different
16-byte bank groups (:func:`row_stride`).

Shapes as the other GEMVs: any T and h, d a multiple of 8; k past d is staged as zeros.

What it showed on the H100 (records/bench/README.md: the tune, and Nsight Compute's
counters): whole-row chunks keep far fewer warps waiting on memory than the register
path's 64-byte pieces, yet the kernel reads the weights no faster than the register path
at T = 1 and 4 and slower at T = 16, and never as fast as the T = 1 CUDA-core GEMV; deeper
rings (more bytes in flight) made it slower. So it is a control, reached only through
``prepare("staged", ...)``, not a path the dispatcher picks.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from numba import cuda, float32, int64, uint16, uint32

from ..elementwise.fused import silu_mul
from ..host.launch import MAX_SHARED, jit_bounds
from ..gemms.splitk import fragment_meeting
from ..gemms.tile import TileShape
from ..instructions.tensorcore import (SIMULATED, cp_async16_zfill_at, cp_async_commit, cp_async_wait,
                         mma_bf16_16816, mma_f16_1688, mma_f16_16816, shared_address)
from ..instructions.wide import load_f32, load_words4, store_f32, store_words4

__all__ = ["StagedTile", "gemv_tile", "make_staged_gemv", "row_stride", "MAX_SHARED"]



def row_stride(chunk: int) -> int:
    """Halves from one staged row to the next: ``chunk`` plus 32 (64 bytes), so a row
    starts 64 bytes past a multiple of 128 from its neighbour and a quarter-warp's 16-byte
    fragment reads (rows g, g+1; four columns) fall in 8 different bank groups."""
    return chunk + 32


@dataclass(frozen=True)
class StagedTile(TileShape):
    """The staged GEMV's compile-time shape: ``nt`` n-tiles of 8 tokens, ``mp`` m-tiles
    (8 output rows each: 8 rows of ``wg`` and the same 8 of ``wu``), ``warps`` per block,
    ``chunk`` halves of k per row staged at a time; ``min_blocks``, if not 0, blocks an SM
    must hold at once (the register cap ptxas is given: ``launch_bounds``); ``stages``: 0,
    the next chunk goes through registers (loaded before this chunk's mmas, stored after
    them); 2 or more, a ring of that many chunks in shared memory that ``cp.async`` fills
    (sm_80+), ``stages - 1`` chunks in flight without registers."""

    nt: int = 1
    mp: int = 1
    warps: int = 8
    chunk: int = 512
    min_blocks: int = 0
    stages: int = 0

    def problems(self) -> list[str]:
        p = []
        if min(self.nt, self.mp, self.warps) < 1:
            p.append("nt, mp and warps must be at least 1")
        if self.chunk < 32 or self.chunk % 32:
            p.append(f"chunk = {self.chunk}: a positive multiple of 32 (whole 32-deep steps)")
        elif (self.pieces % self.threads) or self.pieces < self.threads:
            p.append(f"a stage's {self.pieces} 16-byte pieces (16 mp rows x chunk / 8) must be "
                     f"a whole number per thread ({self.threads} threads): a larger chunk or "
                     "fewer warps")
        if self.stages not in (0,) + tuple(range(2, 9)):
            p.append(f"stages = {self.stages}: 0 (registers) or 2 to 8 (a cp.async ring)")
        if self.per_thread > 16:
            p.append(f"{self.per_thread} pieces per thread: at most 16 (64 registers of "
                     "prefetch)")
        if self.values > 64:
            p.append(f"mp x nt x 4 = {self.values} accumulators per lane: at most 64")
        if self.static_bytes > 48 * 1024:
            p.append(f"{self.static_bytes} bytes of static shared memory (the reduction's "
                     f"{self.reduction_bytes}, the register path's stage): at most 48 KiB")
        if self.shared_bytes > MAX_SHARED:
            p.append(f"{self.shared_bytes} bytes of shared memory (the ring's "
                     f"{self.ring_bytes}): at most {MAX_SHARED} a block (sm_90's 227 KiB; "
                     "sm_80 takes 163 KiB, sm_86 99 KiB)")
        return p

    @property
    def threads(self):
        return 32 * self.warps

    @property
    def rows(self):  # output rows per block
        return 8 * self.mp

    @property
    def tokens(self):
        return 8 * self.nt

    @property
    def pieces(self):  # 16-byte pieces of one stage: 16 mp staged rows x chunk / 8
        return 16 * self.mp * (self.chunk // 8)

    @property
    def per_thread(self):
        return self.pieces // self.threads

    @property
    def values(self):  # accumulators a lane holds
        return self.mp * self.nt * 4

    @property
    def slot_bytes(self):  # one staged chunk: 16 mp rows of row_stride(chunk) halves
        return 16 * self.mp * row_stride(self.chunk) * 2

    @property
    def ring_bytes(self):  # the staged chunks: the cp.async ring, or the register path's one
        return self.slot_bytes * max(self.stages, 1)

    @property
    def dynamic_bytes(self):  # the ring when static shared memory cannot hold it (> 48 KiB)
        fixed = self.reduction_bytes + 8
        return self.ring_bytes if fixed + self.ring_bytes > 48 * 1024 else 0

    @property
    def static_bytes(self):  # static: the reduction, the flag and a ring that fits
        return self.reduction_bytes + 8 + (0 if self.dynamic_bytes else self.ring_bytes)

    @property
    def reduction_bytes(self):
        return self.warps * self.values * 32 * 4

    @property
    def shared_bytes(self):  # all of a block's shared memory
        return self.static_bytes + self.dynamic_bytes


def gemv_tile(T: int) -> StagedTile:
    """The staged GEMV for T tokens: up to 64 tokens a block (n-tiles a power of two)."""
    nt = 1
    while nt < min(8, max(1, -(-T // 8))):
        nt *= 2
    return StagedTile(nt=nt).validate()


@functools.lru_cache(maxsize=None)
def make_staged_gemv(tile: StagedTile, bias: bool, kind: str = "bf16"):
    """``k(x, wg, wu, bg, bu, out, part, count, T, d, h, S)``, flat arrays (the decode GEMVs'
    signature, :func:`book.kernels.decode_mlp.prepare`); one block per (8 ``mp`` rows, token
    group of 8 ``nt``, split). ``kind`` as :func:`book.kernels.mma_gemm.kind_for` names it."""
    tile.validate()
    NT, MP, WK, CH, ST = tile.nt, tile.mp, tile.warps, tile.chunk, tile.stages
    ROWS, TOK, V = tile.rows, tile.tokens, tile.values
    THREADS = tile.threads
    P = tile.per_thread
    CP = CH // 8  # pieces per staged row
    RS = row_stride(CH)  # halves per staged row
    STEPS = CH // 32  # 32-deep steps per stage, shared by the warps
    SLOT = 16 * MP * RS  # halves per stage
    K8 = kind == "f16_sm75"
    if ST and K8:
        raise ValueError(f"{tile}: stages = {ST} needs cp.async (sm_80+); the T4's path "
                         "(f16_sm75, sm_75) has none: use stages = 0 there")
    WAIT = max(ST - 1, 0)
    DYN = tile.dynamic_bytes > 0
    RING = SLOT * max(ST, 1)  # halves of a static ring (a constant: a shared array's shape)
    MMA = mma_bf16_16816 if kind == "bf16" else mma_f16_16816
    BIAS = bias
    ZERO = uint32(0)
    ALIGN = None if SIMULATED else 16
    meet = fragment_meeting(WK, V, THREADS)

    @cuda.jit(device=True, inline="always")
    def piece(tid, p, j0, kc, d, h):
        # piece e = tid + THREADS p of the chunk at k = kc: staged row r = e // CP, column
        # e % CP; staged row r is m-tile r // 16, a row of wg for r % 16 < 8 and of wu for the
        # rest, output row j0 + 8 (r // 16) + r % 8 (clamped into the weight: a row past h is
        # never stored). Returns (index in the weight, wu?, k < d, halves into the stage).
        e = tid + THREADS * p
        r = e // CP
        c = e - r * CP
        k = kc + c * 8
        ok = k < d
        row = min(j0 + 8 * (r >> 4) + (r & 7), h - 1) * d + (k if ok else 0)
        return row, (r & 8) != 0, ok, r * RS + c * 8

    @cuda.jit(device=True, inline="always")
    def fetch(wg, wu, pre, tid, j0, kc, d, h):
        # register path: this thread's pieces of the chunk at kc into registers (k past d: 0)
        for p in range(P):
            row, isu, ok, _ = piece(tid, p, j0, kc, d, h)
            if isu:
                v4 = load_words4(wu, row)
            else:
                v4 = load_words4(wg, row)
            for w in range(4):
                pre[p, w] = v4[w] if ok else ZERO

    @cuda.jit(device=True, inline="always")
    def issue(wg, wu, base, tid, j0, kc, d, h):
        # ring: this thread's pieces of the chunk at kc straight into the stage at shared
        # address base, no registers (k past d lands as zeros)
        for p in range(P):
            row, isu, ok, dst = piece(tid, p, j0, kc, d, h)
            if isu:
                cp_async16_zfill_at(base + dst * 2, wu, row, ok)
            else:
                cp_async16_zfill_at(base + dst * 2, wg, row, ok)

    def staged(x, wg, wu, bg, bu, out, part, count, T, d, h, S):
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        t4 = lane & 3
        tile_ = cuda.blockIdx.x // S
        s = cuda.blockIdx.x - tile_ * S
        ntg = (T + TOK - 1) // TOK
        rg = tile_ // ntg
        j0 = rg * ROWS
        n0 = (tile_ - rg * ntg) * TOK
        nch = (d + CH - 1) // CH  # chunks of the k-range (the last may be partial)
        per = (nch + S - 1) // S
        c0 = s * per
        c1 = min(nch, c0 + per)

        if DYN:  # a ring beyond 48 KiB: dynamic shared memory (the launch's ``shared``)
            stage = cuda.shared.array(0, uint16, alignment=ALIGN)
        else:
            stage = cuda.shared.array(RING, uint16, alignment=ALIGN)
        pre = cuda.local.array((P, 4), uint32)
        acc = cuda.local.array((MP, NT, 4), float32)
        for i in range(MP):
            for n in range(NT):
                for v in range(4):
                    acc[i, n, v] = float32(0.0)
        xrow = cuda.local.array(NT, int64)
        for n in range(NT):
            xrow[n] = min(n0 + 8 * n + g, T - 1) * d
        xb = cuda.local.array(4, uint32)

        if ST:  # prologue: the first ST - 1 chunks in flight
            base = shared_address(stage, 0)
            for q in range(WAIT):
                if c0 + q < c1:
                    issue(wg, wu, base + q * (SLOT * 2), tid, j0, (c0 + q) * CH, d, h)
                cp_async_commit()
        elif c0 < c1:  # prologue: the first chunk's pieces into registers
            fetch(wg, wu, pre, tid, j0, c0 * CH, d, h)
        for ch in range(c0, c1):
            cuda.syncthreads()  # every warp is done reading the stage refilled next
            if ST:
                nxt = ch + WAIT
                if nxt < c1:
                    issue(wg, wu, base + ((nxt - c0) % ST) * (SLOT * 2), tid, j0, nxt * CH, d, h)
                cp_async_commit()  # (an empty group near the end keeps the count uniform)
                cp_async_wait(WAIT)  # this thread's copies of chunk ch have landed
                at = ((ch - c0) % ST) * SLOT
            else:
                for p in range(P):
                    _, _, _, dst = piece(tid, p, j0, 0, d, h)
                    store_words4(stage, dst, (pre[p, 0], pre[p, 1], pre[p, 2], pre[p, 3]))
                at = 0
            cuda.syncthreads()  # ... and every thread's
            if not ST and ch + 1 < c1:  # the next chunk's loads in flight during the mmas
                fetch(wg, wu, pre, tid, j0, (ch + 1) * CH, d, h)
            for st in range(warp, STEPS, WK):
                kl = st * 32 + t4 * 8  # this lane's 8 consecutive k in the chunk
                k = ch * CH + kl
                ok = k < d
                kk = k if ok else 0
                for i in range(MP):
                    gw = load_words4(stage, at + (i * 16 + g) * RS + kl)
                    uw = load_words4(stage, at + (i * 16 + 8 + g) * RS + kl)
                    for n in range(NT):
                        xv = load_words4(x, xrow[n] + kk)
                        for w in range(4):
                            xb[w] = xv[w] if ok else ZERO
                        c = (acc[i, n, 0], acc[i, n, 1], acc[i, n, 2], acc[i, n, 3])
                        if K8:
                            for w in range(4):
                                c = mma_f16_1688((gw[w], uw[w]), (xb[w],), c)
                        else:
                            c = MMA((gw[0], uw[0], gw[1], uw[1]), (xb[0], xb[1]), c)
                            c = MMA((gw[2], uw[2], gw[3], uw[3]), (xb[2], xb[3]), c)
                        for v in range(4):
                            acc[i, n, v] = c[v]

        # the warps' sums (fragment order: value v of lane l at [warp, v, l])
        red = cuda.shared.array((WK, V, 32), float32)
        flag = cuda.shared.array(1, int64)
        for i in range(MP):
            for n in range(NT):
                for v in range(4):
                    red[warp, (i * NT + n) * 4 + v, lane] = acc[i, n, v]
        if not meet(red, part, count, flag, tile_, s, S):
            return
        cuda.syncthreads()
        fin = red[0]
        # the epilogue: lane g*4 + t of m-tile i, n-tile n holds gate (values 0, 1) and up
        # (2, 3) of output row j0 + 8 i + g, tokens 8 n + 2 t and 8 n + 2 t + 1
        for e in range(tid, MP * NT * 2 * 32, THREADS):
            ln = e & 31
            b = (e >> 5) & 1
            inn = e >> 6
            i = inn // NT
            n = inn - i * NT
            j = j0 + 8 * i + (ln >> 2)
            tok = n0 + 8 * n + 2 * (ln & 3) + b
            if j < h and tok < T:
                gate = fin[inn * 4 + b, ln]
                up = fin[inn * 4 + 2 + b, ln]
                if BIAS:
                    gate += load_f32(bg, j)
                    up += load_f32(bu, j)
                store_f32(out, tok * h + j, silu_mul(gate, up))

    return cuda.jit(fastmath=True, **jit_bounds(THREADS, tile.min_blocks))(staged)
