"""The FP8 decode GEMV (:mod:`book.kernels.fp8_gemv`) in NumPy, block by block: what the
kernel stores, computed as it computes it (:func:`model`). Numba's simulator has neither TMA
nor FP8 ``wgmma``, so there the model stands in for the kernel; the GPU lane holds the kernel
to it (``tests/library/test_fp8_gemv.py``)."""

from __future__ import annotations

import numpy as np

from ..instructions import fp8
from .fp8_gemv_tile import BK, Fp8GemvTile, gemv_tile
from ..instructions.hopper import descriptor, tma_box
from ..gemms.stream_k import stream_k, walk
from .wgmma_gemv_tile import BM, output_of

__all__ = ["model"]


def _bf16_round(y):
    b = np.asarray(y, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000).view(np.float32)


def model(xq, sx, wgq, sg, wuq, su, out="bfloat16", out_scale=1.0, fmt="e4m3",
          tile: Fp8GemvTile | None = None, blocks: int = 132) -> np.ndarray:
    """What the kernel stores, computed as it computes it: ``blocks`` blocks each walking its
    range of the stream-K table (:func:`book.kernels.stream_k.walk`), each step's TMA boxes
    (:func:`book.kernels.hopper.tma_box`) multiplied by FP8 wgmma
    (:func:`book.kernels.fp8.wgmma_model`, float32 accumulators), the pieces of a tile cut at
    a seam added in block order in float32, the epilogue thread by thread through the
    accumulators' layout (:func:`book.kernels.wgmma_gemv_tile.output_of`). Returns float32
    values rounded to bf16 (bf16 out) or uint8 codes (e4m3 out). The kernel's exp is the
    fast one and the tensor cores keep fewer bits than float32 in their FP8 sums: the GPU
    agrees with the model to rounding, not bit for bit."""
    xq, wgq, wuq = (np.ascontiguousarray(a, dtype=np.uint8) for a in (xq, wgq, wuq))
    sx, sg, su = (np.asarray(a, dtype=np.float32) for a in (sx, sg, su))
    T, d = xq.shape
    h = wgq.shape[0]
    tile = (tile or gemv_tile(T, d)).validate()
    if tile.probe:
        raise ValueError(f"{tile.probe!r} is a probe (Fp8GemvTile.probe): its output is not "
                         "the layer's, and there is no model of it")
    n, KB = tile.n, tile.kblocks
    mt, nk = -(-h // BM), -(-d // tile.stage_k)
    blocks = min(blocks, mt * nk)
    table = stream_k(mt, nk, blocks)
    inv = np.float32(1.0) / np.float32(out_scale) if out == "e4m3" else np.float32(1.0)
    desc = descriptor(0, 16, 1024, "128B")
    pieces = {}  # row tile -> [(block, gate acc, up acc)] in block order
    for b in range(blocks):
        cur, acc = None, None
        for m, kb in walk(table, b, nk) + [(None, None)]:
            if m != cur:
                if cur is not None:
                    pieces.setdefault(cur, []).append((b, *acc))
                cur, acc = m, [np.zeros((BM, n), np.float32), np.zeros((BM, n), np.float32)]
            if m is None:
                break
            for kk in range(KB):
                kc = (kb * KB + kk) * BK
                x = tma_box(xq, kc, 0, (BK, n))
                for w, weight in enumerate((wgq, wuq)):
                    a = tma_box(weight, kc, m * BM, (BK, BM))
                    img = np.concatenate([a, x])
                    for ks in range(BK // 32):
                        acc[w] = fp8.wgmma_model(img, desc + 2 * ks,
                                                 desc + ((a.size + 32 * ks) >> 4), n, fmt,
                                                 d=acc[w])
    res = np.zeros((T, h), dtype=np.uint8 if out == "e4m3" else np.float32)
    lt = np.arange(128)
    for m in range(mt):
        got = sorted(pieces[m], key=lambda p: p[0])
        g = np.zeros((BM, n), np.float32)
        u = np.zeros((BM, n), np.float32)
        for _, pg, pu in got:
            g, u = g + pg, u + pu  # float32, in block order, as the finisher adds them
        for i in range(n // 2):
            r, t = output_of(lt, i)
            j = m * BM + r
            ok = (j < h) & (t < T)
            jj, tt = j[ok], t[ok]
            s = sx[tt]
            gate = g[r[ok], tt] * s * sg[jj]
            up = u[r[ok], tt] * s * (su[jj] * inv)
            y = (gate / (np.float32(1) + np.exp(-gate)) * up).astype(np.float32)
            res[tt, jj] = fp8.encode(y, fmt="e4m3") if out == "e4m3" else _bf16_round(y)
    return res
