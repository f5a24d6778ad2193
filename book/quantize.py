"""Quantization to eight bits, and what it costs in error: where the scales live.

A tensor is stored as eight-bit codes and float32 scales, ``x ~ decode(codes) * scale``,
with one scale per tensor, per token (a row of the activations x [T, d]) or per output
channel (a row of an nn.Linear weight [h, d]). A scale maps the largest magnitude of its
group onto the format's largest value (``amax / 448`` for e4m3), so nothing saturates; a
*static* scale (given, not measured: the output scale the next GEMM reads) may saturate,
and :func:`quantize` counts the values that did.

Rounding is the hardware's (:func:`book.kernels.fp8.encode`: round to nearest even,
satfinite), and the division by the scale is float32's, as torch's on the GPU, so
:func:`quantize_torch` (for CUDA tensors) gives the same codes as :func:`quantize` here.

:func:`mlp_up_error`: the MLP-up ``silu(x wg^T) * (x wu^T)`` computed in float64 from
the quantized operands, against float64 of the unquantized layer: the error of a scheme
alone (the kernel adds float32 accumulation and its fast exp on top), with the
saturated counts, beside bfloat16's error (:func:`bf16_error`). No GPU needed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .kernels.fp8 import FORMATS, decode, encode

__all__ = ["Quantized", "scales_for", "quantize", "dequantize", "per_tensor", "per_token",
           "per_channel", "quantize_torch", "mlp_up_error", "bf16_error", "SCHEMES"]

#: where a scale lives: one for the whole tensor, or one per row (a token of x, an output
#: channel of an nn.Linear weight)
SCHEMES = ("tensor", "row")


@dataclass
class Quantized:
    codes: np.ndarray  # uint8, the tensor's shape
    scale: np.ndarray  # float32: shape () per tensor, [rows] per row
    fmt: str
    saturated: int  # values whose x / scale rounded past the format's largest (clamped)

    def values(self) -> np.ndarray:
        """float64: decode(codes) * scale."""
        s = self.scale if self.scale.ndim == 0 else self.scale[:, None]
        return decode(self.codes, self.fmt) * s.astype(np.float64)


def scales_for(x, scheme: str = "row", fmt: str = "e4m3") -> np.ndarray:
    """float32 scales mapping each group's largest magnitude onto the format's largest
    value (a group of zeros gets scale 1)."""
    a = np.abs(np.asarray(x, dtype=np.float32))
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    amax = a.max() if scheme == "tensor" else a.max(axis=1)
    s = (amax / np.float32(FORMATS[fmt].max)).astype(np.float32)
    return np.where(s > 0, s, np.float32(1)).astype(np.float32)


def quantize(x, scale, fmt: str = "e4m3") -> Quantized:
    """Codes of ``x / scale`` (float32 division; ``scale`` a scalar or one per row)."""
    x = np.asarray(x, dtype=np.float32)
    s = np.asarray(scale, dtype=np.float32)
    q = x / (s if s.ndim == 0 else s[:, None])
    sat = int(FORMATS[fmt].saturates(q).sum())
    return Quantized(encode(q, fmt), s, fmt, sat)


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


def quantize_torch(x, scheme: str = "row", fmt: str = "e4m3", scale=None):
    """(codes as torch float8, float32 scales) of a torch tensor, on its device: the same
    codes as :func:`quantize` (float32 division, clamped to the largest value as satfinite
    does: torch's own cast gives NaN past it)."""
    import torch

    top = FORMATS[fmt].max
    dt = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
    xf = x.float()
    # divisors as tensors on x's device: torch's CUDA division by a Python number multiplies
    # by its reciprocal (seen on the H200: scales an ulp off the model's)
    if scale is None:
        amax = xf.abs().amax() if scheme == "tensor" else xf.abs().amax(dim=1)
        scale = amax / torch.tensor(top, dtype=torch.float32, device=x.device)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    scale = torch.as_tensor(scale, dtype=torch.float32, device=x.device)
    q = xf / (scale if scale.ndim == 0 else scale[:, None])
    return q.clamp(-top, top).to(dt), scale


def _silu(g):
    return 0.5 * g * (1 + np.tanh(g / 2))  # g * sigmoid(g), with no overflow


def mlp_up_error(x, wg, wu, act: str = "row", weight: str = "row", fmt: str = "e4m3",
                 out_scale: float | None = None) -> dict:
    """Relative error (Frobenius; and the median over output channels of each one's) of the
    MLP-up from quantized x (``act``: "row" per token,
    "tensor") and weights (``weight``: "row" per output channel, "tensor"), against float64
    of the unquantized layer; with ``out_scale``, the output stored as e4m3 codes of
    ``y / out_scale`` too (its error and saturated count)."""
    x, wg, wu = (np.asarray(a, dtype=np.float64) for a in (x, wg, wu))
    ref = _silu(x @ wg.T) * (x @ wu.T)
    qx = quantize(x, scales_for(x, act, fmt), fmt)
    qg = quantize(wg, scales_for(wg, weight, fmt), fmt)
    qu = quantize(wu, scales_for(wu, weight, fmt), fmt)
    xv = qx.values()
    y = _silu(xv @ qg.values().T) * (xv @ qu.values().T)
    norm = np.linalg.norm(ref)
    per_col = np.linalg.norm(y - ref, axis=0) / np.maximum(np.linalg.norm(ref, axis=0), 1e-300)
    res = {"act": act, "weight": weight, "fmt": fmt,
           "rel_error": float(np.linalg.norm(y - ref) / norm),
           # the typical output channel's: a few large channels dominate the whole's norm
           "median_channel_error": float(np.median(per_col)),
           "saturated": {"x": qx.saturated, "wg": qg.saturated, "wu": qu.saturated}}
    if out_scale is not None:
        qy = quantize(y.astype(np.float32), np.float32(out_scale), "e4m3")
        res["rel_error_e4m3_out"] = float(np.linalg.norm(qy.values() - ref) / norm)
        res["saturated"]["out"] = qy.saturated
    return res


def _bf16(a):
    b = np.asarray(a, dtype=np.float32).view(np.uint32)
    b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000  # round to nearest even
    return b.view(np.float32).astype(np.float64)


def bf16_error(x, wg, wu) -> float:
    """The same error for bfloat16 operands (the bf16 kernel's inputs), float64 math."""
    x, wg, wu = (np.asarray(a, dtype=np.float64) for a in (x, wg, wu))
    ref = _silu(x @ wg.T) * (x @ wu.T)
    xb = _bf16(x)
    y = _silu(xb @ _bf16(wg).T) * (xb @ _bf16(wu).T)
    return float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
