"""Naive SwiGLU: two kernels, the way an unfused framework runs it.

Kernel 1 reads ``gate`` and writes ``tmp = silu(gate)``; kernel 2 reads ``tmp`` and ``up``
and writes ``out = tmp * up``. Five transfers per element (2 + 3) instead of the fused
kernel's three, and the temporary costs a whole extra tensor of memory.

One element per thread, float32 math inside; the same kernels serve float32, float16 and
bfloat16 (stored as uint16 bits) through :func:`book.kernels.wide.load_f32`.

``swiglu_naive_vec`` is the same two-kernel algorithm written the way the fast fused
kernel is (16-byte accesses, several per thread), so that naive vs fused compares bytes
moved and nothing else: both saturate the memory system, and the ratio of their times
approaches the ratio of their traffic, 5/3.
"""

import math

from numba import cuda, float32

from ...dtypes import DTYPES  # the three dtypes every elementwise kernel takes
from ..host.launch import aligned, cdiv, launch, prepare
from .vectorized import make_vector_kernel
from ..instructions.wide import load4, load_f32, load_half8, store4, store_f32, store_half8



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
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    if tmp is None:
        tmp = workspace(p.n, p.gate.dtype)
    elif getattr(tmp, "size", None) != p.n or tmp.dtype != p.gate.dtype:
        raise ValueError(f"tmp must hold {p.n} elements of {p.gate.dtype}")
    grid = cdiv(p.n, block)
    launch(silu_kernel, grid, block, stream, p.gate, tmp)
    launch(mul_kernel, grid, block, stream, tmp, p.up, p.out)
    return p.result


def make_unary_vector_kernel(load, store, width, apply):
    """out = apply(x) elementwise, ``width`` elements per access, two accesses per thread."""

    def kernel(x, out):
        n = out.size
        nvec = n // width
        bs = cuda.blockDim.x
        t = cuda.threadIdx.x
        tile = 2 * bs
        for base in range(cuda.blockIdx.x * tile, nvec, cuda.gridDim.x * tile):
            v0 = base + t
            v1 = v0 + bs
            if base + tile <= nvec:
                a0 = load(x, v0 * width)
                a1 = load(x, v1 * width)
                store(out, v0 * width, apply(a0))
                store(out, v1 * width, apply(a1))
            else:
                if v0 < nvec:
                    store(out, v0 * width, apply(load(x, v0 * width)))
                if v1 < nvec:
                    store(out, v1 * width, apply(load(x, v1 * width)))
        if cuda.blockIdx.x == cuda.gridDim.x - 1:
            i = nvec * width + t
            if i < n:
                g = load_f32(x, i)
                store_f32(out, i, g / (float32(1.0) + math.exp(-g)))

    return cuda.jit(fastmath=True)(kernel)


@cuda.jit(device=True, inline="always")
def _silu(g):
    return g / (float32(1.0) + math.exp(-g))


@cuda.jit(device=True, inline="always")
def silu4(a):
    return (_silu(a[0]), _silu(a[1]), _silu(a[2]), _silu(a[3]))


@cuda.jit(device=True, inline="always")
def silu8(a):
    return (_silu(a[0]), _silu(a[1]), _silu(a[2]), _silu(a[3]),
            _silu(a[4]), _silu(a[5]), _silu(a[6]), _silu(a[7]))


@cuda.jit(device=True, inline="always")
def mul4(a, b):
    return (a[0] * b[0], a[1] * b[1], a[2] * b[2], a[3] * b[3])


@cuda.jit(device=True, inline="always")
def mul8(a, b):
    return (a[0] * b[0], a[1] * b[1], a[2] * b[2], a[3] * b[3],
            a[4] * b[4], a[5] * b[5], a[6] * b[6], a[7] * b[7])


@cuda.jit(device=True, inline="always")
def _mul(a, b):
    return a * b


silu_vec4_kernel = make_unary_vector_kernel(load4, store4, 4, silu4)
mul_vec4_kernel = make_vector_kernel(load4, store4, 4, mul4, _mul)
silu_half8_kernel = make_unary_vector_kernel(load_half8, store_half8, 8, silu8)
mul_half8_kernel = make_vector_kernel(load_half8, store_half8, 8, mul8, _mul)


def swiglu_naive_vec(gate, up, out=None, tmp=None, block=256, stream=0):
    """The two-kernel algorithm with 16-byte accesses (float32: 4, halves: 8 per access)."""
    p = prepare(gate, up, out, DTYPES, "naive_vec")
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    if tmp is None:
        tmp = workspace(p.n, p.gate.dtype)
    elif getattr(tmp, "size", None) != p.n or tmp.dtype != p.gate.dtype:
        raise ValueError(f"tmp must hold {p.n} elements of {p.gate.dtype}")
    if not aligned(p.gate, p.up, p.out, tmp, to=16):
        return swiglu_naive(gate, up, p.result, tmp, block, stream)
    from .vectorized import choose_block

    if p.dtype == "float32":
        silu_k, mul_k, width = silu_vec4_kernel, mul_vec4_kernel, 4
    else:
        silu_k, mul_k, width = silu_half8_kernel, mul_half8_kernel, 8
    nvec = p.n // width
    b = choose_block(max(nvec, 1), block)
    grid = max(1, cdiv(nvec, 2 * b))
    launch(silu_k, grid, b, stream, p.gate, tmp)
    launch(mul_k, grid, b, stream, tmp, p.up, p.out)
    return p.result
