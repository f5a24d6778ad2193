"""``fma.rn.f32``, rounded once, in a kernel and in the simulator: the arithmetic a kernel
needs when it must equal its NumPy model bit for bit (book.kernels.norm_quant, issue 42).

- ``fma32(a, b, c)``: float32 ``a * b + c`` rounded once. On the GPU it is ``cuda.fma``, one
  ``fma.rn.f32``; Numba's CUDA simulator's own ``cuda.fma`` rounds twice (float64, then
  float32), so there ``fma32`` is the model.
- ``fma32_model(a, b, c)``: the same in NumPy, for float32 arrays or scalars.
- ``max_nan32(a, b)``: the larger of two float32, a NaN if either is one (``max.NaN.f32``,
  sm_80 on: one instruction), as NumPy's ``np.maximum`` and ``amax``: a row's largest
  magnitude in a kernel that must give NumPy's (book.kernels.norm_quant).
- ``add32(a, b)``: ``a + b`` as a device function, so a reduction written once takes either
  combine (norm_quant's block sum and block amax).
"""

from __future__ import annotations

import numpy as np
from numba import config, cuda

SIMULATED = bool(config.ENABLE_CUDASIM)

__all__ = ["add32", "fma32", "fma32_model", "max_nan32"]


@cuda.jit(device=True, inline="always")
def add32(a, b):
    return a + b


def fma32_model(a, b, c):
    """float32 ``a * b + c`` rounded once (``fma.rn.f32``), for float32 arrays or scalars.

    a * b of two float32 is exact in float64; the sum is rounded to float64 and then to
    float32, which rounds twice only where the float64 sum lands on a float32 midpoint
    without being the exact sum: there the exact sum's remainder (TwoSum) picks the side."""
    p = np.asarray(a, np.float32).astype(np.float64) * np.asarray(b, np.float32)
    c64 = np.asarray(c, np.float32).astype(np.float64)
    s = p + c64
    bv = s - p
    err = (p - (s - bv)) + (c64 - bv)  # s + err == p + c exactly
    r = s.astype(np.float32)
    away = np.nextafter(r, np.where(s > r, np.float32(np.inf), np.float32(-np.inf)))
    mid = (r.astype(np.float64) + away) / 2
    fix = (s != r) & (s == mid) & (err != 0) & ((err > 0) == (away > r))
    return np.where(fix, away, r).astype(np.float32)


if SIMULATED:
    def fma32(a, b, c):
        """``fma.rn.f32`` in the simulator (its own ``cuda.fma`` rounds twice)."""
        return fma32_model(a, b, c)[()]

    def max_nan32(a, b):
        """``max.NaN.f32`` in the simulator: NumPy's maximum, a NaN winning."""
        return np.maximum(np.float32(a), np.float32(b))
else:
    from llvmlite import ir
    from numba import types
    from numba.cuda.extending import intrinsic

    @cuda.jit(device=True, inline="always")
    def fma32(a, b, c):
        return cuda.fma(a, b, c)

    @intrinsic
    def max_nan32(typingctx, a, b):
        def codegen(context, builder, signature, args):
            x, y = (context.cast(builder, v, t, types.float32)
                    for v, t in zip(args, signature.args))
            f = ir.FloatType()
            fn = ir.FunctionType(f, [f, f])
            return builder.asm(fn, "max.NaN.f32 $0, $1, $2;", "=f,f,f", [x, y], False)

        return types.float32(a, b), codegen
