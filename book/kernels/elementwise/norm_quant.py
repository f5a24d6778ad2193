"""RMSNorm fused with the activations' per-token e4m3 quantization (issue 42): the FP8 GEMM's
input made by the norm that precedes it, in one pass over x.

Chapter 11's move once more: the unfused pair is :func:`book.kernels.glu_family.rmsnorm`
writing y (2 or 4 bytes an element) and a quantize kernel reading y back to write its e4m3
codes; fused, y never leaves the SM. One block a token row, the row held in registers: a
:class:`NormQuantTile` (``tile_for(d)``; d = 4096: 256 threads, each holding two pieces of 8
consecutive columns, 16 values) names the geometry. Thread t holds the pieces
``p = c * threads + t`` (c < chunks), columns ``8p .. 8p + 7``: a warp's piece is 512
contiguous bytes of bfloat16, read by one 16-byte load a thread (:func:`book.kernels.wide.load8_f32`).

1. x's row is read once from global memory (and the weight's, from L2), widened to float32
   in registers, and each thread sums its squares with ``fma.rn.f32``
   (:mod:`book.kernels.fma`), its pieces in order; the block adds the sums by warp shuffles
   (``shfl.bfly``: 16, 8, 4, 2, 1), then the warps' sums, one barrier;
2. y = x * r * weight, r = 1 / sqrt(sum / d + eps), in registers; the block's largest |y|
   (a NaN propagates, as NumPy's and torch's ``amax``), by shuffles and a second barrier,
   gives the token's scale, ``amax / 448``, or 1 for a row of zeros
   (:func:`book.quantize.scales_for`'s convention);
3. codes = e4m3(y / scale) by ``cvt.rn.satfinite.e4m3x2.f32``
   (:func:`book.kernels.fp8.cvt_e4m3x2`), packed 8 to an 8-byte store
   (:func:`book.kernels.wide.store_bytes8`): uint8 codes [T, d] and float32 scales [T].

The wide accesses need d a multiple of 8 and 16-byte aligned rows (8 for the codes); a
call without them (d = 301, a sliced view) gets the same kernel reading and writing one
element at a time, the same sums in the same order. The widest row is ``MAX_D`` (1024
threads of 4 pieces: 32 values a thread in registers; past d = 16384 ptxas keeps a block of
1024 threads in 64 registers a thread by spilling a few). ``tile=`` picks another geometry
(``tile_for(d, chunks)``; the model takes the same ``tile``: the sums' order is the tile's).
Why one block a row even at T = 16 (16 of 132 SMs): a token's 8 KB is one DRAM round trip
for 256 threads; what a decode-sized call costs is that trip, the two reductions and the
launch, not bandwidth, and a row split over SMs would add a reduction across them.

``rmsnorm_quant_staged`` is the kernel this one replaced, kept as the control beside it
(benchmarks/norm_quant_bench.py): 256 threads a row, 2-byte loads, the row staged in shared
memory (dynamic, ``d * 4`` bytes) and read again, shared-memory trees of 8 barriers each for
the sum and the amax, y / scale read back from shared memory, 1-byte stores, its loops
counted at run time. The register kernel's loops unroll (the tile is known when it is
compiled; where d is the tile's width, as 4096 is, no piece asks whether it is inside the
row: ``kernels(tile, wide, full)``), so what a thread issues is the arithmetic and the two
reductions: at d = 4096 (sm_90a SASS, bfloat16, 44 registers) about 450 instructions a
thread for its 16 values, of which the 16 ``div.rn.f32`` (about 10 each: the division stays
IEEE, see below) are a third.

Bytes a row: x read once (``d * itemsize``), codes written (``d``), the scale (4); the
weight's ``d * itemsize`` per block come from L2 after the first. ``add_rmsnorm_quant``
first adds the residual: it reads x and residual and writes h (the next layer's residual,
in x's dtype) beside the codes; its norm is of the float32 sum, before h is rounded to its
storage dtype. :func:`glu_family.traffic_bytes` counts both against the unfused pairs
(``"rmsnorm_quant"``, ``"add_rmsnorm_quant"``).

Bit for bit: the kernels are compiled without fastmath, so every step is one IEEE float32
operation (``fma.rn``, ``add.rn``, ``div.rn``, ``sqrt.rn``, ``mul.rn``) in an order
:func:`rmsnorm_f32` repeats in NumPy for the tile: each thread's running fma over its
columns, piece by piece, the warp's tree of adds, then the warps' tree, then the row's
arithmetic (the division ``y / scale`` stays a division: a multiply by ``1 / scale`` rounds
differently, and torch's quantization divides); the amax is ``max.NaN.f32``
(:func:`book.kernels.fma.max_nan32`), NumPy's maximum, in any order. The model, :func:`rmsnorm_quant_reference`, is :func:`book.quantize.per_token`
of that y: the same codes and scales, exactly, in the simulator and on a GPU (and
``quantize_torch`` of the same y gives them too: the GPU test). Against float64's RMSNorm
(:func:`glu_family.rmsnorm_reference`) y differs by float32's rounding, a few ulp.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numba import cuda, float32, int32, uint32

from ...quantize import Quantized, per_token
from ..instructions.fma import add32, fma32, fma32_model, max_nan32
from ..instructions.fp8 import E4M3, cvt_e4m3x2
from .glu_family import ROW_THREADS, _block_sum, _check_weight, _rows, _same
from ..host.launch import (MAX_SHARED, KernelLaunch, aligned, array_dtype, as_device, cdiv, flat,
                     is_torch, jit_bounds)
from ..instructions.tensorcore import shfl_xor
from ..instructions.wide import load8_f32, load_f32, store8_f32, store_bytes8, store_f32

__all__ = ["rmsnorm_quant", "add_rmsnorm_quant", "rmsnorm_quant_staged", "NormQuantTile",
           "tile_for", "kernels", "staged_rmsnorm_quant_kernel", "rmsnorm_f32",
           "rmsnorm_quant_reference", "MAX_D", "STAGED_MAX_D", "VEC"]

E4M3_MAX = E4M3.max  # 448: the largest e4m3 value, where a row's amax lands
#: consecutive columns a thread loads at once: 16 bytes of bfloat16 or float16 (two 16-byte
#: loads of float32), and 8 e4m3 codes, one 8-byte store
VEC = 8
#: pieces of VEC columns a thread holds at the usual widths (d = 4096: 256 threads x 2):
#: two independent 16-byte loads in flight a thread, 8 warps a row to reduce
TARGET_CHUNKS = 2
MAX_CHUNKS = 4      # 32 values of x and 32 of the weight a thread: no spills at 1024 threads
MAX_THREADS = 1024  # a block's most
#: the widest row the kernels hold in registers
MAX_D = MAX_THREADS * VEC * MAX_CHUNKS
#: the widest row the staged control stages in shared memory (float32, beside the 256
#: partial sums; sm_90's 227 KiB a block)
STAGED_MAX_D = (MAX_SHARED - 4 * ROW_THREADS) // 4


@dataclass(frozen=True)
class NormQuantTile:
    """A row's geometry: one block of ``threads`` a row; thread t holds the pieces
    ``c * threads + t`` (c < ``chunks``) of ``vec`` consecutive columns, in registers."""

    threads: int
    chunks: int
    vec: int = VEC

    @property
    def warps(self) -> int:
        return self.threads // 32

    @property
    def cols(self) -> int:  # the columns a block covers (d or more: the rest are zeros)
        return self.threads * self.chunks * self.vec

    @property
    def values(self) -> int:  # float32 of x a thread holds
        return self.chunks * self.vec

    def __str__(self):
        return (f"NormQuantTile({self.threads} threads x {self.chunks} pieces of {self.vec} "
                f"columns = {self.cols} columns, {self.values} values a thread)")


def _pow2_at_least(n):
    return 1 << max(0, int(n) - 1).bit_length()


def tile_for(d: int, chunks: int = TARGET_CHUNKS) -> NormQuantTile:
    """The tile for rows of width d: as many threads (a power of two, 32 to 1024) as give
    each ``chunks`` pieces, then the pieces that cover d."""
    if not 1 <= chunks <= MAX_CHUNKS:
        raise ValueError(f"chunks must be 1 to {MAX_CHUNKS}, got {chunks}.")
    if d > MAX_D:
        raise ValueError(f"d = {d} is wider than a row the kernel holds in registers "
                         f"(at most {MAX_D}: {MAX_THREADS} threads x {MAX_CHUNKS} pieces of "
                         f"{VEC} columns).")
    pieces = max(1, cdiv(d, VEC))
    threads = min(MAX_THREADS, max(32, _pow2_at_least(cdiv(pieces, chunks))))
    return NormQuantTile(threads, cdiv(pieces, threads))


# ---------------------------------------------------------------- kernels
@lru_cache(maxsize=None)
def kernels(tile: NormQuantTile, wide: bool = True, full: bool = False):
    """(rmsnorm_quant kernel, add_rmsnorm_quant kernel) for ``tile``; ``wide``: 16-byte loads
    and 8-byte code stores (d a multiple of ``VEC``, rows aligned), else one element at a
    time (the same values, sums and order); ``full``: d is ``tile.cols`` (d = 4096 at its
    tile), every piece inside the row, so no piece asks whether it is."""
    NT, V, C, W = tile.threads, tile.vec, tile.chunks, tile.warps
    N = V * C
    assert V == 8 and NT % 32 == 0 and W & (W - 1) == 0, tile
    assert wide or not full
    # ptxas fits the block's registers (at 1024 threads, 64 a thread: what a launch needs)
    bounds = jit_bounds(NT, 1)

    @cuda.jit(device=True, inline="always")
    def load_piece(a, base, j, d, vals, o):
        # vals[o:o + V] = a[base + j:base + j + V] as float32, zeros past d
        if wide:
            if full or j < d:
                v = load8_f32(a, base + j)
                for k in range(V):
                    vals[o + k] = v[k]
            else:
                for k in range(V):
                    vals[o + k] = float32(0.0)
        else:
            for k in range(V):
                vals[o + k] = load_f32(a, base + j + k) if j + k < d else float32(0.0)

    def block_reduce(combine):
        # the warp's tree by butterflies (every lane ends with the same bits: combine is
        # commutative), then the warps' results, one barrier; every thread gets the total
        @cuda.jit(device=True, inline="always")
        def reduce(buf, v):
            t = int32(cuda.threadIdx.x)
            lane = t & int32(31)
            m = 16
            while m > 0:
                v = combine(v, shfl_xor(v, m))
                m //= 2
            if lane == 0:
                buf[t >> int32(5)] = v
            cuda.syncthreads()
            v = buf[lane & int32(W - 1)]
            m = W // 2
            while m > 0:
                v = combine(v, shfl_xor(v, m))
                m //= 2
            return v
        return reduce

    block_sum = block_reduce(add32)
    block_max = block_reduce(max_nan32)  # the largest magnitude, a NaN winning (any order)

    @cuda.jit(device=True, inline="always")
    def norm_quant(ys, ws, acc, eps, d, codes, scales, row):
        # steps 2 and 3 for the thread's values ys (x, or x + residual) and weights ws, its
        # sum of squares acc
        t = int32(cuda.threadIdx.x)
        sums = cuda.shared.array(W, dtype=float32)
        tops = cuda.shared.array(W, dtype=float32)
        total = block_sum(sums, acc)
        r = float32(1.0) / float32(math.sqrt(total / float32(d) + eps))
        amax = float32(0.0)
        for c in range(C):
            j = int32(V * (c * NT + t))
            top = float32(0.0)
            for k in range(V):
                y = ys[c * V + k] * r * ws[c * V + k]
                ys[c * V + k] = y
                # columns past d are not the row's (0 * r could be NaN where r is not finite)
                if wide or j + k < d:
                    top = max_nan32(top, abs(y))
            if full or j < d:
                amax = max_nan32(amax, top)
        amax = block_max(tops, amax)
        scale = amax / float32(E4M3_MAX)
        if not scale > float32(0.0):  # a row of zeros (or NaN): scale 1
            scale = float32(1.0)
        if t == 0:
            scales[row] = scale
        base = row * d
        for c in range(C):
            j = int32(V * (c * NT + t))
            o = c * V
            # two values an instruction, lo in the low byte; 8 codes in two words
            p0 = uint32(cvt_e4m3x2(ys[o + 1] / scale, ys[o] / scale))
            p1 = uint32(cvt_e4m3x2(ys[o + 3] / scale, ys[o + 2] / scale))
            p2 = uint32(cvt_e4m3x2(ys[o + 5] / scale, ys[o + 4] / scale))
            p3 = uint32(cvt_e4m3x2(ys[o + 7] / scale, ys[o + 6] / scale))
            lo = p0 | (p1 << uint32(16))
            hi = p2 | (p3 << uint32(16))
            if wide:
                if full or j < d:
                    store_bytes8(codes, base + j, lo, hi)
            else:
                for k in range(V):
                    if j + k < d:
                        word = lo if k < 4 else hi
                        codes[base + j + k] = (word >> uint32(8 * (k % 4))) & uint32(0xFF)

    @cuda.jit(**bounds)
    def rmsnorm_quant_kernel(x, weight, eps, d, codes, scales):
        # One block a row of x [T, d] (flat), the row in registers (tile). DRAM: reads x once
        # (d * itemsize bytes a row) and the weight (d * itemsize, shared by every row: L2),
        # writes d bytes of codes and a 4-byte scale.
        row = cuda.blockIdx.x
        t = int32(cuda.threadIdx.x)
        ys = cuda.local.array(N, dtype=float32)
        ws = cuda.local.array(N, dtype=float32)
        base = row * d
        for c in range(C):  # every load issued before the first use
            j = int32(V * (c * NT + t))
            load_piece(x, base, j, d, ys, c * V)
            load_piece(weight, 0, j, d, ws, c * V)
        acc = float32(0.0)
        for i in range(N):  # columns past d are zeros: fma(0, 0, acc) is acc
            acc = fma32(ys[i], ys[i], acc)
        norm_quant(ys, ws, acc, eps, d, codes, scales, row)

    @cuda.jit(**bounds)
    def add_rmsnorm_quant_kernel(x, residual, weight, eps, d, h, codes, scales):
        # As rmsnorm_quant_kernel with h = x + residual first: reads x and residual once,
        # writes h (x's dtype) and the codes and scale.
        row = cuda.blockIdx.x
        t = int32(cuda.threadIdx.x)
        ys = cuda.local.array(N, dtype=float32)
        rs = cuda.local.array(N, dtype=float32)
        ws = cuda.local.array(N, dtype=float32)
        base = row * d
        for c in range(C):
            j = int32(V * (c * NT + t))
            load_piece(x, base, j, d, ys, c * V)
            load_piece(residual, base, j, d, rs, c * V)
            load_piece(weight, 0, j, d, ws, c * V)
        acc = float32(0.0)
        for c in range(C):
            j = int32(V * (c * NT + t))
            o = c * V
            for k in range(V):
                ys[o + k] = ys[o + k] + rs[o + k]
                acc = fma32(ys[o + k], ys[o + k], acc)
            if wide:
                if full or j < d:
                    store8_f32(h, base + j, (ys[o], ys[o + 1], ys[o + 2], ys[o + 3],
                                             ys[o + 4], ys[o + 5], ys[o + 6], ys[o + 7]))
            else:
                for k in range(V):
                    if j + k < d:
                        store_f32(h, base + j + k, ys[o + k])
        norm_quant(ys, ws, acc, eps, d, codes, scales, row)

    return rmsnorm_quant_kernel, add_rmsnorm_quant_kernel


# ---------------------------------------------------------------- the staged control
@cuda.jit(device=True, inline="always")
def _block_amax(partial, value):
    """The block's largest of ``value`` (magnitudes), a NaN winning, by the tree of
    :func:`glu_family._block_sum`. Every thread gets it."""
    t = cuda.threadIdx.x
    partial[t] = value
    cuda.syncthreads()
    step = ROW_THREADS // 2
    while step > 0:
        if t < step:
            other = partial[t + step]
            if other > partial[t] or other != other:
                partial[t] = other
        cuda.syncthreads()
        step //= 2
    top = partial[0]
    cuda.syncthreads()
    return top


@cuda.jit
def staged_rmsnorm_quant_kernel(x, weight, eps, d, codes, scales):
    # The kernel rmsnorm_quant_kernel replaced, the control: one block of ROW_THREADS a row,
    # 2-byte loads of x staged as float32 in shared memory (d * 4 bytes), the sum and the amax
    # by shared-memory trees (8 barriers each), y / scale read back from shared memory and
    # stored a byte at a time.
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    ys = cuda.shared.array(0, dtype=float32)
    partial = cuda.shared.array(ROW_THREADS, dtype=float32)
    base = row * d
    acc = float32(0.0)
    for j in range(t, d, ROW_THREADS):
        v = load_f32(x, base + j)
        ys[j] = v
        acc = fma32(v, v, acc)
    total = _block_sum(partial, acc)
    r = float32(1.0) / float32(math.sqrt(total / float32(d) + eps))
    amax = float32(0.0)
    for j in range(t, d, ROW_THREADS):  # the columns this thread staged: no barrier needed
        y = ys[j] * r * load_f32(weight, j)
        ys[j] = y
        a = abs(y)
        if a > amax or a != a:
            amax = a
    amax = _block_amax(partial, amax)  # its barriers publish every thread's y
    scale = amax / float32(E4M3_MAX)
    if not scale > float32(0.0):
        scale = float32(1.0)
    if t == 0:
        scales[row] = scale
    for p in range(t, (d + 1) // 2, ROW_THREADS):  # two values an instruction
        j = 2 * p
        lo = ys[j] / scale
        hi = float32(0.0)
        if j + 1 < d:
            hi = ys[j + 1] / scale
        bits = cvt_e4m3x2(hi, lo)
        codes[base + j] = bits & 0xFF
        if j + 1 < d:
            codes[base + j + 1] = bits >> 8


# ---------------------------------------------------------------- host wrappers
_DTYPES = ("float32", "float16", "bfloat16")


def _outputs(given, T, d, out, scales):
    """The codes (uint8 [T, d]) and scales (float32 [T]): given, or made (torch tensors on
    the device of ``given``, the caller's x, when it is one, else Numba device arrays); a
    torch float8_e4m3fn ``out`` is taken as its bytes."""
    if is_torch(given):
        import torch

        if out is None:
            out = torch.empty((T, d), dtype=torch.uint8, device=given.device)
        if scales is None:
            scales = torch.empty(T, dtype=torch.float32, device=given.device)
    else:
        if out is None:
            out = cuda.device_array((T, d), dtype=np.uint8)
        if scales is None:
            scales = cuda.device_array(T, dtype=np.float32)
    codes = out
    if is_torch(out) and out.element_size() == 1 and out.is_floating_point():
        import torch

        codes = out.view(torch.uint8)  # float8: torch exports no __cuda_array_interface__
    c, s = as_device(codes, "out"), as_device(scales, "scales")
    if c.shape != (T, d) or c.dtype != np.uint8:
        raise ValueError(f"out must be uint8 (or float8_e4m3fn) with shape {(T, d)}, "
                         f"got {c.dtype} {c.shape}.")
    if s.shape != (T,) or s.dtype != np.float32:
        raise ValueError(f"scales must be float32 with shape ({T},), got {s.dtype} {s.shape}.")
    return out, scales, c, s


def _check_input(x, name, max_d=MAX_D, where="a row the kernel holds in registers"):
    x = _rows(x, name, floats=False)  # bfloat16's bits too: load_f32 reads them
    try:
        dtype = array_dtype(x)
    except TypeError:
        dtype = None
    if dtype not in _DTYPES:
        raise TypeError(f"{name} must be float32, float16 or bfloat16, got {x.dtype}.")
    if x.shape[1] > max_d:
        raise ValueError(f"d = {x.shape[1]} is wider than {where} (at most {max_d}).")
    return x


def _wide(d, *arrays, codes):
    """The 16-byte path: d a multiple of VEC and every row's start aligned (16 bytes for
    x, residual, h and the weight, 8 for the codes)."""
    return d % VEC == 0 and aligned(*arrays, to=16) and aligned(codes, to=8)


def _tile(tile, d):
    if tile is None:
        return tile_for(d)
    if not isinstance(tile, NormQuantTile) or not (tile.cols >= d > tile.cols - tile.threads
                                                   * tile.vec or d == 0):
        raise ValueError(f"tile must be a NormQuantTile whose last pieces reach d = {d} "
                         f"(tile_for(d, chunks)), got {tile}.")
    return tile


def rmsnorm_quant(x, weight, eps=1e-6, out=None, scales=None, stream=0, tile=None):
    """(codes, scales): uint8 e4m3 codes [T, d] of ``rmsnorm(x) * weight`` and float32
    scales [T], one per token (``amax / 448``), in one kernel: ``decode(codes) * scale``
    is the normalized row. x [T, d] float32, float16 or bfloat16 (Numba device arrays,
    bfloat16 as its uint16 bits, or torch CUDA tensors: then the outputs are torch tensors;
    ``codes.view(torch.float8_e4m3fn)`` is what ``torch._scaled_mm`` takes); d at most
    ``MAX_D``, any width (a multiple of 8 reads and writes 16 and 8 bytes at a time).
    ``tile``: the geometry, ``tile_for(d)`` unless given (the sums' order follows it: the
    model is ``rmsnorm_quant_reference(..., tile=tile)``)."""
    given, x = x, _check_input(x, "x")
    T, d = x.shape
    weight = _check_weight(weight, d, floats=False)
    out, scales, c, s = _outputs(given, T, d, out, scales)
    tile = _tile(tile, d)
    wide = _wide(d, x, weight, codes=c)
    kernel = kernels(tile, wide, wide and d == tile.cols)[0]
    args = (flat(x, "x"), weight, np.float32(eps), d, flat(c, "out"), s)
    return KernelLaunch(kernel, T if d else 0, tile.threads, args, (out, scales)).launch(stream)


def add_rmsnorm_quant(x, residual, weight, eps=1e-6, h=None, out=None, scales=None,
                      stream=0, tile=None):
    """(h, codes, scales): h = x + residual (x's dtype) and the e4m3 codes and per-token
    scales of ``rmsnorm(x + residual) * weight``, in one kernel (see :func:`rmsnorm_quant`)."""
    given, x = x, _check_input(x, "x")
    residual = _rows(residual, "residual", floats=False)
    _same(x, residual, "residual", "x")
    T, d = x.shape
    weight = _check_weight(weight, d, floats=False)
    if h is None:
        h = given.new_empty(given.shape) if is_torch(given) else \
            cuda.device_array(x.shape, dtype=x.dtype)
    hd = as_device(h, "h")
    _same(x, hd, "h", "x")
    out, scales, c, s = _outputs(given, T, d, out, scales)
    tile = _tile(tile, d)
    wide = _wide(d, x, residual, hd, weight, codes=c)
    kernel = kernels(tile, wide, wide and d == tile.cols)[1]
    args = (flat(x, "x"), flat(residual, "residual"), weight, np.float32(eps), d,
            flat(hd, "h"), flat(c, "out"), s)
    return KernelLaunch(kernel, T if d else 0, tile.threads, args,
                        (h, out, scales)).launch(stream)


def rmsnorm_quant_staged(x, weight, eps=1e-6, out=None, scales=None, stream=0):
    """:func:`rmsnorm_quant` by the kernel it replaced (``staged_rmsnorm_quant_kernel``, the
    control): the same codes and scales as its own model, ``rmsnorm_quant_reference(...,
    staged=True)`` (its sums add in another order, so a code may differ from
    :func:`rmsnorm_quant`'s by a rounding)."""
    given, x = x, _check_input(x, "x", STAGED_MAX_D, "one block's shared memory")
    T, d = x.shape
    weight = _check_weight(weight, d, floats=False)
    out, scales, c, s = _outputs(given, T, d, out, scales)
    args = (flat(x, "x"), weight, np.float32(eps), d, flat(c, "out"), s)
    # d * 4 bytes of dynamic shared memory: the row's float32 values
    return KernelLaunch(staged_rmsnorm_quant_kernel, T if d else 0, ROW_THREADS, args,
                        (out, scales), shared=4 * d).launch(stream)


# ---------------------------------------------------------------- the model
def _tree(a):
    """a [..., n] (n a power of two) added pairwise as the kernels' trees: step n/2, ..., 1,
    a[i] + a[i + step]; the sums [...]."""
    step = a.shape[-1] // 2
    while step:
        a = a[..., :step] + a[..., step:2 * step]
        step //= 2
    return a[..., 0]


def _row_sums(x, tile):
    """float32 [T]: each row's sum of squares as the kernel of ``tile`` adds them (None: the
    staged control's, one column at a time, thread t's columns t, t + 256, ... and one tree
    over the 256 threads)."""
    T, d = x.shape
    threads, vec = (ROW_THREADS, 1) if tile is None else (tile.threads, tile.vec)
    n = max(1, -(-d // (threads * vec)))
    cols = np.zeros((T, n * threads * vec), dtype=np.float32)
    cols[:, :d] = x  # zeros past d: fma(0, 0, acc) is acc
    cols = cols.reshape(T, n, threads, vec)
    acc = np.zeros((T, threads), dtype=np.float32)
    for c in range(n):  # thread t's running sum over its pieces, column by column
        for k in range(vec):
            v = cols[:, c, :, k]
            acc = fma32_model(v, v, acc)
    if tile is None:
        return _tree(acc)
    return _tree(_tree(acc.reshape(T, tile.warps, 32)))  # the warps' trees, then theirs


def rmsnorm_f32(x, weight, eps=1e-6, residual=None, staged=False, tile=None) -> np.ndarray:
    """float32 [T, d]: y = rmsnorm(x (+ residual)) * weight as the kernels compute it, each
    operation rounded where theirs is and in their order (the codes follow bit for bit):
    :func:`rmsnorm_quant`'s (``tile``, default ``tile_for(d)``) or, ``staged``, the control's.
    x, residual and weight: values (bfloat16 as float32 values, not bits)."""
    x = np.asarray(x, dtype=np.float32)
    if residual is not None:
        x = x + np.asarray(residual, dtype=np.float32)
    w = np.asarray(weight, dtype=np.float32)
    d = x.shape[1]
    total = _row_sums(x, None if staged else _tile(tile, d))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.float32(1) / np.sqrt(total / np.float32(d) + np.float32(eps))
        return (x * r[:, None]) * w


def rmsnorm_quant_reference(x, weight, eps=1e-6, residual=None, staged=False,
                            tile=None) -> Quantized:
    """The kernels' codes and scales in NumPy: :func:`book.quantize.per_token` (scale
    ``amax / 448``, 1 for a zero row; codes of the float32 ``y / scale`` by
    ``cvt.rn.satfinite``'s model) of :func:`rmsnorm_f32`'s y."""
    with np.errstate(invalid="ignore"):
        return per_token(rmsnorm_f32(x, weight, eps, residual, staged, tile))
