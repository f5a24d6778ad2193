"""Fused SwiGLU, one element per thread, and the fast-math story in three kernels.

One kernel reads ``gate`` and ``up`` once and writes ``out`` once: three transfers per
element instead of the naive five.

The three compilations of the same idea, for reading their PTX side by side:

- ``fused_kernel``: float32 literals, IEEE float32 math: ``math.exp`` becomes a
  libdevice ``expf`` (a dozen instructions) and ``/`` a correctly rounded ``div.rn.f32``.
- ``fused_fastmath_kernel``: the same source compiled with ``fastmath=True``: ``exp``
  becomes ``ex2.approx.ftz.f32`` (the special-function unit, after a multiply by
  log2(e)) and the division ``div.approx.ftz.f32``.
- ``fused_f64_literal_kernel``: the pitfall: ``1.0`` is a float64 literal in Numba, so
  ``g / (1.0 + exp(-g))`` is promoted to float64 (``div.rn.f64``, ``cvt.f64.f32``), even
  under fastmath.
"""

import math

from numba import cuda, float32

from ...dtypes import DTYPES  # the three dtypes every elementwise kernel takes
from ..host.launch import cdiv, launch_kernel, prepare
from ..instructions.wide import load_f32, store_f32



@cuda.jit(device=True, inline="always")
def silu_mul(g, u):
    """silu(g) * u in float32 (g, u float32)."""
    return g / (float32(1.0) + math.exp(-g)) * u


def _fused(gate, up, out):
    i = cuda.grid(1)
    if i < out.size:  # the tail: the grid rounds up to whole blocks
        store_f32(out, i, silu_mul(load_f32(gate, i), load_f32(up, i)))


def _fused_f64_literal(gate, up, out):
    i = cuda.grid(1)
    if i < out.size:
        g = load_f32(gate, i)
        store_f32(out, i, g / (1.0 + math.exp(-g)) * load_f32(up, i))  # 1.0 is float64!


fused_kernel = cuda.jit(_fused)
fused_fastmath_kernel = cuda.jit(fastmath=True)(_fused)
fused_f64_literal_kernel = cuda.jit(fastmath=True)(_fused_f64_literal)

KERNELS = {
    "fused": fused_kernel,
    "fused_fastmath": fused_fastmath_kernel,
    "fused_f64_literal": fused_f64_literal_kernel,
}


def _launch(kernel, variant, gate, up, out, block, stream):
    p = prepare(gate, up, out, DTYPES, variant)
    if p.n == 0:  # nothing to compute (a zero-size grid is an error)
        return p.result
    launch_kernel(kernel, cdiv(p.n, block), block, stream, p.gate, p.up, p.out)
    return p.result


def swiglu_fused(gate, up, out=None, block=256, stream=0):
    """One launch, one element per thread, IEEE float32 math."""
    return _launch(fused_kernel, "fused", gate, up, out, block, stream)


def swiglu_fused_fastmath(gate, up, out=None, block=256, stream=0):
    """As :func:`swiglu_fused`, compiled with fastmath (ex2.approx, approximate division)."""
    return _launch(fused_fastmath_kernel, "fused_fastmath", gate, up, out, block, stream)


def swiglu_fused_f64_literal(gate, up, out=None, block=256, stream=0):
    """The float64-literal pitfall: correct results, float64 arithmetic inside."""
    return _launch(fused_f64_literal_kernel, "fused_f64_literal", gate, up, out, block, stream)
