"""The seeds' claims beside our measurements on the same shapes.

Each seed figure below is quoted from the source documents in ``/work/shared/seeds``
(cited by number: 000 the SwiGLU article, 002 the Jetson Orin optimisation report,
003 the PTX-DSL SwiGLU page). Every "ours" figure is read from ``book/data/<gpu>.json``,
recorded by ``python -m book.bench``; nothing measured is typed here. The ``why``
column says where and why the two differ.

``table()`` returns the rows as dicts; ``markdown()`` renders them for a chapter.
"""

from __future__ import annotations

from . import data as _data

LARGE, PREFILL = (8192, 14336), (2048, 8192)

# Seed 002's kernel benchmark (section 1.4, 200-iteration averages on a Jetson Orin,
# SM 8.7, CUDA 12.6): (dtype, model width F, regime) -> (before us, after us, speed-up).
# "before": fp32 one element per thread with a shared-memory detour; fp16 two halves per
# thread (half2). "after": fp32 float4 (4 per thread); fp16 8 halves per 16-byte access.
SEED_002 = {
    ("float32", 18944, "decode"): (20.45, 19.85, 1.03),
    ("float32", 12288, "decode"): (19.33, 17.86, 1.08),
    ("float16", 18944, "decode"): (17.63, 17.92, 1.0),
    ("float16", 12288, "decode"): (16.40, 16.70, 1.0),
    ("float32", 18944, "prefill-128"): (296.26, 244.20, 1.21),
    ("float32", 12288, "prefill-128"): (273.10, 262.78, 1.04),
    ("float16", 18944, "prefill-128"): (236.56, 126.03, 1.88),
    ("float16", 12288, "prefill-128"): (159.71, 86.84, 1.84),
}
SEED_003_BANDWIDTH = 2.8e12  # B/s at M=2048, F=8192, float32, on H100 ("94% of HBM3 peak")
SEED_003_PEAK_FRACTION = 0.94
SEED_003_SPEEDUP = 1.6  # over F.silu(gate) * up eager, same shape
SEED_000_SPEEDUP = 1.7  # fused over the unfused two-kernel path ("about 5/3")
SEED_000_PEAK = 3.35e12  # "about 3.35 TB/s" of HBM bandwidth on an H100


def _best(res, dtype, shape, kinds=("kernel",)):
    rows = [r for r in res.select(dtype=dtype, shape=shape)
            if r.get("kind") in kinds and not r["variant"].endswith(("_graph", "_l2_warm"))
            and r.get("correct", True)]
    return min(rows, key=lambda r: r["seconds"]) if rows else None


def _us(s):
    return f"{s * 1e6:.2f} us"


def _tbs(b):
    return f"{b / 1e12:.2f} TB/s"


def table(results=None):
    """Rows of {seed, claim, dtype, shape, seed_figure, ours, detail, why}."""
    res = results if results is not None else _data.load("h100")
    gpu = res.provenance.get("gpu", "this GPU")
    rows = []

    def row(seed, claim, dtype, shape, seed_figure, ours, detail, why):
        rows.append({"seed": seed, "claim": claim, "dtype": dtype, "shape": shape,
                     "seed_figure": seed_figure, "ours": ours, "detail": detail, "why": why})

    # ---- seed 000: the ~1.7x of fusion, the 3.35 TB/s
    nv, fu = res.find("naive_vec", "float32", LARGE), res.find("vec4", "float32", LARGE)
    n1, f1 = res.find("naive", "float32", LARGE), res.find("fused", "float32", LARGE)
    row("000", "fused over unfused (two kernels): ~1.7x, the 5/3 byte ratio", "float32",
        "8192x14336", f"~{SEED_000_SPEEDUP}x",
        f"{nv['seconds'] / fu['seconds']:.2f}x",
        f"naive_vec {_us(nv['seconds'])} vs vec4 {_us(fu['seconds'])}; one element per thread: "
        f"naive {_us(n1['seconds'])} vs fused {_us(f1['seconds'])} = {n1['seconds'] / f1['seconds']:.2f}x",
        "Agrees when both versions saturate memory (same 16-byte style): time follows bytes. "
        f"With one element per thread the fused kernel reaches only {_tbs(f1['bandwidth'])} "
        "(it does not keep enough loads in flight), so fusion looks smaller than the byte ratio.")
    copy = res.find("copy", "float32", LARGE)
    peak = res.provenance.get("peak_bandwidth")
    row("000", "H100 HBM bandwidth: about 3.35 TB/s", "float32", "8192x14336",
        _tbs(SEED_000_PEAK), f"{_tbs(copy['bandwidth'])} (copy)",
        f"device attributes give {_tbs(peak)} theoretical; a device copy (read + write) "
        f"reaches {copy['bandwidth'] / peak:.0%} of it",
        "3.35 TB/s is the datasheet/attribute peak (2 x clock x bus width); no kernel "
        f"reaches it. A mix of reads and writes tops out near {copy['bandwidth'] / peak:.0%} "
        f"(torch.add: {res.find('torch_add', 'float32', LARGE)['bandwidth'] / peak:.0%}).")

    # ---- seed 003: 2.8 TB/s at 2048x8192 f32, 94% of peak, 1.6x over eager
    b = _best(res, "float32", PREFILL)
    eager = res.find("torch_eager", "float32", PREFILL)
    add = res.find("torch_add", "float32", PREFILL)
    warm = [r for r in res.select(dtype="float32", shape=PREFILL) if r["variant"] == "vec4_l2_warm"]
    row("003", "fused SwiGLU at 2.8 TB/s (94% of HBM3 peak)", "float32", "2048x8192",
        f"{_tbs(SEED_003_BANDWIDTH)} ({SEED_003_PEAK_FRACTION:.0%})",
        f"{_tbs(b['bandwidth'])} ({b['bandwidth'] / peak:.0%})",
        f"best: {b['variant']}; torch.add there: {_tbs(add['bandwidth'])}"
        + (f"; same buffers every call (no L2 rotation): {_tbs(warm[0]['bandwidth'])}" if warm else ""),
        f"Same level. 2.8 TB/s is {SEED_003_BANDWIDTH / SEED_000_PEAK:.0%} of 3.35 TB/s, so the "
        f"page's 94% divides by a smaller peak ({SEED_003_BANDWIDTH / SEED_003_PEAK_FRACTION / 1e12:.2f} "
        "TB/s, about what a copy reaches). At this size (192 MiB per call) the launch ramp and "
        f"the tail cost a little: the same kernel reaches {_tbs(_best(res, 'float32', LARGE)['bandwidth'])} "
        "at 8192x14336. Rotating inputs beyond L2 or not makes no difference here.")
    row("003", "1.6x faster than F.silu(gate) * up (torch eager)", "float32", "2048x8192",
        f"{SEED_003_SPEEDUP}x", f"{eager['seconds'] / b['seconds']:.2f}x",
        f"eager {_us(eager['seconds'])} vs {b['variant']} {_us(b['seconds'])}",
        "Agrees: eager runs two kernels (5 transfers per element against 3).")
    bl = _best(res, "float32", LARGE)
    el = res.find("torch_eager", "float32", LARGE)
    row("003", "1.6x faster than torch eager (at our large shape)", "float32", "8192x14336",
        f"{SEED_003_SPEEDUP}x", f"{el['seconds'] / bl['seconds']:.2f}x",
        f"eager {_us(el['seconds'])} vs {bl['variant']} {_us(bl['seconds'])}",
        "Same move, larger tensor: the ratio tends to 5/3.")

    # ---- seed 002: Jetson Orin, Qwen widths, decode and prefill-128
    for (dtype, F, regime), (before, after, speedup) in SEED_002.items():
        shape = (1, F) if regime == "decode" else (128, F)
        after_v = "vec4" if dtype == "float32" else "half8"
        ob, oa = res.find("fused", dtype, shape), res.find(after_v, dtype, shape)
        n = shape[0] * shape[1]
        seed_bw = 3 * n * (4 if dtype == "float32" else 2) / (after * 1e-6)
        detail = (f"fused (1/thread) {_us(ob['seconds'])} -> {after_v} {_us(oa['seconds'])} "
                  "(GPU time, back-to-back launches)")
        if regime == "decode":
            graph = [r for r in res.select(dtype=dtype, shape=shape) if r["variant"].endswith("_graph")
                     and r.get("kind") == "kernel"]
            launch = [r for r in res.select(dtype=dtype, shape=shape)
                      if r["variant"] == "fused_kernel_raw_launch"]
            if launch:
                detail += f"; one Numba launch from Python costs {_us(launch[0]['seconds'])} of host time"
            if graph:
                detail += f"; in a CUDA graph {_us(graph[0]['seconds'])} per SwiGLU"
            why = ("Their ~17-20 us is launch and synchronisation overhead (the report says so): the "
                   "kernel is not what is measured, so neither version helps. On the H100 the GPU "
                   f"time is {_us(min(ob['seconds'], oa['seconds']))} and the cost is Python's "
                   "launch; a CUDA graph removes it.")
        else:
            big_b, big_a = res.find("fused", dtype, LARGE), res.find(after_v, dtype, LARGE)
            why = (f"Different GPU: their after-kernel moves 3 x {n} elements in {after} us = "
                   f"{seed_bw / 1e12:.3f} TB/s, the Jetson's memory; ours moves them at "
                   f"{_tbs(oa['bandwidth'])} ({oa['bandwidth'] / seed_bw:.0f}x). A call this short "
                   "on the H100 (microseconds) is dominated by the launch ramp and tail, so wider "
                   f"accesses gain less; at 8192x14336 the same change gives "
                   f"{big_b['seconds'] / big_a['seconds']:.2f}x.")
        row("002", f"{dtype} {regime} F={F}: {before} -> {after} us ({speedup}x)", dtype,
            "x".join(map(str, shape)), f"{before} -> {after} us, {speedup}x",
            f"{ob['seconds'] * 1e6:.2f} -> {oa['seconds'] * 1e6:.2f} us, "
            f"{ob['seconds'] / oa['seconds']:.2f}x", detail, why)
    for r in rows:
        r["gpu"] = gpu
    return rows


def markdown(results=None, columns=("seed", "claim", "shape", "seed_figure", "ours", "why")):
    """The claims table as Markdown (for ``IPython.display.Markdown``)."""
    rows = table(results)
    head = {"seed": "seed", "claim": "claim", "dtype": "dtype", "shape": "shape",
            "seed_figure": "seed's figure", "ours": f"ours ({rows[0]['gpu'] if rows else ''})",
            "detail": "detail", "why": "why we differ"}
    lines = ["| " + " | ".join(head[c] for c in columns) + " |",
             "| " + " | ".join("---" for _ in columns) + " |"]
    for r in rows:
        lines.append("| " + " | ".join(str(r[c]).replace("|", "/") for c in columns) + " |")
    return "\n".join(lines)
