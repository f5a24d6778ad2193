"""The course's kernels, traced the way their wrappers launch them (chapters 4, 6 and 7), and
the tracer's agreement with ncu."""

from __future__ import annotations

import numpy as np

from .model import TracerError
from .recorder import trace

__all__ = ["COURSE_VARIANTS", "course_launch", "gemm_block", "agreement"]

#: variants :func:`course_launch` knows, and the element count that keeps each one a page's
#: worth of simulated threads with no ragged tail (so every request has 32 lanes)
COURSE_VARIANTS = {"fused": 1024, "fused_fastmath": 1024, "ilp4": 2048, "vec4": 2048,
                   "coalesced": 1024, "strided2": 1024, "uncoalesced": 1024}


def course_launch(variant: str, n: int | None = None, block: int = 64, seed: int = 0):
    """``(kernel, grid, block, args)`` for a course kernel on ``n`` float32 elements.

    The grid is the one the variant's wrapper computes, so a trace shows the pattern the GPU
    sees at full size (the full-size launch only has more of the same warps).
    """
    from ..kernels.elementwise import coalescing, fused, vectorized
    from ..kernels.host.launch import cdiv

    if variant not in COURSE_VARIANTS:
        raise TracerError(f"unknown variant {variant!r}; the tracer knows "
                          f"{', '.join(COURSE_VARIANTS)}")
    n = n or COURSE_VARIANTS[variant]
    rng = np.random.default_rng(seed)
    gate, up = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    if variant in ("fused", "fused_fastmath"):
        k = fused.KERNELS[variant]
        return k, (cdiv(n, block),), (block,), (gate, up, out)
    if variant == "ilp4":
        return vectorized.ilp4_kernel, (cdiv(n, 4 * block),), (block,), (gate, up, out)
    if variant == "vec4":
        return vectorized.vec4_kernel, (max(1, cdiv(n // 4, 2 * block)),), (block,), \
            (gate, up, out)
    stride = coalescing.STRIDES[variant]
    per_pass = n // stride
    return coalescing.strided_kernel, (max(1, cdiv(per_pass + stride, block)), stride), \
        (block,), (gate, up, out, stride)


def gemm_block(a, b0, b1, out, tile=None):
    """Launch one block of the course's tiled GEMM, ``out = a @ b0`` on its first tile.

    What chapter 7 traces: ``tile`` is a :class:`book.kernels.gemms.gemm.Tile` (default
    ``SIM_TILE``: 64 threads, seconds in the simulator); ``a`` is ``tile.bm x K`` and
    ``b0``, ``b1`` (the same values: the kernel reads the right half of the tile from
    ``b1``) are ``K x tile.bn``, with ``K`` a multiple of ``tile.bk``. The GEMM's kernels
    are made by a factory, so they cannot be imported by name; this function can, so a GPU
    session traces it with ``trace_call("book.tracer:gemm_block", ..., tile=...)`` in a
    simulator process.
    """
    from ..kernels.gemms import gemm

    tile = tile or gemm.SIM_TILE
    shapes = (tuple(a.shape), tuple(b0.shape), tuple(b1.shape), tuple(out.shape))
    K = a.shape[1] if len(a.shape) == 2 else -1
    if (shapes != ((tile.bm, K), (K, tile.bn), (K, tile.bn), (tile.bm, tile.bn))
            or K <= 0 or K % tile.bk):
        raise TracerError(f"gemm_block needs a: ({tile.bm}, K), b0 and b1: (K, {tile.bn}), "
                          f"out: ({tile.bm}, {tile.bn}) with K a positive multiple of "
                          f"{tile.bk} (one block of this tile); got {shapes}")
    gemm.build_kernel(tile)[(1, 1), (tile.threads,)](a, b0, b1, out, 0, 0)


def agreement(record: dict, variants=("coalesced", "strided2", "uncoalesced", "vec4",
                                       "fused_fastmath")) -> list[dict]:
    """The tracer's global-load sectors per request beside ncu's, kernel by kernel.

    ``record`` is a coalescing record (``book.data.record("ncu/coalescing_h100")``) whose
    ``kernels[variant]["ld_sectors_per_request"]`` is ncu's
    ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_..._ld.sum``
    at full size.
    """
    rows = []
    for v in variants:
        hw = record["kernels"].get(v, {}).get("ld_sectors_per_request")
        if hw is None:
            continue
        k, g, b, args = course_launch(v)
        ours = trace(k, g, b, *args).sectors_per_request(kind="ld")
        rows.append({"variant": v, "tracer": ours, "ncu": hw, "ratio": ours / hw,
                     "within_10pct": abs(ours / hw - 1) <= 0.10})
    return rows
