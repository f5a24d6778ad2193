"""The course's goals as measured ratios, computed from a run's rows (also after a merge).

The benchmark suite (:mod:`book.bench.suite`) measures the rows and writes their targets with
them; ``python -m book.bench.merge`` recomputes them after merging rows of another run. Both
judge at the sizes defined here, and both fall back on :data:`HBM3_PEAK` where a record does
not carry the device's own bandwidth.
"""

from __future__ import annotations

from book.dtypes import DTYPES
from book.specs import GPU_SPECS

from .decode import targets as decode_targets
from .hopper import targets as hopper_targets
from .rows import find, keys
from .tensorcore import targets as tensorcore_targets

__all__ = ["find", "best", "keys", "targets", "LARGE", "PREFILL", "DECODE_SHAPES", "GEMM_SHAPES",
           "HBM3_PEAK"]

LARGE = (8192, 14336)
PREFILL = (2048, 8192)
DECODE_SHAPES = [(1, 12288), (1, 18944)]
GEMM_SHAPES = [(2048, 4096, 8192), (512, 4096, 14336)]  # (T, d, h)
# H100 SXM datasheet, used when the device does not report its own figure
HBM3_PEAK = GPU_SPECS["H100-SXM"].memory_bandwidth


def best(rows, dtype, shape):
    """The fastest correct kernel row at ``dtype`` and ``shape`` (graph replays aside)."""
    cands = [r for r in rows if r["kind"] == "kernel" and r["dtype"] == dtype
             and tuple(r["shape"]) == tuple(shape) and not r["variant"].endswith("_graph")
             and r.get("correct", True)]
    return min(cands, key=lambda r: r["seconds"]) if cands else None


def targets(rows, peak):
    """The course's goals as measured ratios, from a run's rows (also after a merge)."""
    out = []

    def target(name, value, goal, ok, detail, *used):
        out.append({"target": name, "value": value, "goal": goal, "met": bool(ok), "detail": detail,
                    "rows": keys(*used)})

    for dtype in DTYPES:
        b = best(rows, dtype, LARGE)
        add = find(rows, "torch_add", dtype, LARGE)
        eager = find(rows, "torch_eager", dtype, LARGE)
        if b and add:
            r = b["bandwidth"] / add["bandwidth"]
            goal = 1.0 if dtype == "float32" else 0.95
            target(f"{dtype} {LARGE}: best kernel / torch.add bandwidth", r, f">= {goal}",
                   r >= goal, f"{b['variant']} {b['bandwidth'] / 1e12:.3f} TB/s vs torch.add "
                              f"{add['bandwidth'] / 1e12:.3f} TB/s", b, add)
        if b and dtype == "float32":
            frac = b["bandwidth"] / peak
            target(f"float32 {LARGE}: fraction of peak bandwidth", frac, ">= 0.90", frac >= 0.90,
                   f"{b['bandwidth'] / 1e12:.3f} of {peak / 1e12:.3f} TB/s", b)
        if b and eager and dtype in ("float32", "float16"):
            r = eager["seconds"] / b["seconds"]
            target(f"{dtype} {LARGE}: speed-up over torch eager", r, ">= 1.6", r >= 1.6,
                   f"{b['variant']} {b['seconds'] * 1e6:.1f} us vs eager {eager['seconds'] * 1e6:.1f} us",
                   b, eager)
    b = best(rows, "float32", PREFILL)
    if b:
        target(f"float32 {PREFILL}: effective bandwidth (TB/s)", b["bandwidth"] / 1e12, ">= 2.8",
               b["bandwidth"] >= 2.8e12, f"{b['variant']}; torch.add there: "
               + (f"{find(rows, 'torch_add', 'float32', PREFILL)['bandwidth'] / 1e12:.3f} TB/s"
                  if find(rows, 'torch_add', 'float32', PREFILL) else "n/a"),
               b, find(rows, "torch_add", "float32", PREFILL))
    for dtype in DTYPES:
        best_fused = "vec4" if dtype == "float32" else "half8"
        nv, fu = find(rows, "naive_vec", dtype, LARGE), find(rows, best_fused, dtype, LARGE)
        n1, f1 = find(rows, "naive", dtype, LARGE), find(rows, "fused", dtype, LARGE)
        if nv and fu:
            r = nv["seconds"] / fu["seconds"]
            target(f"{dtype} {LARGE}: naive / fused time, same 16-byte style (bytes: 5/3 = 1.67)",
                   r, "~1.67 (within 0.15)", abs(r - 5 / 3) <= 0.15,
                   f"naive_vec {nv['seconds'] * 1e6:.1f} us / {best_fused} {fu['seconds'] * 1e6:.1f} us"
                   + (f"; one element per thread: naive / fused = {n1['seconds'] / f1['seconds']:.2f}"
                      if n1 and f1 else ""), nv, fu, n1 if n1 and f1 else None, f1 if n1 else None)
    for dtype in DTYPES:
        g = [r for r in rows if r["variant"].endswith("_graph") and r["kind"] == "kernel"
             and r["dtype"] == dtype and tuple(r["shape"]) == (1, 18944)]
        if g:
            s = g[0]["seconds"]
            target(f"{dtype} decode 1x18944: graph replay per SwiGLU (us)", s * 1e6, "<= 2", s <= 2e-6,
                   g[0]["variant"], g[0])
    from book.kernels import best_variant

    for dtype in DTYPES:
        v = best_variant(dtype)
        tc = find(rows, f"{v}_torch_call", dtype, DECODE_SHAPES[-1])
        raw = find(rows, "launch_layer_raw_numba_launch", dtype, DECODE_SHAPES[-1])
        if tc and raw:
            r = tc["seconds"] / raw["seconds"]
            target(f"{dtype} decode {DECODE_SHAPES[-1]}: host time per call from torch tensors / "
                   "raw Numba launch", r, "<= 1.3", r <= 1.3,
                   f"swiglu_{v} from torch {tc['seconds'] * 1e6:.1f} us vs "
                   f"kernel[grid, block] on Numba arrays {raw['seconds'] * 1e6:.1f} us", tc, raw)
        fc = find(rows, "launch_layer_fastcall", dtype, DECODE_SHAPES[-1])
        add = find(rows, "launch_layer_torch_add", dtype, DECODE_SHAPES[-1])
        if fc:
            target(f"{dtype} decode {DECODE_SHAPES[-1]}: cheap path, host time per call from torch "
                   "tensors (us)", fc["seconds"] * 1e6, "<= 10", fc["seconds"] <= 10e-6,
                   f"FastCall({v!r}) median {fc['seconds'] * 1e6:.1f} us"
                   + (f" (p10 {fc['p10_s'] * 1e6:.1f}, p90 {fc['p90_s'] * 1e6:.1f})"
                      if fc.get("p10_s") else ""), fc)
        if fc and add:
            r = fc["seconds"] / add["seconds"]
            target(f"{dtype} decode {DECODE_SHAPES[-1]}: cheap path / torch.add, host time per call",
                   r, "<= 1.2", r <= 1.2,
                   f"FastCall({v!r}) {fc['seconds'] * 1e6:.1f} us vs torch.add "
                   f"{add['seconds'] * 1e6:.1f} us, same run, rows taking turns", fc, add)
        tt = find(rows, f"{v}_torch_tensors", dtype, LARGE)
        ref = find(rows, "torch_add_back_to_back", dtype, LARGE)
        if tt and ref:
            r = tt["bandwidth"] / ref["bandwidth"]
            ctl = find(rows, f"{v}_numba_arrays", dtype, LARGE)
            target(f"{dtype} {LARGE}: called with torch tensors / torch.add bandwidth (back to back)",
                   r, ">= 0.95", r >= 0.95,
                   f"{v} {tt['bandwidth'] / 1e12:.3f} TB/s vs torch.add {ref['bandwidth'] / 1e12:.3f}"
                   + (f"; with Numba arrays {ctl['bandwidth'] / 1e12:.3f}" if ctl else ""), tt, ref, ctl)
    for T, d, h in GEMM_SHAPES:
        dual = find(rows, "numba_dual_gemm", "float32", (T, d, h))
        cub = find(rows, "torch_matmul_float32", "float32", (T, d, h))
        unf = find(rows, "numba_unfused", "float32", (T, d, h))
        sw = find(rows, "vec4_swiglu_only", "float32", (T, h))
        ident = find(rows, "numba_dual_gemm_identity", "float32", (T, d, h))
        if dual and cub:
            # same matrix work: two strict-f32 cuBLAS GEMMs x @ Wg against the one dual kernel
            r = 2 * cub["seconds"] / dual["seconds"]
            target(f"dual GEMM {T}x{d}x{h}: throughput / strict-f32 cuBLAS", r, ">= 0.80", r >= 0.8,
                   f"dual {dual['seconds'] * 1e3:.3f} ms vs 2 x cuBLAS {cub['seconds'] * 1e3:.3f} ms",
                   dual, cub)
        if dual and ident:
            # the control: what the SiLU*mul itself costs inside the epilogue
            cost = dual["seconds"] - ident["seconds"]
            lim = sw["seconds"] if sw else float("inf")
            target(f"dual GEMM {T}x{d}x{h}: SwiGLU epilogue - identity epilogue (ms)", cost * 1e3,
                   "<= standalone SwiGLU" + (f" {lim * 1e3:.3f}" if sw else ""), cost <= lim,
                   f"dual {dual['seconds'] * 1e3:.3f} ms, identity-epilogue control "
                   f"{ident['seconds'] * 1e3:.3f} ms", dual, ident, sw)
        if dual and unf and sw:
            lim = unf["seconds"] - sw["seconds"]
            target(f"dual GEMM {T}x{d}x{h}: fused time <= unfused - SwiGLU (ms)", dual["seconds"] * 1e3,
                   f"<= {lim * 1e3:.3f}", dual["seconds"] <= lim,
                   f"unfused {unf['seconds'] * 1e3:.3f} ms, SwiGLU {sw['seconds'] * 1e3:.3f} ms",
                   dual, unf, sw)
    return out + tensorcore_targets(rows) + hopper_targets(rows) + decode_targets(rows, peak)


def print_outcome(doc, out) -> int:
    """Print a benchmark run's targets and correctness checks (``doc``: its record, written
    to ``out``); the exit status the benchmark scripts return: 1 if a check failed."""
    print("\nTargets:")
    for tg in doc["targets"]:
        print(f"  [{'met' if tg['met'] else 'MISS'}] {tg['target']}: {tg['value']:.3f} "
              f"(goal {tg['goal']}); {tg['detail']}")
    checks = doc["checks"]
    bad = [c for c in checks if not c["ok"]]
    print(f"correctness: {len(checks) - len(bad)}/{len(checks)} checks passed; "
          f"wrote {out} in {doc['provenance']['elapsed_s']} s")
    for c in bad:
        print(f"  FAILED {c['variant']} {c['dtype']} {c['shape']}: {c['error']}")
    return 1 if bad else 0
