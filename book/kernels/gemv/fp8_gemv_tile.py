"""The FP8 decode GEMV's tile (:mod:`book.kernels.fp8_gemv`), as
:mod:`book.kernels.wgmma_gemv_tile` is the bf16 GEMV's: :class:`Fp8GemvTile` (the bf16 tile
with twice the k per box, its options, its fixes and diagnostic probes),
:func:`gemv_tile` (the default tile for T tokens, :data:`FIXES` on) and where a consumer
thread's outputs lie (:func:`row_of`, :func:`token_of`: the rows and tokens whose scales ``preload`` keeps in
registers); the bytes a call reads at least (:func:`weight_bytes`)."""

from __future__ import annotations

import dataclasses

from .wgmma_gemv_tile import FIXES as BF16_FIXES
from .wgmma_gemv_tile import WgmmaGemvTile
from .wgmma_gemv_tile import gemv_tile as bf16_gemv_tile

__all__ = ["BK", "FIXES", "MAX_T", "OUTS", "PROBES", "WIDE_WARPS", "Fp8GemvTile", "gemv_tile",
           "row_of", "token_of", "weight_bytes"]

BK = 128  # k per box: 128 e4m3 = one 128-byte swizzled row
#: the most tokens: x is copied with every stage (no resident x), N up to 32
MAX_T = 32
OUTS = ("bfloat16", "e4m3")
#: the diagnostics ``Fp8GemvTile.probe`` names (each leaves out one part of the kernel; their
#: outputs are not the layer's)
PROBES = ("stream", "nowgmma", "noscale", "noseam", "nox")
#: (``Fp8GemvTile.wide_settle``) the warps that sum a seam, warps 1 to 3 (threads 32-127):
#: every warp of the first warpgroup but the producer's
WIDE_WARPS = 3
#: the options :func:`gemv_tile` turns on over the bare tile (the structure of chapter 9's bf16
#: GEMV before it took the two it shares, its control), the bits unchanged: ``preload``, this
#: kernel's own, and the bf16 GEMV's fixes (:data:`book.kernels.wgmma_gemv_tile.FIXES`:
#: ``short_settle``, ``pdl``, first built here); what they saved, timed beside it on an H200:
#: records/fp8/fp8_decode_settle_h200.json (records/fp8/README.md, "The seams settled in short");
#: and ``wide_settle``, the seams' sums over warps 1-3, which took T = 16 over the 85% line where
#: the others left it under (records/fp8/fp8_decode_wide_h200.json; its bits equal the default's
#: before it, records/tests/gpu_fp8_wide_h200_1d4d2a7.json)
FIXES = {"preload": True, **BF16_FIXES, "wide_settle": True}


@dataclasses.dataclass(frozen=True)
class Fp8GemvTile(WgmmaGemvTile):
    """:class:`book.kernels.wgmma_gemv_tile.WgmmaGemvTile` for one byte per value: the same
    boxes, stages, barriers and shared-memory layout (byte for byte), ``BK`` = 128 values of
    k per box. Of the bf16 tile's options it keeps ``n``, ``stages``, ``ctas_per_sm``,
    ``kblocks``, ``promotion``, ``waves``, ``hold``, ``hints`` and ``lead``, and the two fixes
    the bf16 tile defines for both kernels, ``pdl`` and ``short_settle`` (first built here;
    described below as this kernel runs them); the others (resident x, traces, dynamic
    ranges, cp.async, rotation, prefetch, fold) are refused.
    Its own: ``tma_elem`` (the element the tensor maps describe to TMA: 1, the e4m3 bytes
    as they are; 2, each pair of bytes as one 16-bit element, the boxes 64 elements wide:
    the same 128-byte rows, the same swizzle, the same bytes in shared memory, as chapter
    9's bf16 maps; a probe of whether the copy engine reads one-byte tensors slower).
    ``pdl``: a programmatic dependent launch. The call may start while the kernel before it
    on the stream ends: its producer asks for its first ``stages`` stages of weights (which
    nothing on the GPU writes) before it waits for that kernel (``griddep_wait``), then for
    their tokens; every other thread waits before it reads or writes global memory. What
    it attacks: the fixed cost of a call's start and of the tail before it, which weighs
    on the 117 MB layer and not at twice the bytes (records/fp8/README.md).

    Two fixes of the time this kernel spends beyond chapter 9's bf16 GEMV on the same bytes
    (issue 42), each giving the bare tile's bits (the same products in the same order; the
    GPU lane checks it); ``preload`` is on in :func:`gemv_tile`'s tile (:data:`FIXES`),
    ``unguarded`` off (it saved nothing measurable: records/fp8/fp8_decode_probe_h200.json).
    The bare tile's epilogue reads three scales
    (``sx[t]``, ``sg[j]``, ``su[j]``) from global memory for every output, inside the test
    of whether the output exists, so each output waits for its loads in turn, behind the
    ring's copies, at the end of a tile (the end of every block: its last tile is whole, or
    its last seam's sum); the bf16 GEMV's epilogue reads nothing. ``preload``: the scales
    are read into registers before they are needed: each consumer thread its tokens' once
    at its start and its two rows' as it begins each tile, the finisher warp its lanes'
    tokens at its start and a seam's rows before it waits for the seam's piece.
    ``unguarded``: the epilogue's arithmetic for every accumulator, only its store inside the
    test (where not preloaded, the scales read at indices clamped into their arrays), so a
    thread's outputs are independent and their loads and math overlap.

    A third, of what the seams still cost with ``preload`` and ``pdl`` (records/fp8/README.md),
    on in :func:`gemv_tile`'s tile and giving the bare tile's bits: ``short_settle``. A
    block's seam pieces are in by step 11 or 12 of its 27 at d = 4096, h = 14336 (every block: a range cut in one or two tiles,
    then one whole tile), so the finisher warp's sum starts with a whole tile still to read
    behind it; it costs the tail only by its length, and its length is a chain of global
    round trips one after another, each queued behind the ring's copies on the SM's return
    path (up to ``stages`` stages outstanding): the fence and the counter's atomic, the
    reset and a second fence, then for each piece a read of the stream-K table (its slot)
    and, only then, its loads. ``short_settle`` keeps the finisher (nothing moves onto the
    consumer's path) and its order of sums, and cuts the chain to the atomic and one round of
    loads for two pieces: the tile's blocks and first slot read before the piece is waited
    for, a later block's slot by arithmetic (2c: a block after the first starts its range in
    the tile), the first two pieces' loads issued together, and no fence after the reset
    (the launch's end, or the next launch's ``griddepcontrol.wait``, orders it). Not the
    consumers' 128 threads: they are free only after their whole tile, at the very end, so
    the sum would start there (every last-arriving block's tail longer by its round trips),
    while four times the lanes shortens no chain of latencies.

    ``probe`` (a diagnostic, never the dispatcher's: its output is NOT the layer's, so
    :func:`model` refuses it and :func:`swiglu_fp8_gemv` runs it only when asked with
    ``probe=True``): one part of the kernel left out, to time what it costs. ``"stream"``:
    the ring alone (the copies as always; the consumers wait for each stage and hand it
    back, no wgmma, no seams, no epilogue: nothing stored); ``"nowgmma"``: no wgmma (a stage
    handed back once the consumer warpgroup has seen it land; the accumulators hold
    numbers the compiler cannot fold, and seams and epilogues run as always);
    ``"noscale"``: the epilogue reads no scale (all taken as 1); ``"noseam"``: a seam's
    piece neither stored nor summed (the finisher idle: the cut tiles' outputs never
    written); ``"nox"``: no token copied (a stage brings the weights alone; the wgmma read
    whatever the tokens' slots hold).

    ``wide_settle`` (on in :func:`gemv_tile`'s tile since it was timed, :data:`FIXES`; the
    bare tile's bits): a seam's sum and epilogue spread over warps 1-3 (:data:`WIDE_WARPS`,
    96 lanes) instead of the finisher warp alone. A seam's piece is 64 rows x N tokens x 2
    floats, 16 times larger at T = 16 than at T = 1, and warps 2 and 3 are idle otherwise.
    Each of the three warps waits for the piece on the same seam barrier (no arrival counts
    change); one thread (warp 1's lane 0) counts it with the atomic, as ``short_settle``
    does, and hands the decision to the other two through shared memory and a named barrier
    (``bar.sync 2, 96``); for the last piece, each warp sums and stores its share of the
    tile's 4 NA (consumer warp, accumulator) pairs (pair u to warp u mod 3), every output
    the same sums in the same order as ``short_settle``'s (whose reads it keeps: it needs
    it). Not with ``dynamic`` (its scheduler is warp 2) nor the probes that settle no seam."""

    tma_elem: int = 1  # (pdl and short_settle: WgmmaGemvTile's fields, inherited)
    preload: bool = False
    unguarded: bool = False
    probe: str = ""
    wide_settle: bool = False

    @property
    def stage_k(self):  # k a stage covers
        return self.kblocks * BK

    def problems(self) -> list[str]:
        p = super().problems()
        if self.n > MAX_T:
            p.append(f"n must be at most {MAX_T}")
        for name in ("x_resident", "trace", "fold", "cpasync", "rotate", "dynamic",
                     "prefetch"):
            if getattr(self, name):
                p.append(f"{name} is the bf16 GEMV's option, not this kernel's")
        if not self.early:
            p.append("early must be True")
        if self.tma_elem not in (1, 2):
            p.append("tma_elem must be 1 or 2 (bytes of the element the tensor maps describe)")
        if self.probe and self.probe not in PROBES:
            p.append(f"probe must be '' (none) or one of {PROBES}")
        if self.short_settle and self.probe in ("stream", "noseam"):
            p.append(f"short_settle settles seams: probe {self.probe!r} has none")
        if self.wide_settle:
            if self.dynamic:
                p.append("wide_settle sums a seam in warps 1-3: dynamic's scheduler is warp 2")
            if not self.short_settle:
                p.append("wide_settle spreads short_settle's sums over three warps: it needs "
                         "short_settle")
            if self.probe in ("stream", "noseam"):
                p.append(f"wide_settle settles seams: probe {self.probe!r} has none")
        return p

    def describe(self) -> str:
        return (f"wgmma m64n{self.n}k32 e4m3 twice a k32 (gate and up rows, the tokens shared),"
                f" {self.stages} stages of {self.tx_bytes:,} bytes (k {self.stage_k}: "
                f"{self.kblocks * self.w_bytes // 1024} KiB of each weight + "
                f"{self.kblocks * self.x_bytes:,} of tokens), {self.ctas_per_sm} block(s) an "
                f"SM, {self.shared_bytes:,} bytes of dynamic shared memory"
                + (", launched as a dependent of the kernel before it" if self.pdl else "")
                + (", the scales preloaded" if self.preload else "")
                + (", the epilogue unguarded" if self.unguarded else "")
                + (", the seams settled in short" if self.short_settle else "")
                + (f", each seam summed by {WIDE_WARPS} warps" if self.wide_settle else "")
                + (f", PROBE {self.probe} (its output is not the layer's)" if self.probe
                   else ""))


def gemv_tile(T: int, d: int = 4096, gpu: str = "", *, fixes: bool = True) -> Fp8GemvTile:
    """The default tile for T tokens: the bf16 GEMV's choice
    (:func:`book.kernels.wgmma_gemv_tile.gemv_tile`: up to 16 tokens four stages of two boxes
    along k, a weight row read 256 bytes at a time, x copied a stage, the GPU's L2 promotion
    and lead; beyond, six stages of one box) in the same bytes, x always copied a stage (this
    kernel has no resident x), with the measured fixes of :data:`FIXES`; ``fixes=False``: the
    bare tile, their control (the same bits)."""
    if not 1 <= T <= MAX_T:
        raise ValueError(f"the FP8 GEMV takes 1 to {MAX_T} tokens, got T = {T}")
    bf16 = bf16_gemv_tile(T, d, gpu, fixes=False)  # (its geometry; the fixes are FIXES)
    return Fp8GemvTile(n=bf16.n, stages=bf16.stages, kblocks=bf16.kblocks,
                       promotion=bf16.promotion, lead=bf16.lead, **(FIXES if fixes else {}))


def row_of(lt: int, b: int) -> int:
    """The row of the tile of consumer thread ``lt``'s accumulators i with ``(i >> 1) & 1 ==
    b`` (:func:`book.kernels.wgmma_gemv_tile.output_of`): a thread's outputs lie on two rows,
    whose scales ``preload`` keeps in registers."""
    return 16 * (lt >> 5) + ((lt & 31) >> 2) + 8 * b


def token_of(lt: int, k: int) -> int:
    """The token of consumer thread ``lt``'s accumulators i with ``2 (i >> 2) + (i & 1) ==
    k`` (:func:`book.kernels.wgmma_gemv_tile.output_of`): ``n / 4`` tokens a thread."""
    return 8 * (k >> 1) + 2 * (lt & 3) + (k & 1)


def weight_bytes(d: int, h: int) -> int:
    """The bytes one call must read at least: both weights, one byte each."""
    return 2 * d * h
