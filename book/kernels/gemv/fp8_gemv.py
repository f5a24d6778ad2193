"""The FP8 MLP-up at decode on Hopper: chapter 9's ``wgmma`` GEMV with one byte per value.

``out = silu(sx sg (xq @ wgq.T)) * (sx su (xq @ wuq.T))`` for a few tokens (T at most
:data:`MAX_T`): the inputs of :func:`book.kernels.fp8_gemm.swiglu_fp8` (x e4m3 [T, d] with a
scale per token, the nn.Linear weights e4m3 [h, d] with a scale per output channel), the
output bfloat16 or e4m3 with a static scale. At decode the call *is* the weights' read (117 MB
at d = 4096, h = 14336, half of bf16's), so the kernel's one job is chapter 9's: keep HBM busy
while the weights stream through once.

It is :mod:`book.kernels.wgmma_gemv`'s design with eight-bit operands, its options cut to
the ones its defaults use (what each one bought is measured there):

- **Roles swapped**: a weight tile is ``wgmma``'s A operand (64 rows of wg, and the same 64
  rows of wu, two ``m64nNk32`` sharing one B), the tokens its B operand (N = T rounded up to
  8; TMA reads zeros past T). FP8 ``wgmma`` takes both operands K-major, which both are.
- **The same bytes**: a 128-byte swizzled row holds 128 e4m3 values, so the boxes are the
  bf16 kernel's 64 x 128 bytes (:class:`Fp8GemvTile` is its tile with twice the k per box),
  the ring's stages the same bytes, the descriptors the same; an instruction reads 32
  bytes of each row (k = 32), four per box as bf16's k16 are.
- **A ring fed by TMA**, one thread copying up to ``stages`` k-blocks ahead, the weights
  ``evict_first`` and the tokens ``evict_last`` in L2, the first ``lead`` stages' weights asked
  of L2 before the barriers are set up.
- **Stream-K** (:mod:`book.kernels.stream_k`): the (row tile, k-block) steps cut into one
  equal range a block over every SM, then whole tiles; a tile cut between blocks is finished
  by the last piece to arrive, in a finisher warp of its own, which adds the pieces in block
  order (the same sums every launch) and leaves the counters at zero.
- **The epilogue**: the scales (the token's, the output channel's; ``1 / out_scale`` folded
  into up's, as :mod:`book.kernels.fp8_gemm` folds it), ``silu(gate) * up`` in float32, and
  one store per output: bfloat16, or the e4m3 code of ``cvt.rn.satfinite``. In the bare tile
  the scales are read output by output from global memory; the default tile reads them into
  registers ahead, settles the seams in fewer round trips and launches as a dependent of the
  kernel before it (:data:`book.kernels.fp8_gemv_tile.FIXES`, the same bits; the probes:
  :mod:`book.kernels.fp8_gemv_tile`, records/fp8/README.md).

:func:`model` (:mod:`book.kernels.fp8_gemv_model`) computes what the kernel stores through
the same walk and the models of TMA and FP8 ``wgmma``: Numba's simulator has neither, so
there the model stands in for the kernel; the GPU lane holds the kernel to it
(``tests/library/test_fp8_gemv.py``).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np
from numba import cuda, float32, int32, uint8, uint32, uint64

from ..instructions import fp8
from .fp8_gemv_model import model
from .fp8_gemv_tile import (BK, FIXES, MAX_T, OUTS, PROBES, WIDE_WARPS, Fp8GemvTile, gemv_tile,
                            row_of, token_of, weight_bytes)
from ..elementwise.fused import silu_mul
from ..instructions.hopper import SIMULATED, descriptor
from ..host.launch import device_name
from ..gemms.stream_k import ENTRY, next_step, step_at, stream_k
from .wgmma_gemv_tile import ALIGN, BM, output_of

__all__ = ["BK", "BM", "FIXES", "MAX_T", "OUTS", "PROBES", "Fp8GemvTile", "gemv_tile", "make_fp8_gemv",
           "swiglu_fp8_gemv", "model", "weight_bytes", "ptx_variants", "signature", "row_of",
           "token_of", "prepare"]

def signature(out: str) -> str:
    """The kernel's argument types: tensor maps, stream-K table, sx, sg, su, out (flat),
    the seams' workspace, T, d, h, 1 / out_scale."""
    o = "uint8" if out == "e4m3" else "uint16"
    return (f"void(uint64[::1], int32[::1], float32[::1], float32[::1], float32[::1], "
            f"{o}[::1], float32[::1], int32[::1], int64, int64, int64, float32)")


# ---------------------------------------------------------------------------------------
# the kernel


@functools.lru_cache(maxsize=None)
def make_fp8_gemv(tile: Fp8GemvTile, out: str = "bfloat16", fmt: str = "e4m3"):
    """``k(maps, sk, sx, sg, su, out, part, count, T, d, h, inv)``: ``maps`` the tensor maps of
    wg, wu and x (16 uint64 each), ``sk`` the stream-K table
    (:func:`book.kernels.stream_k.stream_k`), ``out`` [T * h] flat (bf16 bits or e4m3
    codes), ``part``/``count`` the seams' workspace, ``inv`` = 1 / out_scale (1 for bf16).
    Launch one block an SM (``ctas_per_sm``) of 256 threads with ``tile.shared_bytes`` of
    dynamic shared memory."""
    tile.validate()
    if out not in OUTS or fmt not in fp8.FORMATS:
        raise ValueError(f"out must be one of {OUTS} and fmt e4m3 or e5m2, got {out!r}, {fmt!r}")
    if SIMULATED:
        raise RuntimeError("the FP8 GEMV needs a Hopper GPU: Numba's simulator has no wgmma or "
                           "TMA (book.kernels.fp8_gemv.model computes what it does)")
    from ..instructions.fp8 import cvt_e4m3x2
    from ..instructions.hopper import (fence_mbarrier_init, global_address, griddep_launch_dependents,
                         griddep_wait, l2_evict_first, l2_evict_last, make_wgmma, mbar_arrive,
                         mbar_arrive_expect_tx, mbar_init, mbar_wait, named_barrier, ring_next,
                         shared_address,
                         tma_load_2d, tma_load_2d_hint, tma_prefetch, tma_prefetch_2d,
                         wgmma_commit, wgmma_fence, wgmma_wait)
    from ..instructions.wide import load_f32_cg, store_f32

    WGMMA = make_wgmma(tile.n, fmt)
    NA = tile.accumulators
    ST, SB, WB, TX = tile.stages, tile.stage_bytes, tile.w_bytes, tile.tx_bytes
    KB, XS = tile.kblocks, tile.x_slot
    U_OFF, X_OFF = KB * WB, 2 * KB * WB  # wu's boxes, then the tokens', in a stage
    SHIFT = 7 + KB.bit_length() - 1  # log2 of the k a stage covers (BK = 128)
    LAY = tile.layout
    FULL, EMPTY, RING, SEAM = LAY["full"], LAY["empty"], LAY["ring"], LAY["seam"]
    DESC = np.uint64(descriptor(0, 16, 1024, "128B"))  # chapter 9's, byte for byte
    STEP = np.uint64(32 >> 4)  # the next k32: 32 bytes along the swizzled row
    KSTEPS = BK // 32
    MASK = uint32(0xFFFFFC00)
    SLOT = 128 * 2 * NA  # floats of one workspace slot: every consumer thread's gate and up
    WR = 4 if NA <= 8 else 2 if NA <= 16 else 1  # consumer threads a finisher lane sums at once
    WRNA = WR * NA
    HOLD, HINTS, LEAD_ST = tile.hold, tile.hints, tile.lead
    E4M3 = out == "e4m3"
    CS = tile.tma_elem >> 1  # a column of the maps is 2**CS bytes of k
    PDL = tile.pdl
    PRE, UNG = tile.preload, tile.unguarded
    SHORT = tile.short_settle  # (short_settle) a seam's sum two round trips after its piece
    WIDE = tile.wide_settle  # (wide_settle) a seam summed by warps 1-3, not warp 1 alone
    UN = 4 * NA  # (wide_settle) a seam's (consumer warp, accumulator) pairs: u = NA w + i,
    UPW = -(-UN // WIDE_WARPS)  # pair u to finisher warp u mod 3; at most UPW a warp
    WIDE_BAR = 2  # (wide_settle) the named barrier of warps 1-3 (1: the nowgmma probe's)
    FIN = 32 * (1 + WIDE_WARPS) if WIDE else 64  # the finisher's threads end here
    NS = UPW if WIDE else WRNA  # the sums a finisher lane holds
    WRS = NS if SHORT else 1  # (the second piece's floats, loaded with the first's)
    NX = tile.n // 4  # tokens of a consumer thread's accumulators (token_of)
    PROBE = tile.probe  # (a probe's parts left out: Fp8GemvTile)
    WG = PROBE not in ("stream", "nowgmma")  # the consumers issue wgmma
    SEAMS = PROBE not in ("stream", "noseam")  # seams' pieces stored, counted and summed
    EPI = PROBE != "stream"  # whole tiles' epilogues
    NOSCALE = PROBE == "noscale"
    TXS = TX if PROBE != "nox" else 2 * KB * WB  # the bytes a stage's copies bring

    place = cuda.jit(device=True, inline="always")(output_of)
    row = cuda.jit(device=True, inline="always")(row_of)
    token = cuda.jit(device=True, inline="always")(token_of)
    at_step = cuda.jit(device=True, inline="always")(step_at)
    advance = cuda.jit(device=True, inline="always")(next_step)

    @cuda.jit(device=True, inline="always")
    def scaled(sx, sg, su, t, j, i, gate, up, T, h, inv, xs, gr, ur, rw):
        # dequantize and activate: gate and up times their scales, then silu(gate) * up
        if NOSCALE:  # (probe) no scale read
            s = float32(1.0)
            return silu_mul(gate * s * s, up * s * (s * inv))
        if PRE:  # (preload) from registers: xs the thread's tokens', gr / ur rows' (from rw)
            s = xs[2 * (i >> 2) + (i & 1)]
            return silu_mul(gate * s * gr[rw + ((i >> 1) & 1)],
                            up * s * (ur[rw + ((i >> 1) & 1)] * inv))
        if UNG:  # (unguarded) read for every accumulator: indices kept inside the arrays
            s = sx[min(t, T - 1)]
            return silu_mul(gate * s * sg[min(j, h - 1)], up * s * (su[min(j, h - 1)] * inv))
        s = sx[t]
        return silu_mul(gate * s * sg[j], up * s * (su[j] * inv))

    @cuda.jit(device=True, inline="always")
    def emit(out, sx, sg, su, mt, lt, i, gate, up, T, h, inv, xs, gr, ur, rw):
        # dequantize, activate, requantize: the output of consumer thread lt's accumulators
        # i (gate and up) of row tile mt (preload: its scales in xs, gr, ur; rw, the slot of
        # lt's first row in gr and ur)
        r, t = place(lt, i)
        j = mt * BM + r
        if UNG:  # the arithmetic whether or not the output exists; only its store tested
            y = scaled(sx, sg, su, t, j, i, gate, up, T, h, inv, xs, gr, ur, rw)
            if j < h and t < T:
                if E4M3:
                    out[t * h + j] = uint8(cvt_e4m3x2(float32(0.0), y) & 0xFF)
                else:
                    store_f32(out, t * h + j, y)
        elif j < h and t < T:
            y = scaled(sx, sg, su, t, j, i, gate, up, T, h, inv, xs, gr, ur, rw)
            if E4M3:  # requantize and store: the e4m3 code or bf16 bits
                out[t * h + j] = uint8(cvt_e4m3x2(float32(0.0), y) & 0xFF)
            else:
                store_f32(out, t * h + j, y)

    @cuda.jit(device=True, inline="always")
    def copy_box(dst, tmap, c0, c1, bar, policy):  # one TMA box, with its L2 hint if HINTS
        if HINTS:
            tma_load_2d_hint(dst, tmap, c0, c1, bar, policy)
        else:
            tma_load_2d(dst, tmap, c0, c1, bar)

    @cuda.jit(device=True, inline="always")
    def round_rows(sg, su, gr, ur, mt, w0, lane, h):
        # (preload, WR < 4) a round's rows' scales, asked for before its sums
        for v in range(2 * WR):
            jr = min(mt * BM + row(32 * (w0 + (v >> 1)) + lane, v & 1), h - 1)
            gr[v] = sg[jr]
            ur[v] = su[jr]

    @cuda.jit(device=True, inline="always")
    def emit_round(out, sx, sg, su, gs, us, mt, w0, lane, T, h, inv, xs, gr, ur):
        for w in range(WR):
            for i in range(NA):
                emit(out, sx, sg, su, mt, 32 * (w0 + w) + lane, i, gs[w * NA + i],
                     us[w * NA + i], T, h, inv, xs, gr, ur, 2 * w)

    @cuda.jit(device=True, inline="always")
    def settle(sk, part, count, out, sx, sg, su, gs, us, mt, tiles, lane, T, h, inv, xs, gr,
               ur):
        # a piece of tile mt is in: the finisher warp counts it, and the last piece's adds
        # every piece in block order and runs the epilogue (wgmma_gemv's, with the scales)
        p0 = sk[tiles + 2 * mt]
        p1 = sk[tiles + 2 * mt + 1]
        last = 0
        if lane == 0:
            cuda.threadfence()  # the piece (ordered before the barrier) is visible
            before = cuda.atomic.add(count, mt, 1)
            if before == p1 - p0:
                last = 1
                count[mt] = 0  # every piece is in: ready for the next launch
                cuda.threadfence()
        last = cuda.shfl_sync(0xFFFFFFFF, last, 0)
        if last == 1:
            for w0 in range(0, 4, WR):
                if PRE and WR < 4:  # (one round, WR = 4: its rows read before the wait)
                    round_rows(sg, su, gr, ur, mt, w0, lane, h)
                for v in range(WRNA):
                    gs[v] = float32(0.0)
                    us[v] = float32(0.0)
                for c in range(p0, p1 + 1):
                    pc = (2 * c + (0 if mt == sk[ENTRY * c] else 1)) * SLOT + 32 * w0 + lane
                    for w in range(WR):
                        for i in range(NA):
                            gs[w * NA + i] += load_f32_cg(part, pc + 32 * w + i * 128)
                            us[w * NA + i] += load_f32_cg(part, pc + 32 * w + (NA + i) * 128)
                emit_round(out, sx, sg, su, gs, us, mt, w0, lane, T, h, inv, xs, gr, ur)

    @cuda.jit(device=True, inline="always")
    def settle_short(part, count, out, sx, sg, su, gs, us, gn, un, mt, p0, p1, s0, lane, T, h,
                     inv, xs, gr, ur):
        # (short_settle) settle's sums in its order, fewer round trips in a row (Fp8GemvTile)
        last = 0
        if lane == 0:
            cuda.threadfence()  # the piece (ordered before the barrier) is visible
            if cuda.atomic.add(count, mt, 1) == p1 - p0:
                last = 1
                count[mt] = 0  # every piece is in: ready for the next launch
        last = cuda.shfl_sync(0xFFFFFFFF, last, 0)
        if last == 1:
            for w0 in range(0, 4, WR):
                if PRE and WR < 4:
                    round_rows(sg, su, gr, ur, mt, w0, lane, h)
                pa = s0 + 32 * w0 + lane
                pb = 2 * (p0 + 1) * SLOT + 32 * w0 + lane
                for w in range(WR):
                    for i in range(NA):
                        gs[w * NA + i] = load_f32_cg(part, pa + 32 * w + i * 128)
                        us[w * NA + i] = load_f32_cg(part, pa + 32 * w + (NA + i) * 128)
                        gn[w * NA + i] = load_f32_cg(part, pb + 32 * w + i * 128)
                        un[w * NA + i] = load_f32_cg(part, pb + 32 * w + (NA + i) * 128)
                for v in range(WRNA):  # settle's order: 0, then each piece in block order
                    gs[v] = (float32(0.0) + gs[v]) + gn[v]
                    us[v] = (float32(0.0) + us[v]) + un[v]
                for c in range(p0 + 2, p1 + 1):  # a third piece and on, as settle
                    pc = 2 * c * SLOT + 32 * w0 + lane
                    for w in range(WR):
                        for i in range(NA):
                            gs[w * NA + i] += load_f32_cg(part, pc + 32 * w + i * 128)
                            us[w * NA + i] += load_f32_cg(part, pc + 32 * w + (NA + i) * 128)
                emit_round(out, sx, sg, su, gs, us, mt, w0, lane, T, h, inv, xs, gr, ur)

    @cuda.jit(device=True, inline="always")
    def wide_share(part, out, sx, sg, su, gs, us, gn, un, mt, p0, p1, s0, f, lane, T, h, inv,
                   xs, gr, ur):
        # (wide_settle) finisher warp f's share of a seam's sum and epilogue: pairs u = f,
        # f + 3, ... (f is a constant here: every index below folds, the sums stay in
        # registers), each summed as settle_short sums it (0, then each piece in block order)
        pa = s0 + lane
        pb = 2 * (p0 + 1) * SLOT + lane
        for k in range(UPW):
            u = f + WIDE_WARPS * k
            if u < UN:
                o = 32 * (u // NA) + (u % NA) * 128
                gs[k] = load_f32_cg(part, pa + o)
                us[k] = load_f32_cg(part, pa + o + NA * 128)
                gn[k] = load_f32_cg(part, pb + o)
                un[k] = load_f32_cg(part, pb + o + NA * 128)
        for k in range(UPW):
            if f + WIDE_WARPS * k < UN:
                gs[k] = (float32(0.0) + gs[k]) + gn[k]
                us[k] = (float32(0.0) + us[k]) + un[k]
        for c in range(p0 + 2, p1 + 1):  # a third piece and on, as settle
            pc = 2 * c * SLOT + lane
            for k in range(UPW):
                u = f + WIDE_WARPS * k
                if u < UN:
                    o = 32 * (u // NA) + (u % NA) * 128
                    gs[k] += load_f32_cg(part, pc + o)
                    us[k] += load_f32_cg(part, pc + o + NA * 128)
        for k in range(UPW):
            u = f + WIDE_WARPS * k
            if u < UN:  # consumer thread 32 w + lane's accumulators i (its rows: 2 w, 2 w + 1)
                emit(out, sx, sg, su, mt, 32 * (u // NA) + lane, u % NA, gs[k], us[k], T, h,
                     inv, xs, gr, ur, 2 * (u // NA))

    @cuda.jit(device=True, inline="always")
    def settle_wide(part, count, out, sx, sg, su, gs, us, gn, un, said, mt, p0, p1, s0, sf, fw,
                    lane, T, h, inv, xs, gr, ur):
        # (wide_settle) settle_short's count by one thread (finisher warp 0's lane 0), its
        # decision handed to the other two warps in shared memory (said[sf], one word a
        # seam) across their named barrier; the last piece's sums, a share a warp
        if fw == 0 and lane == 0:
            cuda.threadfence()  # the piece (ordered before the barrier) is visible
            last = 0
            if cuda.atomic.add(count, mt, 1) == p1 - p0:
                last = 1
                count[mt] = 0  # every piece is in: ready for the next launch
            said[sf] = last
        named_barrier(WIDE_BAR, 32 * WIDE_WARPS)
        if said[sf] == 1:
            if fw == 0:  # (three calls: in each, the warp's pairs are constants)
                wide_share(part, out, sx, sg, su, gs, us, gn, un, mt, p0, p1, s0, 0, lane, T,
                           h, inv, xs, gr, ur)
            elif fw == 1:
                wide_share(part, out, sx, sg, su, gs, us, gn, un, mt, p0, p1, s0, 1, lane, T,
                           h, inv, xs, gr, ur)
            else:
                wide_share(part, out, sx, sg, su, gs, us, gn, un, mt, p0, p1, s0, 2, lane, T,
                           h, inv, xs, gr, ur)

    def fp8_gemv(maps, sk, sx, sg, su, out, part, count, T, d, h, inv):
        smem = cuda.shared.array(0, uint8)
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        tid = cuda.threadIdx.x
        G = cuda.gridDim.x
        e = ENTRY * cuda.blockIdx.x  # this block's walk: its stream-K range, then whole tiles
        m0 = sk[e]
        kb0 = sk[e + 1]
        n = sk[e + 2]
        w0 = sk[e + 3]
        nw = sk[e + 4]
        nk = (d + (BK * KB - 1)) >> SHIFT  # stages of a row tile (TMA reads zeros past d)
        if PDL:  # the next call on the stream may place its blocks as this one's leave
            griddep_launch_dependents()
        if tid == 0:
            tma_prefetch(global_address(maps, 0))
            tma_prefetch(global_address(maps, 16))
            tma_prefetch(global_address(maps, 32))
            if LEAD_ST:  # the first stages' weights asked of L2 before the set-up
                pm = m0
                pkb = kb0
                for pq in range(min(LEAD_ST, n + nw * nk)):
                    pm, pkb = at_step(pq, pm, pkb, n, w0)
                    for kk in range(KB):
                        tma_prefetch_2d(global_address(maps, 0), ((pkb * KB + kk) * BK) >> CS,
                                        pm * BM)
                        tma_prefetch_2d(global_address(maps, 16), ((pkb * KB + kk) * BK) >> CS,
                                        pm * BM)
                    pm, pkb = advance(pm, pkb, nk)
            for s in range(ST):
                mbar_init(base + FULL + 8 * s, 1)  # the producer's (+ the bytes)
                mbar_init(base + EMPTY + 8 * s, 1)  # the consumer's release
            for s in range(2):  # once a launch each: every consumer thread's piece stored
                mbar_init(base + SEAM + 8 * s, 128)
            fence_mbarrier_init()
        cuda.syncthreads()
        if tid == 0:  # the producer: the TMA copies, up to ST stages ahead
            map_g = global_address(maps, 0)
            map_u = global_address(maps, 16)
            map_x = global_address(maps, 32)
            once = l2_evict_first() if HINTS else uint64(0)
            again = l2_evict_last() if HINTS else uint64(0)
            s = 0
            ph = 0
            m = m0
            kb = kb0
            steps = n + nw * nk
            first = 0
            if PDL:  # the first stages' weights before the kernel before this one is waited
                first = min(ST, steps)  # for (the ring is empty: no release to wait for)
                for q in range(first):
                    m, kb = at_step(q, m, kb, n, w0)
                    full = base + FULL + 8 * q
                    mbar_arrive_expect_tx(full, TXS)  # the tokens' bytes counted now, too
                    st = base + RING + q * SB
                    for kk in range(KB):
                        kc = ((kb * KB + kk) * BK) >> CS
                        copy_box(st + kk * WB, map_g, kc, m * BM, full, once)
                        copy_box(st + U_OFF + kk * WB, map_u, kc, m * BM, full, once)
                    m, kb = advance(m, kb, nk)
                griddep_wait()  # what the kernel before wrote (the tokens) is there now
                m = m0
                kb = kb0
                for q in range(first):  # the same stages again: their tokens
                    m, kb = at_step(q, m, kb, n, w0)
                    st = base + RING + q * SB
                    for kk in range(KB):
                        kc = ((kb * KB + kk) * BK) >> CS
                        if PROBE != "nox":
                            copy_box(st + X_OFF + kk * XS, map_x, kc, 0, base + FULL + 8 * q,
                                     again)
                    m, kb = advance(m, kb, nk)
                    s, ph = ring_next(s, ph, ST)
            for q in range(first, steps):
                m, kb = at_step(q, m, kb, n, w0)
                mbar_wait(base + EMPTY + 8 * s, ph ^ 1)  # the consumer is done with it
                full = base + FULL + 8 * s
                mbar_arrive_expect_tx(full, TXS)
                st = base + RING + s * SB
                for kk in range(KB):  # a row's 128 KB bytes asked for back to back
                    kc = ((kb * KB + kk) * BK) >> CS
                    copy_box(st + kk * WB, map_g, kc, m * BM, full, once)
                    copy_box(st + U_OFF + kk * WB, map_u, kc, m * BM, full, once)
                    if PROBE != "nox":
                        copy_box(st + X_OFF + kk * XS, map_x, kc, 0, full, again)
                m, kb = advance(m, kb, nk)
                s, ph = ring_next(s, ph, ST)
        elif SEAMS and 32 <= tid < FIN:  # the finisher warp (wide_settle: warps 1-3): the
            if PDL:  # range's seams, off the consumer's path. The workspace and out: the
                griddep_wait()  # kernel before may use them
            lane = (tid & 31) if WIDE else tid - 32
            fw = (tid >> 5) - 1  # (wide_settle) which finisher warp
            if WIDE:  # (its decision on each seam, handed from warp 1 to warps 2 and 3)
                said = cuda.shared.array(2, int32)
            gs = cuda.local.array(NS, float32)
            us = cuda.local.array(NS, float32)
            xs = cuda.local.array(NX, float32)  # (preload) the lanes' tokens' scales and
            gr = cuda.local.array(8, float32)  # a seam's rows' (two of each consumer warp's)
            ur = cuda.local.array(8, float32)
            gn = cuda.local.array(WRS, float32)  # (short_settle) the second piece's
            un = cuda.local.array(WRS, float32)
            if PRE:  # (a lane sums consumer threads 32 w + lane: the same tokens as lane's)
                for k in range(NX):
                    xs[k] = sx[min(token(lane, k), T - 1)]
            m = m0
            kb = kb0
            left = n
            while left > 0:  # the consumer's walk through the range, tile by tile
                nb = min(nk - kb, left)
                left -= nb
                kb = 0
                m += 1
                if nb == nk:
                    continue
                mt = m - 1  # a seam: wait for the consumer's piece of tile mt
                p0 = sk[ENTRY * G + 2 * mt]  # (short_settle: read before the wait)
                p1 = sk[ENTRY * G + 2 * mt + 1]
                s0 = (2 * p0 + (0 if mt == sk[ENTRY * p0] else 1)) * SLOT
                if PRE and (WR == 4 or WIDE):  # its rows' scales on their way while the
                    for v in range(8):  # piece is waited for (settle: in rounds if WR < 4)
                        jr = min(mt * BM + row(32 * (v >> 1) + lane, v & 1), h - 1)
                        gr[v] = sg[jr]
                        ur[v] = su[jr]
                mbar_wait(base + SEAM + 8 * (0 if mt == m0 else 1), 0)
                if WIDE:
                    settle_wide(part, count, out, sx, sg, su, gs, us, gn, un, said, mt, p0, p1,
                                s0, 0 if mt == m0 else 1, fw, lane, T, h, inv, xs, gr, ur)
                elif SHORT:
                    settle_short(part, count, out, sx, sg, su, gs, us, gn, un, mt, p0, p1, s0,
                                 lane, T, h, inv, xs, gr, ur)
                else:
                    settle(sk, part, count, out, sx, sg, su, gs, us, mt, ENTRY * G, lane, T, h,
                           inv, xs, gr, ur)
        elif tid >= 128:  # the consumer warpgroup
            if PDL:  # the workspace, the scales and out: after the kernel before
                griddep_wait()
            lt = tid - 128
            accg = cuda.local.array(NA, float32)
            accu = cuda.local.array(NA, float32)
            xs = cuda.local.array(NX, float32)  # (preload) the thread's tokens' scales and
            gr = cuda.local.array(2, float32)  # its two rows' in the tile it reads
            ur = cuda.local.array(2, float32)
            if PRE:
                for k in range(NX):
                    xs[k] = sx[min(token(lt, k), T - 1)]
            s = 0
            ph = 0
            prev = 0
            m = m0
            kb = kb0
            left = n
            whole = 0  # 1 once the range is read and the whole tiles begin
            while left > 0 or whole == 0:
                if left == 0:  # the range read (or empty): the whole tiles, if any
                    whole = 1
                    m = w0
                    kb = 0
                    left = nw * nk
                    if left == 0:
                        break
                nb = min(nk - kb, left)
                if PRE:  # the tile's rows' scales, on their way while its stages stream
                    for b in range(2):
                        jr = min(m * BM + row(lt, b), h - 1)
                        gr[b] = sg[jr]
                        ur[b] = su[jr]
                if not WG:  # (probe) numbers the compiler cannot fold, for the epilogue
                    for i in range(NA):
                        accg[i] = float32(m + i)
                        accu[i] = float32(kb + i)
                for q in range(nb):
                    mbar_wait(base + FULL + 8 * s, ph)  # the stage's bytes have landed
                    st = base + RING + s * SB
                    if not WG:  # (probe) handed back once the whole warpgroup saw it land
                        named_barrier(1, 128)
                        if lt == 0:
                            mbar_arrive(base + EMPTY + 8 * s)
                        s, ph = ring_next(s, ph, ST)
                        continue
                    wgmma_fence()
                    for kk in range(KB):
                        da = DESC | uint64((st + kk * WB) >> 4)
                        du = DESC | uint64((st + U_OFF + kk * WB) >> 4)
                        dx = DESC | uint64((st + X_OFF + kk * XS) >> 4)
                        for ks in range(KSTEPS):
                            acc_on = uint32(q + kk + ks > 0)
                            WGMMA(accg, da + STEP * uint64(ks), dx + STEP * uint64(ks), acc_on)
                            WGMMA(accu, du + STEP * uint64(ks), dx + STEP * uint64(ks), acc_on)
                    wgmma_commit()
                    if HOLD:
                        wgmma_wait(1)  # the previous k-block's wgmma are done: its stage is free
                        if q > 0 and lt == 0:
                            mbar_arrive(base + EMPTY + 8 * prev)
                    else:
                        wgmma_wait(0)
                        if lt == 0:
                            mbar_arrive(base + EMPTY + 8 * s)
                    prev = s
                    s, ph = ring_next(s, ph, ST)
                if WG:
                    wgmma_wait(0)
                    if HOLD and lt == 0:
                        mbar_arrive(base + EMPTY + 8 * prev)
                left -= nb
                kb = 0
                m += 1
                mt = m - 1  # the tile just read
                if nb < nk:  # a seam: the piece to its slot, the finisher takes it from there
                    if SEAMS:
                        pb = (2 * cuda.blockIdx.x + (0 if mt == m0 else 1)) * SLOT
                        for i in range(NA):
                            part[pb + i * 128 + lt] = accg[i]
                            part[pb + (NA + i) * 128 + lt] = accu[i]
                        # (mbarrier.arrive releases: the stores come before it for the finisher)
                        mbar_arrive(base + SEAM + 8 * (0 if mt == m0 else 1))
                    continue
                if EPI:
                    for i in range(NA):  # a whole tile: the epilogue from registers
                        emit(out, sx, sg, su, mt, lt, i, accg[i], accu[i], T, h, inv, xs, gr,
                             ur, 0)

    return cuda.jit(fastmath=True, launch_bounds=(256, tile.ctas_per_sm))(fp8_gemv)


def ptx_variants() -> dict:
    """The kernels whose PTX the tests read (book.kernels.ptx: ``fp8_gemv_<name>``), with
    their argument types."""
    # named by what they change of the bare tile (gemv_tile's fixes off); the dispatcher's
    # default is the "_short_settle_preload_pdl" one
    out = {f"t{T}_{o}": (make_fp8_gemv(gemv_tile(T, gpu="H200", fixes=False), o), signature(o))
           for T, o in ((1, "bfloat16"), (4, "e4m3"), (16, "e4m3"), (16, "bfloat16"))}
    t1, t4, t16, t32 = (gemv_tile(T, gpu="H200", fixes=False) for T in (1, 4, 16, 32))
    for name, t, o, change in (
            ("t16_e4m3_pdl", t16, "e4m3", {"pdl": True}),
            # the candidate fixes (Fp8GemvTile.preload, unguarded), alone and together
            ("t1_e4m3_preload", t1, "e4m3", {"preload": True}),
            ("t16_bfloat16_preload", t16, "bfloat16", {"preload": True}),
            ("t16_e4m3_unguarded", t16, "e4m3", {"unguarded": True}),
            ("t16_e4m3_preload_unguarded", t16, "e4m3", {"preload": True, "unguarded": True}),
            ("t1_bfloat16_preload_unguarded_pdl", t1, "bfloat16",
             {"preload": True, "unguarded": True, "pdl": True}),
            ("t32_e4m3_preload_unguarded", t32, "e4m3", {"preload": True, "unguarded": True}),
            ("t16_e4m3_short_settle", t16, "e4m3", {"short_settle": True}),  # (and with both)
            *((f"t{T}_{o}_short_settle_preload_pdl", t, o, {"short_settle": True,
               "preload": True, "pdl": True}) for T, t, o in ((1, t1, "bfloat16"),
                                                             (32, t32, "e4m3"))),
            *((f"t16_e4m3_probe_{p}", t16, "e4m3", {"probe": p}) for p in PROBES),
            # the candidate of the seams' sums over three warps (Fp8GemvTile.wide_settle):
            # over the default tile's fixes at every N, and over short_settle alone
            *((f"t{T}_{o}_short_settle_preload_pdl_wide_settle", t, o, {
                "short_settle": True, "preload": True, "pdl": True, "wide_settle": True})
              for T, t, o in ((1, t1, "bfloat16"), (4, t4, "e4m3"), (16, t16, "e4m3"),
                              (16, t16, "bfloat16"), (32, t32, "e4m3"))),
            ("t16_e4m3_short_settle_wide_settle", t16, "e4m3",
             {"short_settle": True, "wide_settle": True})):
        out[name] = (make_fp8_gemv(dataclasses.replace(t, **change), o), signature(o))
    return out


# ---------------------------------------------------------------------------------------
# host side


_TABLES = {}  # (device, row tiles, k-blocks, blocks) -> the stream-K table on the device


def prepare(xq, sx, wgq, sg, wuq, su, out=None, *, out_dtype: str = "bfloat16",
            inv: float = 1.0, fmt: str = "e4m3", tile: Fp8GemvTile | None = None,
            stream_key=0):
    """Validate and build the launch of :func:`swiglu_fp8_gemv` (``inv``:
    :func:`book.kernels.fp8_gemm.inverse_scale`): a :class:`book.kernels.launch.KernelLaunch`,
    a dependent launch where the tile says ``pdl``; its seams' workspace is the one of the
    stream ``stream_key`` names."""
    from ..gemms.fp8_gemm import operands
    from ..host.launch import KernelLaunch, flat, sm_count
    from ..gemms.splitk import device_key, workspace
    from ..gemms.wgmma_gemm import tensor_maps

    xd, gd, ud, sxd, sgd, sud, res, od, T, d, h = operands(
        xq, sx, wgq, sg, wuq, su, out, out_dtype, MAX_T, "the FP8 GEMV")
    tile = (tile or gemv_tile(T, d, device_name())).validate()
    if T > tile.n:
        raise ValueError(f"{tile} takes at most {tile.n} tokens (its wgmma's N), got T = {T}")
    kern = make_fp8_gemv(tile, out_dtype, fmt)
    mt, nk = -(-h // BM), -(-d // tile.stage_k)
    grid = min(sm_count() * tile.ctas_per_sm * tile.waves, mt * nk)
    key = (device_key(), mt, nk, grid)
    if key not in _TABLES:
        _TABLES[key] = cuda.to_device(stream_k(mt, nk, grid))
    sk = _TABLES[key]
    # every launch leaves the tiles' counters at zero: launches on one stream share it
    ws = workspace("fp8_gemv", stream_key, 2 * grid * 128 * tile.n, mt)
    if tile.tma_elem == 2:  # each byte pair one 16-bit element: the same boxes' bytes
        arrays = [a.view(np.uint16) for a in (gd, ud, xd)]
    else:
        arrays = [gd, ud, xd]
    bk = BK // tile.tma_elem
    maps = tensor_maps(arrays, [(bk, BM), (bk, BM), (bk, tile.n)], tile.promotion)
    fo = flat(od, "out")
    args = (maps, sk, sxd, sgd, sud, fo, ws.part, ws.count, T, d, h, np.float32(inv))
    return KernelLaunch(kern, grid, 256, args, res, tile.shared_bytes, dependent=tile.pdl)


def swiglu_fp8_gemv(xq, sx, wgq, sg, wuq, su, out=None, *, out_dtype: str = "bfloat16",
                    out_scale: float = 1.0, fmt: str = "e4m3", tile: Fp8GemvTile | None = None,
                    stream=None, probe: bool = False):
    """``out = silu(sx sg (xq @ wgq.T)) * (sx su (xq @ wuq.T))`` for T <= :data:`MAX_T`
    tokens, bfloat16, or e4m3 codes of ``out / out_scale`` (saturated) when
    ``out_dtype="e4m3"``: the arguments of :func:`book.kernels.fp8_gemm.swiglu_fp8`. torch
    CUDA tensors (float8 or their uint8 codes; float32 scales) or Numba device arrays.
    Called plainly (no ``stream``), the launch is planned once per set of torch tensors
    (``out`` given) and options and then replayed (:func:`book.kernels.plan.planned`) on
    torch's current stream (a CUDA graph's capture too: a planned call allocates nothing).
    Its seams' workspace is the one of the stream it was planned on: two plans launched at
    once on two streams must not share one (plan each on its own stream). A probe tile
    (``Fp8GemvTile.probe``: its output is not the layer's) runs only with ``probe=True``, for
    timing."""
    from ..gemms.fp8_gemm import inverse_scale
    from ..host.plan import launch_once, planned, raw_stream

    inv = inverse_scale(out_dtype, out_scale)
    if tile is not None and tile.probe and not probe:  # (before a plan is replayed, too)
        raise ValueError(f"{tile.probe!r} is a probe: its output is not the layer's (time it "
                         "with probe=True)")
    options = dict(out_dtype=out_dtype, inv=inv, fmt=fmt, tile=tile)
    if stream is None:
        return planned("swiglu_fp8_gemv", *options.items())(xq, sx, wgq, sg, wuq, su, out)
    return launch_once(prepare(xq, sx, wgq, sg, wuq, su, out, stream_key=raw_stream(stream),
                               **options), stream)
