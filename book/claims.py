"""The source documents' claims beside our measurements on the same shapes.

Each quoted figure below comes from one of the course's source documents (``book.sources``:
``vizuara`` Vizuara's SwiGLU article, ``orin`` the Jetson Orin optimisation report, ``ptx-dsl``
the PTX-DSL SwiGLU page, whose project also publishes the Hopper GEMM figure of
:func:`published_gemm`); rows name their source by key, and pages print its name with
``book.sources.name``. Every "ours" figure is read from ``book/data/<gpu>.json``,
recorded by ``python -m book.bench``; nothing measured is typed here. The ``why``
column says where and why the two differ.

``table()`` returns the rows as dicts; ``markdown()`` renders them for a chapter.
"""

from __future__ import annotations

from . import data as _data
from .sources import name as source_name

LARGE, PREFILL = (8192, 14336), (2048, 8192)

# The Jetson Orin report's kernel benchmark (section 1.4, 200-iteration averages on a Jetson Orin,
# SM 8.7, CUDA 12.6): (dtype, model width F, regime) -> (before us, after us, speed-up).
# "before": fp32 one element per thread with a shared-memory detour; fp16 two halves per
# thread (half2). "after": fp32 float4 (4 per thread); fp16 8 halves per 16-byte access.
ORIN_BENCHMARK = {
    ("float32", 18944, "decode"): (20.45, 19.85, 1.03),
    ("float32", 12288, "decode"): (19.33, 17.86, 1.08),
    ("float16", 18944, "decode"): (17.63, 17.92, 1.0),
    ("float16", 12288, "decode"): (16.40, 16.70, 1.0),
    ("float32", 18944, "prefill-128"): (296.26, 244.20, 1.21),
    ("float32", 12288, "prefill-128"): (273.10, 262.78, 1.04),
    ("float16", 18944, "prefill-128"): (236.56, 126.03, 1.88),
    ("float16", 12288, "prefill-128"): (159.71, 86.84, 1.84),
}
# The Jetson Orin report's Nsight Compute profile (sections 1.2 and 1.3): "GPU Duration", the kernel's own
# time on the GPU, at F = 18944: (dtype, regime) -> (before us, after us).
ORIN_NCU = {
    ("float32", "decode"): (17.47, 17.57),
    ("float16", "decode"): (16.70, 15.90),
    ("float32", "prefill-128"): (505.79, 457.31),
    ("float16", "prefill-128"): (251.55, 232.77),
}
PTX_DSL_BANDWIDTH = 2.8e12  # B/s at M=2048, F=8192, float32, on H100 ("94% of HBM3 peak")
PTX_DSL_PEAK_FRACTION = 0.94
PTX_DSL_SPEEDUP = 1.6  # over F.silu(gate) * up eager, same shape
# The same project's published GEMM: the Python PTX DSL behind the PTX-DSL page also
# publishes a hand-written Hopper GEMM (wgmma fed by TMA, warp-specialized, clusters with
# multicast), bf16 at M = N = K = 8192 on an H100 SXM5: "815 TFLOPS" (its v0.1.0 release
# notes, and the docstring of its examples/hopper/gemm_highperf_hopper.py). Their kernel,
# shape and measurement: shown beside ours as a published figure, never as ours.
PTX_DSL_GEMM_FLOPS = 815e12
PTX_DSL_GEMM_SHAPE = (8192, 8192, 8192)  # M, N, K
PTX_DSL_GEMM_GPU = "H100 SXM5"
VIZUARA_SPEEDUP = 1.7  # fused over the unfused two-kernel path ("about 5/3")
VIZUARA_PEAK = 3.35e12  # "about 3.35 TB/s" of HBM bandwidth on an H100


def _best(res, dtype, shape, kinds=("kernel",)):
    rows = [r for r in res.select(dtype=dtype, shape=shape)
            if r.get("kind") in kinds and not r["variant"].endswith(("_graph", "_l2_warm"))
            and r.get("correct", True)]
    return min(rows, key=lambda r: r["seconds"]) if rows else None


def _run_of(row):
    """The run a row was measured in (a merged row carries its own provenance; None: the
    record's own run)."""
    p = row.get("provenance") or {}
    return p.get("date"), p.get("commit")


def _date(row, record_prov) -> str:
    return str((row.get("provenance") or record_prov or {}).get("date"))[:10]


def _two_runs(a, b, record_prov) -> str:
    """"" for rows of one run; else "rows of two runs: <date> and <date>" (a merged row is
    another run's: book/data/lineage.py)."""
    if _run_of(a) == _run_of(b):
        return ""
    return f"rows of two runs: {_date(a, record_prov)} and {_date(b, record_prov)}"


def _ratio(a, b, record_prov) -> str:
    """a / b of two rows' times, "1.70x"; rows of two benchmark runs say so and name both."""
    two = _two_runs(a, b, record_prov)
    return f"{a['seconds'] / b['seconds']:.2f}x" + (f" ({two})" if two else "")


def _decode_ratio(before, after, after_v, same, record_prov) -> str:
    """What the decode row's own ratio says, in words right at either sign; rows of two
    runs are not divided (each run's GPU clocks and state are its own)."""
    if not same:
        return (f"Here the two rows come from two benchmark runs (fused "
                f"{_date(before, record_prov)}, {after_v} {_date(after, record_prov)}): a "
                "difference this small is within what separates two runs.")
    r = before["seconds"] / after["seconds"]
    if r < 0.95:
        return (f"Here the {after_v} kernel is slower, {r:.2f}x: with so few elements it runs "
                "fewer threads, each doing more in sequence, and no access width pays.")
    if r > 1.05:
        return f"Here the {after_v} kernel is a little faster, {r:.2f}x: still a fixed cost, not bytes."
    return f"Here {r:.2f}x: a kernel's fixed cost, not its bytes."


def _us(s):
    return f"{s * 1e6:.2f} us"


def _tbs(b):
    return f"{b / 1e12:.2f} TB/s"


def _compiled(res, dtype, shape, best):
    """The torch.compile row beside eager, where the record has one ("" where not)."""
    c = res.select(variant="torch_compile", dtype=dtype, shape=shape)
    if not c:
        return ""
    two = _two_runs(c[0], best, res.provenance)
    return (f"; torch.compile'd {_us(c[0]['seconds'])} ({c[0]['seconds'] / best['seconds']:.2f}x "
            f"{best['variant']}'s time" + (f", {two})" if two else ")"))


def table(results=None):
    """Rows of {source, claim, dtype, shape, their_figure, ours, detail, why}; ``source`` is a
    key of ``book.sources.SOURCES``."""
    res = results if results is not None else _data.load("h100")
    gpu = res.provenance.get("gpu", "this GPU")
    rows = []

    def row(source, claim, dtype, shape, their_figure, ours, detail, why):
        rows.append({"source": source, "claim": claim, "dtype": dtype, "shape": shape,
                     "their_figure": their_figure, "ours": ours, "detail": detail, "why": why})

    # ---- Vizuara's article: the ~1.7x of fusion, the 3.35 TB/s
    nv, fu = res.find("naive_vec", "float32", LARGE), res.find("vec4", "float32", LARGE)
    n1, f1 = res.find("naive", "float32", LARGE), res.find("fused", "float32", LARGE)
    row("vizuara", "fused over unfused (two kernels): ~1.7x, the 5/3 byte ratio", "float32",
        "8192x14336", f"~{VIZUARA_SPEEDUP}x",
        _ratio(nv, fu, res.provenance),
        f"naive_vec {_us(nv['seconds'])} vs vec4 {_us(fu['seconds'])}; one element per thread: "
        f"naive {_us(n1['seconds'])} vs fused {_us(f1['seconds'])} = {n1['seconds'] / f1['seconds']:.2f}x",
        "Agrees when both versions saturate memory (same 16-byte style): time follows bytes. "
        f"With one element per thread the fused kernel reaches only {_tbs(f1['bandwidth'])} "
        "(it does not keep enough loads in flight), so fusion looks smaller than the byte ratio.")
    copy = res.find("copy", "float32", LARGE)
    peak = res.provenance.get("peak_bandwidth")
    row("vizuara", "H100 HBM bandwidth: about 3.35 TB/s", "float32", "8192x14336",
        _tbs(VIZUARA_PEAK), f"{_tbs(copy['bandwidth'])} (copy)",
        f"device attributes give {_tbs(peak)} theoretical; a device copy (read + write) "
        f"reaches {copy['bandwidth'] / peak:.0%} of it",
        "3.35 TB/s is the datasheet/attribute peak (2 x clock x bus width); no kernel "
        f"reaches it. A mix of reads and writes tops out near {copy['bandwidth'] / peak:.0%} "
        f"(torch.add: {res.find('torch_add', 'float32', LARGE)['bandwidth'] / peak:.0%}).")

    # ---- the PTX-DSL page: 2.8 TB/s at 2048x8192 f32, 94% of peak, 1.6x over eager
    b = _best(res, "float32", PREFILL)
    eager = res.find("torch_eager", "float32", PREFILL)
    add = res.find("torch_add", "float32", PREFILL)
    warm = [r for r in res.select(dtype="float32", shape=PREFILL) if r["variant"] == "vec4_l2_warm"]
    row("ptx-dsl", "fused SwiGLU at 2.8 TB/s (94% of HBM3 peak)", "float32", "2048x8192",
        f"{_tbs(PTX_DSL_BANDWIDTH)} ({PTX_DSL_PEAK_FRACTION:.0%})",
        f"{_tbs(b['bandwidth'])} ({b['bandwidth'] / peak:.0%})",
        f"best: {b['variant']}; torch.add there: {_tbs(add['bandwidth'])}"
        + (f"; same buffers every call (no L2 rotation): {_tbs(warm[0]['bandwidth'])}" if warm else ""),
        f"Same level. 2.8 TB/s is {PTX_DSL_BANDWIDTH / VIZUARA_PEAK:.0%} of 3.35 TB/s, so the "
        f"page's 94% divides by a smaller peak ({PTX_DSL_BANDWIDTH / PTX_DSL_PEAK_FRACTION / 1e12:.2f} "
        "TB/s, about what a copy reaches). At this size (192 MiB per call) the launch ramp and "
        f"the tail cost a little: the same kernel reaches {_tbs(_best(res, 'float32', LARGE)['bandwidth'])} "
        "at 8192x14336. Rotating inputs beyond L2 or not makes no difference here.")
    row("ptx-dsl", "1.6x faster than F.silu(gate) * up (torch eager)", "float32", "2048x8192",
        f"{PTX_DSL_SPEEDUP}x", _ratio(eager, b, res.provenance),
        f"eager {_us(eager['seconds'])} vs {b['variant']} {_us(b['seconds'])}"
        + _compiled(res, "float32", PREFILL, b),
        "Agrees: eager runs two kernels (5 transfers per element against 3).")
    bl = _best(res, "float32", LARGE)
    el = res.find("torch_eager", "float32", LARGE)
    row("ptx-dsl", "1.6x faster than torch eager (at our large shape)", "float32", "8192x14336",
        f"{PTX_DSL_SPEEDUP}x", _ratio(el, bl, res.provenance),
        f"eager {_us(el['seconds'])} vs {bl['variant']} {_us(bl['seconds'])}"
        + _compiled(res, "float32", LARGE, bl),
        "Same move, larger tensor: the ratio tends to 5/3.")

    # ---- the Jetson Orin report: Jetson Orin, Qwen widths, decode and prefill-128. The explanation of each
    # regime is given once, on its first row; the other rows say what is particular to them.
    explained = set()
    for (dtype, F, regime), (before, after, speedup) in ORIN_BENCHMARK.items():
        shape = (1, F) if regime == "decode" else (128, F)
        after_v = "vec4" if dtype == "float32" else "half8"
        ob, oa = res.find("fused", dtype, shape), res.find(after_v, dtype, shape)
        n = shape[0] * shape[1]
        their_bw = 3 * n * (4 if dtype == "float32" else 2) / (after * 1e-6)
        detail = (f"fused (1/thread) {_us(ob['seconds'])} -> {after_v} {_us(oa['seconds'])} "
                  "(GPU time, back-to-back launches)")
        ncu = ORIN_NCU.get((dtype, regime)) if F == 18944 else None
        if ncu:
            detail += f"; the report's ncu GPU Duration {ncu[0]} -> {ncu[1]} us"
        if regime == "decode":
            graph = [r for r in res.select(dtype=dtype, shape=shape) if r["variant"].endswith("_graph")
                     and r.get("kind") == "kernel"]
            launch = [r for r in res.select(dtype=dtype, shape=shape)
                      if r["variant"] == "fused_kernel_raw_launch"]
            if launch:
                detail += f"; one Numba launch from Python costs {_us(launch[0]['seconds'])} of host time"
            fast = res.select(variant="launch_layer_fastcall", dtype=dtype, shape=shape)
            if fast:
                detail += f", the cheap path (book.kernels.host.fastcall) {_us(fast[0]['seconds'])}"
            if graph:
                detail += f"; in a CUDA graph {_us(graph[0]['seconds'])} per SwiGLU"
            same = _run_of(ob) == _run_of(oa)
            if regime not in explained:
                f32 = ORIN_NCU[("float32", "decode")]
                f16 = ORIN_NCU[("float16", "decode")]
                why = ("Kernel time on both GPUs. The report's own ncu profile at F=18944 gives a GPU "
                       f"Duration of {f32[0]} -> {f32[1]} us (fp32) and {f16[0]} -> {f16[1]} us "
                       "(fp16): the kernels themselves take about as long as the benchmark's "
                       "average, so its 17-20 us are not host launch overhead. (Its summary blames "
                       "launch overhead; by its own profile that means the fixed cost of running a "
                       "grid at all.) The data are a few hundred kB, far too few for the access "
                       "width to pay: neither GPU gets faster from the wider kernel. On the H100 "
                       f"that fixed cost is {_us(min(ob['seconds'], oa['seconds']))} of GPU time, "
                       "and from Python the host's launch dominates instead: a CUDA graph "
                       "removes it. " + _decode_ratio(ob, oa, after_v, same, res.provenance))
            else:
                why = "As for the first decode row. " + _decode_ratio(ob, oa, after_v, same, res.provenance)
        else:
            big_b, big_a = res.find("fused", dtype, LARGE), res.find(after_v, dtype, LARGE)
            if regime not in explained:
                why = (f"Different GPU: their after-kernel moves 3 x {n} elements in {after} us = "
                       f"{their_bw / 1e12:.3f} TB/s, the Jetson's memory; ours moves them at "
                       f"{_tbs(oa['bandwidth'])} ({oa['bandwidth'] / their_bw:.0f}x). A call this "
                       "short on the H100 (microseconds) is dominated by the launch ramp and tail, "
                       "so wider accesses gain less; at 8192x14336 the same change gives "
                       f"{big_b['seconds'] / big_a['seconds']:.2f}x.")
            else:
                why = (f"As for the first prefill row: theirs {their_bw / 1e12:.3f} TB/s, ours "
                       f"{_tbs(oa['bandwidth'])}; at 8192x14336 "
                       f"{big_b['seconds'] / big_a['seconds']:.2f}x.")
        explained.add(regime)
        row("orin", f"{dtype} {regime} F={F}: {before} -> {after} us ({speedup}x)", dtype,
            "x".join(map(str, shape)), f"{before} -> {after} us, {speedup}x",
            f"{ob['seconds'] * 1e6:.2f} -> {oa['seconds'] * 1e6:.2f} us, "
            f"{_ratio(ob, oa, res.provenance)}", detail, why)
    for r in rows:
        r["gpu"] = gpu
    return rows


def published_gemm() -> dict:
    """The PTX-DSL project's published Hopper GEMM figure, labelled as published: {source
    (a key of ``book.sources``), name (how pages name the source), project, what, flops_per_s,
    shape (M, N, K), dtype, gpu, where (where it is published)}. Nothing here was measured
    by the course."""
    return {"source": "ptx-dsl", "name": source_name("ptx-dsl"),
            "project": f"pyptx (the {source_name('ptx-dsl')}'s project)",
            "what": "a hand-written warp-specialized wgmma + TMA GEMM",
            "flops_per_s": PTX_DSL_GEMM_FLOPS, "shape": PTX_DSL_GEMM_SHAPE,
            "dtype": "bfloat16", "gpu": PTX_DSL_GEMM_GPU,
            "where": "the project's release notes (v0.1.0) and its Hopper GEMM example"}


#: the IEEE-math controls: each variant is its fast-math twin compiled without fastmath
IEEE_CONTROLS = {"ilp4_ieee": "ilp4", "vec2_ieee": "vec2", "vec4_ieee": "vec4",
                 "half4_ieee": "half4", "half8_ieee": "half8"}


def ieee_controls(results=None, shape=LARGE):
    """The claim "once enough loads are in flight, the arithmetic stops mattering" beside its
    control: for each multi-element kernel and dtype recorded at ``shape``, the fast-math
    time, the IEEE-math time and ``cost`` = IEEE time / fast-math time - 1.

    Rows of {variant, control, dtype, shape, fast_s, ieee_s, fast_p90_s, ieee_p10_s, cost,
    beyond_spread}; ``beyond_spread`` is True when the IEEE kernel's 10th percentile is
    slower than the fast-math kernel's 90th (the difference is more than the noise).
    A pair the recording lacks is left out."""
    res = results if results is not None else _data.load("h100")
    out = []
    for control, fast in IEEE_CONTROLS.items():
        for dtype in ("float32", "float16", "bfloat16"):
            f = res.select(variant=fast, dtype=dtype, shape=shape)
            c = res.select(variant=control, dtype=dtype, shape=shape)
            if not (f and c):
                continue
            f, c = f[0], c[0]
            out.append({"variant": fast, "control": control, "dtype": dtype,
                        "shape": tuple(shape), "fast_s": f["seconds"], "ieee_s": c["seconds"],
                        "fast_p90_s": f.get("p90_s", f["seconds"]),
                        "ieee_p10_s": c.get("p10_s", c["seconds"]),
                        "cost": c["seconds"] / f["seconds"] - 1,
                        "beyond_spread": c.get("p10_s", c["seconds"]) > f.get("p90_s", f["seconds"])})
    return out


#: column headings of the claims table, shared by ``markdown`` and the chapters' own tables
HEADINGS = {"source": "source", "claim": "claim", "dtype": "dtype", "shape": "shape",
            "their_figure": "their figure", "detail": "detail", "why": "why we differ"}


def markdown(results=None, columns=("source", "claim", "shape", "their_figure", "ours", "why")):
    """The claims table as Markdown (for ``IPython.display.Markdown``); the source column
    names each document (``book.sources``), never a key."""
    rows = table(results)
    head = {**HEADINGS, "ours": f"ours ({rows[0]['gpu'] if rows else ''})"}
    lines = ["| " + " | ".join(head[c] for c in columns) + " |",
             "| " + " | ".join("---" for _ in columns) + " |"]
    for r in rows:
        cells = {**r, "source": source_name(r["source"])}
        lines.append("| " + " | ".join(str(cells[c]).replace("|", "/") for c in columns) + " |")
    return "\n".join(lines)
