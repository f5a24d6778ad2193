"""float16 and bfloat16: half the bytes, float32 math inside.

Storage is 2 bytes per element, so the same bandwidth moves twice the elements. The
math stays float32: each element is widened on load and rounded (to nearest even) once
on store. (Computing silu(g) * u in float16 can overflow: float16 tops out at 65504.)

Scalar 2-byte loads waste most of each memory instruction, so ``half8_kernel`` loads
16 bytes (8 halves) per access as four 32-bit words and widens the pairs in registers:
16 elements per thread. NumPy has no bfloat16, so bfloat16 arrays are uint16 bit
patterns; a torch bfloat16 tensor is viewed as int16 by the wrapper.
"""

from ..host.launch import aligned, ieee_control, prepare
from .vectorized import (
    launch_vector,
    make_vector_kernel,
    silu_mul4,
    silu_mul8,
    swiglu_ilp4,
)
from ..instructions.wide import load_half4, load_half8, store_half4, store_half8

DTYPES = ("float16", "bfloat16")

half4_kernel = make_vector_kernel(load_half4, store_half4, 4, silu_mul4)
half8_kernel = make_vector_kernel(load_half8, store_half8, 8, silu_mul8)
# the IEEE-math controls (chapter 6): the same kernels compiled without fastmath
half4_ieee_kernel = make_vector_kernel(load_half4, store_half4, 4, silu_mul4, fastmath=False)
half8_ieee_kernel = make_vector_kernel(load_half8, store_half8, 8, silu_mul8, fastmath=False)


def swiglu_half8(gate, up, out=None, block=256, max_blocks=None, stream=0,
                 fastmath=True):
    """float16/bfloat16, 16-byte accesses (8 elements each), 16 elements per thread."""
    p = prepare(gate, up, out, DTYPES, "half8" if fastmath else "half8_ieee")
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    if not aligned(p.gate, p.up, p.out, to=16):
        return swiglu_ilp4(gate, up, p.result, block, max_blocks, stream, fastmath)
    kernel = half8_kernel if fastmath else half8_ieee_kernel
    return launch_vector(kernel, p, 8, block, max_blocks, stream)


def swiglu_half4(gate, up, out=None, block=256, max_blocks=None, stream=0,
                 fastmath=True):
    """float16/bfloat16, 8-byte accesses (4 elements each), 8 elements per thread."""
    p = prepare(gate, up, out, DTYPES, "half4" if fastmath else "half4_ieee")
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    if not aligned(p.gate, p.up, p.out, to=8):
        return swiglu_ilp4(gate, up, p.result, block, max_blocks, stream, fastmath)
    kernel = half4_kernel if fastmath else half4_ieee_kernel
    return launch_vector(kernel, p, 4, block, max_blocks, stream)


swiglu_half4_ieee = ieee_control(swiglu_half4)
swiglu_half8_ieee = ieee_control(swiglu_half8)
