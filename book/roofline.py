"""The roofline model: ridge point, time predictions and the plot.

time >= max(bytes / bandwidth, flops / peak): a kernel is memory-bound when its
arithmetic intensity (flop/byte) is left of the ridge point peak / bandwidth.
For the H100 SXM, the dense FP16/BF16 tensor-core peak (989.5 TFLOP/s) over
3.35 TB/s gives the ~295 flop/byte of the Vizuara article (`book.sources`); see :func:`ridge_table`.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import specs as _specs
from .traffic import Traffic

__all__ = ["ridge_point", "ridge_table", "predict", "Prediction", "plot", "OKABE_ITO",
           "default_precision", "kernel_kind"]

#: Okabe-Ito colour-blind-safe palette (Okabe & Ito 2008, "Color Universal Design").
OKABE_ITO = {
    "orange": "#E69F00", "sky_blue": "#56B4E9", "bluish_green": "#009E73",
    "yellow": "#F0E442", "blue": "#0072B2", "vermillion": "#D55E00",
    "reddish_purple": "#CC79A7", "black": "#000000",
}
_CYCLE = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]

_DTYPE_TO_PRECISION = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}


def default_precision(dtype: str, kind: str = "gemm") -> str:
    """The compute roof where a kernel's math runs.

    ``kind="elementwise"``: the FP32 CUDA cores in every dtype (the course's elementwise
    kernels widen float16/bfloat16 to float32 and never touch a tensor core).
    ``kind="gemm"``: CUDA-core fp32 for float32, the tensor cores for the half types."""
    if kind == "elementwise":
        return "fp32"
    if kind != "gemm":
        raise ValueError(f"kind must be 'elementwise' or 'gemm', got {kind!r}")
    return _DTYPE_TO_PRECISION.get(dtype, "fp32")


def kernel_kind(traffic: Traffic) -> str:
    """"gemm" for a count that includes matrix multiplications (its shape has a reduction:
    book.traffic.mlp_up's model width d, book.traffic.gemm's K), else "elementwise"."""
    return "gemm" if "d" in traffic.shape or "K" in traffic.shape else "elementwise"


def ridge_point(spec, precision: str = "bf16") -> float:
    """Arithmetic intensity (flop/byte) where the compute and memory roofs meet."""
    spec = _specs.get(spec)
    return spec.peak(precision) / spec.memory_bandwidth


def ridge_table(spec) -> dict[str, float | None]:
    """Ridge point for every precision the GPU has (None where it has no such unit)."""
    spec = _specs.get(spec)
    out = {}
    for p in ("fp32", "tf32", "fp16", "bf16"):
        try:
            out[p] = ridge_point(spec, p)
        except ValueError:
            out[p] = None
    return out


@dataclass(frozen=True)
class Prediction:
    time_s: float
    memory_time_s: float
    compute_time_s: float
    bound: str  # "memory" or "compute"
    intensity: float  # flop/byte
    ridge: float  # flop/byte
    precision: str


def predict(traffic: Traffic, spec, precision: str | None = None) -> Prediction:
    """Roofline lower bound on the time of ``traffic`` on ``spec``.

    ``precision`` picks the compute roof (default: where the math runs, from the traffic's
    dtype and kind: see :func:`default_precision` and :func:`kernel_kind`).
    """
    spec = _specs.get(spec)
    precision = precision or default_precision(traffic.dtype, kernel_kind(traffic))
    mem = traffic.bytes / spec.memory_bandwidth
    comp = traffic.flops / spec.peak(precision)
    bound = "memory" if mem >= comp else "compute"
    return Prediction(max(mem, comp), mem, comp, bound, traffic.intensity,
                      ridge_point(spec, precision), precision)


def plot(ax=None, spec="H100-SXM", points=(), precision=("fp32", "bf16"), *,
         intensity_range=(0.05, 2000.0), title: str | None = None):
    """Draw a log-log roofline on ``ax`` (created if None) and return the Axes.

    ``precision``: one precision or a list; each draws a compute roof.
    ``points``: measured or predicted kernels, each (label, intensity flop/byte,
    achieved flop/s). The caller adds alt text (e.g. in the notebook cell's
    metadata or the figure caption).
    """
    import matplotlib.pyplot as plt
    import numpy as np

    spec = _specs.get(spec)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    precisions = [precision] if isinstance(precision, str) else list(precision)
    lo, hi = intensity_range
    x = np.logspace(np.log10(lo), np.log10(hi), 400)
    bw = spec.memory_bandwidth
    for i, p in enumerate(precisions):
        peak = spec.peak(p)
        y = np.minimum(bw * x, peak) / 1e12
        color = _CYCLE[i % len(_CYCLE)]
        ridge = peak / bw
        ax.plot(x, y, color=color, lw=2,
                label=f"{p} roof: {peak / 1e12:.0f} TFLOP/s, ridge {ridge:.0f} flop/B")
        if lo < ridge < hi:
            ax.axvline(ridge, color=color, ls=":", lw=1)
    markers = ["o", "s", "^", "D", "v", "P", "X"]
    for j, pt in enumerate(points):
        label, intensity, flops_per_s = pt
        ax.plot([intensity], [flops_per_s / 1e12], ls="none", marker=markers[j % len(markers)],
                ms=8, color=_CYCLE[(j + len(precisions)) % len(_CYCLE)], label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("Arithmetic intensity (flop/byte)")
    ax.set_ylabel("Attainable performance (TFLOP/s)")
    ax.set_title(title or f"Roofline: {spec.name}, {bw / 1e12:.2f} TB/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small", loc="lower right")
    return ax
