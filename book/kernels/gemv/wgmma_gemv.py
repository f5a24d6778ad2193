"""The MLP-up at decode on Hopper: ``wgmma`` with the weights on the M side, TMA into an
mbarrier ring, the k-loop shared evenly by every SM (sm_90a).

``out = silu(x @ wg.T + bg) * (x @ wu.T + bu)`` for a few tokens (x [T, d], T at most
:data:`MAX_T`), the nn.Linear weights wg, wu [h, d], biases [h] optional; bfloat16 or
float16, float32 accumulation. At decode the weights are the work (235 MB at d = 4096,
h = 14336) and the kernel's one job is to keep HBM busy while it reads them once.

Why another kernel when :mod:`book.kernels.decode_mlp` has two GEMVs and
:mod:`book.kernels.wgmma_gemm` a Hopper GEMM (the measurements behind each point are in
records/bench/README.md):

- the ``mma.sync`` GEMV is latency-bound: each byte it has in flight is a register a warp
  loaded, and its grid gives an SM about 27 warps (Nsight Compute: 41% of the warps active,
  most cycles waiting on memory). Here a TMA copy puts 16 KiB in flight from one thread and
  the ring holds ``stages`` of them per SM, whatever the registers;
- the Hopper dual GEMM's tile is 128 rows of x by 128 columns of h, so at decode its grid is
  h / 128 = 112 tiles for 132 SMs: a fifth of the GPU reads nothing. Here the work is the
  flat list of (row tile, k-block) iterations, cut into one equal, contiguous range per
  block (*stream-K*): every SM reads the same number of bytes, ±one k-block.

How it is built (:class:`WgmmaGemvTile` holds every size):

- **Roles swapped**: a weight tile is wgmma's A operand (64 rows of wg and the *same* 64
  rows of wu, two ``m64nNk16`` sharing one B), the tokens its B operand (N = T rounded up
  to 8; TMA reads zeros for tokens past T). A thread's gate accumulator i and up
  accumulator i are the same output (row, token) (:func:`book.kernels.hopper.d_coords`), so
  the epilogue is elementwise in registers.
- **One stage** of the ring is ``kblocks`` 64 x 64 boxes of each weight (8 KiB each; two
  up to 16 tokens, one beyond, :func:`gemv_tile`) and, unless the tokens stay in shared
  memory (``x_resident``: each box of x copied once a block, with the first stage that needs
  it; the default beyond 16 tokens where they fit), the tokens' N x 64 boxes:
  128B-swizzled rows of 64 halves, as :mod:`book.kernels.wgmma_gemm` lays its tiles out; the
  same descriptors read them.
- **L2 hints**: every copy carries a cache policy, the weights ``evict_first`` (each byte is
  read once) and the tokens ``evict_last`` (every SM reads them again): on the H100 about
  0.8 us faster at 4 tokens and 1.8 at 16 than the same copies without (``hints``;
  records/bench/weight_stream_hints_h100.json).
- **Warp specialization**: one thread of warpgroup 0 issues the TMA copies, up to
  ``stages`` k-blocks ahead of the consumer (warpgroup 1), which issues the wgmma and
  releases each stage once they no longer read it (one k-block kept in flight).
- **Stream-K's seams**: a row tile cut between two blocks is finished by the piece that
  arrives last. Each block reads its share of the cut tiles first and its whole tiles after
  (:mod:`book.kernels.stream_k`: ``split``, ``walk``), so every seam is met while the ring
  still has a whole tile to read and the launch ends on plain epilogues. At a seam the consumer only stores its
  accumulators to its workspace slot and arrives on a shared-memory barrier; a warp of its
  own, the *finisher* (warp 1, idle otherwise), then counts the piece (a fence and an atomic,
  round trips that wait behind the ring's copies: measured at 3-11 us a block when the
  consumer made them itself, records/bench/weight_stream_h100.json) and, for the last piece,
  adds every piece in block order (the same sum every run) and runs the epilogue. The
  counters are left at zero, so a launch needs no memset and replays from a CUDA graph.
- **Ranges taken as blocks run out** (``WgmmaGemvTile.dynamic``, off: a control): equal
  ranges over most of the work, then short ones that whichever block is free takes (an
  atomic on a counter, by a scheduler warp of its own, warp 2); the cuts are fixed, so each
  tile's pieces are still added in one order. The SMs do not read at one rate (on the H200
  34.9-41.8 GB/s a block, the same SMs slow launch after launch: records/bench/
  sm_balance_h200.json), and equal shares leave the fast ones idle at the end; but every
  short range is a seam more, and on the H100 the GEMV took 93-191 us with them against
  80.5-82.2 without (records/bench/weight_stream_dynamic_h100.json).
- **The first stages asked of L2 at the start** (``WgmmaGemvTile.lead``, 4 by default up to
  16 tokens on the H100 and the H200): before its barriers are set up, the producer asks L2
  for its first stages' weights (``cp.async.bulk.prefetch``). 1.7-2.3 us off the GEMV at 4
  and 16 tokens on the H100, 0.6-1.4 on the H200 (``wgmma_gemv_tile.LEAD`` has the runs).
- **The fixes of the FP8 GEMV** (``WgmmaGemvTile.pdl``, ``short_settle``; on in
  :func:`gemv_tile`'s tile, :data:`FIXES`; ``fixes=False``: the bare tile, their control, the
  same bits): the call launched as a dependent of the kernel before it, its first stages'
  weights asked for before it waits for that kernel; and the finisher's sum of a seam's
  pieces with fewer global round trips one after another (:class:`WgmmaGemvTile` says how).
  What they saved on the FP8 GEMV is in records/fp8/README.md; here, the decode sweep's
  ``sweep_gemv_hopper_bare`` control beside ``sweep_gemv_hopper``.
- **A timeline** (``WgmmaGemvTile.trace``, :func:`timeline`): each block stamps
  ``%globaltimer`` at its start, first copy, first landed stage, last wgmma and end, and
  sums the time its consumer and its finisher spent on seams: what the two points above were
  found with (``benchmarks/weight_stream.py`` prints it).

Any T up to :data:`MAX_T`, d and h multiples of 8 (TMA's 16-byte rows); the caller is
:func:`book.kernels.decode_mlp.prepare` (path ``"hopper_gemv"``). Numba's simulator has no
wgmma or TMA: in the simulator the decode path never picks this kernel, and the stream-K
arithmetic (:mod:`book.kernels.stream_k`) is checked in pure Python.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda, float32, int32, uint8, uint32, uint64

from .block_trace import RAW_EVENTS, TRACE_EVENTS, timeline, traced_runs
from ..elementwise.fused import silu_mul
from ..instructions.hopper import SIMULATED, descriptor
from ..gemms.stream_k import ENTRY, first_visit, next_step, rotated, step_at
from .wgmma_gemv_tile import (ALIGN, BK, BM, FIXES, LEAD, MAX_T, PROMOTION, WgmmaGemvTile,
                              gemv_tile, lead_for, output_of, promotion_for)

__all__ = ["WgmmaGemvTile", "MAX_T", "gemv_tile", "make_wgmma_gemv", "output_of", "BK", "BM",
           "PROMOTION", "promotion_for", "LEAD", "lead_for", "FIXES", "TRACE_EVENTS",
           "RAW_EVENTS", "timeline", "traced_runs"]

# ---------------------------------------------------------------------------------------
# the kernel


@functools.lru_cache(maxsize=None)
def make_wgmma_gemv(tile: WgmmaGemvTile, bias: bool, kind: str = "bf16"):
    """``k(maps, sk, bg, bu, out, part, count, T, d, h)``: ``maps`` the tensor maps of wg,
    wu and x (16 uint64 each), ``sk`` the block ranges (:func:`book.kernels.stream_k.
    stream_k`), ``out`` [T * h] flat, ``part``/``count`` the seams' workspace (module doc). Launch ``ctas_per_sm`` blocks
    an SM of 256 threads with ``tile.shared_for(d)`` bytes of dynamic shared memory."""
    tile.validate()
    if kind not in ("bf16", "f16"):
        raise ValueError(f"kind must be bf16 or f16, got {kind!r}")
    if SIMULATED:
        raise RuntimeError("the Hopper GEMV needs a Hopper GPU: Numba's simulator has no "
                           "wgmma or TMA")
    from ..instructions.hopper import (cp_async_arrive_noinc, fence_mbarrier_init, fence_proxy_async,
                         global_address, globaltimer, griddep_launch_dependents,
                         griddep_wait, make_cp_async_box, make_wgmma,
                         mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait,
                         l2_evict_first, l2_evict_last, ring_next, shared_address, smid,
                         tma_load_2d, tma_load_2d_hint, tma_prefetch,
                         tma_prefetch_2d, wgmma_commit,
                         wgmma_fence, wgmma_wait)
    from ..instructions.wide import load_f32, load_f32_cg, store_f32

    WGMMA = make_wgmma(tile.n, kind)
    NA = tile.accumulators
    ST, SB, WB, TX = tile.stages, tile.stage_bytes, tile.w_bytes, tile.tx_bytes
    KB, XS = tile.kblocks, tile.x_slot
    XRES = tile.x_resident
    TXW = KB * 2 * WB  # a stage's weight bytes (all it delivers once x is resident)
    U_OFF, X_OFF = KB * WB, 2 * KB * WB  # wu's boxes, then the tokens', in a stage
    SHIFT = 6 + KB.bit_length() - 1  # log2 of the k a stage covers
    LAY = tile.layout
    FULL, EMPTY, RING, XREG = LAY["full"], LAY["empty"], LAY["ring"], LAY["x"]
    SEAM = LAY["seam"]
    # K-major operands, 128B swizzle, 8-row groups 1024 bytes apart (as wgmma_gemm's)
    DESC = np.uint64(descriptor(0, 16, 1024, "128B"))
    STEP = np.uint64(32 >> 4)  # the next k16: 32 bytes along the swizzled row
    KSTEPS = BK // 16
    MASK = uint32(0xFFFFFC00)
    BIAS = bias
    SLOT = 128 * 2 * NA  # floats of one workspace slot: every consumer thread's gate and up
    # consumer threads a finisher lane sums at once: all 4 while that is at most 64 floats
    # in registers (2 WR NA), fewer beyond
    WR = 4 if NA <= 8 else 2 if NA <= 16 else 1
    WRNA = WR * NA
    TRACE = tile.trace
    HOLD = tile.hold
    PF = tile.prefetch
    EARLY = tile.early
    FOLD = tile.fold
    HINTS = tile.hints
    CPA = tile.cpasync
    ROT = tile.rotate
    LEAD_ST = tile.lead  # (the stages asked of L2 at the start)
    PDL = tile.pdl  # (a dependent launch: the first stages' weights before the wait)
    SHORT = tile.short_settle  # (short_settle) a seam's sum two round trips after its piece
    WRS = WRNA if SHORT else 1  # (the second piece's floats, loaded with the first's)
    DYN = tile.dynamic > 0
    RQF, RQE = LAY["rq_full"], LAY["rq_empty"]  # (dynamic) the ranges' queue, two deep
    SFF, SFE = LAY["seam_full"], LAY["seam_free"]  # (dynamic) the seams' ring, four deep
    # a stage lands once every copying thread's cp.async have (warp 0's, and thread 0 has
    # said how many bytes its TMA copies of x bring), or thread 0's TMA copies have
    ARRIVALS = 33 if CPA else 1
    XTX = TX - TXW  # the tokens' bytes of a stage that copies them
    wbox = make_cp_async_box(32) if CPA else None
    NEV = len(TRACE_EVENTS)
    EV = {e: i for i, e in enumerate(TRACE_EVENTS)}
    E_START, E_COPY, E_LANDED, E_WGMMA = EV["start"], EV["first_copy"], EV["first_landed"], \
        EV["last_wgmma"]
    E_END, E_LAST, E_MEET, E_SUM = EV["end"], EV["last_copy"], EV["meet_ns"], EV["sum_ns"]
    E_FIN, E_SM = EV["finisher_end"], EV["smid"]
    E_STARVED, E_BLOCKED = EV["starved_ns"], EV["blocked_ns"]

    place = cuda.jit(device=True, inline="always")(output_of)

    @cuda.jit(device=True, inline="always")
    def emit(out, bg, bu, mt, lt, i, gate, up, T, h):
        # the output of consumer thread lt's accumulators i (gate and up) of tile mt, stored
        r, t = place(lt, i)
        j = mt * BM + r
        if j < h and t < T:
            if BIAS:
                gate += load_f32(bg, j)
                up += load_f32(bu, j)
            store_f32(out, t * h + j, silu_mul(gate, up))

    first_box = cuda.jit(device=True, inline="always")(first_visit)

    @cuda.jit(device=True, inline="always")
    def copy_box(dst, tmap, c0, c1, bar, policy):  # one TMA box, with its L2 hint if HINTS
        if HINTS:
            tma_load_2d_hint(dst, tmap, c0, c1, bar, policy)
        else:
            tma_load_2d(dst, tmap, c0, c1, bar)

    # a block's walk (stream_k.walk), one step at a time: (row tile, k-block) of step q is
    # at_step(q, ...) of what advance left after step q - 1
    at_step = cuda.jit(device=True, inline="always")(step_at)
    advance = cuda.jit(device=True, inline="always")(next_step)
    rotate_k = cuda.jit(device=True, inline="always")(rotated)

    @cuda.jit(device=True, inline="always")
    def settle(sk, part, count, out, bg, bu, sg, su, mt, ent, tiles, lane, T, h):
        # a piece of tile mt is in: the finisher warp counts it, and the last piece's adds
        # every piece in range order and runs the epilogue (the ranges' entries from word
        # ent of the table, the tiles' from word tiles). WR consumer threads' loads at
        # once, every piece's, then their stores: each round is a round trip behind the
        # ring's copies
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
                for v in range(WRNA):
                    sg[v] = float32(0.0)
                    su[v] = float32(0.0)
                for c in range(p0, p1 + 1):
                    pc = (2 * c + (0 if mt == sk[ent + ENTRY * c] else 1)) * SLOT + 32 * w0 + lane
                    for w in range(WR):
                        for i in range(NA):
                            sg[w * NA + i] += load_f32_cg(part, pc + 32 * w + i * 128)
                            su[w * NA + i] += load_f32_cg(part, pc + 32 * w + (NA + i) * 128)
                for w in range(WR):
                    for i in range(NA):
                        emit(out, bg, bu, mt, 32 * (w0 + w) + lane, i, sg[w * NA + i],
                             su[w * NA + i], T, h)

    @cuda.jit(device=True, inline="always")
    def settle_short(part, count, out, bg, bu, sg, su, gn, un, mt, p0, p1, s0, lane, T, h):
        # (short_settle) settle's sums in its order, fewer round trips in a row
        # (WgmmaGemvTile): p0, p1 and the first piece's slot s0 were read before the piece was
        # waited for; a later block's slot is 2c (its range starts in tile mt); the first two
        # pieces' loads go out together; a tile has two pieces at least (it is cut)
        last = 0
        if lane == 0:
            cuda.threadfence()  # the piece (ordered before the barrier) is visible
            if cuda.atomic.add(count, mt, 1) == p1 - p0:
                last = 1
                # every piece is in: ready for the next launch (no fence: the launch's end,
                # or the next launch's griddepcontrol.wait, orders it before that one's reads)
                count[mt] = 0
        last = cuda.shfl_sync(0xFFFFFFFF, last, 0)
        if last == 1:
            for w0 in range(0, 4, WR):
                pa = s0 + 32 * w0 + lane
                pb = 2 * (p0 + 1) * SLOT + 32 * w0 + lane
                for w in range(WR):
                    for i in range(NA):
                        sg[w * NA + i] = load_f32_cg(part, pa + 32 * w + i * 128)
                        su[w * NA + i] = load_f32_cg(part, pa + 32 * w + (NA + i) * 128)
                        gn[w * NA + i] = load_f32_cg(part, pb + 32 * w + i * 128)
                        un[w * NA + i] = load_f32_cg(part, pb + 32 * w + (NA + i) * 128)
                for v in range(WRNA):  # settle's order: 0, then each piece in block order
                    sg[v] = (float32(0.0) + sg[v]) + gn[v]
                    su[v] = (float32(0.0) + su[v]) + un[v]
                for c in range(p0 + 2, p1 + 1):  # a third piece and on, as settle
                    pc = 2 * c * SLOT + 32 * w0 + lane
                    for w in range(WR):
                        for i in range(NA):
                            sg[w * NA + i] += load_f32_cg(part, pc + 32 * w + i * 128)
                            su[w * NA + i] += load_f32_cg(part, pc + 32 * w + (NA + i) * 128)
                for w in range(WR):
                    for i in range(NA):
                        emit(out, bg, bu, mt, 32 * (w0 + w) + lane, i, sg[w * NA + i],
                             su[w * NA + i], T, h)

    @cuda.jit(device=True, inline="always")
    def take_range(base, rq, ri):  # (dynamic) the block's range ri from the scheduler's
        # queue: (range, row tile, k-block, length), this thread's read handed back
        qs = ri & 1
        mbar_wait(base + RQF + 8 * qs, (ri >> 1) & 1)
        r = rq[4 * qs]
        m = rq[4 * qs + 1]
        kb = rq[4 * qs + 2]
        n = rq[4 * qs + 3]
        mbar_arrive(base + RQE + 8 * qs)
        return r, m, kb, n

    @cuda.jit(device=True, inline="always")
    def stamp(count, at, t):  # the low 32 bits of a time (or a sum of ns) in the timeline
        count[at] = int32(t & uint64(0xFFFFFFFF))

    def wgmma_gemv(maps, sk, bg, bu, out, part, count, T, d, h):
        smem = cuda.shared.array(0, uint8)
        base = (shared_address(smem, 0) + uint32(ALIGN - 1)) & MASK
        tid = cuda.threadIdx.x
        # a traced block's timeline follows the row tiles' counters
        tr = ((h + (BM - 1)) >> 6) + NEV * cuda.blockIdx.x
        if TRACE and tid == 0:
            stamp(count, tr + E_START, globaltimer())
            count[tr + E_SM] = int32(smid())
        G = cuda.gridDim.x
        b = cuda.blockIdx.x
        e = ENTRY * b  # this block's walk (stream_k): its stream-K range, then whole tiles
        if PDL:  # the next call on the stream may place its blocks as this one's leave
            griddep_launch_dependents()
        if EARLY:  # the first reads of global memory on their way before the set-up
            m0 = sk[e]
            kb0 = sk[e + 1]
            n = sk[e + 2]
            w0 = sk[e + 3]
            nw = sk[e + 4]
            if tid == 0:
                tma_prefetch(global_address(maps, 0))
                tma_prefetch(global_address(maps, 16))
                tma_prefetch(global_address(maps, 32))
                if LEAD_ST:  # the first stages' weights asked of L2 before the set-up
                    lk = (d + (BK * KB - 1)) >> SHIFT
                    pm = m0
                    pkb = kb0
                    for pq in range(min(LEAD_ST, n + nw * lk)):
                        pm, pkb = at_step(pq, pm, pkb, n, w0)
                        for kk in range(KB):
                            tma_prefetch_2d(global_address(maps, 0), (pkb * KB + kk) * BK,
                                            pm * BM)
                            tma_prefetch_2d(global_address(maps, 16), (pkb * KB + kk) * BK,
                                            pm * BM)
                        pm, pkb = advance(pm, pkb, lk)
        if tid == 0:
            for s in range(ST):
                mbar_init(base + FULL + 8 * s, ARRIVALS)  # the producer's (+ the bytes)
                mbar_init(base + EMPTY + 8 * s, 1)  # the consumer's release
            for s in range(2):  # once a launch each: every consumer thread's piece stored
                mbar_init(base + SEAM + 8 * s, 128)
            if DYN:
                for s in range(2):  # a range in the queue: the scheduler's; read: all readers
                    mbar_init(base + RQF + 8 * s, 1)
                    mbar_init(base + RQE + 8 * s, 129)
                for s in range(4):  # a seam handed over: every consumer thread; taken: finisher
                    mbar_init(base + SFF + 8 * s, 128)
                    mbar_init(base + SFE + 8 * s, 1)
            fence_mbarrier_init()
        cuda.syncthreads()
        nk = (d + (BK * KB - 1)) >> SHIFT  # stages of a row tile (TMA reads zeros past d)
        half = (nk + 1) >> 1  # (fold: the k-blocks whose x is resident)
        pw = 1 << (31 - cuda.clz(int32(nk)))  # (rotate: the largest power of two <= nk)
        if DYN:  # the ranges (guided), their queue and the seams' records; the take counters
            R = sk[0]
            rq = cuda.shared.array(8, int32)
            srec = cuda.shared.array(8, int32)
            gc = ((h + (BM - 1)) >> 6) + (NEV * G if TRACE else 0)
        if not EARLY:
            m0 = sk[e]
            kb0 = sk[e + 1]
            n = sk[e + 2]
            w0 = sk[e + 3]
            nw = sk[e + 4]
        if tid < 128:  # the producer
            if (tid < 32) if CPA else (tid == 0):  # the threads that copy
                map_g = global_address(maps, 0)
                map_u = global_address(maps, 16)
                map_x = global_address(maps, 32)
                s = 0
                ph = 0
                m = m0
                kb = kb0
                total = n + nw * nk
                pm = m0  # the prefetch's walk, PF k-blocks ahead of the copies'
                pkb = kb0
                for pq in range(PF):
                    pm, pkb = at_step(pq, pm, pkb, n, w0)
                    pm, pkb = advance(pm, pkb, nk)
                blocked = uint64(0)  # (the trace's sum)
                once = l2_evict_first() if HINTS else uint64(0)
                if CPA:  # the weights' addresses follow their maps (decode_mlp.prepare)
                    wg_at = maps[48]
                    wu_at = maps[49]
                again = l2_evict_last() if HINTS else uint64(0)
                ri = 0  # (dynamic) ranges taken from the queue
                ahead = 0  # (pdl) the stages copied before the wait
                if PDL:  # the first stages' weights before the kernel before this one is
                    ahead = min(ST, total)  # waited for (the ring is empty: nothing to wait for)
                    for q in range(ahead):
                        m, kb = at_step(q, m, kb, n, w0)
                        full = base + FULL + 8 * q
                        # (the tokens' bytes counted now, too: resident x's only on a first use)
                        xnew = not XRES or first_box(q, kb, n, kb0, nk)
                        mbar_arrive_expect_tx(full, TX if xnew else TXW)
                        st = base + RING + q * SB
                        for kk in range(KB):
                            kc = (kb * KB + kk) * BK
                            copy_box(st + kk * WB, map_g, kc, m * BM, full, once)
                            copy_box(st + U_OFF + kk * WB, map_u, kc, m * BM, full, once)
                        m, kb = advance(m, kb, nk)
                    griddep_wait()  # what the kernel before wrote (the tokens) is there now
                    m = m0
                    kb = kb0
                    for q in range(ahead):  # the same stages again: their tokens
                        m, kb = at_step(q, m, kb, n, w0)
                        full = base + FULL + 8 * q
                        st = base + RING + q * SB
                        xnew = not XRES or first_box(q, kb, n, kb0, nk)
                        for kk in range(KB):
                            kc = (kb * KB + kk) * BK
                            if not XRES:
                                copy_box(st + X_OFF + kk * XS, map_x, kc, 0, full, again)
                            elif xnew:
                                copy_box(base + XREG + (kb * KB + kk) * XS, map_x, kc, 0, full,
                                         again)
                        m, kb = advance(m, kb, nk)
                        s, ph = ring_next(s, ph, ST)
                    m = m0  # (the loop below walks those stages again, copying nothing)
                    kb = kb0
                while True:
                    if DYN:  # the next range from the scheduler warp's queue
                        rr, m, kb, n = take_range(base, rq, ri)
                        if rr < 0:
                            break
                        total = n
                        ri += 1
                    for q in range(total):
                        m, kb = at_step(q, m, kb, n, w0)
                        # (pdl: the stages copied above, walked past; the loop starts at 0 so
                        # that the other tiles' kernels compile to the PTX they always had)
                        if PDL and q < ahead:
                            m, kb = advance(m, kb, nk)
                            continue
                        if PF:  # k-block q + PF's weights, into L2 only
                            pm, pkb = at_step(q + PF, pm, pkb, n, w0)
                            if q + PF < total:
                                for kk in range(KB):
                                    kc = (pkb * KB + kk) * BK
                                    tma_prefetch_2d(map_g, kc, pm * BM)
                                    tma_prefetch_2d(map_u, kc, pm * BM)
                            pm, pkb = advance(pm, pkb, nk)
                        if TRACE:
                            tw = globaltimer()
                        mbar_wait(base + EMPTY + 8 * s, ph ^ 1)  # the consumer is done with it
                        if TRACE:
                            blocked += globaltimer() - tw
                        full = base + FULL + 8 * s
                        # resident x: each box comes with the first stage of its k-block (the
                        # range's first nk stages; a whole tile's where the range missed it)
                        xnew = not XRES or first_box(q, kb, n, kb0, nk)
                        if FOLD and kb >= half:
                            xnew = False
                        if not CPA:
                            mbar_arrive_expect_tx(full, TX if xnew else TXW)
                        elif tid == 0:
                            mbar_arrive_expect_tx(full, XTX if xnew else 0)
                        st = base + RING + s * SB
                        # (rotate: tile m read from its k-block m ROT on, a fixed order: the
                        # same sums every launch, so the SMs' copies fall on other columns)
                        kr = rotate_k(kb, m, ROT, pw, nk) if ROT else kb
                        for kk in range(KB):  # a row's 128 KB bytes asked for back to back
                            kc = (kr * KB + kk) * BK
                            if CPA:
                                wbox(st + kk * WB, wg_at, d, m * BM, kc, h, d, tid, once)
                                wbox(st + U_OFF + kk * WB, wu_at, d, m * BM, kc, h, d, tid, once)
                                if tid > 0:
                                    continue
                            else:
                                copy_box(st + kk * WB, map_g, kc, m * BM, full, once)
                                copy_box(st + U_OFF + kk * WB, map_u, kc, m * BM, full, once)
                            if not XRES:
                                copy_box(st + X_OFF + kk * XS, map_x, kc, 0, full, again)
                            elif xnew:
                                copy_box(base + XREG + (kb * KB + kk) * XS, map_x, kc, 0, full,
                                         again)
                        if CPA:
                            cp_async_arrive_noinc(full)
                        if TRACE and q == 0 and tid == 0:
                            stamp(count, tr + E_COPY, globaltimer())
                        m, kb = advance(m, kb, nk)
                        s, ph = ring_next(s, ph, ST)
                    if not DYN:
                        break
                if TRACE and tid == 0:
                    stamp(count, tr + E_LAST, globaltimer())
                    stamp(count, tr + E_BLOCKED, blocked)
            elif 32 <= tid < 64 and DYN:  # (dynamic) the finisher: each seam as handed over
                lane = tid - 32
                sg = cuda.local.array(WRNA, float32)
                su = cuda.local.array(WRNA, float32)
                sc = 0
                while True:
                    ss = sc & 3
                    mbar_wait(base + SFF + 8 * ss, (sc >> 2) & 1)
                    mt = srec[2 * ss]
                    cuda.syncwarp()
                    if lane == 0:
                        mbar_arrive(base + SFE + 8 * ss)
                    if mt < 0:
                        break
                    sc += 1
                    settle(sk, part, count, out, bg, bu, sg, su, mt, 1, 1 + ENTRY * R, lane, T,
                           h)
            elif DYN and tid == 64:  # (dynamic) the scheduler: the block's ranges, in a queue
                r = b  # its first range is its own (ranges 0 .. G - 1, the long ones)
                ri = 0
                while True:
                    qs = ri & 1
                    if ri >= 2:  # the producer and the consumer have both read what was here
                        mbar_wait(base + RQE + 8 * qs, ((ri >> 1) - 1) & 1)
                    if ri >= 1:  # the next range no block has taken yet
                        r = cuda.atomic.add(count, gc, 1) + G
                    if r < R:
                        e1 = 1 + ENTRY * r
                        rq[4 * qs + 1] = sk[e1]
                        rq[4 * qs + 2] = sk[e1 + 1]
                        rq[4 * qs + 3] = sk[e1 + 2]
                        rq[4 * qs] = r
                    else:
                        rq[4 * qs] = -1
                    mbar_arrive(base + RQF + 8 * qs)  # (releases the words above)
                    if r >= R:  # the last block to run out sets both counters back to zero
                        cuda.threadfence()
                        if cuda.atomic.add(count, gc + 1, 1) == G - 1:
                            count[gc] = 0
                            count[gc + 1] = 0
                            cuda.threadfence()
                        break
                    ri += 1
            elif 32 <= tid < 64:  # the finisher warp: the range's seams, off the consumer's path
                if PDL:  # the workspace and out: the kernel before may use them
                    griddep_wait()
                lane = tid - 32
                busy = uint64(0)
                sg = cuda.local.array(WRNA, float32)  # WR consumer threads' sums
                su = cuda.local.array(WRNA, float32)
                gn = cuda.local.array(WRS, float32)  # (short_settle) the second piece's
                un = cuda.local.array(WRS, float32)
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
                    if SHORT:  # its blocks and first slot on their way while it is waited for
                        p0 = sk[ENTRY * G + 2 * mt]
                        p1 = sk[ENTRY * G + 2 * mt + 1]
                        s0 = (2 * p0 + (0 if mt == sk[ENTRY * p0] else 1)) * SLOT
                    mbar_wait(base + SEAM + 8 * (0 if mt == m0 else 1), 0)
                    if TRACE:
                        t0 = globaltimer()
                    if SHORT:
                        settle_short(part, count, out, bg, bu, sg, su, gn, un, mt, p0, p1, s0,
                                     lane, T, h)
                    else:
                        settle(sk, part, count, out, bg, bu, sg, su, mt, 0, ENTRY * G, lane, T,
                               h)
                    if TRACE:
                        busy += globaltimer() - t0
                if TRACE and lane == 0:
                    stamp(count, tr + E_SUM, busy)
                    stamp(count, tr + E_FIN, globaltimer())
        else:  # the consumer warpgroup
            if PDL:  # the workspace, the biases and out: after the kernel before
                griddep_wait()
            lt = tid - 128
            accg = cuda.local.array(NA, float32)
            accu = cuda.local.array(NA, float32)
            s = 0
            ph = 0
            prev = 0
            m = m0
            kb = kb0
            left = n
            whole = 0  # 1 once the range is read and the whole tiles begin
            meet = uint64(0)  # (the trace's sums)
            starved = uint64(0)
            t0 = uint64(0)
            first = 1
            ri = 0  # (dynamic) ranges taken from the queue, seams handed over
            sc = 0
            cb = b  # whose slots the seams go to: this block's, or (dynamic) its range's
            while True:
                if DYN:  # the next range from the scheduler warp's queue
                    rr, m0, kb0, n = take_range(base, rq, ri)
                    if rr < 0:
                        break
                    ri += 1
                    cb = rr
                    m = m0
                    kb = kb0
                    left = n
                    whole = 0
                    nw = 0
                while left > 0 or whole == 0:
                    if left == 0:  # the range read (or empty): the whole tiles, if any
                        whole = 1
                        m = w0
                        kb = 0
                        left = nw * nk
                        if left == 0:
                            break
                    nb = min(nk - kb, left)
                    for q in range(nb):
                        if TRACE and lt == 0:
                            tw = globaltimer()
                        mbar_wait(base + FULL + 8 * s, ph)  # the stage's bytes have landed
                        if TRACE and lt == 0:
                            starved += globaltimer() - tw
                        if CPA:  # the cp.async wrote through the generic proxy; wgmma reads async
                            fence_proxy_async()
                        if TRACE and lt == 0 and first == 1:
                            stamp(count, tr + E_LANDED, globaltimer())
                        first = 0
                        st = base + RING + s * SB
                        # x's boxes: in the stage, or where the first stage of this k left them
                        xk = kb + q
                        if FOLD and xk >= half:
                            xk -= half
                        xs = base + XREG + xk * KB * XS if XRES else st + X_OFF
                        wgmma_fence()
                        for kk in range(KB):
                            da = DESC | uint64((st + kk * WB) >> 4)
                            du = DESC | uint64((st + U_OFF + kk * WB) >> 4)
                            dx = DESC | uint64((xs + kk * XS) >> 4)
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
                            wgmma_wait(0)  # this k-block's are done: its stage is free at once
                            if lt == 0:
                                mbar_arrive(base + EMPTY + 8 * s)
                        prev = s
                        s, ph = ring_next(s, ph, ST)
                    wgmma_wait(0)
                    if HOLD and lt == 0:
                        mbar_arrive(base + EMPTY + 8 * prev)
                    if TRACE and lt == 0:
                        t0 = globaltimer()
                        stamp(count, tr + E_WGMMA, t0)
                    left -= nb
                    kb = 0
                    m += 1
                    mt = m - 1  # the tile just read
                    # a seam: this block read only part of tile mt. Its piece goes to its
                    # slot and the finisher warp takes it from there (counts it; the last
                    # piece's finisher sums them all): the consumer reads on at once
                    if nb < nk:
                        pb = (2 * cb + (0 if mt == m0 else 1)) * SLOT
                        if DYN:  # a slot of the seams' ring the finisher has emptied
                            ss = sc & 3
                            if sc >= 4:
                                mbar_wait(base + SFE + 8 * ss, ((sc >> 2) - 1) & 1)
                            if lt == 0:
                                srec[2 * ss] = mt
                        for i in range(NA):
                            part[pb + i * 128 + lt] = accg[i]
                            part[pb + (NA + i) * 128 + lt] = accu[i]
                        # (mbarrier.arrive releases: the stores come before it for the finisher)
                        if DYN:
                            mbar_arrive(base + SFF + 8 * ss)
                            sc += 1
                        else:
                            mbar_arrive(base + SEAM + 8 * (0 if mt == m0 else 1))
                        if TRACE and lt == 0:
                            meet += globaltimer() - t0
                        continue
                    for i in range(NA):  # a whole tile: the epilogue from registers
                        emit(out, bg, bu, mt, lt, i, accg[i], accu[i], T, h)
                if not DYN:
                    break
            if DYN:  # the finisher stops at a seam of tile -1
                ss = sc & 3
                if sc >= 4:
                    mbar_wait(base + SFE + 8 * ss, ((sc >> 2) - 1) & 1)
                if lt == 0:
                    srec[2 * ss] = -1
                mbar_arrive(base + SFF + 8 * ss)
            if TRACE and lt == 0:
                stamp(count, tr + E_END, globaltimer())
                stamp(count, tr + E_MEET, meet)
                stamp(count, tr + E_STARVED, starved)

    return cuda.jit(fastmath=True, launch_bounds=(256, tile.ctas_per_sm))(wgmma_gemv)
