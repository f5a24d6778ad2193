"""The MLP-up at every T a model sees: where it turns from bandwidth-bound to compute-bound,
and which path the course's dispatcher takes there (issue 31's sweep, chapter 6's decode story
extended to the whole MLP-up).

From one record's ``decode_sweep`` rows (:mod:`book.bench.decode`, bfloat16, d = 4096,
h = 14336, T = 1 .. 8192): :func:`curves` gives each series' points in T order,
:func:`plot` draws them in GB/s of the weight bytes (the decode regime's measure: flat while
the weights set the time) and in TFLOP/s (the prefill regime's: rising until the tensor cores
set it), the device's HBM peak beside the first, the dispatcher's path shaded under both.
"""

from __future__ import annotations

__all__ = ["SERIES", "PATH_LABELS", "curves", "series", "paths", "plot"]

#: series drawn: row variant -> label
SERIES = {
    "sweep_ours": "ours (the dispatcher's path)",
    "sweep_cublas_compiled": "cuBLAS + compiled SiLU*up",
    "sweep_cublas_eager": "cuBLAS + eager SiLU*up",
    "sweep_cublas": "cuBLAS GEMM alone (no activation)",
}
PATH_LABELS = {"cuda_cores": "CUDA-core GEMV", "tensor_cores": "tensor-core GEMV",
               "hopper_gemv": "wgmma GEMV", "hopper": "wgmma dual GEMM",
               "large_t": "registered kernel"}


def curves(results, dtype="bfloat16") -> dict:
    """{variant: [row, ...] in T order} for the variants of :data:`SERIES` the record has;
    a KeyError naming the command that measures them when it has none."""
    out = {}
    for variant in SERIES:
        rows = [r for r in results.rows if r.get("kind") == "decode_sweep"
                and r["variant"] == variant and r["dtype"] == dtype]
        if rows:
            out[variant] = sorted(rows, key=lambda r: r["shape"][0])
    if "sweep_ours" not in out:
        raise KeyError("no decode_sweep rows in this record: measure them on a GPU with "
                       "`bash records/bench/decode_session.sh OUT sweep` and merge "
                       "OUT/decode_sweep_h100.json (python -m book.bench.merge)")
    return out


def series(results, variant, dtype="bfloat16") -> dict:
    """{T: row} of one sweep variant, any of the record's (the controls too: the wgmma GEMV
    ``sweep_gemv_hopper`` and its bare tile ``sweep_gemv_hopper_bare``, the wgmma dual GEMM
    ``sweep_wgmma_dual``, the mma.sync GEMV ``sweep_gemv_tc``); empty if the record has
    none."""
    return {r["shape"][0]: r for r in results.rows if r.get("kind") == "decode_sweep"
            and r["variant"] == variant and r["dtype"] == dtype}


def paths(ours_rows) -> list:
    """The dispatcher's path over T as runs: [(path, first T, last T), ...]."""
    runs = []
    for r in ours_rows:
        T, p = r["shape"][0], r.get("path", "?")
        if runs and runs[-1][0] == p:
            runs[-1] = (p, runs[-1][1], T)
        else:
            runs.append((p, T, T))
    return runs


def plot(results, dtype="bfloat16", peak_bandwidth=None):
    """Two panels over T (log scale): GB/s of weights and TFLOP/s, one line per series;
    ``peak_bandwidth`` (bytes/s; default the record's GPU's, from book.specs) drawn dashed."""
    import matplotlib.pyplot as plt

    from . import specs

    cs = curves(results, dtype)
    # the sweep's own run (a merged row carries it) rather than the record's first full run
    run = cs["sweep_ours"][0].get("provenance") or results.provenance
    if peak_bandwidth is None:
        spec = specs.match(run.get("gpu", ""))
        peak_bandwidth = spec.memory_bandwidth if spec else None
    fig, (bw, fl) = plt.subplots(2, 1, figsize=(7.5, 6.5), sharex=True)
    shades = ("#f2f2f2", "#e4e4e4", "#d6d6d6")
    for i, (p, t0, t1) in enumerate(paths(cs["sweep_ours"])):
        for ax in (bw, fl):
            ax.axvspan(t0 / 1.2, t1 * 1.2, color=shades[i % len(shades)], zorder=0)
        bw.text((t0 * t1) ** 0.5, 0.02, PATH_LABELS.get(p, p), transform=bw.get_xaxis_transform(),
                ha="center", va="bottom", fontsize=8)
    for variant, rows in cs.items():
        Ts = [r["shape"][0] for r in rows]
        style = {"lw": 2.2} if variant == "sweep_ours" else {"lw": 1.2}
        bw.plot(Ts, [r["bandwidth"] / 1e9 for r in rows], marker="o", ms=3,
                label=SERIES[variant], **style)
        fl.plot(Ts, [r["flops_per_s"] / 1e12 for r in rows], marker="o", ms=3, **style)
    if peak_bandwidth:
        bw.axhline(peak_bandwidth / 1e9, ls="--", color="k", lw=0.8)
        bw.text(1, peak_bandwidth / 1e9, " HBM peak", va="bottom", fontsize=8)
    bw.set_ylabel("GB/s of weights")
    fl.set_ylabel("TFLOP/s")
    fl.set_xlabel("T (tokens in the call)")
    fl.set_xscale("log", base=2)
    # the legend in the throughput panel's upper left, which its rising curves leave empty: in the
    # bandwidth panel it covered the HBM peak line it labels (issue 43, L16)
    fl.legend(*bw.get_legend_handles_labels(), fontsize=8, loc="upper left")
    fig.suptitle(f"MLP-up, d = 4096, h = 14336, {dtype}: {run.get('gpu', '?')}, "
                 f"{str(run.get('date', ''))[:10]}", fontsize=10)
    fig.tight_layout()
    return fig
