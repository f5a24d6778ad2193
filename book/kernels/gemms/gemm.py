"""A tiled, register-blocked float32 GEMM in Numba CUDA: ``out = a @ b``.

The kernel is built by :func:`build_kernel` from a :class:`Tile` (the tile sizes are
compile-time constants of the closure, so loops over them unroll and the per-thread
arrays live in registers). The design, for ``TILE`` (the configuration we time):

- A block of ``THREADS`` = 256 threads owns a ``BM x BN`` = 128 x 128 tile of ``out``;
  each thread owns an 8 x 8 sub-tile of accumulators, split in four 4 x 4 quadrants
  (rows ``ty*4 + i`` and ``64 + ty*4 + i``, likewise columns) so that a warp reads
  shared memory in contiguous 16-byte pieces: every fragment load is one
  ``ld.shared.v4.f32`` with no bank conflict.
- The k dimension advances ``BK`` = 8 at a time through two shared-memory buffers:
  while the block multiplies out of one, each thread already has the next A and B
  values in flight from global memory into registers, and stores them into the other
  buffer afterwards (one barrier per step). Every step in the loop prefetches without a
  branch; the last stage, with nothing left to fetch, is a copy after the loop
  ("peeled"). With a branch around the prefetch ptxas moved the loads to just before the
  stores, so the multiply waited on them (``Tile(prefetch="branchy")``).
- Two steps per loop iteration (``unroll2``): buffer 0 then buffer 1, so every shared
  address is a register plus a constant.
- The global loads go through flat offsets (``flat``) that the loop advances by a
  constant (BK for x, BK rows of the weights): a pointer increment per stage, where a
  2-D index costs a 64-bit multiply-add per load. With the peeled loop, the two-step
  unroll, the flat offsets and the B loads below, 88% of the hot loop's instructions are
  FFMAs (75% before); see ``records/bench/gemm_tuning.md``.
- Launch bounds ``(256, MIN_BLOCKS=2)``: at most 128 registers a thread, so two blocks
  (16 warps) share an SM; ptxas left to itself picked more registers or sank the loads.
- Every thread loads its share of both halves of the B tile (``b0``'s columns, then
  ``b1``'s), 256 threads apart: a warp reads 32 consecutive floats of a row (one 128-byte
  line) and writes 32 consecutive banks, and no load chooses between two arrays.
- A is stored transposed in shared memory (``As[k, m]``), so the 8 rows a thread needs
  at one ``k`` are contiguous too; the rows are padded by ``PAD`` floats so that the
  transposing store does not hit one bank twice.
- Per ``k`` a thread does 4 vector loads for 64 fused multiply-adds. NVVM does not
  unroll the k loop by itself (its body is too large), so the kernel calls the rank-1
  update 8 times with literal ``k``: the addresses then fold into immediate offsets.
- The hot loop has no bounds checks: interior tiles run ``build_kernel(..., checked=False)``;
  the ragged bottom and right strips run the same source compiled with
  ``checked=True`` (guarded loads that fill zeros, guarded stores).
- Indices into global arrays are cast to unsigned: Numba otherwise adds Python's
  negative-index wrap-around (a compare and a select) to every signed index.

``epilogue``: a device function ``f(g, u) -> value``. With one, the kernel becomes the
dual GEMM of :mod:`book.kernels.dual_gemm`: the left half of the accumulator tile
multiplies ``b0`` (x @ Wg), the right half ``b1`` (x @ Wu) over the same output columns,
from the same x tile in shared memory, and each thread stores ``f(gate, up)`` for its
pairs of accumulators: the activation never leaves registers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numba import cuda, float32, uint64

from ..host.launch import address, as_device, cdiv, is_c_contiguous, is_torch
from .tile import TileShape

__all__ = [
    "CHAPTER", "Tile", "TILE", "TILE_VARIANTS", "SIM_TILE", "BM", "BN", "BK", "TM", "TN", "PAD", "THREADS", "MIN_BLOCKS",
    "build_kernel", "make_tiled_gemm", "gemm_kernel", "gemm_kernel_edge", "matmul", "flops", "default_tile",
]


#: The chapter that teaches these kernels (``chapters/<CHAPTER>.ipynb`` shows their source).
CHAPTER = "07_epilogue_fusion"


@dataclass(frozen=True)
class Tile(TileShape):
    """Tile sizes of one kernel configuration (all compile-time constants; the protocol:
    :mod:`book.kernels.tile`)."""

    bm: int = 128  # output rows per block
    bn: int = 128  # accumulator columns per block (dual GEMM: half gate, half up)
    bk: int = 8  # k-depth of one shared-memory stage: 8, or 16 = two sub-slabs of 8
    tm: int = 8  # accumulator rows per thread
    tn: int = 8  # accumulator columns per thread
    pad: int = 4  # floats of padding per row of the transposed A tile
    min_blocks: int = 2  # launch bounds: ptxas must fit this many blocks per SM (<= 128 registers)
    # how the next stage is fetched during this one (see the k loop):
    # "peeled": every step prefetches, the last step (nothing to fetch) follows the loop;
    # "clamped": every step prefetches, the last one its own stage again (no peeled copy);
    # "branchy": the prefetch sits inside ``if kt + 1 < nk`` (ptxas then sinks the loads)
    prefetch: str = "peeled"
    unroll2: bool = False  # two steps per loop iteration: the buffer indices are constants
    flat: bool = False  # unguarded loads through running flat offsets (see load8)

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def shared_bytes(self) -> int:
        # two stages (double buffer) of float32: the transposed A tile (bk x (bm + pad)) and
        # the B tile (bk x bn); both sizes are multiples of 16 bytes, so no padding between
        return 4 * 2 * self.bk * (self.bm + self.pad + self.bn)

    def problems(self) -> list[str]:
        tx = self.bn // self.tn
        problems = []
        if self.bk not in (8, 16):
            problems.append("bk must be 8 or 16 (the k loop is unrolled in slabs of 8)")
        if self.tm not in (4, 8) or self.tn not in (4, 8):
            problems.append("tm and tn must be 4 or 8 (two 16-byte halves or two 8-byte halves)")
        if self.min_blocks < 0 or self.pad < 0 or self.pad % 4:
            problems.append("min_blocks must be >= 0 and pad a multiple of 4 (16-byte rows)")
        if self.bm % (2 * self.tm) or self.bn % (2 * self.tn):
            problems.append("bm and bn must be multiples of 2*tm and 2*tn")
        if tx & (tx - 1):
            problems.append("bn // tn must be a power of two")
        if self.prefetch not in ("peeled", "clamped", "branchy"):
            problems.append("prefetch must be 'peeled', 'clamped' or 'branchy'")
        if (self.unroll2 or self.flat) and self.prefetch != "peeled":
            problems.append("unroll2 and flat need prefetch='peeled'")
        t = self.threads
        # loads go by sub-slabs of 8 k: A rows of 4 consecutive k (2 threads a row),
        # B half-rows strided over half the block
        if (self.bm * 8) % (4 * t) or (8 * self.bn) % (4 * t):
            problems.append("each thread must load whole groups of 4 floats of each tile")
        if (8 * (self.bn // 2)) % t:
            problems.append("the threads must load each half of the B tile evenly")
        if t // 2 > self.bm:
            problems.append("too many threads for the A tile")
        if not 32 <= t <= 1024:
            problems.append(f"(bm / tm) x (bn / tn) = {t} threads: a block takes 32 to 1024")
        if self.shared_bytes > 48 * 1024:
            problems.append(f"{self.shared_bytes} bytes of shared memory (two stages of the A "
                            "and B tiles): at most 48 KiB of static shared memory")
        return problems


#: The configuration measured on the H100: 128 x 128 tile, 8 x 8 per thread, BK = 8, two
#: steps per loop iteration, flat-offset loads (``Tile()`` without the last two is the
#: control the benchmark times beside it).
TILE = Tile(unroll2=True, flat=True).validate()
#: The loop shapes the benchmark times side by side (benchmarks/gemm_bench.py): the
#: library's TILE and its controls, each differing from it in one or two choices.
TILE_VARIANTS = {
    "flat_u2": TILE,
    "peeled": Tile(),  # one step an iteration, 2-D indices
    "peeled_u2": Tile(unroll2=True),  # two steps an iteration, 2-D indices
    "bk16_flat_u2": Tile(bk=16, unroll2=True, flat=True),  # 16-deep stages
    "clamped": Tile(prefetch="clamped"),  # last step reloads its own stage, no peeled copy
    "branchy": Tile(prefetch="branchy"),  # prefetch inside ``if kt + 1 < nk``
    "nolb": Tile(unroll2=True, flat=True, min_blocks=0),  # no launch bounds
}
#: A small configuration (64 threads) that the CPU simulator runs in seconds; same source.
SIM_TILE = Tile(bm=32, bn=32, bk=8, tm=4, tn=4, pad=4, unroll2=True, flat=True).validate()

BM, BN, BK, TM, TN, PAD = TILE.bm, TILE.bn, TILE.bk, TILE.tm, TILE.tn, TILE.pad
THREADS = TILE.threads
MIN_BLOCKS = TILE.min_blocks


def _simulated():
    from numba.cuda import config

    return bool(config.ENABLE_CUDASIM)


def _smem_align():
    # 16-byte aligned shared tiles let LLVM merge four float loads into one
    # ld.shared.v4.f32; the simulator does not accept an alignment argument.
    return None if _simulated() else 16


def build_kernel(tile: Tile = TILE, epilogue=None, checked: bool = False):
    """Compile-ready kernel ``k(a, b0, b1, out, row_block0, col_block0)``.

    Without ``epilogue``: ``out = a @ b0`` (pass the same ``b`` as ``b0`` and ``b1``);
    each block covers ``bm x bn`` outputs. With ``epilogue=f``:
    ``out = f(a @ b0, a @ b1)`` elementwise; each block covers ``bm x bn/2`` outputs.
    Blocks are offset by ``(row_block0, col_block0)`` whole tiles (edge launches).
    ``checked=False`` assumes every tile is whole and ``K % bk == 0``.
    One dispatcher per (tile, epilogue, checked): the wrappers launch these same objects.
    """
    return make_tiled_gemm(tile, epilogue, bool(checked))


@functools.lru_cache(maxsize=None)
def make_tiled_gemm(tile, epilogue, checked):
    """The kernel factory (the source chapter 7 shows); call build_kernel."""
    tile.validate()
    BM, BN, BK = tile.bm, tile.bn, tile.bk
    TM, TN, PAD = tile.tm, tile.tn, tile.pad
    THREADS = tile.threads
    TX = BN // TN  # threads across a block
    TXS = TX.bit_length() - 1  # tid >> TXS == tid // TX, provably >= 0
    TM2, TN2 = TM // 2, TN // 2  # a thread's rows/columns: two halves each
    HM, HN = BM // 2, BN // 2
    SA = BM + PAD  # row length of the transposed A tile
    TWO = BK == 16  # a stage is two 8-deep sub-slabs, handled in turn
    A_ROWS = THREADS // 2  # A rows of a sub-slab loaded at once (2 a row)
    A_PASSES = BM // A_ROWS
    A_REG = 4 * A_PASSES
    B_HALF = 8 * HN // THREADS  # elements of each B half a thread loads
    B_REG = 2 * B_HALF
    HNS = HN.bit_length() - 1  # e >> HNS == e // HN (HN: a power of two)
    DUAL = epilogue is not None
    EPI = epilogue
    B1_OFF = 0 if DUAL else HN  # column of B's right half, relative to n0
    NSTEP = HN if DUAL else BN  # output columns per block
    ALIGN = _smem_align()
    CHECKED = checked
    PEELED = tile.prefetch == "peeled"
    CLAMPED = tile.prefetch == "clamped" and not checked
    UNROLL2 = tile.unroll2
    FLAT = tile.flat and not checked

    @cuda.jit(device=True, inline="always")
    def rank1(acc, fa, fb, As, Bs, buf, k, ty, tx):
        # acc += (column k of the A tile) x (row k of the B tile): this
        # thread's part
        for i in range(TM2):
            fa[i] = As[buf, k, ty * TM2 + i]
            fa[TM2 + i] = As[buf, k, HM + ty * TM2 + i]
        for j in range(TN2):
            fb[j] = Bs[buf, k, tx * TN2 + j]
            fb[TN2 + j] = Bs[buf, k, HN + tx * TN2 + j]
        for i in range(TM):
            for j in range(TN):
                acc[i, j] += fa[i] * fb[j]

    @cuda.jit(device=True, inline="always")
    def slab8(acc, fa, fb, As, Bs, buf, k0, ty, tx):
        # eight rank-1 updates with literal k: unrolled, constant offsets
        rank1(acc, fa, fb, As, Bs, buf, k0 + 0, ty, tx)
        rank1(acc, fa, fb, As, Bs, buf, k0 + 1, ty, tx)
        rank1(acc, fa, fb, As, Bs, buf, k0 + 2, ty, tx)
        rank1(acc, fa, fb, As, Bs, buf, k0 + 3, ty, tx)
        rank1(acc, fa, fb, As, Bs, buf, k0 + 4, ty, tx)
        rank1(acc, fa, fb, As, Bs, buf, k0 + 5, ty, tx)
        rank1(acc, fa, fb, As, Bs, buf, k0 + 6, ty, tx)
        rank1(acc, fa, fb, As, Bs, buf, k0 + 7, ty, tx)

    @cuda.jit(device=True, inline="always")
    def load8(ra, rb, a, b0, b1, k0, a_r0, a_c, tid, n0, M, K, NB,
              oa, ob, bstep):
        # global -> registers: this thread's share of the 8-deep sub-slab
        # at depth k0
        if FLAT:
            # The same elements through flat offsets that the k loop
            # advances by a constant (oa: this thread's A element, ob: its
            # first B element): a pointer increment a step, where a 2-D
            # index costs a 64-bit multiply-add per load.
            af, b0f, b1f = a.flat, b0.flat, b1.flat
            for p in range(A_PASSES):
                for v in range(4):
                    o = oa + uint64(p * A_ROWS) * uint64(K) + uint64(v)
                    ra[p * 4 + v] = af[o]
            for v in range(B_HALF):
                rb[v] = b0f[ob + uint64(v) * bstep]
                o = ob + uint64(B1_OFF) + uint64(v) * bstep
                rb[B_HALF + v] = b1f[o]
            return
        for p in range(A_PASSES):
            r = a_r0 + p * A_ROWS
            for v in range(4):
                kk = k0 + a_c + v
                if CHECKED:
                    ok = r < M and kk < K
                    x = a[uint64(r), uint64(kk)] if ok else float32(0.0)
                    ra[p * 4 + v] = x
                else:
                    ra[p * 4 + v] = a[uint64(r), uint64(kk)]
        # every thread loads its share of both halves (b0's, then b1's
        # columns): one address per load, no select between two arrays
        for v in range(B_HALF):
            # element of a half sub-slab: a warp reads 32 consecutive floats
            e = tid + v * THREADS
            kk = k0 + (e >> HNS)
            cc = n0 + (e & (HN - 1))
            c1 = cc + B1_OFF
            if CHECKED:
                ok = kk < K and cc < NB
                x = b0[uint64(kk), uint64(cc)] if ok else float32(0.0)
                rb[v] = x
                ok = kk < K and c1 < NB
                x = b1[uint64(kk), uint64(c1)] if ok else float32(0.0)
                rb[B_HALF + v] = x
            else:
                rb[v] = b0[uint64(kk), uint64(cc)]
                rb[B_HALF + v] = b1[uint64(kk), uint64(c1)]

    @cuda.jit(device=True, inline="always")
    def store8(ra, rb, As, Bs, buf, k0, a_rs, a_c, tid):
        # registers -> rows k0..k0+7 of shared buffer ``buf``; A goes in
        # transposed
        for p in range(A_PASSES):
            for v in range(4):
                As[buf, k0 + a_c + v, a_rs + p * A_ROWS] = ra[p * 4 + v]
        for v in range(B_HALF):  # consecutive threads, consecutive banks
            e = tid + v * THREADS
            Bs[buf, k0 + (e >> HNS), e & (HN - 1)] = rb[v]
            Bs[buf, k0 + (e >> HNS), HN + (e & (HN - 1))] = rb[B_HALF + v]

    @cuda.jit(device=True, inline="always")
    def step(acc, fa, fb, ra, rb, As, Bs, buf, a, b0, b1, knext, a_r0,
             a_rs, a_c, tid, n0, M, K, NB, ty, tx, oa, ob, bstep):
        # multiply out of ``buf`` while the next stage (at depth knext)
        # travels from global memory through registers into the other
        # buffer; the loads are issued first
        load8(ra, rb, a, b0, b1, knext, a_r0, a_c, tid, n0, M, K, NB,
              oa, ob, bstep)
        slab8(acc, fa, fb, As, Bs, buf, 0, ty, tx)
        store8(ra, rb, As, Bs, 1 - buf, 0, a_rs, a_c, tid)
        if TWO:
            load8(ra, rb, a, b0, b1, knext + 8, a_r0, a_c, tid, n0, M, K, NB,
                  oa + uint64(8), ob + uint64(8) * uint64(NB), bstep)
            slab8(acc, fa, fb, As, Bs, buf, 8, ty, tx)
            store8(ra, rb, As, Bs, 1 - buf, 8, a_rs, a_c, tid)

    @cuda.jit(device=True, inline="always")
    def stage(acc, fa, fb, As, Bs, buf, ty, tx):
        # multiply out of ``buf`` with nothing to fetch (the last stage)
        slab8(acc, fa, fb, As, Bs, buf, 0, ty, tx)
        if TWO:
            slab8(acc, fa, fb, As, Bs, buf, 8, ty, tx)

    def tiled_gemm(a, b0, b1, out, row_block0, col_block0):
        tid = cuda.threadIdx.x
        m0 = (cuda.blockIdx.y + row_block0) * BM
        n0 = (cuda.blockIdx.x + col_block0) * NSTEP
        M = a.shape[0]
        K = a.shape[1]
        N = out.shape[1]
        NB = b0.shape[1]
        As = cuda.shared.array((2, BK, SA), float32, alignment=ALIGN)
        Bs = cuda.shared.array((2, BK, BN), float32, alignment=ALIGN)
        # registers: constant indices only
        acc = cuda.local.array((TM, TN), float32)
        fa = cuda.local.array(TM, float32)
        fb = cuda.local.array(TN, float32)
        ra = cuda.local.array(A_REG, float32)
        rb = cuda.local.array(B_REG, float32)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0.0)

        # who loads what: A rows of 4 consecutive k (2 threads a row);
        # B: see load8
        a_rs = tid >> 1  # row within the tile
        a_c = (tid & 1) * 4
        a_r0 = m0 + a_rs
        ty = tid >> TXS  # this thread's accumulator rows/columns
        tx = tid & (TX - 1)
        nk = (K + BK - 1) // BK
        # flat offsets (used when FLAT): this thread's A and B elements of
        # stage 0, the distance between its B elements, and how far both
        # move per stage
        oa = uint64(a_r0) * uint64(K) + uint64(a_c)
        ob = uint64(tid >> HNS) * uint64(NB) + uint64(n0 + (tid & (HN - 1)))
        bstep = uint64(THREADS >> HNS) * uint64(NB)
        oa_step = uint64(BK)
        ob_step = uint64(BK) * uint64(NB)

        # stage 0 into buffer 0
        load8(ra, rb, a, b0, b1, 0, a_r0, a_c, tid, n0, M, K, NB,
              oa, ob, bstep)
        store8(ra, rb, As, Bs, 0, 0, a_rs, a_c, tid)
        if TWO:
            load8(ra, rb, a, b0, b1, 8, a_r0, a_c, tid, n0, M, K, NB,
                  oa + uint64(8), ob + uint64(8) * uint64(NB), bstep)
            store8(ra, rb, As, Bs, 0, 8, a_rs, a_c, tid)
        cuda.syncthreads()
        if PEELED:
            # Every step in the loop prefetches stage kt + 1, with no branch
            # and an address that grows by BK rows a step (one pointer
            # increment); the last stage, with nothing to fetch, is the copy
            # after the loop.
            kt = 0
            oa += oa_step  # stage 1
            ob += ob_step
            if UNROLL2:
                # two steps an iteration: buffer 0 then 1, constant addresses
                for _ in range((nk - 1) >> 1):
                    step(acc, fa, fb, ra, rb, As, Bs, 0, a, b0, b1,
                         (kt + 1) * BK, a_r0, a_rs, a_c, tid, n0, M, K, NB,
                         ty, tx, oa, ob, bstep)
                    cuda.syncthreads()
                    step(acc, fa, fb, ra, rb, As, Bs, 1, a, b0, b1,
                         (kt + 2) * BK, a_r0, a_rs, a_c, tid, n0, M, K, NB,
                         ty, tx, oa + oa_step, ob + ob_step, bstep)
                    cuda.syncthreads()
                    kt += 2
                    oa += oa_step + oa_step
                    ob += ob_step + ob_step
            for kt in range(kt, nk - 1):
                step(acc, fa, fb, ra, rb, As, Bs, kt & 1, a, b0, b1,
                     (kt + 1) * BK, a_r0, a_rs, a_c, tid, n0, M, K, NB,
                     ty, tx, oa, ob, bstep)
                cuda.syncthreads()
                oa += oa_step
                ob += ob_step
            if nk > 0:
                stage(acc, fa, fb, As, Bs, (nk - 1) & 1, ty, tx)
        else:
            for kt in range(nk):
                buf = kt & 1
                if CLAMPED:
                    # No branch around the prefetch: the last step reloads
                    # its own stage (min() makes the address non-affine in
                    # kt: computed afresh each step)
                    step(acc, fa, fb, ra, rb, As, Bs, buf, a, b0, b1,
                         min(kt + 1, nk - 1) * BK, a_r0, a_rs, a_c, tid, n0,
                         M, K, NB, ty, tx, oa, ob, bstep)
                elif kt + 1 < nk:
                    # "branchy": ptxas sinks these loads to the stores
                    step(acc, fa, fb, ra, rb, As, Bs, buf, a, b0, b1,
                         (kt + 1) * BK, a_r0, a_rs, a_c, tid, n0,
                         M, K, NB, ty, tx, oa, ob, bstep)
                else:
                    stage(acc, fa, fb, As, Bs, buf, ty, tx)
                cuda.syncthreads()

        # epilogue: accumulators -> out (GEMM), or f(gate, up) -> out (dual)
        for i in range(TM):
            r = m0 + (i // TM2) * HM + ty * TM2 + (i % TM2)
            if DUAL:
                for j in range(TN2):
                    col = n0 + tx * TN2 + j
                    if (not CHECKED) or (r < M and col < N):
                        o = EPI(acc[i, j], acc[i, TN2 + j])  # gate, up
                        out[uint64(r), uint64(col)] = o
            else:
                for j in range(TN):
                    col = n0 + (j // TN2) * HN + tx * TN2 + (j % TN2)
                    if (not CHECKED) or (r < M and col < N):
                        out[uint64(r), uint64(col)] = acc[i, j]

    options = {"fastmath": True}
    if tile.min_blocks and not checked and not _simulated():
        # (the guarded edge kernels would spill under the cap; they run on
        # thin strips)
        options["launch_bounds"] = (THREADS, tile.min_blocks)
    return cuda.jit(**options)(tiled_gemm)


#: The kernels measured on the H100 (interior tiles, and the guarded edge variant).
gemm_kernel = build_kernel(TILE)
gemm_kernel_edge = build_kernel(TILE, checked=True)


def default_tile() -> Tile:
    """``TILE`` on a GPU; ``SIM_TILE`` in the simulator (256 Python threads per block is slow)."""
    return SIM_TILE if _simulated() else TILE


def flops(M: int, N: int, K: int) -> int:
    """Floating-point operations of an M x K by K x N product (a multiply and an add each)."""
    return 2 * M * N * K


# ---------------------------------------------------------------------------------------
# host side


def check_matrix(x, name):
    """A Numba device view of a 2-D, C-contiguous float32 GPU array, or a clear error."""
    d = as_device(x, name)
    if d.ndim != 2:
        raise ValueError(f"{name} must be a 2-D matrix, got {d.ndim} dimensions (shape {d.shape})")
    if np.dtype(d.dtype) != np.float32:
        raise TypeError(
            f"{name} must be float32, got {d.dtype}: these GEMM kernels compute in float32 "
            f"(convert first, e.g. torch: {name}.float())"
        )
    if d.size and not is_c_contiguous(d):  # empty arrays may report zero strides
        raise ValueError(
            f"{name} is not row-major contiguous (shape {d.shape}, strides {d.strides}): "
            "pass a contiguous array (torch: .contiguous(); NumPy: np.ascontiguousarray "
            "before copying)."
        )
    return d


def _span(d):
    """[start, end) byte addresses of a device array; None where unknown."""
    p = address(d)   # in the simulator, of the host array behind the device one
    return (p, p + d.size * d.dtype.itemsize) if p else None


def check_no_overlap(out_dev, inputs):
    """Refuse an ``out`` that shares memory with an input: tiles read what others write."""
    o = _span(out_dev)
    if o is None or out_dev.size == 0:
        return
    for name, d in inputs:
        i = _span(d)
        if i is not None and d.size and o[0] < i[1] and i[0] < o[1]:
            raise ValueError(
                f"out overlaps {name} in memory: the kernel would read values it has already "
                "overwritten; pass a separate output array."
            )


def new_output(like, shape):
    """An uninitialised float32 output on the device, torch if ``like`` is torch."""
    if is_torch(like):
        import torch

        result = torch.empty(shape, dtype=torch.float32, device=like.device)
        return result, cuda.as_cuda_array(result)
    result = cuda.device_array(shape, dtype=np.float32)
    return result, result


def prepare_output(out, like, shape):
    if out is None:
        return new_output(like, shape)
    o = check_matrix(out, "out")
    if tuple(o.shape) != tuple(shape):
        raise ValueError(f"out must have shape {tuple(shape)}, got {tuple(o.shape)}")
    return out, o


def launch(tile, epilogue, a, b0, b1, o, stream=0):
    """Launch interior tiles unchecked and the ragged strips checked (see module doc)."""
    M, K = a.shape
    N = o.shape[1]
    nstep = tile.bn // 2 if epilogue is not None else tile.bn
    if M == 0 or N == 0:
        return
    rows, cols = cdiv(M, tile.bm), cdiv(N, nstep)
    fast = build_kernel(tile, epilogue, False)
    edge = build_kernel(tile, epilogue, True)
    threads = tile.threads
    full_r, full_c = M // tile.bm, N // nstep
    if K == 0 or K % tile.bk:  # ragged k: every tile takes the guarded path
        edge[(cols, rows), threads, stream](a, b0, b1, o, 0, 0)
        return
    if full_r and full_c:
        fast[(full_c, full_r), threads, stream](a, b0, b1, o, 0, 0)
    if rows > full_r:  # bottom strip, all columns
        edge[(cols, rows - full_r), threads, stream](a, b0, b1, o, full_r, 0)
    if cols > full_c and full_r:  # right strip, the rows above the bottom strip
        edge[(cols - full_c, full_r), threads, stream](a, b0, b1, o, 0, full_c)


def matmul(a, b, out=None, *, tile: Tile | None = None, stream=0):
    """``out = a @ b`` for float32 GPU matrices a[M, K], b[K, N]; returns ``out``.

    Accepts Numba device arrays or anything with ``__cuda_array_interface__`` (torch CUDA
    tensors). ``out`` (M x N, float32) is allocated when not given (a torch tensor when
    ``a`` is one). ``tile`` defaults to :func:`default_tile`.
    """
    tile = (tile or default_tile()).validate()
    ad, bd = check_matrix(a, "a"), check_matrix(b, "b")
    if ad.shape[1] != bd.shape[0]:
        raise ValueError(
            f"inner dimensions differ: a is {tuple(ad.shape)} and b is {tuple(bd.shape)}; "
            "a @ b needs a.shape[1] == b.shape[0]"
        )
    shape = (ad.shape[0], bd.shape[1])
    result, o = prepare_output(out, a, shape)
    check_no_overlap(o, [("a", ad), ("b", bd)])
    launch(tile, None, ad, bd, bd, o, stream)
    return result
