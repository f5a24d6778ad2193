"""Kernels that run one eight-bit instruction each, so the models of :mod:`book.kernels.fp8`
can be held to the GPU (the GPU lane's tests, the "Eight bits" chapter's cells):

- :func:`pack`: ``cvt.rn.satfinite.<fmt>x2.f32`` on pairs of float32: compare with
  :func:`book.kernels.fp8.pack_model`;
- :func:`widen`: ``cvt.rn.f16x2.<fmt>x2`` on 16-bit pairs of codes: compare with
  :func:`book.kernels.fp8.widen_model`;
- FP8 ``wgmma``: :func:`book.kernels.hopper_probes.wgmma_once` with ``kind="e4m3"`` or
  ``"e5m2"`` (one m64nNk32): compare with :func:`book.kernels.fp8.wgmma_model`.

The conversions run in Numba's simulator too (there they are the models); wgmma needs a
Hopper GPU (sm_90a).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..instructions import fp8

__all__ = ["pack", "widen", "pack_kernel", "widen_kernel"]


@functools.lru_cache(maxsize=None)
def pack_kernel(fmt: str):
    cvt = {"e4m3": fp8.cvt_e4m3x2, "e5m2": fp8.cvt_e5m2x2}[fmt]

    def k(hi, lo, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = cvt(hi[i], lo[i])

    return cuda.jit(k)


@functools.lru_cache(maxsize=None)
def widen_kernel(fmt: str):
    cvt = {"e4m3": fp8.cvt_f16x2_e4m3x2, "e5m2": fp8.cvt_f16x2_e5m2x2}[fmt]

    def k(b, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = cvt(b[i])

    return cuda.jit(k)


def _launch(kern, n, *args):
    from ..host.launch import deliberate_grid

    blocks = max(1, -(-n // 256))
    with deliberate_grid():
        kern[blocks, 256](*args)


def pack(hi, lo, fmt: str = "e4m3") -> np.ndarray:
    """uint16[n]: ``cvt.rn.satfinite.<fmt>x2.f32 d, hi[i], lo[i]`` for each i."""
    hi = np.ascontiguousarray(hi, dtype=np.float32)
    lo = np.ascontiguousarray(lo, dtype=np.float32)
    out = cuda.device_array(hi.size, dtype=np.uint16)
    _launch(pack_kernel(fmt), hi.size, cuda.to_device(hi), cuda.to_device(lo), out)
    return out.copy_to_host()


def widen(b16, fmt: str = "e4m3") -> np.ndarray:
    """uint32[n]: ``cvt.rn.f16x2.<fmt>x2 d, b[i]`` for each 16-bit pair of codes."""
    b = np.ascontiguousarray(b16, dtype=np.uint16)
    out = cuda.device_array(b.size, dtype=np.uint32)
    _launch(widen_kernel(fmt), b.size, cuda.to_device(b), out)
    return out.copy_to_host()
