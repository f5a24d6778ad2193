"""Saturating memory bandwidth: more bytes in flight per thread.

A fused kernel with one 4-byte element per thread leaves HBM waiting: each thread issues
two small loads, waits the whole DRAM latency (hundreds of nanoseconds), computes, stores
and exits. By Little's law, bytes in flight = bandwidth x latency: to keep HBM busy the
GPU needs megabytes of loads outstanding. Three moves, one per kernel here:

1. ``ilp4_kernel``: four elements per thread, *all eight loads issued before any use*.
   (A store between two loads would stop the compiler from hoisting the later load: it
   cannot prove that ``out`` does not alias ``gate``.) Neighbouring threads still touch
   neighbouring addresses (element ``base + k * blockDim + tid``), so every warp access is
   coalesced. Works for every dtype.
2. ``vec2_kernel`` (float32): 8-byte loads (``ld.global.v2.f32``), two per input per
   thread.
3. ``vec4_kernel`` (float32): 16-byte loads (``ld.global.v4.f32``), two per input per
   thread: 8 elements per thread with a quarter of the memory instructions.

All loop grid-stride over *tiles* of ``2 * blockDim`` vectors, so any grid size is
correct; whole tiles run with no bounds checks, the last partial tile checks each
vector, and the ``n % width`` ragged elements are done one by one by the last block.
The host wrapper picks the block size; for small tensors (decode: one token) it shrinks
the block so that the work spreads over more SMs instead of a handful.
"""

from numba import cuda

from ...dtypes import DTYPES  # the three dtypes every elementwise kernel takes
from .fused import silu_mul
from ..host.launch import aligned, cdiv, ieee_control, launch_kernel, prepare, sm_count
from ..instructions.wide import load2, load4, load_f32, store2, store4, store_f32



def _ilp4(gate, up, out):
    n = out.size
    bs = cuda.blockDim.x
    t = cuda.threadIdx.x
    tile = 4 * bs
    for base in range(cuda.blockIdx.x * tile, n, cuda.gridDim.x * tile):
        i0 = base + t
        i1 = i0 + bs
        i2 = i1 + bs
        i3 = i2 + bs
        if base + tile <= n:  # whole tile: eight loads in flight, then math, then stores
            g0 = load_f32(gate, i0)
            g1 = load_f32(gate, i1)
            g2 = load_f32(gate, i2)
            g3 = load_f32(gate, i3)
            u0 = load_f32(up, i0)
            u1 = load_f32(up, i1)
            u2 = load_f32(up, i2)
            u3 = load_f32(up, i3)
            store_f32(out, i0, silu_mul(g0, u0))
            store_f32(out, i1, silu_mul(g1, u1))
            store_f32(out, i2, silu_mul(g2, u2))
            store_f32(out, i3, silu_mul(g3, u3))
        else:  # the last, partial tile
            for i in range(i0, n, bs):
                store_f32(out, i, silu_mul(load_f32(gate, i), load_f32(up, i)))


ilp4_kernel = cuda.jit(fastmath=True)(_ilp4)
# The IEEE-math control (chapter 6): the same source without fastmath, so a measured
# difference between the two is the arithmetic's cost and nothing else.
ilp4_ieee_kernel = cuda.jit(_ilp4)


@cuda.jit(device=True, inline="always")
def silu_mul2(a, b):
    return (silu_mul(a[0], b[0]), silu_mul(a[1], b[1]))


@cuda.jit(device=True, inline="always")
def silu_mul4(a, b):
    return (silu_mul(a[0], b[0]), silu_mul(a[1], b[1]),
            silu_mul(a[2], b[2]), silu_mul(a[3], b[3]))


@cuda.jit(device=True, inline="always")
def silu_mul8(a, b):
    return (silu_mul(a[0], b[0]), silu_mul(a[1], b[1]),
            silu_mul(a[2], b[2]), silu_mul(a[3], b[3]),
            silu_mul(a[4], b[4]), silu_mul(a[5], b[5]),
            silu_mul(a[6], b[6]), silu_mul(a[7], b[7]))


def make_vector_kernel(load, store, width, apply, scalar=silu_mul, fastmath=True):
    """A fused kernel moving ``width`` elements per access, two accesses per input per thread.

    ``load(a, i)`` returns ``width`` float32 values starting at element ``i`` in one access,
    ``store(a, i, values)`` writes them back; ``apply`` is silu_mul over the tuples and
    ``scalar`` the same for one element (the ragged tail). The naive version's multiply kernel
    is built here too, with a plain product for both. ``fastmath=False`` builds the
    IEEE-math control: the same kernel with libdevice ``expf`` and a correctly rounded
    division.
    """

    def kernel(gate, up, out):
        n = out.size
        nvec = n // width  # whole vectors
        bs = cuda.blockDim.x
        t = cuda.threadIdx.x
        tile = 2 * bs  # vectors per block per step
        for base in range(cuda.blockIdx.x * tile, nvec, cuda.gridDim.x * tile):
            v0 = base + t
            v1 = v0 + bs
            if base + tile <= nvec:  # whole tile: four wide loads in flight before any math
                g0 = load(gate, v0 * width)
                u0 = load(up, v0 * width)
                g1 = load(gate, v1 * width)
                u1 = load(up, v1 * width)
                store(out, v0 * width, apply(g0, u0))
                store(out, v1 * width, apply(g1, u1))
            else:
                if v0 < nvec:
                    store(out, v0 * width, apply(load(gate, v0 * width), load(up, v0 * width)))
                if v1 < nvec:
                    store(out, v1 * width, apply(load(gate, v1 * width), load(up, v1 * width)))
        # fewer than `width` ragged elements at the very end: the last block does them
        if cuda.blockIdx.x == cuda.gridDim.x - 1:
            i = nvec * width + t
            if i < n:
                store_f32(out, i, scalar(load_f32(gate, i), load_f32(up, i)))

    return cuda.jit(fastmath=fastmath)(kernel)


vec2_kernel = make_vector_kernel(load2, store2, 2, silu_mul2)
vec4_kernel = make_vector_kernel(load4, store4, 4, silu_mul4)
vec2_ieee_kernel = make_vector_kernel(load2, store2, 2, silu_mul2, fastmath=False)
vec4_ieee_kernel = make_vector_kernel(load4, store4, 4, silu_mul4, fastmath=False)


def choose_block(vectors, block, per_thread=2):
    """Shrink the block (down to one warp) until the work spans at least one block per SM.

    At decode size (one token, ~19k elements) a 256-thread block with 8 elements per
    thread would put the whole tensor on 10 of 132 SMs.
    """
    sms = sm_count()
    while block > 32 and cdiv(vectors, block * per_thread) < sms:
        block //= 2
    return block


def vector_config(n, width, block=256, max_blocks=None):
    """(grid, block) of a vector kernel over ``n`` elements, ``width`` per access: what every
    vector wrapper launches (book.kernels.fastcall looks it up once per shape)."""
    nvec = n // width
    b = choose_block(max(nvec, 1), block)
    grid = max(1, cdiv(nvec, 2 * b))
    if max_blocks:
        grid = min(grid, max_blocks)
    return grid, b


def launch_vector(kernel, p, width, block, max_blocks, stream):
    grid, b = vector_config(p.n, width, block, max_blocks)
    launch_kernel(kernel, grid, b, stream, p.gate, p.up, p.out)
    return p.result


def swiglu_ilp4(gate, up, out=None, block=256, max_blocks=None, stream=0, fastmath=True):
    """Four elements per thread, loads before use, scalar (element-sized) accesses.

    ``fastmath=False`` launches the IEEE-math control (``ilp4_ieee``)."""
    p = prepare(gate, up, out, DTYPES, "ilp4" if fastmath else "ilp4_ieee")
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    grid = max(1, cdiv(p.n, 4 * block))
    if max_blocks:
        grid = min(grid, max_blocks)
    launch_kernel(ilp4_kernel if fastmath else ilp4_ieee_kernel, grid, block, stream,
                  p.gate, p.up, p.out)
    return p.result


def swiglu_vec2(gate, up, out=None, block=256, max_blocks=None, stream=0, fastmath=True):
    """float32, 8-byte loads and stores, 4 elements per thread."""
    p = prepare(gate, up, out, ("float32",), "vec2" if fastmath else "vec2_ieee")
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    if not aligned(p.gate, p.up, p.out, to=8):
        return swiglu_ilp4(gate, up, p.result, block, max_blocks, stream, fastmath)
    kernel = vec2_kernel if fastmath else vec2_ieee_kernel
    return launch_vector(kernel, p, 2, block, max_blocks, stream)


def swiglu_vec4(gate, up, out=None, block=256, max_blocks=None, stream=0, fastmath=True):
    """float32, 16-byte loads and stores, 8 elements per thread.

    Falls back to :func:`swiglu_ilp4` when a pointer is not 16-byte aligned (a view that
    starts mid-allocation), since a misaligned vector access would fault.
    """
    p = prepare(gate, up, out, ("float32",), "vec4" if fastmath else "vec4_ieee")
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    if not aligned(p.gate, p.up, p.out, to=16):
        return swiglu_ilp4(gate, up, p.result, block, max_blocks, stream, fastmath)
    kernel = vec4_kernel if fastmath else vec4_ieee_kernel
    return launch_vector(kernel, p, 4, block, max_blocks, stream)


# The IEEE-math controls (chapter 6): each the same kernel compiled without fastmath.
swiglu_ilp4_ieee = ieee_control(swiglu_ilp4)
swiglu_vec2_ieee = ieee_control(swiglu_vec2)
swiglu_vec4_ieee = ieee_control(swiglu_vec4)
