"""The "Eight bits" chapter's pictures and tables, drawn from the models of
:mod:`book.kernels.instructions.fp8`, the quantization of :mod:`book.quantize` and the FP8 record
(:mod:`book.fp8_data`).

- :func:`fields`, :func:`bits_figure`: an eight-bit code taken apart (sign, exponent,
  mantissa) and its value, from :func:`book.kernels.instructions.fp8.decode`;
- :func:`ladder`, :func:`values_figure`: every positive value of e4m3 and e5m2 on one
  logarithmic axis (how many per power of two, where the subnormals are);
- :func:`call_bytes`, :func:`predicted_seconds`, :func:`roofline_figure`: chapter 1's count
  of the MLP-up's bytes with one byte per value instead of two, and the time the roofline
  allows at every T (the weights' read at decode, the flops at prefill), with the record's
  measured rows on it;
- :func:`scales_figure`: where the scales live (per tensor, per token or output channel, per
  block), drawn on a small x and W;
- :func:`scheme_errors`, :func:`outlier_sweep`, :func:`sweep_figure`, :func:`out_scale_rows`:
  what each scheme costs in error (:func:`book.quantize.mlp_up_error`), with outliers and
  with static scales;
- :func:`measurement_rows`: the comparison table's rows as the record names them.

FP8 peaks are not in :mod:`book.specs`: :data:`FP8_PEAK` holds the datasheets' dense FP8
tensor-core rates of the Hopper GPUs, each with its source.
"""

from __future__ import annotations

import numpy as np

from . import quantize as Q
from .kernels.instructions import fp8 as F
from .roofline import OKABE_ITO as OI

__all__ = ["FP8_PEAK", "fields", "bits_figure", "ladder", "values_figure", "call_bytes",
           "predicted_seconds", "roofline_figure", "scales_figure", "scheme_errors",
           "outlier_sweep", "sweep_figure", "out_scale_rows", "measurement_rows", "decode_rows",
           "SCHEMES", "MEASURED", "DECODE_ROWS", "spec_of"]

_H100 = "https://www.nvidia.com/en-us/data-center/h100/"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
#: dense FP8 tensor-core flop/s (the datasheets print 3,958 TFLOPS "with sparsity", twice
#: the dense rate) and where it is printed, by book.specs key
FP8_PEAK = {"H100-SXM": (1979e12, _H100), "H200": (1979e12, _H200)}

FIELD_COLOURS = {"sign": OI["reddish_purple"], "exponent": OI["sky_blue"],
                 "mantissa": OI["orange"]}


def spec_of(provenance: dict):
    """The :class:`book.specs.GPUSpec` of the GPU a record names, and its table key."""
    from .specs import get, key_of

    return get(provenance["gpu"]), key_of(provenance["gpu"])


# ---------------------------------------------------------------------------------------
# a byte, bit by bit


def fields(code: int, fmt: str = "e4m3") -> dict:
    """An eight-bit code's fields and what they mean: sign, exponent bits, mantissa bits,
    the value (``decode``), whether it is subnormal, and the value written out as
    sign x 2^(e - bias) x (1 + m / 2^bits) (or the subnormal form)."""
    f = F.FORMATS[fmt]
    code = int(code) & 0xFF
    s = code >> 7
    e = (code >> f.man_bits) & ((1 << f.exp_bits) - 1)
    m = code & ((1 << f.man_bits) - 1)
    v = float(F.decode(code, fmt))
    sign = "-" if s else "+"
    top = (1 << f.exp_bits) - 1
    if np.isnan(v):
        text = "NaN"
    elif np.isinf(v):
        text = f"{sign}infinity (exponent all ones, mantissa 0)"
    elif e == 0:
        text = (f"{sign}2^{f.emin} x {m}/{1 << f.man_bits} = {v:g} (subnormal: exponent 0, "
                "no implicit 1)")
    else:
        text = (f"{sign}2^({e} - {f.bias}) x (1 + {m}/{1 << f.man_bits}) = {v:g}")
    return {"fmt": fmt, "code": code, "sign": s, "exponent": e, "mantissa": m, "value": v,
            "subnormal": e == 0 and m != 0, "special": bool(np.isnan(v) or np.isinf(v)
                                                            or (e == top and f.ieee)),
            "bits": f"{code:08b}", "text": text}


def bits_figure(examples=(("e4m3", 0x7E), ("e4m3", 0x38), ("e4m3", 0x01), ("e5m2", 0x7B),
                          ("e5m2", 0x3C), ("e5m2", 0x7C)), fontsize: float = 10):
    """One row per (format, code): its eight bits in boxes coloured by field, and the value
    the model reads from them. Returns the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    fig, ax = plt.subplots(figsize=(9.5, 0.62 * len(examples) + 0.9))
    for row, (fmt, code) in enumerate(examples):
        fl = fields(code, fmt)
        f = F.FORMATS[fmt]
        y = len(examples) - 1 - row
        kinds = ["sign"] + ["exponent"] * f.exp_bits + ["mantissa"] * f.man_bits
        ax.text(-0.3, y + 0.4, f"{fmt} 0x{code:02X}", ha="right", va="center",
                fontsize=fontsize, family="monospace")
        for i, (bit, kind) in enumerate(zip(fl["bits"], kinds)):
            ax.add_patch(Rectangle((i, y), 0.95, 0.8, facecolor=FIELD_COLOURS[kind],
                                   edgecolor="black", linewidth=0.6))
            ax.text(i + 0.475, y + 0.4, bit, ha="center", va="center", fontsize=fontsize,
                    family="monospace")
        ax.text(8.4, y + 0.4, fl["text"], ha="left", va="center", fontsize=fontsize)
    ax.set_xlim(-3.2, 22)
    ax.set_ylim(-0.3, len(examples))
    ax.axis("off")
    ax.legend(handles=[Patch(facecolor=c, edgecolor="black", label=k)
                       for k, c in FIELD_COLOURS.items()],
              loc="lower center", bbox_to_anchor=(0.4, -0.22), ncol=3, fontsize=fontsize,
              frameon=False)
    return ax


def ladder(fmt: str = "e4m3") -> dict:
    """Every positive finite value of ``fmt``, and what they say: the largest, the smallest
    normal and subnormal, the powers of two they span, the values in [1, 2)."""
    f = F.FORMATS[fmt]
    v = F.values(fmt)[:128]
    pos = v[np.isfinite(v) & (v > 0)]
    normal = pos[pos >= 2.0 ** f.emin]
    return {"fmt": fmt, "values": pos, "max": float(pos.max()),
            "min_normal": float(normal.min()), "min_subnormal": float(pos.min()),
            "per_octave": int(((pos >= 1) & (pos < 2)).sum()),
            "octaves": float(np.log2(pos.max() / pos.min())),
            "normal_octaves": float(np.log2(pos.max() / normal.min())),
            "step_at_1": float(pos[pos > 1].min() - 1)}


def values_figure(ax=None, fontsize: float = 10):
    """Every positive value of both formats as a tick on a log2 axis (subnormals in grey),
    bf16's range beside them for scale. Returns the axis."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(9.5, 2.4))
    for y, fmt in ((1, "e4m3"), (0, "e5m2")):
        lad = ladder(fmt)
        vals = lad["values"]
        sub = vals < lad["min_normal"]
        ax.vlines(np.log2(vals[~sub]), y - 0.3, y + 0.3, color=OI["blue"], linewidth=0.8)
        ax.vlines(np.log2(vals[sub]), y - 0.3, y + 0.3, color="0.6", linewidth=0.8)
        ax.text(np.log2(lad["max"]) + 0.6, y,
                f"{fmt}: {len(vals)} positive values, {lad['per_octave']} per power of two",
                va="center", fontsize=fontsize)
    ax.set_yticks([0, 1], ["e5m2", "e4m3"], fontsize=fontsize)
    lo, hi = -17, 16
    ax.set_xlim(lo - 0.5, hi + 20)
    ticks = list(range(lo + 1, hi + 1, 4))
    ax.set_xticks(ticks, [f"$2^{{{t}}}$" for t in ticks], fontsize=fontsize)
    ax.set_ylim(-0.6, 1.6)
    ax.set_xlabel("value (log scale); grey: subnormals", fontsize=fontsize)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


# ---------------------------------------------------------------------------------------
# bytes per weight, and the roofline that follows


def call_bytes(T: int, d: int, h: int, value_bytes: int) -> dict:
    """Chapter 1's count for one fused MLP-up call with ``value_bytes`` per value: x read
    once, both weights read once, the output written once."""
    w = 2 * d * h * value_bytes
    x = T * d * value_bytes
    out = T * h * value_bytes
    return {"weights": w, "x": x, "out": out, "total": w + x + out, "flops": 4 * T * d * h}


def predicted_seconds(T: int, d: int, h: int, value_bytes: int, bandwidth: float,
                      peak: float) -> float:
    """The roofline's time for one call: the larger of its bytes at ``bandwidth`` and its
    flops at ``peak``."""
    c = call_bytes(T, d, h, value_bytes)
    return max(c["total"] / bandwidth, c["flops"] / peak)


#: the record's rows the roofline figure marks: (variant, dtype, label, colour, marker)
MEASURED = (("fp8_fused_e4m3_out", "e4m3", "ours, FP8 (e4m3 out)", OI["vermillion"], "o"),
            ("scaled_mm_rowwise_mlp_up_e4m3_compiled", "e4m3",
             "cuBLASLt FP8 + compile", OI["bluish_green"], "s"),
            ("fp8_gemv_e4m3_out", "e4m3", "ours, FP8 decode GEMV", OI["vermillion"], "D"),
            ("scaled_mm_rowwise_decode_e4m3_compiled", "e4m3",
             "cuBLASLt FP8 + compile (decode)", OI["bluish_green"], "^"),
            ("wgmma_dual_gemm_bf16", "bfloat16", "ours, bf16 (chapter 9)", OI["blue"], "o"),
            ("bf16_decode_planned", "bfloat16", "ours, bf16 decode (chapter 9)", OI["blue"],
             "D"))


def roofline_figure(rec, d: int = 4096, h: int = 14336, ax=None, fontsize: float = 10):
    """Predicted time per MLP-up call over T = 1..8192 with two bytes per value (bf16 at the
    bf16 peak) and one (e4m3 at the FP8 peak) on the record's GPU, and the record's measured
    rows on them. Returns (axis, what was drawn: the measured points by label)."""
    import matplotlib.pyplot as plt

    spec, key = spec_of(rec.provenance)
    peak8 = FP8_PEAK[key][0]
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.6))
    Ts = np.unique(np.round(np.logspace(0, 13, 200, base=2)).astype(int))
    for b, peak, colour, label in ((2, spec.peak("bf16"), OI["blue"], "bf16 roof"),
                                   (1, peak8, OI["vermillion"], "e4m3 roof")):
        t = [predicted_seconds(int(T), d, h, b, spec.memory_bandwidth, peak) * 1e6
             for T in Ts]
        ax.plot(Ts, t, color=colour, linewidth=1.6, label=label)
    drawn = {}
    for variant, dtype, label, colour, marker in MEASURED:
        pts = sorted((r["shape"][0], r["seconds"] * 1e6) for r in rec.select(variant=variant,
                                                                            dtype=dtype)
                     if tuple(r["shape"][1:]) == (d, h))
        if pts:
            ax.plot(*zip(*pts), linestyle="none", marker=marker, color=colour,
                    markerfacecolor="white" if "cuBLAS" in label else colour, label=label)
            drawn[label] = pts
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens per call, T", fontsize=fontsize)
    ax.set_ylabel("time per call (µs)", fontsize=fontsize)
    ax.tick_params(labelsize=fontsize)
    ax.grid(True, which="major", linewidth=0.4, alpha=0.5)
    ax.legend(fontsize=fontsize - 1, loc="upper left")
    ax.set_title(f"MLP-up, d = {d:,}, h = {h:,}, {spec.name.split(' (')[0]}: roofs "
                 "from the datasheet, points measured", fontsize=fontsize, loc="left")
    return ax, drawn


# ---------------------------------------------------------------------------------------
# where the scales live


def _groups(scheme, rows, cols, block):
    r, c = np.indices((rows, cols))
    if scheme == "tensor":
        return np.zeros((rows, cols), int)
    if scheme == "row":
        return r
    return (r // block[0]) * (-(-cols // block[1])) + c // block[1]


def scales_figure(fontsize: float = 10, k_cells: int = 16, cell_k: int = 32):
    """Six small matrices, x [T, d] above and W [h, d] below, coloured by the scale each
    value is divided by: per tensor, per row (token; output channel), per block (1 x 128;
    128 x 128). One cell stands for ``cell_k`` values along k. Returns the axes."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    palette = ListedColormap([OI[k] for k in ("sky_blue", "orange", "bluish_green", "yellow",
                                              "blue", "vermillion", "reddish_purple")])
    fig, axes = plt.subplots(2, 3, figsize=(9.5, 4.4))
    ab, wb = Q.ACT_BLOCK, Q.WEIGHT_BLOCK
    panels = (("x [T, d]: one scale", "tensor", None, 6),
              ("x: one per token (row)", "row", None, 6),
              (f"x: one per {ab[0]} x {ab[1]} block", "block", (1, ab[1] // cell_k), 6),
              ("W [h, d]: one scale", "tensor", None, 8),
              ("W: one per output channel", "row", None, 8),
              (f"W: one per {wb[0]} x {wb[1]} block", "block",
               (wb[0] // cell_k, wb[1] // cell_k), 8))
    for ax, (title, scheme, block, rows) in zip(axes.flat, panels):
        g = _groups(scheme, rows, k_cells, block)
        ax.imshow(g % palette.N, cmap=palette, vmin=0, vmax=palette.N - 1, aspect="auto")
        ax.set_xticks(np.arange(-0.5, k_cells, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.6)
        ax.tick_params(which="both", bottom=False, left=False, labelbottom=False,
                       labelleft=False)
        ax.set_title(title, fontsize=fontsize)
    for ax in axes[1]:
        ax.set_xlabel(f"k → (one cell: {cell_k} values)", fontsize=fontsize)
    axes[0][0].set_ylabel("tokens", fontsize=fontsize)
    axes[1][0].set_ylabel("output channels", fontsize=fontsize)
    return axes


# ---------------------------------------------------------------------------------------
# what each scheme costs in error

#: (label, activation scheme, weight scheme) in the order the chapter's tables print them
SCHEMES = (("per tensor", "tensor", "tensor"),
           ("per token, per channel", "row", "row"),
           ("per block (1 x 128, 128 x 128)", "block", "block"))


def scheme_errors(x, wg, wu, schemes=SCHEMES, fmt: str = "e4m3") -> dict:
    """Each scheme's :func:`book.quantize.mlp_up_error` on one layer (the float64
    reference made once), and bfloat16's error beside them."""
    ref = Q.reference(x, wg, wu)
    out = {label: Q.mlp_up_error(x, wg, wu, a, w, fmt=fmt, ref=ref)
           for label, a, w in schemes}
    out["bf16"] = Q.bf16_error(x, wg, wu, ref=ref)
    return out


def outlier_sweep(T: int, d: int, h: int, factors=(1, 10, 100, 1e3, 1e4, 1e5),
                  kinds=("channel", "feature"), seed: int = 0) -> list[dict]:
    """The typical output channel's error (the median over channels) of each scheme as a few
    weight channels, or a few features of x, grow ``factor`` times larger than the rest
    (:func:`book.quantize.random_layer`)."""
    rows = []
    for kind in kinds:
        for f in factors:
            kw = {"channel_outliers": f} if kind == "channel" else {"feature_outliers": f}
            x, wg, wu = Q.random_layer(T, d, h, seed=seed, **kw)
            errs = scheme_errors(x, wg, wu)
            rows.append({"kind": kind, "factor": float(f), "bf16": errs.pop("bf16"),
                         **{k: v["median_channel_error"] for k, v in errs.items()}})
    return rows


def sweep_figure(rows, fontsize: float = 10):
    """The sweep as two panels (weights' outlier channels; x's outlier features): each
    scheme's median channel error against the outliers' factor, bf16's beside. Returns the
    axes."""
    import matplotlib.pyplot as plt

    kinds = list(dict.fromkeys(r["kind"] for r in rows))
    fig, axes = plt.subplots(1, len(kinds), figsize=(9.5, 3.8), sharey=True, squeeze=False)
    colours = (OI["vermillion"], OI["blue"], OI["bluish_green"])
    titles = {"channel": "4 output channels of the weights\nthat many times larger",
              "feature": "4 features (columns) of x\nthat many times larger"}
    for ax, kind in zip(axes[0], kinds):
        rs = [r for r in rows if r["kind"] == kind]
        fs = [r["factor"] for r in rs]
        for (label, _, _), c, m in zip(SCHEMES, colours, "os^"):
            ax.plot(fs, [100 * r[label] for r in rs], marker=m, color=c, label=label)
        ax.plot(fs, [100 * r["bf16"] for r in rs], color="0.4", linestyle="--",
                label="bf16 operands")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(titles.get(kind, kind), fontsize=fontsize)
        ax.set_xlabel("outliers' factor", fontsize=fontsize)
        ax.tick_params(labelsize=fontsize)
        ax.grid(True, linewidth=0.4, alpha=0.5)
    axes[0][0].set_ylabel("typical channel's error (%)", fontsize=fontsize)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=4, fontsize=fontsize - 1,
               frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return axes[0]


def out_scale_rows(x, wg, wu, calibration, factors=(1 / 8, 1 / 2, 1, 2, 8, 64, 1024)) -> list:
    """A static output scale: ``amax / 448`` of the ``calibration`` layer's output (other
    tokens), times each factor, applied to this layer's output: its error and the outputs
    that saturated (per token and per channel scales for x and the weights)."""
    cal = Q.reference(*calibration)
    base = float(np.abs(cal).max()) / F.E4M3.max
    ref = Q.reference(x, wg, wu)
    rows = []
    for f in factors:
        r = Q.mlp_up_error(x, wg, wu, out_scale=base * f, ref=ref)
        rows.append({"factor": f, "out_scale": base * f, "error": r["rel_error_e4m3_out"],
                     "before_store": r["rel_error"], "saturated": r["saturated"]["out"],
                     "outputs": r["values"]["out"]})
    return rows


# ---------------------------------------------------------------------------------------
# the measurement


def measurement_rows(rec, T: int, d: int = 4096, h: int = 14336) -> list[tuple]:
    """(variant, label, row) of the comparison table at T, in order, for the rows the record
    has: ours, its control, the practitioner's paths, the GEMMs alone, chapter 9's bf16
    kernel."""
    order = (("fp8_fused_e4m3_out", "e4m3", "ours: fused FP8, e4m3 out"),
             ("fp8_fused_bf16_out", "e4m3", "control: the same kernel storing bf16"),
             ("scaled_mm_rowwise_mlp_up_e4m3_compiled", "e4m3",
              "cuBLASLt FP8 + compiled SiLU*up + quantize (e4m3 out)"),
             ("scaled_mm_rowwise_mlp_up_bf16_compiled", "e4m3",
              "cuBLASLt FP8 + compiled SiLU*up (bf16 out)"),
             ("scaled_mm_rowwise_gemm", "e4m3", "cuBLASLt FP8 GEMM alone"),
             ("scaled_mm_tensorwise_mlp_up_e4m3_compiled", "e4m3",
              "per-tensor scales: cuBLASLt + compile (e4m3 out)"),
             ("scaled_mm_tensorwise_gemm", "e4m3", "per-tensor scales: cuBLASLt GEMM alone"),
             ("fp8_fused_e4m3_out_inflight", "e4m3", "variant: one wgmma group in flight"),
             ("wgmma_dual_gemm_bf16", "bfloat16", "chapter 9's bf16 kernel"))
    out = []
    for v, dt, label in order:
        found = rec.select(variant=v, dtype=dt, shape=(T, d, h))
        if found:
            out.append((v, label, found[0]))
    return out


#: the decode table's rows, in order (``benchmarks/fp8_decode_bench.py`` writes them)
DECODE_ROWS = (("fp8_gemv_e4m3_out", "e4m3", "ours: FP8 GEMV, e4m3 out"),
               ("fp8_gemv_bf16_out", "e4m3", "control: the same GEMV storing bf16"),
               ("fp8_gemv_e4m3_out_bare", "e4m3",
                "control: the same GEMV, its three fixes off (the bare tile)"),
               ("fp8_fused_gemm_decode", "e4m3", "the fused FP8 GEMM (the prefill kernel)"),
               ("scaled_mm_rowwise_decode_e4m3_compiled", "e4m3",
                "cuBLASLt FP8 + compiled SiLU*up + quantize"),
               ("scaled_mm_rowwise_decode_bf16_compiled", "e4m3",
                "cuBLASLt FP8 + compiled SiLU*up (bf16 out)"),
               ("scaled_mm_rowwise_decode_gemm", "e4m3", "cuBLASLt FP8 GEMM alone"),
               ("bf16_decode_planned", "bfloat16", "chapter 9's bf16 decode path"))


def decode_rows(rec, d: int = 4096, h: int = 14336, max_T: int = 16) -> dict:
    """{T: [(variant, label, row), ...]} of the decode table, for each T up to ``max_T`` at
    which the record has rows (empty when it has none)."""
    out = {}
    for v, dt, label in DECODE_ROWS:
        for r in rec.select(variant=v, dtype=dt):
            T = r["shape"][0]
            if T <= max_T and tuple(r["shape"][1:]) == (d, h):
                out.setdefault(T, []).append((v, label, r))
    return dict(sorted(out.items()))
