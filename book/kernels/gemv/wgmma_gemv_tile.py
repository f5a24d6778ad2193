"""The wgmma decode GEMV's geometry (:mod:`book.kernels.wgmma_gemv`): its tile as named
sizes one can print and test, the default tile for T tokens, and where a consumer thread's
accumulators land in the output; the fixes its default tile takes (:data:`FIXES`). Plain
Python: the simulator imports it, the kernel reads it.
"""

from __future__ import annotations

import dataclasses

from ..instructions.hopper import SWIZZLE_PERIOD
from ..host.launch import MAX_SHARED, RESERVED_SHARED, SM_SHARED
from ..gemms.tile import TileShape

__all__ = ["WgmmaGemvTile", "MAX_T", "gemv_tile", "output_of", "BK", "BM", "ALIGN",
           "PROMOTION", "promotion_for", "LEAD", "lead_for", "FIXES"]

BM = 64  # rows of each weight per row tile: wgmma's M
BK = 64  # k per box: 64 halves = one 128-byte swizzled row
ALIGN = SWIZZLE_PERIOD  # a 128B-swizzled box starts on 1024 bytes
#: the most tokens: N = 64 keeps a thread's 64 accumulators (gate and up) in registers
MAX_T = 64


@dataclasses.dataclass(frozen=True)
class WgmmaGemvTile(TileShape):
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
    tokens every SM reads again; False: no hint, the control); ``cpasync`` (warp 0's 32
    threads copy the weights' boxes with 16-byte ``cp.async`` into the layout TMA leaves,
    :func:`book.kernels.hopper.make_cp_async_box`, the load path every thread has; the tokens
    still by TMA; False: one thread's TMA copies); ``rotate`` (row tile m's stages read from
    stage ``m rotate`` on (modulo the largest power of two that is at most the stages of a
    tile), wrapping: at any moment the SMs ask for different columns of their rows; a fixed
    order, the same sums every launch; 0: every tile from column 0); ``dynamic`` (if not 0:
    each block reads one of equal ranges over the first ``100 - pool`` percent of the
    iterations, then ranges of ``dynamic`` stages, taken by whichever block runs out of work
    first: SMs that read faster read more; :func:`book.kernels.stream_k.guided`; a
    scheduler warp, warp 2, queues each block's next range; its first run on a GPU hung on
    warp 0's lanes 1-31 running the finisher's loop, fixed since; since run, correct (its GPU tests pass on the H100)
    and slow: 93-191 us against the default's 80.5-82.2, records/bench/
    weight_stream_dynamic_h100.json, each short range a seam more: a dead end as built, kept
    as the control of the balance it was for); ``lead`` (if not 0: at its entry, before the
    barriers are set up, the producer thread asks L2 for the weights of its first ``lead``
    stages, ``cp.async.bulk.prefetch``; needs ``early``; the default on the GPUs of
    :data:`LEAD`).

    Two fixes first built for the FP8 GEMV (:class:`book.kernels.fp8_gemv_tile.Fp8GemvTile`
    inherits them from here; records/fp8/README.md has their runs there), on in
    :func:`gemv_tile`'s tile (:data:`FIXES`; ``fixes=False``: the bare tile, their control),
    each giving the bare tile's bits (the same products, the same order of sums; the GPU lane
    checks it). ``pdl``: a programmatic dependent launch. The call may start while the
    kernel before it on the stream ends: its producer asks for its first ``stages`` stages
    of weights (which nothing on the GPU writes) before it waits for that kernel
    (``griddep_wait``), then for their tokens; every other thread waits before it reads or
    writes global memory (the stream-K table and the tensor maps, written from the host, are
    read before). What it attacks: the fixed cost of a call's start and of the tail before
    it. One thread's TMA copies in the walk's order: not with ``dynamic``, ``cpasync``,
    ``prefetch``, ``rotate`` or ``fold``; nor ``trace`` (a traced launch runs alone,
    :func:`book.kernels.block_trace.traced_runs`, with nothing before it to overlap).
    ``short_settle``: the finisher warp's sum of a seam's pieces with fewer global round trips
    one after another (each queued behind the ring's copies on the SM's return path): the
    tile's blocks and first slot read from the stream-K table before the piece is waited for,
    a later block's slot by arithmetic (2c: a block after the tile's first starts its range in
    it), the first two pieces' loads issued together, and no fence after the counter's reset
    (the launch's end, or the next launch's ``griddepcontrol.wait``, orders it); the same
    finisher, the same order of sums. The static walk's seams only: not with ``dynamic``."""

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
    cpasync: bool = False
    rotate: int = 0
    dynamic: int = 0
    pool: int = 15
    lead: int = 0
    pdl: bool = False
    short_settle: bool = False

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
        bars = 16 * self.stages + 16  # (dynamic: the ranges' queue and the seams' ring after)
        ring = -(-(bars + (96 if self.dynamic else 0)) // ALIGN) * ALIGN
        x = ring + self.stages * self.stage_bytes
        return {"full": 0, "empty": 8 * self.stages, "seam": 16 * self.stages, "ring": ring,
                "x": x, "end": x, "rq_full": bars, "rq_empty": bars + 16,
                "seam_full": bars + 32, "seam_free": bars + 64}

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

    def problems(self) -> list[str]:
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
        if self.rotate and (self.x_resident or self.prefetch or not 0 <= self.rotate < 64):
            p.append("rotate (0 to 63) copies x a stage, with no prefetch")
        if self.dynamic and (self.x_resident or self.prefetch or self.rotate or self.fold
                             or self.cpasync or self.ctas_per_sm > 1 or self.waves > 1):
            p.append("dynamic ranges copy x a stage, one block an SM, one wave, no prefetch, "
                     "rotate or cp.async")
        if not (0 <= self.dynamic <= 64 and 0 <= self.pool < 100):
            p.append("dynamic must be 0 to 64 stages and pool 0 to 99 percent")
        if not 0 <= self.lead <= 32 or self.lead and (not self.early or self.dynamic
                                                       or self.cpasync or self.rotate):
            p.append("lead must be 0 to 32 stages, with early and without dynamic, cpasync "
                     "or rotate")
        if self.pdl and (self.dynamic or self.cpasync or self.prefetch or self.rotate
                         or self.fold or self.trace):
            p.append("pdl copies the first stages from one thread by TMA in the walk's order "
                     "before it waits: not with dynamic, cpasync, prefetch, rotate, fold or "
                     "trace (a traced launch runs alone: nothing before it to overlap)")
        if self.short_settle and self.dynamic:
            p.append("short_settle settles the static walk's seams: not with dynamic ranges")
        if self.cpasync and (self.prefetch or not self.hints):
            p.append("cpasync copies with the L2 hints and no prefetch")
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
        return p

    def describe(self) -> str:
        return (f"wgmma m64n{self.n}k16 twice a k16 (gate and up rows, the tokens shared), "
                f"{self.stages} stages of {self.tx_bytes:,} bytes (k {self.stage_k}: "
                f"{self.kblocks * self.w_bytes // 1024} KiB of each weight + "
                f"{self.kblocks * self.x_bytes:,} of tokens), {self.ctas_per_sm} block(s) "
                f"an SM, {self.shared_bytes:,} bytes of dynamic shared memory"
                + (", launched as a dependent of the kernel before it" if self.pdl else "")
                + (", the seams settled in short" if self.short_settle else ""))


#: The L2 promotion of the copies (how much L2 fetches from HBM around the lines a TMA copy
#: asks for) where a GPU reads faster with another than the default 256 bytes: the H200 reads
#: the weights' 64 x 64 boxes slower with it (the TMA probe: 58.9-59.2 us against 56.0-56.5
#: with 128 bytes or none), the H100 faster (the probe 79.2 against 81.0 with none; the GEMV
#: at T = 16 82.8-83.0 against 84.0 with 128; records/bench/weight_stream_promotion_h200.json,
#: weight_stream_h100.json, weight_stream_hints2_h100.json). Matched in the GPU's name.
PROMOTION = {"H200": "128B"}


#: The stages whose weights a block asks L2 for before it sets up (``WgmmaGemvTile.lead``),
#: up to 16 tokens, per GPU (matched in its name; 0 where it names none). The GEMV at T = 4 /
#: 16 (records/bench/weight_stream_lead_h200.json, _lead2_h200, _lead_h100.json): on an H200
#: 56.2 / 57.1 us with 4 against 57.6 / 58.5 without (beside 57.9-66.4 for six stages, four
#: boxes a stage or an L2 prefetch two stages ahead), on another 55.2 / 55.8 against 55.8 /
#: 57.2 (2: 55.0 / 56.2, 8: 55.1 / 56.0); on the H100 78.9 / 79.9 against 80.6 / 82.2 (2: 78.9 /
#: 80.2, 8: 81.6 / 82.7). Not the start's latency hidden: traced at T = 16 on the H100 a
#: block's first copy goes out later (2.6 us after its start against 0.8) and lands later
#: (7.1 against 3.1), yet the median block ends 3 us sooner (74.9 against 77.9 us); why the
#: stream runs faster after it is not known.
LEAD = {"H200": 4, "H100": 4}


#: the options :func:`gemv_tile` turns on over the bare tile (``fixes=False``, their control),
#: the bits unchanged: the FP8 GEMV's fixes of a call's start and of its seams' settle
#: (``WgmmaGemvTile.pdl``, ``short_settle``), ported (issue 42). What they saved there:
#: records/fp8/fp8_decode_settle_h200.json; here, the decode sweep's ``sweep_gemv_hopper_bare``
#: rows beside ``sweep_gemv_hopper`` (``python -m benchmarks.decode_bench --only sweep_``). The
#: FP8 tile's :data:`book.kernels.fp8_gemv_tile.FIXES` are these and its own ``preload``.
FIXES = {"short_settle": True, "pdl": True}


def lead_for(gpu: str) -> int:
    """The default ``lead`` of the tiles up to 16 tokens on the GPU named ``gpu``
    (:data:`LEAD`)."""
    return next((v for key, v in LEAD.items() if key in gpu), 0)


def promotion_for(gpu: str) -> str:
    """The L2 promotion of the copies on the GPU named ``gpu`` (:data:`PROMOTION`; 256B where
    it names none)."""
    return next((p for key, p in PROMOTION.items() if key in gpu), "256B")


def gemv_tile(T: int, d: int = 4096, gpu: str = "", *, fixes: bool = True) -> WgmmaGemvTile:
    """The default tile for T tokens and rows of d halves. Up to 16 tokens: four stages of two
    boxes along k (a weight row read 256 bytes at a time), x copied a stage (the L2 hints keep
    it there); beyond: six stages of one box, x resident where it fits. Every copy with its L2
    hint (``hints``). The H100's measurements behind it (records/bench/weight_stream_hints_h100.json):
    with the hints, at T = 16 four stages of two boxes with x copied 82.9-83.0 us against 83.4-83.5
    for three beside resident x (84.6-84.8 without the hints) and 84.6 / 86.7 for five / six;
    at T = 4 81.2 against 81.4 for resident x (82.0-82.2 without); at T = 24 six stages of one
    box 82.1 against four of two 82.9 (88.9 before the hints,
    decode_tune_hopper_switch_h100.json). On the GPU named ``gpu`` the copies' L2 promotion
    is :func:`promotion_for` it (the H200: 128 bytes, at T = 4 and 16 56.0-57.1 / 57.4-58.8 us
    against 59.3-59.9 / 59.8-60.5 with 256; weight_stream_promotion_h200.json, _promotion2_,
    _rotate_); up to 16 tokens its ``lead`` is :func:`lead_for` it (4 on the H100 and the H200,
    :data:`LEAD`). With the fixes of :data:`FIXES` (a dependent launch, the seams settled in
    short); ``fixes=False``: the bare tile, their control (the same bits)."""
    if not 1 <= T <= MAX_T:
        raise ValueError(f"the Hopper GEMV takes 1 to {MAX_T} tokens, got T = {T}")
    n = -(-T // 8) * 8
    promo = promotion_for(gpu)
    if n <= 16:
        tile = WgmmaGemvTile(n=n, stages=4, kblocks=2, promotion=promo, lead=lead_for(gpu))
    else:
        tile = WgmmaGemvTile(n=n, stages=6, x_resident=True, promotion=promo)
        if not tile.fits(d):
            tile = WgmmaGemvTile(n=n, stages=6, promotion=promo)
    return dataclasses.replace(tile, **FIXES) if fixes else tile


# ---------------------------------------------------------------------------------------
# the epilogue's map (the kernel runs it)


def output_of(lt: int, i: int):
    """(row of the tile, token) of consumer thread ``lt``'s accumulator ``i``, in both
    weights: where wgmma leaves it (:func:`book.kernels.hopper.d_coords`), so the epilogue
    is elementwise (the kernel runs this same function)."""
    row = 16 * (lt >> 5) + ((lt & 31) >> 2) + 8 * ((i >> 1) & 1)
    return row, 8 * (i >> 2) + 2 * (lt & 3) + (i & 1)
