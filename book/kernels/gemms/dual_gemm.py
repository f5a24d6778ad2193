"""Epilogue fusion: one kernel computes ``silu(x @ Wg) * (x @ Wu)``.

The dual GEMM is the tiled GEMM of :mod:`book.kernels.gemm` with two changes, both in
:func:`book.kernels.gemm.build_kernel` under ``epilogue``:

1. The block's B tile is ``[Wg tile | Wu tile]`` for the *same* 64 output columns, so the
   x tile a block has staged in shared memory feeds both products: x is read once for
   gate and up together. Each thread's 8 x 8 accumulators hold a 8 x 4 gate block and the
   matching 8 x 4 up block (its left and right column halves).
2. Before the single store, each thread applies ``silu_mul(gate, up)`` (the very device
   function of the fused elementwise kernel, :func:`book.kernels.fused.silu_mul`) to its
   pairs of accumulators. Gate and up never exist in global memory: per output element
   the kernel writes 4 bytes, where the unfused path writes gate and up (8 bytes), then
   reads them back (8 bytes) and writes out (4 bytes).

``DUAL_TILE``: 128 rows x 128 accumulator columns per block = 128 x 64 outputs, 256 threads.

The control, :func:`dual_gemm_identity`: the same kernel (same tiles, same two
accumulations from one x tile, same loads, same 4-byte store per output) with the
*identity* epilogue ``gate + up`` instead of ``silu(gate) * up``. "Identity" here means the
least an epilogue can do that still needs both accumulators and stores what the SwiGLU
epilogue stores: one add, no exp, no division. (Writing gate and up out separately would
double the stores and measure the store traffic, not the activation.) So
``numba_dual_gemm - numba_dual_gemm_identity`` is the cost of the SiLU*mul in the epilogue,
and ``numba_unfused - numba_dual_gemm_identity`` is what the dual structure (one x tile for
both products, no gate/up round trip) saves without any activation at all.

Taught in chapter 7 (``chapters/07_epilogue_fusion.ipynb``), like :mod:`book.kernels.gemm`.
"""

from __future__ import annotations

from numba import cuda

from ..elementwise.fused import silu_mul
from .gemm import (
    CHAPTER, TILE, Tile, build_kernel, check_matrix, check_no_overlap, default_tile, launch,
    prepare_output,
)

__all__ = [
    "CHAPTER", "DUAL_TILE", "OUT_COLS_PER_BLOCK", "dual_gemm_kernel", "dual_gemm_kernel_edge",
    "dual_gemm_identity_kernel", "swiglu_dual_gemm", "dual_gemm_identity", "flops", "silu_mul",
    "gate_plus_up",
]

#: Same tile as the GEMM; half of its 128 accumulator columns are gate, half up.
DUAL_TILE = TILE
OUT_COLS_PER_BLOCK = DUAL_TILE.bn // 2



@cuda.jit(device=True, inline="always")
def gate_plus_up(g, u):
    """The control's epilogue: both accumulators, one add, one store."""
    return g + u


#: The kernels measured on the H100: interior tiles, and the guarded edge variant.
dual_gemm_kernel = build_kernel(DUAL_TILE, silu_mul)
dual_gemm_kernel_edge = build_kernel(DUAL_TILE, silu_mul, True)
#: The control: the same kernel with the identity epilogue (``gate + up``).
dual_gemm_identity_kernel = build_kernel(DUAL_TILE, gate_plus_up)


def flops(T: int, d: int, h: int) -> int:
    """Matrix flops of the two projections (2*T*d*h each); the activation is not counted."""
    return 4 * T * d * h


def swiglu_dual_gemm(x, wg, wu, out=None, *, tile: Tile | None = None,
                     stream=0):
    """``out = silu(x @ wg) * (x @ wu)`` in one launch (plus guarded edges).

    x[T, d], wg[d, h], wu[d, h], out[T, h]: float32 GPU arrays (Numba device
    arrays or anything with ``__cuda_array_interface__``, e.g. torch CUDA
    tensors), row-major.
    ``out`` is allocated when not given. ``tile`` defaults to
    :func:`book.kernels.gemm.default_tile`.
    """
    return _dual(silu_mul, x, wg, wu, out, tile, stream)


def dual_gemm_identity(x, wg, wu, out=None, *, tile: Tile | None = None,
                       stream=0):
    """The control: ``out = (x @ wg) + (x @ wu)``, by the same kernel.

    Same arguments, same launches, same loads and stores as
    :func:`swiglu_dual_gemm`; only the epilogue's arithmetic differs (one add
    instead of silu and a multiply).
    """
    return _dual(gate_plus_up, x, wg, wu, out, tile, stream)


def _dual(epilogue, x, wg, wu, out, tile, stream):
    tile = (tile or default_tile()).validate()
    xd = check_matrix(x, "x")
    gd, ud = check_matrix(wg, "wg"), check_matrix(wu, "wu")
    if tuple(gd.shape) != tuple(ud.shape):
        raise ValueError(
            f"wg and wu must have the same shape [d, h], got {tuple(gd.shape)} and "
            f"{tuple(ud.shape)}"
        )
    if xd.shape[1] != gd.shape[0]:
        raise ValueError(
            f"x is {tuple(xd.shape)} but wg is {tuple(gd.shape)}: x[T, d] needs weights "
            "[d, h] (x.shape[1] == wg.shape[0]); a torch nn.Linear weight is [h, d]: "
            "pass weight.t().contiguous()"
        )
    shape = (xd.shape[0], gd.shape[1])
    result, o = prepare_output(out, x, shape)
    check_no_overlap(o, [("x", xd), ("wg", gd), ("wu", ud)])
    launch(tile, epilogue, xd, gd, ud, o, stream)
    return result
