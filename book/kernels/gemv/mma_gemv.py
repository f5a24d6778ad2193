"""The tensor-core decode GEMV (:mod:`book.kernels.decode_mlp`'s path from a few tokens to a
few hundred): ``mma.sync`` (sm_80 in bf16 and fp16, and fp16 on sm_75 as ``m16n8k8``) with the
roles swapped: the weights are the A operand (16 rows of the M side) and the tokens the B
operand (8 columns of N), so a token count of 1 wastes N, never the weights.

No shared memory and no ``ldmatrix``: since a dot product does not care in which order it
visits k, each lane loads 16 bytes (8 consecutive k) of weight row ``g`` and of row ``g + 8``
(``load_words4``, the halves as they are) and 16 bytes of token ``g``, and feeds them to two
``mma`` as if they were the k-columns the fragment table names (``2t, 2t+1, 2t+8, 2t+9`` of a
16-deep step): the same permutation of k on both operands leaves the product unchanged. With
``stages`` >= 2 (:class:`MmaGemvTile`) the weights go through shared memory instead: each warp
keeps a ring of that many stages (one 32-deep step of its rows each, ``2048 mt`` bytes) that
``cp.async`` fills without registers (sm_80+); a lane copies exactly the 16-byte pieces it later
reads back (``ld.shared.v4``) for its own fragment, so it waits for its own copies
(``cp.async.wait_group``) and no barrier is needed. More weight bytes in flight per warp
without the registers an ``unroll`` holds.

k is split over the warps of a block and, when the output tiles alone are too few blocks to
fill the GPU, over several blocks: those meet in the kernel (:mod:`book.kernels.splitk`), so
the epilogue stays fused. Its tile: :class:`MmaGemvTile` (the protocol,
:mod:`book.kernels.tile`); the default for T tokens: :func:`gemv_tile`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from numba import cuda, float32, int64, uint16, uint32

from ..elementwise.fused import silu_mul
from ..host.launch import jit_bounds
from ..gemms.splitk import fragment_meeting
from ..instructions.tensorcore import (SIMULATED, cp_async16_zfill_at, cp_async_commit, cp_async_wait,
                         mma_bf16_16816, mma_f16_1688, mma_f16_16816, shared_address)
from ..gemms.tile import TileShape
from ..instructions.wide import load_f32, load_words4, store_f32

__all__ = ["MmaGemvTile", "MAX_STAGES", "gemv_tile", "make_mma_gemv"]

#: the deepest cp.async ring (``MmaGemvTile.stages``)
MAX_STAGES = 8


@dataclass(frozen=True)
class MmaGemvTile(TileShape):
    """The tensor-core GEMV's compile-time shape: ``nt`` n-tiles of 8 tokens, ``mt``
    m-tiles of 16 weight rows (of both weights), ``warps`` sharing the k-range, ``unroll``
    32-deep steps a warp loads before it multiplies (its weight bytes in flight: a warp
    waits on one memory latency per step group, so more steps a group, fewer waits).

    ``stages``: 0, the weights go straight to registers (``unroll`` steps at a time); 2 or
    more, they go through a ring of that many shared-memory stages per warp with
    ``cp.async`` (sm_80+), so ``stages`` steps are in flight without holding registers
    (a stage: ``mt`` x 16 rows x 2 weights x 64 bytes, ``stage_bytes``). ``min_blocks``, if
    not 0: the blocks an SM must hold at once (``launch_bounds``, a register cap)."""

    nt: int = 1
    mt: int = 2
    warps: int = 4
    unroll: int = 1
    stages: int = 0
    min_blocks: int = 0

    def problems(self) -> list[str]:
        p = []
        if self.nt < 1 or self.mt < 1 or self.warps < 1 or self.unroll < 1:
            p.append("nt, mt, warps and unroll must be at least 1")
        if self.stages not in (0,) + tuple(range(2, MAX_STAGES + 1)):
            p.append(f"stages = {self.stages}: 0 (weights straight to registers) or 2 to "
                     f"{MAX_STAGES} (a cp.async ring; one stage would wait for each copy as it "
                     "is issued)")
        if self.stages and self.unroll != 1:
            p.append(f"unroll = {self.unroll} with stages = {self.stages}: the ring keeps the "
                     "steps in flight in shared memory, so a staged tile takes unroll 1")
        if self.weight_words > 64:
            p.append(f"unroll x mt x 16 = {self.weight_words} weight registers per lane: at "
                     "most 64")
        if self.values > 64:
            p.append(f"mt x 2 x nt x 4 = {self.values} accumulators per lane: at most 64 "
                     "(registers, and the warps' shared-memory reduction)")
        if self.shared_bytes > 48 * 1024:
            ring = (f" + the cp.async ring's {self.ring_bytes} (warps x stages x "
                    f"{self.stage_bytes})" if self.stages else "")
            p.append(f"{self.shared_bytes} bytes of shared memory: the warps' reduction's "
                     f"{self.reduction_bytes} (warps x accumulators x 32 lanes x 4){ring} + 8 "
                     "(the split-K flag): at most 48 KiB of static shared memory (ptxas "
                     "refuses more); fewer warps, stages or accumulators")
        return p

    @property
    def values(self):  # accumulators a lane holds
        return self.mt * 2 * self.nt * 4

    @property
    def weight_words(self):  # 32-bit registers of weights a lane holds between its loads and mmas
        return self.unroll * self.mt * 16

    @property
    def reduction_bytes(self):  # the reduction's array: every warp's accumulators, lane by lane
        return self.warps * self.values * 32 * 4

    @property
    def stage_bytes(self):  # one 32-deep step of a warp's rows: 16 mt rows x (gate, up) x 64 B
        return self.mt * 16 * 2 * 64

    @property
    def ring_bytes(self):  # every warp's ring of stages (0 on the register path)
        return self.warps * self.stages * self.stage_bytes

    @property
    def shared_bytes(self):  # static shared memory a block declares (8: the split-K flag)
        return self.reduction_bytes + self.ring_bytes + 8

    @property
    def rows(self):
        return 16 * self.mt

    @property
    def tokens(self):
        return 8 * self.nt


def gemv_tile(T: int) -> MmaGemvTile:
    """The tensor-core GEMV for T tokens: up to 64 tokens in one block (beyond, token
    groups), two m-tiles while the accumulators allow."""
    nt = 1 << (min(8, max(1, -(-T // 8))) - 1).bit_length()  # a power of two
    # the H100 tune: one m-tile and 4 warps, but two m-tiles of 2 warps at 4 n-tiles (T = 32)
    return MmaGemvTile(nt=nt, mt=2 if nt == 4 else 1, warps=2 if nt == 4 else 4).validate()


@functools.lru_cache(maxsize=None)
def make_mma_gemv(tile: MmaGemvTile, bias: bool, kind: str = "bf16"):
    """``k(x, wg, wu, bg, bu, out, part, count, T, d, h, S)``, flat arrays; one block per
    (16 ``mt`` rows, token group of 8 ``nt``, split) (module doc). ``kind`` as
    :func:`book.kernels.mma_gemm.kind_for` names it."""
    tile.validate()
    NT, MT, WK, U = tile.nt, tile.mt, tile.warps, tile.unroll
    ROWS, TOK = tile.rows, tile.tokens
    V = tile.values
    K8 = kind == "f16_sm75"  # m16n8k8: four per 32-deep step
    MMA = mma_bf16_16816 if kind == "bf16" else mma_f16_16816
    BIAS = bias
    THREADS = 32 * WK
    ZERO = uint32(0)
    # the cp.async ring (tile.stages >= 2): per warp ST stages of one 32-deep step each; in a
    # stage, chunk c = (m-tile i, weight w, row half hh) is 512 bytes, lane l's 16 at 16 l
    ST = tile.stages
    if ST and K8:
        raise ValueError(f"{tile}: stages = {ST} needs cp.async (sm_80+); the T4's path "
                         "(f16_sm75, sm_75) has none: use stages = 0 there")
    WAIT = max(ST - 1, 0)  # groups left in flight when the oldest step must have landed
    STAGE_B = tile.stage_bytes
    RING_HALVES = max(8, tile.ring_bytes // 2)  # (a placeholder on the register path)
    ALIGN = None if SIMULATED else 16
    meet = fragment_meeting(WK, V, THREADS)  # the warps' shares, then split-K's blocks

    @cuda.jit(device=True, inline="always")
    def ring_load(wg, wu, wrow, dst, kg, t4, d):
        # step kg of this lane's rows into the stage at shared address dst (this lane's slot
        # of chunk 0): 4 mt copies of 16 bytes, no registers; k past d lands as zeros
        k = (kg << 5) + (t4 << 3)
        ok = k < d
        for i in range(MT):
            for hh in range(2):
                cp_async16_zfill_at(dst + ((i * 2) * 2 + hh) * 512, wg, wrow[i, hh] + k, ok)
                cp_async16_zfill_at(dst + ((i * 2 + 1) * 2 + hh) * 512, wu, wrow[i, hh] + k, ok)

    @cuda.jit(device=True, inline="always")
    def mma_step(acc, wa, u, xb, n):
        # the mmas of one 32-deep step for n-tile n: every m-tile's gate and up rows (their
        # words in wa[u], the step's slot) times token g's words xb, into the accumulators
        for i in range(MT):
            for w in range(2):
                c = (acc[i, w, n, 0], acc[i, w, n, 1], acc[i, w, n, 2], acc[i, w, n, 3])
                if K8:  # word q of rows g and g+8, word q of token g
                    for q in range(4):
                        c = mma_f16_1688((wa[u, i, w, 0, q], wa[u, i, w, 1, q]), (xb[q],), c)
                else:  # words 0, 1 as k-columns (2t, 2t+1), (2t+8, 2t+9); then 2, 3
                    c = MMA((wa[u, i, w, 0, 0], wa[u, i, w, 1, 0], wa[u, i, w, 0, 1],
                             wa[u, i, w, 1, 1]), (xb[0], xb[1]), c)
                    c = MMA((wa[u, i, w, 0, 2], wa[u, i, w, 1, 2], wa[u, i, w, 0, 3],
                             wa[u, i, w, 1, 3]), (xb[2], xb[3]), c)
                for v in range(4):
                    acc[i, w, n, v] = c[v]

    def mma_gemv(x, wg, wu, bg, bu, out, part, count, T, d, h, S):
        tid = cuda.threadIdx.x
        lane = tid & 31
        warp = tid >> 5
        g = lane >> 2
        t4 = lane & 3
        tile_ = cuda.blockIdx.x // S
        s = cuda.blockIdx.x - tile_ * S
        ntg = (T + TOK - 1) // TOK  # token groups; the tiles of one row group are neighbours
        rg = tile_ // ntg
        j0 = rg * ROWS
        n0 = (tile_ - rg * ntg) * TOK
        nks = (d + 31) >> 5  # 32-deep steps (the last may be partial)
        per = (nks + S - 1) // S
        ks0 = s * per
        ks1 = min(nks, ks0 + per)

        acc = cuda.local.array((MT, 2, NT, 4), float32)
        for i in range(MT):
            for w in range(2):
                for n in range(NT):
                    for v in range(4):
                        acc[i, w, n, v] = float32(0.0)
        # the rows and tokens this lane reads, once (clamped into the arrays: a row past h
        # or a token past T computes an accumulator that is never stored)
        wrow = cuda.local.array((MT, 2), int64)
        for i in range(MT):
            for hh in range(2):
                wrow[i, hh] = min(j0 + 16 * i + g + 8 * hh, h - 1) * d
        xrow = cuda.local.array(NT, int64)
        for n in range(NT):
            xrow[n] = min(n0 + 8 * n + g, T - 1) * d
        # [step of the group][m-tile][gate, up][row g, g+8][word]
        wa = cuda.local.array((U, MT, 2, 2, 4), uint32)
        xb = cuda.local.array(4, uint32)

        if ST:
            # The ring: this warp's steps are ks0 + warp + WK j (interleaved as below). Each
            # lane copies the 16-byte pieces it will itself feed to the mma (rows g, g+8 of
            # every m-tile, its 8 k), so it waits only for its own copies: no barrier. The
            # copies of step j + ST - 1 are issued before the mmas of step j, ST steps in
            # flight; the slot they fill held step j - 1, already in this lane's registers.
            ring = cuda.shared.array(RING_HALVES, uint16, alignment=ALIGN)
            mine = warp * (ST * STAGE_B) + (lane << 4)  # byte offset of my slot of chunk 0
            sbase = shared_address(ring, 0) + mine
            nmy = max(0, (ks1 - ks0 - warp + WK - 1) // WK)  # steps of this warp
            for q in range(WAIT):  # prologue: the first ST - 1 steps in flight
                if q < nmy:
                    ring_load(wg, wu, wrow, sbase + q * STAGE_B, ks0 + warp + q * WK, t4, d)
                cp_async_commit()
            rd = 0  # the slot read in this step
            wt = WAIT  # the slot refilled in this step
            # [one slot][m-tile][gate, up][row g, g+8][word]: the register path's layout
            fa = cuda.local.array((1, MT, 2, 2, 4), uint32)
            xr = cuda.local.array((NT, 4), uint32)  # [n-tile][word] of token g
            for j in range(nmy):
                if j + WAIT < nmy:
                    ring_load(wg, wu, wrow, sbase + wt * STAGE_B, ks0 + warp + (j + WAIT) * WK,
                              t4, d)
                cp_async_commit()  # (an empty group near the end keeps the count uniform)
                k = ((ks0 + warp + j * WK) << 5) + (t4 << 3)
                ok = k < d  # a partial last step: zeros in the stage, zeros for x
                kk = k if ok else 0
                for n in range(NT):  # the tokens before the wait, which no load may cross
                    xv = load_words4(x, xrow[n] + kk)
                    for q in range(4):
                        xr[n, q] = xv[q] if ok else ZERO
                cp_async_wait(WAIT)  # my copies of step j have landed
                e0 = ((warp * ST + rd) * STAGE_B + (lane << 4)) >> 1  # my slot, in halves
                for i in range(MT):
                    for w in range(2):
                        for hh in range(2):
                            a = load_words4(ring, e0 + ((i * 2 + w) * 2 + hh) * 256)
                            for q in range(4):
                                fa[0, i, w, hh, q] = a[q]
                for n in range(NT):
                    for q in range(4):
                        xb[q] = xr[n, q]
                    mma_step(acc, fa, 0, xb, n)
                rd = rd + 1 if rd + 1 < ST else 0
                wt = wt + 1 if wt + 1 < ST else 0
        else:
            # a warp takes U neighbouring 32-deep steps at a time (its group), the warps' groups
            # interleaved; every weight load of the group is issued before the first mma
            for kg in range(ks0 + warp * U, ks1, WK * U):
                for u in range(U):  # the weights first: 4 U mt 16-byte loads in flight
                    k = ((kg + u) << 5) + (t4 << 3)  # this lane's 8 consecutive k
                    # past the group's share (ks1) or past d (a d that is no multiple of 32): zeros
                    ok = kg + u < ks1 and k < d
                    kk = k if ok else 0
                    for i in range(MT):
                        for hh in range(2):
                            a = load_words4(wg, wrow[i, hh] + kk)
                            b = load_words4(wu, wrow[i, hh] + kk)
                            for q in range(4):
                                wa[u, i, 0, hh, q] = a[q] if ok else ZERO
                                wa[u, i, 1, hh, q] = b[q] if ok else ZERO
                for u in range(U):
                    k = ((kg + u) << 5) + (t4 << 3)
                    ok = kg + u < ks1 and k < d
                    kk = k if ok else 0
                    for n in range(NT):
                        xv = load_words4(x, xrow[n] + kk)
                        for q in range(4):
                            xb[q] = xv[q] if ok else ZERO
                        mma_step(acc, wa, u, xb, n)

        # The warps' k-shares meet in shared memory: each warp stores its accumulators
        # (fragment order: value v of lane l at [v, l]), then every thread adds up a share
        # of the elements over the warps. Only fully unrolled loops touch acc (a loop that
        # indexes it at run time would put it in local memory): everything after this
        # reads shared memory.
        red = cuda.shared.array((WK, V, 32), float32)
        flag = cuda.shared.array(1, int64)
        for i in range(MT):
            for w in range(2):
                for n in range(NT):
                    for v in range(4):
                        red[warp, ((i * 2 + w) * NT + n) * 4 + v, lane] = acc[i, w, n, v]
        if not meet(red, part, count, flag, tile_, s, S):
            return
        cuda.syncthreads()
        fin = red[0]  # the tile's sums (fragment order)
        # The epilogue, by every thread: element (token tk, row rr) of the tile, rows
        # fastest, so neighbouring threads store neighbouring outputs. Lane g*4 + t holds
        # rows g, g+8 and tokens 2t, 2t+1 of each 16 x 8 accumulator tile.
        for e in range(tid, TOK * ROWS, THREADS):
            tk = e // ROWS
            rr = e - tk * ROWS
            j = j0 + rr
            tok = n0 + tk
            if j < h and tok < T:
                i = rr >> 4
                n = tk >> 3
                ln = (rr & 7) * 4 + ((tk & 7) >> 1)
                c = ((rr >> 3) & 1) * 2 + (tk & 1)
                gate = fin[((i * 2) * NT + n) * 4 + c, ln]
                up = fin[((i * 2 + 1) * NT + n) * 4 + c, ln]
                if BIAS:
                    gate += load_f32(bg, j)
                    up += load_f32(bu, j)
                store_f32(out, tok * h + j, silu_mul(gate, up))

    return cuda.jit(fastmath=True, **jit_bounds(THREADS, tile.min_blocks))(mma_gemv)
