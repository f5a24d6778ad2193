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
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32, int32, uint8, uint32, uint64

from .block_trace import RAW_EVENTS, TRACE_EVENTS, timeline, traced_runs
from .fused import silu_mul
from .hopper import SIMULATED, SWIZZLE_PERIOD, descriptor
from .launch import MAX_SHARED, RESERVED_SHARED, SM_SHARED
from .stream_k import ENTRY, first_visit

__all__ = ["WgmmaGemvTile", "MAX_T", "gemv_tile", "make_wgmma_gemv", "output_of", "BK", "BM",
           "TRACE_EVENTS", "RAW_EVENTS", "timeline", "traced_runs"]

BM = 64  # rows of each weight per row tile: wgmma's M
BK = 64  # k per box: 64 halves = one 128-byte swizzled row
ALIGN = SWIZZLE_PERIOD  # a 128B-swizzled box starts on 1024 bytes
#: the most tokens: N = 64 keeps a thread's 64 accumulators (gate and up) in registers
MAX_T = 64


@dataclass(frozen=True)
class WgmmaGemvTile:
    """The kernel's geometry: ``n`` (wgmma's N: the tokens, rounded up to 8), ``stages`` (the
    ring), ``ctas_per_sm`` (blocks per SM of the persistent grid), ``kblocks`` (64-column
    boxes of each operand a stage holds: a weight row is read ``128 kblocks`` contiguous
    bytes at a time), ``promotion`` (the L2 fill size the TMA copies ask for), ``waves``
    (the grid is ``waves`` times what the SMs hold at once, each block a shorter range:
    beyond 1 the hardware hands the ranges to whichever SM is free, more seams),
    ``x_resident`` (the tokens stay in shared memory: each block copies each box of x once,
    with the weights of the first stage that needs it, instead of once a stage); ``trace``
    (a diagnostic, never the dispatcher's: each block writes a timeline of
    :data:`TRACE_EVENTS` after the seams' counters, :func:`timeline` reads it); ``hold``
    (k-blocks of wgmma the consumer leaves in flight: 1, a stage is handed back once the next
    one's wgmma are issued and its own are done; 0, as soon as its own are done);
    ``prefetch`` (if not 0, the producer also asks L2 for the weights of the k-block that
    many stages past the one it copies, ``cp.async.bulk.prefetch``: bytes on their way from
    HBM beyond what the ring's shared memory holds); ``early`` (the block's first global
    reads, its walk's five words and the three tensor maps, are asked for before the
    barriers are set up, so their round trips overlap it; False: after, the control);
    ``fold`` (a diagnostic of traffic only, wrong sums, never dispatched: x resident for the
    first half of d, the second half's wgmma reading the first half's boxes and no x copied
    for them: the shared memory and x traffic of a kernel that splits d between two SMs);
    ``hints`` (the copies tell L2 the weights are read once, ``evict_first``, and x again by
    every SM, ``evict_last``: without them L2 keeps the streamed weights as long as the
    tokens every SM reads again; False: no hint, the control)."""

    n: int = 16
    stages: int = 8
    ctas_per_sm: int = 1
    kblocks: int = 1
    promotion: str = "256B"
    waves: int = 1
    x_resident: bool = False
    trace: bool = False
    hold: int = 1
    prefetch: int = 0
    early: bool = True
    fold: bool = False
    hints: bool = True

    @property
    def w_bytes(self):  # one weight's box: 64 rows x 64 halves
        return BM * BK * 2

    @property
    def x_bytes(self):  # the tokens' box: n rows x 64 halves
        return self.n * BK * 2

    @property
    def x_slot(self):  # a tokens' box in shared memory, 1024-aligned
        return -(-self.x_bytes // ALIGN) * ALIGN

    @property
    def tx_bytes(self):  # what one stage's copies deliver (x's only on a first use if resident)
        return self.kblocks * (2 * self.w_bytes + self.x_bytes)

    @property
    def stage_bytes(self):  # a stage in shared memory: wg's boxes, wu's, the tokens' (if not resident)
        return self.kblocks * (2 * self.w_bytes + (0 if self.x_resident else self.x_slot))

    @property
    def stage_k(self):  # k a stage covers
        return self.kblocks * BK

    @property
    def layout(self) -> dict:
        """Byte offsets from a 1024-aligned base: the full and the empty barriers, the two
        seam barriers (a block's pieces handed to its finisher warp), the ring, then
        (``x_resident``) the tokens' boxes, ``x_slot`` each."""
        ring = -(-(16 * self.stages + 16) // ALIGN) * ALIGN
        x = ring + self.stages * self.stage_bytes
        return {"full": 0, "empty": 8 * self.stages, "seam": 16 * self.stages, "ring": ring,
                "x": x, "end": x}

    @property
    def shared_bytes(self):
        """Dynamic shared memory without the resident tokens (:meth:`shared_for`)."""
        return self.layout["end"] + ALIGN

    def shared_for(self, d: int) -> int:
        """Dynamic shared memory for rows of ``d`` halves: with ``x_resident``, room for
        every box of x a row tile's stages read."""
        if not self.x_resident:
            return self.shared_bytes
        boxes = -(-d // self.stage_k)
        if self.fold:
            boxes = -(-boxes // 2)
        return self.shared_bytes + boxes * self.kblocks * self.x_slot

    def fits(self, d: int = 0) -> bool:
        """Whether ``ctas_per_sm`` blocks fit an SM's shared memory (at rows of ``d`` halves
        if x is resident; 0: the ring and barriers alone)."""
        need = self.shared_for(d)
        return need <= MAX_SHARED and self.ctas_per_sm * (need + RESERVED_SHARED) <= SM_SHARED

    @property
    def accumulators(self):  # float32 a consumer thread holds per weight
        return self.n // 2

    def validate(self) -> "WgmmaGemvTile":
        p = []
        if self.n % 8 or not 8 <= self.n <= MAX_T:
            p.append(f"n must be a multiple of 8 from 8 to {MAX_T}")
        if self.stages < 2:
            p.append("stages must be at least 2")
        if self.ctas_per_sm not in (1, 2):
            p.append("ctas_per_sm must be 1 or 2")
        if self.waves < 1:
            p.append("waves must be at least 1")
        if self.fold and not self.x_resident:
            p.append("fold needs x_resident")
        if not 0 <= self.prefetch <= 32:
            p.append("prefetch must be 0 to 32 stages")
        if self.hold not in (0, 1):
            p.append("hold must be 0 or 1")
        if self.kblocks not in (1, 2, 4):
            p.append("kblocks must be 1, 2 or 4")
        if self.promotion not in ("none", "64B", "128B", "256B"):
            p.append("promotion must be none, 64B, 128B or 256B")
        if not self.fits():
            p.append(f"{self.ctas_per_sm} block(s) of {self.shared_bytes} bytes of shared memory"
                     f" do not fit (a block gets at most {MAX_SHARED}, an SM {SM_SHARED} with "
                     f"{RESERVED_SHARED} of each block's reserved)")
        if p:
            raise ValueError(f"invalid {self}: " + "; ".join(p))
        return self

    def describe(self) -> str:
        return (f"wgmma m64n{self.n}k16 twice a k16 (gate and up rows, the tokens shared), "
                f"{self.stages} stages of {self.tx_bytes:,} bytes (k {self.stage_k}: "
                f"{self.kblocks * self.w_bytes // 1024} KiB of each weight + "
                f"{self.kblocks * self.x_bytes:,} of tokens), {self.ctas_per_sm} block(s) "
                f"an SM, {self.shared_bytes:,} bytes of dynamic shared memory")


def gemv_tile(T: int, d: int = 4096) -> WgmmaGemvTile:
    """The default tile for T tokens and rows of d halves. Up to 16 tokens: four stages of two
    boxes along k (a weight row read 256 bytes at a time), x copied a stage (the L2 hints keep
    it there); beyond: six stages of one box, x resident where it fits. Every copy with its L2
    hint (``hints``). The H100's measurements behind it (records/bench/weight_stream_hints_h100.json):
    with the hints, at T = 16 four stages of two boxes with x copied 82.9-83.0 us against 83.4-83.5
    for three beside resident x (84.6-84.8 without the hints) and 84.6 / 86.7 for five / six;
    at T = 4 81.2 against 81.4 for resident x (82.0-82.2 without); at T = 24 six stages of one
    box 82.1 against four of two 82.9 (88.9 before the hints,
    decode_tune_hopper_switch_h100.json)."""
    if not 1 <= T <= MAX_T:
        raise ValueError(f"the Hopper GEMV takes 1 to {MAX_T} tokens, got T = {T}")
    n = -(-T // 8) * 8
    if n <= 16:
        return WgmmaGemvTile(n=n, stages=4, kblocks=2)
    tile = WgmmaGemvTile(n=n, stages=6, x_resident=True)
    return tile if tile.fits(d) else WgmmaGemvTile(n=n, stages=6)


# ---------------------------------------------------------------------------------------
# the epilogue's map (the kernel runs it)


def output_of(lt: int, i: int):
    """(row of the tile, token) of consumer thread ``lt``'s accumulator ``i``, in both
    weights: where wgmma leaves it (:func:`book.kernels.hopper.d_coords`), so the epilogue
    is elementwise (the kernel runs this same function)."""
    row = 16 * (lt >> 5) + ((lt & 31) >> 2) + 8 * ((i >> 1) & 1)
    return row, 8 * (i >> 2) + 2 * (lt & 3) + (i & 1)


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
    from .hopper import (fence_mbarrier_init, global_address, globaltimer, make_wgmma,
                         mbar_arrive, mbar_arrive_expect_tx, mbar_init, mbar_wait,
                         l2_evict_first, l2_evict_last, ring_next, shared_address, smid,
                         tma_load_2d, tma_load_2d_hint, tma_prefetch,
                         tma_prefetch_2d, wgmma_commit,
                         wgmma_fence, wgmma_wait)
    from .splitk import load_f32_cg
    from .wide import load_f32, store_f32

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
    @cuda.jit(device=True, inline="always")
    def at_step(q, m, kb, n, w0):  # the range read at step n: the block's whole tiles
        if q == n:
            return w0, 0
        return m, kb

    @cuda.jit(device=True, inline="always")
    def advance(m, kb, nk):
        kb += 1
        if kb == nk:
            return m + 1, 0
        return m, kb

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
        if tid == 0:
            for s in range(ST):
                mbar_init(base + FULL + 8 * s, 1)  # the producer's arrive (+ the bytes)
                mbar_init(base + EMPTY + 8 * s, 1)  # the consumer's release
            for s in range(2):  # once a launch each: every consumer thread's piece stored
                mbar_init(base + SEAM + 8 * s, 128)
            fence_mbarrier_init()
        cuda.syncthreads()
        nk = (d + (BK * KB - 1)) >> SHIFT  # stages of a row tile (TMA reads zeros past d)
        half = (nk + 1) >> 1  # (fold: the k-blocks whose x is resident)
        if not EARLY:
            m0 = sk[e]
            kb0 = sk[e + 1]
            n = sk[e + 2]
            w0 = sk[e + 3]
            nw = sk[e + 4]
        if tid < 128:  # the producer
            if tid == 0:
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
                again = l2_evict_last() if HINTS else uint64(0)
                for q in range(total):
                    m, kb = at_step(q, m, kb, n, w0)
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
                    mbar_arrive_expect_tx(full, TX if xnew else TXW)
                    st = base + RING + s * SB
                    for kk in range(KB):  # a row's 128 KB bytes asked for back to back
                        kc = (kb * KB + kk) * BK
                        copy_box(st + kk * WB, map_g, kc, m * BM, full, once)
                        copy_box(st + U_OFF + kk * WB, map_u, kc, m * BM, full, once)
                        if not XRES:
                            copy_box(st + X_OFF + kk * XS, map_x, kc, 0, full, again)
                        elif xnew:
                            copy_box(base + XREG + (kb * KB + kk) * XS, map_x, kc, 0, full,
                                     again)
                    if TRACE and q == 0:
                        stamp(count, tr + E_COPY, globaltimer())
                    m, kb = advance(m, kb, nk)
                    s, ph = ring_next(s, ph, ST)
                if TRACE:
                    stamp(count, tr + E_LAST, globaltimer())
                    stamp(count, tr + E_BLOCKED, blocked)
            elif tid < 64:  # the finisher warp: the range's seams, off the consumer's path
                lane = tid - 32
                busy = uint64(0)
                sg = cuda.local.array(WRNA, float32)  # WR consumer threads' sums
                su = cuda.local.array(WRNA, float32)
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
                    mbar_wait(base + SEAM + 8 * (0 if mt == m0 else 1), 0)
                    if TRACE:
                        t0 = globaltimer()
                    p0 = sk[ENTRY * G + 2 * mt]
                    p1 = sk[ENTRY * G + 2 * mt + 1]
                    last = 0
                    if lane == 0:
                        cuda.threadfence()  # the piece (ordered before the barrier) is visible
                        before = cuda.atomic.add(count, mt, 1)
                        if before == p1 - p0:
                            last = 1
                            count[mt] = 0  # every piece is in: ready for the next launch
                            cuda.threadfence()
                    last = cuda.shfl_sync(0xFFFFFFFF, last, 0)
                    if last == 1:  # the last piece: every piece's sums, in block order
                        # (WR consumer threads' loads at once, every piece's, then their
                        # stores: each round is a round trip behind the ring's copies)
                        for w0 in range(0, 4, WR):
                            for v in range(WRNA):
                                sg[v] = float32(0.0)
                                su[v] = float32(0.0)
                            for c in range(p0, p1 + 1):
                                pc = ((2 * c + (0 if mt == sk[ENTRY * c] else 1)) * SLOT
                                      + 32 * w0 + lane)
                                for w in range(WR):
                                    for i in range(NA):
                                        sg[w * NA + i] += load_f32_cg(part, pc + 32 * w
                                                                      + i * 128)
                                        su[w * NA + i] += load_f32_cg(part, pc + 32 * w
                                                                      + (NA + i) * 128)
                            for w in range(WR):
                                for i in range(NA):
                                    emit(out, bg, bu, mt, 32 * (w0 + w) + lane, i,
                                         sg[w * NA + i], su[w * NA + i], T, h)
                    if TRACE:
                        busy += globaltimer() - t0
                if TRACE and lane == 0:
                    stamp(count, tr + E_SUM, busy)
                    stamp(count, tr + E_FIN, globaltimer())
        else:  # the consumer warpgroup
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
                    pb = (2 * b + (0 if mt == m0 else 1)) * SLOT
                    for i in range(NA):
                        part[pb + i * 128 + lt] = accg[i]
                        part[pb + (NA + i) * 128 + lt] = accu[i]
                    # (mbarrier.arrive releases: the stores come before it for the finisher)
                    mbar_arrive(base + SEAM + 8 * (0 if mt == m0 else 1))
                    if TRACE and lt == 0:
                        meet += globaltimer() - t0
                    continue
                for i in range(NA):  # a whole tile: the epilogue from registers
                    emit(out, bg, bu, mt, lt, i, accg[i], accu[i], T, h)
            if TRACE and lt == 0:
                stamp(count, tr + E_END, globaltimer())
                stamp(count, tr + E_MEET, meet)
                stamp(count, tr + E_STARVED, starved)

    return cuda.jit(fastmath=True, launch_bounds=(256, tile.ctas_per_sm))(wgmma_gemv)
