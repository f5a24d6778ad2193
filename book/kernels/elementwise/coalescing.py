"""Coalescing: one fused kernel, three ways of numbering its elements.

Taught in chapter 6 (``chapters/06_saturating_bandwidth.ipynb``, section "Coalescing:
which addresses a warp asks for"); :data:`CHAPTER` says so in code.

A warp's 32 threads execute each load instruction together. The memory system serves
the warp in 32-byte *sectors*: if thread ``k`` asks for element ``i + k`` (float32), the
32 addresses fill 128 contiguous bytes, 4 sectors, every byte of which is used. That is a
*coalesced* access. If neighbouring threads ask for elements ``stride`` apart, the same
instruction touches up to ``min(32, 4 * stride)`` sectors, and each sector brings 32
bytes of which the warp uses 4 per thread: the rest is fetched and, unless a cache keeps
it until another thread wants it, thrown away.

``strided_kernel`` computes exactly the fused SwiGLU of chapter 5 (fast math, one
element per thread); only the element a thread picks changes. Thread ``j`` of pass ``p``
(``blockIdx.y``) handles element ``j * stride + p``: with ``stride = 1`` that is element
``j`` (coalesced); with ``stride = 2`` a warp reads every other element and the odd ones
come in a second pass, half a grid later; with ``stride = 32`` every thread of a warp
reads its own 128-byte line. The passes run one after the other (blocks are scheduled in
order of their index), so by the time pass ``p + 1`` wants the rest of a sector, the
sector has long left the caches and is fetched from DRAM again.

Variants (registered in :mod:`book.kernels`, timed by ``python -m book.bench``):
``coalesced`` (stride 1), ``strided2`` (stride 2) and ``uncoalesced`` (stride 32).
"""

from numba import cuda

from .fused import silu_mul
from ..host.launch import cdiv, launch, prepare
from ..instructions.wide import load_f32, store_f32

#: the chapter that teaches these kernels
CHAPTER = "06_saturating_bandwidth"
DTYPES = ("float32",)
#: variant name -> stride in elements between neighbouring threads of a warp
STRIDES = {"coalesced": 1, "strided2": 2, "uncoalesced": 32}


# fastmath, as in the vector kernels: the arithmetic chain stays short, so what differs
# between the three variants is the addresses and nothing else (chapter 5 showed that a
# one-element kernel is sensitive to a long chain).
@cuda.jit(fastmath=True)
def strided_kernel(gate, up, out, stride):
    n = out.size
    per_pass = n // stride  # elements each pass covers
    j = cuda.grid(1)  # position within the pass
    p = cuda.blockIdx.y  # which pass: 0 .. stride - 1
    if j < per_pass:
        i = j * stride + p  # neighbouring threads: `stride` elements apart
        store_f32(out, i, silu_mul(load_f32(gate, i), load_f32(up, i)))
    elif p == 0 and j < per_pass + n - per_pass * stride:
        i = per_pass * stride + (j - per_pass)  # the n % stride left over at the end
        store_f32(out, i, silu_mul(load_f32(gate, i), load_f32(up, i)))


def swiglu_strided(gate, up, out=None, stride=1, block=256, stream=0):
    """Fused SwiGLU whose warps read elements ``stride`` apart (float32)."""
    if int(stride) != stride or stride < 1:
        raise ValueError(f"stride must be a whole number >= 1, got {stride!r}")
    p = prepare(gate, up, out, DTYPES, f"strided (stride {stride})")
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    per_pass = p.n // stride
    blocks_x = max(1, cdiv(per_pass + stride, block))  # the pass, plus room for the tail
    launch(strided_kernel, (blocks_x, stride), block, stream, p.gate, p.up, p.out, stride)
    return p.result


def swiglu_coalesced(gate, up, out=None, block=256, stream=0):
    """Neighbouring threads, neighbouring elements: 4 sectors per warp load (float32)."""
    return swiglu_strided(gate, up, out, STRIDES["coalesced"], block, stream)


def swiglu_strided2(gate, up, out=None, block=256, stream=0):
    """Every other element per pass: 8 sectors per warp load, half of each sector used."""
    return swiglu_strided(gate, up, out, STRIDES["strided2"], block, stream)


def swiglu_uncoalesced(gate, up, out=None, block=256, stream=0):
    """Each thread of a warp in its own 128-byte line: 32 sectors per warp load."""
    return swiglu_strided(gate, up, out, STRIDES["uncoalesced"], block, stream)
