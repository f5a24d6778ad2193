"""Naive SwiGLU: two kernels, the way an unfused framework runs it.

Kernel 1 reads ``gate`` and writes ``tmp = silu(gate)``; kernel 2 reads ``tmp`` and ``up``
and writes ``out = tmp * up``. Five transfers per element (2 + 3) instead of the fused
kernel's three, and the temporary costs a whole extra tensor of memory.

One element per thread, float32 math inside; the same kernels serve float32, float16 and
bfloat16 (stored as uint16 bits) through :func:`book.kernels.wide.load_f32`.
"""

import math

from numba import cuda, float32

from .launch import cdiv, prepare
from .wide import load_f32, store_f32

DTYPES = ("float32", "float16", "bfloat16")


@cuda.jit
def silu_kernel(gate, tmp):
    i = cuda.grid(1)
    if i < gate.size:
        g = load_f32(gate, i)
        # float32(1.0), not 1.0: a bare 1.0 is float64 and would drag the division to f64.
        store_f32(tmp, i, g / (float32(1.0) + math.exp(-g)))


@cuda.jit
def mul_kernel(tmp, up, out):
    i = cuda.grid(1)
    if i < out.size:
        store_f32(out, i, load_f32(tmp, i) * load_f32(up, i))


_WORKSPACE = {}  # (n, dtype) -> reused temporary


def workspace(n, dtype):
    """A temporary of n elements, reused across calls.

    Frameworks keep freed blocks in a caching allocator for the same reason: a fresh
    cudaMalloc per call costs more than this kernel, and cudaFree waits for the GPU.
    """
    key = (n, str(dtype))
    if key not in _WORKSPACE:
        _WORKSPACE.clear()  # keep at most one
        _WORKSPACE[key] = cuda.device_array(n, dtype=dtype)
    return _WORKSPACE[key]


def swiglu_naive(gate, up, out=None, tmp=None, block=256, stream=0):
    """out = silu(gate) * up with two launches through a temporary in the input dtype.

    ``tmp`` (n elements, gate's dtype) defaults to a reused workspace."""
    p = prepare(gate, up, out, DTYPES, "naive")
    if tmp is None:
        tmp = workspace(p.n, p.gate.dtype)
    elif getattr(tmp, "size", None) != p.n or tmp.dtype != p.gate.dtype:
        raise ValueError(f"tmp must hold {p.n} elements of {p.gate.dtype}")
    grid = cdiv(p.n, block)
    silu_kernel[grid, block, stream](p.gate, tmp)
    mul_kernel[grid, block, stream](tmp, p.up, p.out)
    return p.result
