"""Quantization to eight bits, and what it costs in error: where the scales live.

A tensor is stored as eight-bit codes and float32 scales, ``x ~ decode(codes) * scale``,
with one scale per tensor, per row (a token of the activations x [T, d], or an output
channel of an nn.Linear weight [h, d]) or per block (``block=(rows, cols)``: 1 x 128 for
activations, 128 x 128 for weights, as DeepSeek-V3 trains them). A scale maps the largest
magnitude of its group onto the format's largest value (``amax / 448`` for e4m3), so
nothing saturates; a *static* scale (given, not measured: the output scale the next GEMM
reads, or an activation scale calibrated on other data) may saturate, and :func:`quantize`
counts the values that did.

Rounding is the hardware's (:func:`book.kernels.instructions.fp8.encode`: round to nearest even,
satfinite; by table, :func:`~book.kernels.instructions.fp8.encode_fast`, the same codes), and the
division by the scale is float32's, as torch's on the GPU, so :func:`quantize_torch` (for
CUDA tensors) gives the same codes as :func:`quantize` here.

:func:`mlp_up_error`: the MLP-up ``silu(x wg^T) * (x wu^T)`` computed in float64 from
the quantized operands, against float64 of the unquantized layer: the error of a scheme
alone (the kernel adds float32 accumulation and its fast exp on top), with the
saturated counts, beside bfloat16's error (:func:`bf16_error`). :func:`random_layer` makes
the course's layer, with outliers where asked. No GPU needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels.instructions.fp8 import FORMATS, decode, encode_fast

__all__ = ["Quantized", "scales_for", "quantize", "dequantize", "per_tensor", "per_token",
           "per_channel", "per_block", "quantize_torch", "reference", "mlp_up_error",
           "bf16_error", "random_layer", "SCHEMES", "ACT_BLOCK", "WEIGHT_BLOCK"]

#: where a scale lives: one for the whole tensor, one per row (a token of x, an output
#: channel of an nn.Linear weight), or one per block of rows x columns
SCHEMES = ("tensor", "row", "block")
#: the blocks DeepSeek-V3 scales by: 1 x 128 of the activations (a token's 128 values of
#: k), 128 x 128 of the weights
ACT_BLOCK = (1, 128)
WEIGHT_BLOCK = (128, 128)
#: rows quantized at a time (float32 temporaries of a few MB each)
_CHUNK = 1 << 22


@dataclass
class Quantized:
    codes: np.ndarray  # uint8, the tensor's shape
    scale: np.ndarray  # float32: shape () per tensor, [rows] per row, [R, C] per block
    fmt: str
    saturated: int  # values whose x / scale rounded past the format's largest (clamped)
    block: tuple | None = None  # (rows, cols) of a block, when scaled per block

    def scale_of_each(self) -> np.ndarray:
        """float32 of the codes' shape (or broadcastable to it): each value's scale."""
        return _expand(self.scale, self.codes.shape, self.block)

    def values(self) -> np.ndarray:
        """float64: decode(codes) * scale."""
        return decode(self.codes, self.fmt) * self.scale_of_each().astype(np.float64)


def _expand(s, shape, block):
    s = np.asarray(s, dtype=np.float32)
    if s.ndim == 0:
        return s
    if s.ndim == 1:
        return s[:, None]
    br, bc = block
    return np.repeat(np.repeat(s, br, axis=0), bc, axis=1)[:shape[0], :shape[1]]


def _amax_blocks(a, block):
    """The largest magnitude of each block (zero-padded at the edges)."""
    br, bc = block
    R, C = a.shape
    nr, nc = -(-R // br), -(-C // bc)
    pad = np.zeros((nr * br, nc * bc), dtype=np.float32)
    pad[:R, :C] = a
    return pad.reshape(nr, br, nc, bc).max(axis=(1, 3))


def scales_for(x, scheme: str = "row", fmt: str = "e4m3", block=None) -> np.ndarray:
    """float32 scales mapping each group's largest magnitude onto the format's largest
    value (a group of zeros gets scale 1); ``block`` (rows, cols) for ``"block"``."""
    a = np.abs(np.asarray(x, dtype=np.float32))
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    if scheme == "block" and (block is None or len(block) != 2 or min(block) < 1):
        raise ValueError(f"a block scheme needs block=(rows, cols), got {block!r}")
    amax = (a.max() if scheme == "tensor" else a.max(axis=1) if scheme == "row"
            else _amax_blocks(a, block))
    s = (amax / np.float32(FORMATS[fmt].max)).astype(np.float32)
    return np.where(s > 0, s, np.float32(1)).astype(np.float32)


def quantize(x, scale, fmt: str = "e4m3", block=None) -> Quantized:
    """Codes of ``x / scale`` (float32 division; ``scale`` a scalar, one per row, or one
    per block of ``block`` = (rows, cols)), rows at a time."""
    x = np.asarray(x, dtype=np.float32)
    s = np.asarray(scale, dtype=np.float32)
    if s.ndim == 2 and block is None:
        raise ValueError("scales per block need block=(rows, cols)")
    codes = np.empty(x.shape, dtype=np.uint8)
    top = np.float32(FORMATS[fmt].max)
    sat = 0
    rows = max(1, _CHUNK // max(1, x.shape[-1])) if x.ndim == 2 else x.shape[0] or 1
    if s.ndim == 2:
        rows = max(block[0], rows - rows % block[0])  # whole blocks of rows
    for r0 in range(0, x.shape[0], rows):
        part = x[r0:r0 + rows]
        if s.ndim == 0:
            sp = s
        elif s.ndim == 1:
            sp = s[r0:r0 + rows, None]
        else:
            sp = _expand(s[r0 // block[0]:], part.shape, block)
        q = part / sp
        c = encode_fast(q, fmt)
        # the clamp changed the result where the code is the largest magnitude but the
        # value is past it (the float32 quotient exactly; saturates() in float64 agrees)
        big = (c & 0x7F) == (encode_fast(top, fmt) & 0x7F)
        if big.any():
            sat += int(FORMATS[fmt].saturates(q[big]).sum())
        codes[r0:r0 + rows] = c
    return Quantized(codes, s, fmt, sat, tuple(block) if s.ndim == 2 else None)


def dequantize(q: Quantized) -> np.ndarray:
    return q.values()


def per_tensor(x, fmt: str = "e4m3") -> Quantized:
    return quantize(x, scales_for(x, "tensor", fmt), fmt)


def per_token(x, fmt: str = "e4m3") -> Quantized:
    """Activations [T, d]: a scale per token (row)."""
    return quantize(x, scales_for(x, "row", fmt), fmt)


def per_channel(w, fmt: str = "e4m3") -> Quantized:
    """An nn.Linear weight [h, d]: a scale per output channel (row), made once, offline."""
    return quantize(w, scales_for(w, "row", fmt), fmt)


def per_block(a, block=WEIGHT_BLOCK, fmt: str = "e4m3") -> Quantized:
    """A scale per block of ``block`` = (rows, cols): ``ACT_BLOCK`` for activations,
    ``WEIGHT_BLOCK`` for weights."""
    return quantize(a, scales_for(a, "block", fmt, block), fmt, block)


def _quantize_as(a, scheme, fmt, block):
    return quantize(a, scales_for(a, scheme, fmt, block), fmt,
                    block if scheme == "block" else None)


def quantize_torch(x, scheme: str = "row", fmt: str = "e4m3", scale=None):
    """(codes as torch float8, float32 scales) of a torch tensor, on its device: the same
    codes as :func:`quantize` (float32 division, clamped to the largest value as satfinite
    does: torch's own cast gives NaN past it). Per tensor or per row."""
    import torch

    top = FORMATS[fmt].max
    dt = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
    xf = x.float()
    # divisors as tensors on x's device: torch's CUDA division by a Python number multiplies
    # by its reciprocal (seen on the H200: scales an ulp off the model's). Made there by a fill
    # (torch.full), never copied from the host (torch.tensor): a copy waits for the GPU, and a
    # call that waits cannot be timed behind a queue (book.bench.delay.primed)
    if scale is None:
        if scheme not in ("tensor", "row"):
            raise ValueError(f"quantize_torch scales per tensor or per row, not {scheme!r}")
        amax = xf.abs().amax() if scheme == "tensor" else xf.abs().amax(dim=1)
        scale = amax / torch.full((), top, dtype=torch.float32, device=x.device)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    elif not isinstance(scale, torch.Tensor) and np.ndim(scale) == 0:   # a number: filled too
        scale = torch.full((), float(scale), dtype=torch.float32, device=x.device)
    scale = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    q = xf / (scale if scale.ndim == 0 else scale[:, None])
    return q.clamp(-top, top).to(dt), scale


def _silu(g):
    return 0.5 * g * (1 + np.tanh(g / 2))  # g * sigmoid(g), with no overflow


def reference(x, wg, wu) -> np.ndarray:
    """float64 [T, h]: the unquantized layer, ``silu(x wg^T) * (x wu^T)``."""
    x64 = np.asarray(x, dtype=np.float64)
    gate = x64 @ np.asarray(wg, np.float64).T
    return _silu(gate) * (x64 @ np.asarray(wu, np.float64).T)


def mlp_up_error(x, wg, wu, act: str = "row", weight: str = "row", fmt: str = "e4m3",
                 out_scale: float | None = None, act_block=ACT_BLOCK,
                 weight_block=WEIGHT_BLOCK, act_scale=None, ref=None) -> dict:
    """Relative error (Frobenius; and the median over output channels of each one's) of the
    MLP-up from quantized x (``act``: "row" per token, "tensor", "block" per
    ``act_block``) and weights (``weight``: "row" per output channel, "tensor", "block" per
    ``weight_block``), against float64 of the unquantized layer. ``act_scale``: a static
    per-tensor scale for x (calibrated elsewhere: it may saturate) instead of one measured
    here. With ``out_scale``, the output stored as e4m3 codes of ``y / out_scale`` too (its
    error and saturated count). ``ref``: :func:`reference` of the same layer, if made
    already (several schemes compared on one layer)."""
    x = np.asarray(x, dtype=np.float32)
    if ref is None:
        ref = reference(x, wg, wu)
    qx = (quantize(x, np.float32(act_scale), fmt) if act_scale is not None
          else _quantize_as(x, act, fmt, act_block))
    xv = qx.values()
    qg = _quantize_as(wg, weight, fmt, weight_block)
    gate = xv @ qg.values().T
    qu = _quantize_as(wu, weight, fmt, weight_block)
    y = _silu(gate) * (xv @ qu.values().T)
    del gate
    norm = np.linalg.norm(ref)
    per_col = np.linalg.norm(y - ref, axis=0) / np.maximum(np.linalg.norm(ref, axis=0), 1e-300)
    res = {"act": "static" if act_scale is not None else act, "weight": weight, "fmt": fmt,
           "rel_error": float(np.linalg.norm(y - ref) / norm),
           # the typical output channel's: a few large channels dominate the whole's norm
           "median_channel_error": float(np.median(per_col)),
           "saturated": {"x": qx.saturated, "wg": qg.saturated, "wu": qu.saturated},
           "values": {"x": int(x.size), "wg": int(np.size(wg)), "wu": int(np.size(wu))}}
    if out_scale is not None:
        qy = quantize(y.astype(np.float32), np.float32(out_scale), "e4m3")
        res["rel_error_e4m3_out"] = float(np.linalg.norm(qy.values() - ref) / norm)
        res["saturated"]["out"] = qy.saturated
        res["values"]["out"] = int(y.size)
    return res


def _bf16(a):
    b = np.asarray(a, dtype=np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000  # round to nearest even
    return b.view(np.float32).astype(np.float64)


def bf16_error(x, wg, wu, ref=None) -> float:
    """The same error for bfloat16 operands (the bf16 kernel's inputs), float64 math."""
    if ref is None:
        ref = reference(x, wg, wu)
    xb = _bf16(x)
    y = _silu(xb @ _bf16(wg).T) * (xb @ _bf16(wu).T)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))


def random_layer(T: int, d: int, h: int, seed: int = 0, channel_outliers: float = 1.0,
                 feature_outliers: float = 1.0, n_outliers: int = 4):
    """(x [T, d], wg [h, d], wu [h, d]) float32: the course's random layer (x standard
    normal, weights normal with variance 1/d), with ``n_outliers`` output channels of wg
    and wu ``channel_outliers`` times larger, and ``n_outliers`` features (columns) of x
    ``feature_outliers`` times larger (a few hidden dimensions far above the rest, as in
    trained models' activations)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T, d), dtype=np.float32)
    wg = rng.standard_normal((h, d), dtype=np.float32)
    wg *= np.float32(1 / np.sqrt(d))
    wu = rng.standard_normal((h, d), dtype=np.float32)
    wu *= np.float32(1 / np.sqrt(d))
    if channel_outliers != 1.0:
        rows = rng.choice(h, n_outliers, replace=False)
        wg[rows] *= np.float32(channel_outliers)
        wu[rows] *= np.float32(channel_outliers)
    if feature_outliers != 1.0:
        cols = rng.choice(d, n_outliers, replace=False)
        x[:, cols] *= np.float32(feature_outliers)
    return x, wg, wu
