"""SwiGLU's relatives: the same fusion move applied to GeGLU, RMSNorm and quantization.

Chapter 11 shows these kernels. Each one does its arithmetic in float32 whatever the
storage dtype (float32 or float16), reads every input once and writes every output
once. They are small and plain on purpose: one idea per kernel, no tuning.

* ``geglu_kernel``: out = gelu_tanh(gate) * up, the GeGLU of Gemma-style MLPs.
* ``residual_add_kernel`` and ``rmsnorm_kernel``: the unfused pair.
* ``add_rmsnorm_kernel``: h = x + residual and y = rmsnorm(h) * weight in one pass.
* ``swiglu_int8_kernel``: SwiGLU whose result is quantized to int8 with a static
  per-tensor scale before the store, the activation-quant fusion of serving stacks.

Float32 literals are spelled ``float32(...)``: a bare ``1.0`` is float64 in Numba.
The host side is the SwiGLU kernels' own (:mod:`book.kernels.launch`: device arrays or
torch CUDA tensors, flat views, grid sizes) and SiLU is :func:`book.kernels.fused.silu_mul`.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, int32

from .fused import silu_mul
from ..host.launch import as_device, flat, grid_for

GELU_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
GELU_COEF = 0.044715

THREADS = 256          # elementwise kernels: threads per block
MAX_BLOCKS = 65535     # grid-stride loops cover anything larger (grid_for caps at it)
ROW_THREADS = 256      # RMSNorm: one block of this many threads per row (power of two)

# Streams (element loads + stores per element of the [T, h] tensor) of each step, the
# count chapter 11 turns into bytes. Weights of RMSNorm are one row, shared by all
# tokens: negligible beside T*h and not counted.
STREAMS = {
    "swiglu": {"unfused": 5, "fused": 3},          # silu -> tmp, tmp*up  vs  one pass
    "geglu": {"unfused": 5, "fused": 3},           # the same shape with gelu
    "add_rmsnorm": {"unfused": 5, "fused": 4},     # add: 2R+1W; norm: 1R+1W  vs  2R+2W
    "swiglu_int8": {"unfused": None, "fused": None},  # bytes differ per stream: see traffic_bytes
    # RMSNorm + the per-token e4m3 quantization (book.kernels.norm_quant), alone and after
    # the residual add: one-byte codes and a 4-byte scale a token, see traffic_bytes
    "rmsnorm_quant": {"unfused": None, "fused": None},
    "add_rmsnorm_quant": {"unfused": None, "fused": None},
}


# ---------------------------------------------------------------- device functions
@cuda.jit(device=True, inline="always")
def gelu_tanh(x):
    """GELU, tanh approximation, in float32 (x must already be float32)."""
    inner = float32(GELU_SQRT_2_OVER_PI) * (x + float32(GELU_COEF) * x * x * x)
    return float32(0.5) * x * (float32(1.0) + math.tanh(inner))


# ---------------------------------------------------------------- kernels
@cuda.jit(fastmath=True)
def geglu_kernel(gate, up, out):
    # Flat 1-D view; grid-stride so any size works with a capped grid.
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, out.size, stride):
        g = float32(gate[i])          # widen fp16 to f32 before any arithmetic
        u = float32(up[i])
        out[i] = gelu_tanh(g) * u     # rounded to out's dtype once, at the store


@cuda.jit(fastmath=True)
def swiglu_int8_kernel(gate, up, inv_scale, out_q):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    s = float32(inv_scale)
    for i in range(start, out_q.size, stride):
        v = silu_mul(float32(gate[i]), float32(up[i])) * s
        v = min(max(v + float32(0.5), float32(-127.0)), float32(127.0))  # clamp first
        q = int32(v)                          # truncates toward zero ...
        if float32(q) > v:                    # ... so step down for negatives: floor,
            q -= 1                            # i.e. round half up, as the reference does
        out_q[i] = q                          # one byte per element leaves the SM


@cuda.jit
def residual_add_kernel(x, residual, h):
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, h.size, stride):
        h[i] = float32(x[i]) + float32(residual[i])


@cuda.jit(device=True, inline="always")
def _block_sum(partial, value):
    """Sum `value` over the block through shared memory (a tree; no warp shuffles,
    so it also runs in the simulator). Every thread gets the total."""
    t = cuda.threadIdx.x
    partial[t] = value
    cuda.syncthreads()
    step = ROW_THREADS // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    total = partial[0]
    cuda.syncthreads()    # everyone has read partial[0] before it is reused
    return total


@cuda.jit(fastmath=True)
def rmsnorm_kernel(x, weight, eps, y):
    # One block per row of x [T, d].
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    d = x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, dtype=float32)
    acc = float32(0.0)
    for j in range(t, d, ROW_THREADS):
        v = float32(x[row, j])
        acc += v * v
    total = _block_sum(partial, acc)
    r = float32(1.0) / math.sqrt(total / float32(d) + float32(eps))
    for j in range(t, d, ROW_THREADS):
        y[row, j] = float32(x[row, j]) * r * float32(weight[j])


@cuda.jit(fastmath=True)
def add_rmsnorm_kernel(x, residual, weight, eps, h, y):
    # One block per row. First pass: h = x + residual, stored (the next layer's
    # residual) and squared into the running sum. Second pass: re-read this block's
    # own row of h, which is still in L1/L2 (d * 4 bytes at most a few tens of KB),
    # so DRAM sees x and residual read once, h and y written once: 4 streams, not 5.
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    d = x.shape[1]
    partial = cuda.shared.array(ROW_THREADS, dtype=float32)
    acc = float32(0.0)
    for j in range(t, d, ROW_THREADS):
        v = float32(x[row, j]) + float32(residual[row, j])
        h[row, j] = v
        acc += v * v
    total = _block_sum(partial, acc)
    r = float32(1.0) / math.sqrt(total / float32(d) + float32(eps))
    for j in range(t, d, ROW_THREADS):
        y[row, j] = float32(h[row, j]) * r * float32(weight[j])


# ---------------------------------------------------------------- host wrappers
_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


def _same(ref, other, name, ref_name):
    if other.shape != ref.shape:
        raise ValueError(f"{name} has shape {other.shape} but {ref_name} has {ref.shape}; they must match.")
    if other.dtype != ref.dtype:
        raise ValueError(f"{name} is {other.dtype} but {ref_name} is {ref.dtype}; use one dtype for both.")


def geglu(gate, up, out=None):
    """out = gelu_tanh(gate) * up for float32 or float16 device arrays of one shape."""
    gate, up = as_device(gate, "gate"), as_device(up, "up")
    _same(gate, up, "up", "gate")
    if gate.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"geglu supports float32 and float16, got {gate.dtype}.")
    if out is None:
        out = cuda.device_array(gate.shape, dtype=gate.dtype)
    out = as_device(out, "out")
    _same(gate, out, "out", "gate")
    n = gate.size
    if n:
        geglu_kernel[grid_for(n, THREADS, 1, MAX_BLOCKS), THREADS](
            flat(gate, "gate"), flat(up, "up"), flat(out, "out"))
    return out


def swiglu_int8(gate, up, scale, out=None):
    """int8 q = clamp(round(silu(gate) * up / scale), -127, 127); dequantize as q * scale."""
    gate, up = as_device(gate, "gate"), as_device(up, "up")
    _same(gate, up, "up", "gate")
    if not (scale > 0 and math.isfinite(scale)):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}.")
    if out is None:
        out = cuda.device_array(gate.shape, dtype=np.int8)
    out = as_device(out, "out")
    if out.shape != gate.shape or out.dtype != np.int8:
        raise ValueError(f"out must be int8 with shape {gate.shape}, got {out.dtype} {out.shape}.")
    n = gate.size
    if n:
        swiglu_int8_kernel[grid_for(n, THREADS, 1, MAX_BLOCKS), THREADS](
            flat(gate, "gate"), flat(up, "up"), np.float32(1.0 / scale), flat(out, "out"))
    return out


def _floats(a, name):
    """``a`` if it holds float32 or float16 values: a bfloat16 torch tensor arrives as its
    int16 bits (book.kernels.launch), which these kernels would read as numbers."""
    if a.dtype not in _FLOAT_DTYPES:
        raise TypeError(f"{name} is {a.dtype} (a bfloat16 torch tensor arrives as its 16-bit "
                        "bits): these kernels read float32 or float16 values; pass "
                        f"{name}.float() or {name}.half() (book.kernels.norm_quant reads "
                        "bfloat16 itself)")
    return a


def _rows(x, name, floats=True):
    x = as_device(x, name)
    if floats:
        x = _floats(x, name)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D [tokens, d], got {x.ndim}-D shape {x.shape}.")
    return x


def _check_weight(weight, d, floats=True):
    weight = as_device(weight, "weight")
    if floats:
        weight = _floats(weight, "weight")
    if weight.shape != (d,):
        raise ValueError(f"weight must have shape ({d},) to match d = {d}, got {weight.shape}.")
    return weight


def residual_add(x, residual, h=None):
    """h = x + residual (the unfused first step)."""
    x, residual = _rows(x, "x"), _rows(residual, "residual")
    _same(x, residual, "residual", "x")
    if h is None:
        h = cuda.device_array(x.shape, dtype=x.dtype)
    h = as_device(h, "h")
    _same(x, h, "h", "x")
    if x.size:
        residual_add_kernel[grid_for(x.size, THREADS, 1, MAX_BLOCKS), THREADS](flat(x, "x"), flat(residual, "residual"), flat(h, "h"))
    return h


def rmsnorm(x, weight, eps=1e-6, y=None):
    """y = x / sqrt(mean(x**2, axis=-1) + eps) * weight, one block per row."""
    x = _rows(x, "x")
    weight = _check_weight(weight, x.shape[1])
    if y is None:
        y = cuda.device_array(x.shape, dtype=x.dtype)
    y = as_device(y, "y")
    _same(x, y, "y", "x")
    if x.shape[0]:
        rmsnorm_kernel[x.shape[0], ROW_THREADS](x, weight, np.float32(eps), y)
    return y


def add_rmsnorm(x, residual, weight, eps=1e-6, h=None, y=None):
    """Fused: h = x + residual and y = rmsnorm(h) * weight; returns (h, y)."""
    x, residual = _rows(x, "x"), _rows(residual, "residual")
    _same(x, residual, "residual", "x")
    weight = _check_weight(weight, x.shape[1])
    if h is None:
        h = cuda.device_array(x.shape, dtype=x.dtype)
    if y is None:
        y = cuda.device_array(x.shape, dtype=x.dtype)
    h, y = as_device(h, "h"), as_device(y, "y")
    _same(x, h, "h", "x")
    _same(x, y, "y", "x")
    if x.shape[0]:
        add_rmsnorm_kernel[x.shape[0], ROW_THREADS](x, residual, weight, np.float32(eps), h, y)
    return h, y


# ---------------------------------------------------------------- float64 references
def geglu_reference(gate, up):
    g = np.asarray(gate, dtype=np.float64)
    inner = GELU_SQRT_2_OVER_PI * (g + GELU_COEF * g ** 3)
    return 0.5 * g * (1.0 + np.tanh(inner)) * np.asarray(up, dtype=np.float64)


def rmsnorm_reference(x, weight, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x * r * np.asarray(weight, dtype=np.float64)


def swiglu_int8_reference(gate, up, scale):
    g = np.asarray(gate, dtype=np.float64)
    v = g / (1.0 + np.exp(-g)) * np.asarray(up, dtype=np.float64) / scale
    return np.clip(np.floor(v + 0.5), -127, 127).astype(np.int8)


# ---------------------------------------------------------------- half-precision arithmetic
def gated_product_all_half(gate, up, act="silu"):
    """The product computed the careless way, every step rounded to float16, in the
    order `gate * up * sigmoid-like(gate)` a hand-written kernel might use.
    numpy rounds after each float16 operation, as fp16 hardware would."""
    g = np.asarray(gate, dtype=np.float16)
    u = np.asarray(up, dtype=np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        if act == "silu":
            return (g * u) / (np.float16(1) + np.exp(-g))
        if act == "gelu":
            c = np.float16(GELU_SQRT_2_OVER_PI)
            a = np.float16(GELU_COEF)
            return (g * u) * np.float16(0.5) * (np.float16(1) + np.tanh(c * (g + a * g * g * g)))
    raise ValueError(f"act must be 'silu' or 'gelu', got {act!r}.")


def gated_product_float_inside(gate, up, act="silu"):
    """The kernels' way: widen to float32, compute, round to float16 once at the end."""
    g = np.asarray(gate, dtype=np.float16).astype(np.float32)
    u = np.asarray(up, dtype=np.float16).astype(np.float32)
    with np.errstate(over="ignore"):
        if act == "silu":
            r = g / (np.float32(1) + np.exp(-g)) * u
        elif act == "gelu":
            c = np.float32(GELU_SQRT_2_OVER_PI)
            r = np.float32(0.5) * g * (np.float32(1) + np.tanh(c * (g + np.float32(GELU_COEF) * g ** 3))) * u
        else:
            raise ValueError(f"act must be 'silu' or 'gelu', got {act!r}.")
        return r.astype(np.float16)


def gated_product_reference(gate, up, act="silu"):
    """float64 truth from the float16 inputs."""
    g = np.asarray(gate, dtype=np.float16).astype(np.float64)
    u = np.asarray(up, dtype=np.float16).astype(np.float64)
    if act == "silu":
        return g / (1.0 + np.exp(-g)) * u
    if act == "gelu":
        return geglu_reference(g, u)
    raise ValueError(f"act must be 'silu' or 'gelu', got {act!r}.")


# ---------------------------------------------------------------- traffic
def traffic_bytes(op, T, h, dtype_bytes):
    """(unfused_bytes, fused_bytes) of the DRAM traffic of `op` over a [T, h] tensor.

    swiglu_int8 compares SwiGLU writing a dtype_bytes-wide result that a separate
    quantize kernel reads back and writes as int8, against one kernel that stores
    int8 directly; rmsnorm_quant and add_rmsnorm_quant the same for RMSNorm's y
    quantized to e4m3 with a float32 scale per token (h = T tokens of width h)."""
    n = T * h
    if op == "swiglu_int8":
        unfused = n * (3 * dtype_bytes) + n * (dtype_bytes + 1)
        fused = n * (2 * dtype_bytes + 1)
        return unfused, fused
    if op in ("rmsnorm_quant", "add_rmsnorm_quant"):
        # the norm's streams: x in, y out (2); fused with the add, x and residual in, h and
        # y out (4). Unfused, a quantize kernel reads y back once; fused, y is never stored.
        norm = STREAMS["add_rmsnorm"]["fused"] if op == "add_rmsnorm_quant" else 2
        codes = n + 4 * T  # e4m3 codes, a float32 scale per token
        unfused = norm * n * dtype_bytes + n * dtype_bytes + codes
        fused = (norm - 1) * n * dtype_bytes + codes
        return unfused, fused
    if op not in STREAMS:
        raise ValueError(f"unknown op {op!r}; choose from {sorted(STREAMS)}.")
    s = STREAMS[op]
    return s["unfused"] * n * dtype_bytes, s["fused"] * n * dtype_bytes
