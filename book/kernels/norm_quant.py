"""RMSNorm fused with the activations' per-token e4m3 quantization (issue 42): the FP8 GEMM's
input made by the norm that precedes it, in one pass over x.

Chapter 11's move once more: the unfused pair is :func:`book.kernels.glu_family.rmsnorm`
writing y (2 or 4 bytes an element) and a quantize kernel reading y back to write its e4m3
codes; fused, y never leaves the SM. One block of ``ROW_THREADS`` threads per token row:

1. x's row is read once from global memory (2 or 4 bytes an element), widened to float32 and
   staged in shared memory (``d * 4`` bytes, dynamic), and each thread sums its squares with
   ``fma.rn.f32`` (:mod:`book.kernels.fma`); the block adds the 256 partial sums
   (:func:`glu_family._block_sum`);
2. y = x * r * weight, r = 1 / sqrt(sum / d + eps), overwrites the staged row; the block's
   largest |y| (a NaN propagates, as NumPy's and torch's ``amax``) gives the token's scale,
   ``amax / 448``, or 1 for a row of zeros (:func:`book.quantize.scales_for`'s convention);
3. codes = e4m3(y / scale) by ``cvt.rn.satfinite.e4m3x2.f32``
   (:func:`book.kernels.fp8.cvt_e4m3x2`), two values an instruction: uint8 codes [T, d]
   and float32 scales [T] are written.

Bytes a row: x read once (``d * itemsize``), codes written (``d``), the scale (4); the
weight's ``d * itemsize`` per block come from L2 after the first. ``add_rmsnorm_quant``
first adds the residual: it reads x and residual and writes h (the next layer's residual,
in x's dtype) beside the codes; its norm is of the float32 sum, before h is rounded to its
storage dtype. :func:`glu_family.traffic_bytes` counts both against the unfused pairs
(``"rmsnorm_quant"``, ``"add_rmsnorm_quant"``).

Bit for bit: the kernels are compiled without fastmath, so every step is one IEEE float32
operation (``fma.rn``, ``add.rn``, ``div.rn``, ``sqrt.rn``, ``mul.rn``) in an order
:func:`rmsnorm_f32` repeats in NumPy: each thread's running fma over the columns
``t, t + 256, ...``, the block's tree of adds, then the row's arithmetic. The model,
:func:`rmsnorm_quant_reference`, is :func:`book.quantize.per_token` of that y: the same
codes and scales, exactly, in the simulator and on a GPU (and ``quantize_torch`` of the
same y gives them too: the GPU test). Against float64's RMSNorm
(:func:`glu_family.rmsnorm_reference`) y differs by float32's rounding, a few ulp.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32

from ..quantize import Quantized, per_token
from .fma import fma32, fma32_model
from .fp8 import E4M3, cvt_e4m3x2
from .glu_family import ROW_THREADS, _block_sum, _check_weight, _rows, _same
from .launch import MAX_SHARED, KernelLaunch, is_torch, array_dtype, as_device, flat
from .wide import load_f32, store_f32

__all__ = ["rmsnorm_quant", "add_rmsnorm_quant", "rmsnorm_quant_kernel",
           "add_rmsnorm_quant_kernel", "rmsnorm_f32", "rmsnorm_quant_reference", "MAX_D"]

E4M3_MAX = E4M3.max  # 448: the largest e4m3 value, where a row's amax lands
#: the widest row one block stages in shared memory (float32, beside the 256 partial sums;
#: sm_90's 227 KiB a block)
MAX_D = (MAX_SHARED - 4 * ROW_THREADS) // 4


# ---------------------------------------------------------------- kernels
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


@cuda.jit(device=True, inline="always")
def _norm_quant_row(ys, partial, acc, weight, eps, d, codes, scales, row):
    """Steps 2 and 3 for one row staged in ``ys`` (float32, shared), each thread's sum of
    squares in ``acc``."""
    t = cuda.threadIdx.x
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
    if not scale > float32(0.0):  # a row of zeros (or NaN): scale 1
        scale = float32(1.0)
    if t == 0:
        scales[row] = scale
    base = row * d
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


@cuda.jit
def rmsnorm_quant_kernel(x, weight, eps, d, codes, scales):
    # One block per row of x [T, d] (flat). DRAM: reads x once (d * itemsize bytes a row)
    # and the weight (d * itemsize, shared by every row: L2), writes d bytes of codes and a
    # 4-byte scale. y lives in shared memory (d * 4 bytes), never in global memory.
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
    _norm_quant_row(ys, partial, acc, weight, eps, d, codes, scales, row)


@cuda.jit
def add_rmsnorm_quant_kernel(x, residual, weight, eps, d, h, codes, scales):
    # As rmsnorm_quant_kernel with h = x + residual first: reads x and residual once,
    # writes h (x's dtype) and the codes and scale.
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    ys = cuda.shared.array(0, dtype=float32)
    partial = cuda.shared.array(ROW_THREADS, dtype=float32)
    base = row * d
    acc = float32(0.0)
    for j in range(t, d, ROW_THREADS):
        v = load_f32(x, base + j) + load_f32(residual, base + j)
        store_f32(h, base + j, v)
        ys[j] = v
        acc = fma32(v, v, acc)
    _norm_quant_row(ys, partial, acc, weight, eps, d, codes, scales, row)


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


def _check_input(x, name):
    x = _rows(x, name, floats=False)  # bfloat16's bits too: load_f32 reads them
    try:
        dtype = array_dtype(x)
    except TypeError:
        dtype = None
    if dtype not in _DTYPES:
        raise TypeError(f"{name} must be float32, float16 or bfloat16, got {x.dtype}.")
    if x.shape[1] > MAX_D:
        raise ValueError(f"d = {x.shape[1]} does not fit one block's shared memory "
                         f"(at most {MAX_D} values of float32 a row).")
    return x


def _launch(kernel, args, T, d, result, stream):
    # d * 4 bytes of dynamic shared memory: the row's float32 values
    return KernelLaunch(kernel, T if d else 0, ROW_THREADS, args, result,
                        shared=4 * d).launch(stream)


def rmsnorm_quant(x, weight, eps=1e-6, out=None, scales=None, stream=0):
    """(codes, scales): uint8 e4m3 codes [T, d] of ``rmsnorm(x) * weight`` and float32
    scales [T], one per token (``amax / 448``), in one kernel: ``decode(codes) * scale``
    is the normalized row. x [T, d] float32, float16 or bfloat16 (Numba device arrays,
    bfloat16 as its uint16 bits, or torch CUDA tensors: then the outputs are torch tensors;
    ``codes.view(torch.float8_e4m3fn)`` is what ``torch._scaled_mm`` takes)."""
    given, x = x, _check_input(x, "x")
    T, d = x.shape
    weight = _check_weight(weight, d, floats=False)
    out, scales, c, s = _outputs(given, T, d, out, scales)
    args = (flat(x, "x"), weight, np.float32(eps), d, flat(c, "out"), s)
    return _launch(rmsnorm_quant_kernel, args, T, d, (out, scales), stream)


def add_rmsnorm_quant(x, residual, weight, eps=1e-6, h=None, out=None, scales=None,
                      stream=0):
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
    args = (flat(x, "x"), flat(residual, "residual"), weight, np.float32(eps), d,
            flat(hd, "h"), flat(c, "out"), s)
    return _launch(add_rmsnorm_quant_kernel, args, T, d, (h, out, scales), stream)


# ---------------------------------------------------------------- the model
def rmsnorm_f32(x, weight, eps=1e-6, residual=None) -> np.ndarray:
    """float32 [T, d]: y = rmsnorm(x (+ residual)) * weight as the kernels compute it, each
    operation rounded where theirs is and in their order (the codes follow bit for bit).
    x, residual and weight: values (bfloat16 as float32 values, not bits)."""
    x = np.asarray(x, dtype=np.float32)
    if residual is not None:
        x = x + np.asarray(residual, dtype=np.float32)
    w = np.asarray(weight, dtype=np.float32)
    T, d = x.shape
    n = -(-d // ROW_THREADS)
    cols = np.zeros((T, n * ROW_THREADS), dtype=np.float32)
    cols[:, :d] = x  # zeros past d: fma(0, 0, acc) is acc
    acc = np.zeros((T, ROW_THREADS), dtype=np.float32)
    for i in range(n):  # thread t's running sum over columns t, t + 256, ...
        v = cols[:, i * ROW_THREADS:(i + 1) * ROW_THREADS]
        acc = fma32_model(v, v, acc)
    step = ROW_THREADS // 2
    while step:  # _block_sum's tree
        acc[:, :step] = acc[:, :step] + acc[:, step:2 * step]
        step //= 2
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r = np.float32(1) / np.sqrt(acc[:, 0] / np.float32(d) + np.float32(eps))
        return (x * r[:, None]) * w


def rmsnorm_quant_reference(x, weight, eps=1e-6, residual=None) -> Quantized:
    """The kernels' codes and scales in NumPy: :func:`book.quantize.per_token` (scale
    ``amax / 448``, 1 for a zero row; codes of the float32 ``y / scale`` by
    ``cvt.rn.satfinite``'s model) of :func:`rmsnorm_f32`'s y."""
    with np.errstate(invalid="ignore"):
        return per_token(rmsnorm_f32(x, weight, eps, residual))
