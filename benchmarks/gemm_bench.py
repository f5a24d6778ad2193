"""GEMM and epilogue-fused dual GEMM on a GPU: correctness at full size, then timings.

Run on a CUDA GPU (the course ran it on the lent H100 through the device tool):

    python benchmarks/gemm_bench.py --out DIR [--quick]

Writes DIR/gemm_bench.json (provenance, correctness, rows, summary) and prints a table.
Everything is measured with the course's harness ``book.bench.measure`` (CUDA events,
warm-up excluded, medians over many repetitions). References: ``torch.matmul`` in strict
float32 (TF32 off: cuBLAS's SGEMM) and with TF32 tensor cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import book  # noqa: E402  (decides GPU vs simulator before numba.cuda)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402

from book import bench  # noqa: E402
from book.kernels import dual_gemm, gemm  # noqa: E402
from book.kernels.gemm import Tile  # noqa: E402

VARIANTS = {  # name -> tile (the first is the library's default)
    "128x128_bk8": gemm.TILE,
    "128x128_bk16": Tile(bk=16),
    "64x128_bk8": Tile(bm=64),
    "128x128_bk16_lb2": Tile(bk=16, min_blocks=2),
    "128x128_bk8_branchy": Tile(branchless=False),
    "128x128_bk8_nolb": Tile(min_blocks=0),
}
SHAPES = [(2048, 4096, 8192), (512, 4096, 14336)]  # (T, d, h)
OUT_DIR = "."


from book.provenance import provenance  # noqa: E402  (the one provenance helper)


def rel_err(out, ref):
    out = out.double()
    if torch.isnan(out).any():
        return float("nan"), int(torch.isnan(out).sum())
    return float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref)), 0


def silu_mul64(g, u):
    return g / (1 + torch.exp(-g)) * u


def correctness(tiles):
    """Relative error against float64 (cuBLAS DGEMM) references, outputs poisoned with NaN."""
    gen = torch.Generator(device="cuda").manual_seed(1)
    results = []
    cases = [(2048, 4096, 8192), (512, 4096, 14336), (1, 4096, 8192), (127, 100, 130),
             (129, 100, 130), (1, 100, 130), (300, 1000, 700)]
    for tname, tile in tiles.items():
        for (T, d, h) in (cases if tname == "128x128_bk8" else cases[:1] + cases[3:5]):
            x = torch.randn(T, d, device="cuda", generator=gen)
            wg = torch.randn(d, h, device="cuda", generator=gen) / d ** 0.5
            wu = torch.randn(d, h, device="cuda", generator=gen) / d ** 0.5
            g64 = x.double() @ wg.double()
            u64 = x.double() @ wu.double()
            out = torch.full((T, h), float("nan"), device="cuda")
            gemm.matmul(x, wg, out, tile=tile)
            e_gemm, nan_gemm = rel_err(out, g64)
            out.fill_(float("nan"))
            dual_gemm.swiglu_dual_gemm(x, wg, wu, out, tile=tile)
            e_dual, nan_dual = rel_err(out, silu_mul64(g64, u64))
            torch.cuda.synchronize()
            results.append({"tile": tname, "shape": [T, d, h], "gemm_rel_err": e_gemm,
                            "gemm_unwritten": nan_gemm, "dual_rel_err": e_dual,
                            "dual_unwritten": nan_dual})
            print(f"check {tname:14s} T={T:5d} d={d:5d} h={h:6d}: gemm {e_gemm:.2e} "
                  f"dual {e_dual:.2e} unwritten {nan_gemm + nan_dual}", flush=True)
    return results


def elementwise_fn():
    """The best fused elementwise SwiGLU of the library (vec4 if present)."""
    try:
        from book.kernels import vectorized

        return "vec4", vectorized.swiglu_vec4
    except Exception:
        from book.kernels import fused

        return "fused_fastmath", fused.swiglu_fused_fastmath


def timings(tiles, reps):
    rows = []
    ew_name, ew = elementwise_fn()
    for (T, d, h) in SHAPES:
        gen = torch.Generator(device="cuda").manual_seed(2)
        sets = []
        for _ in range(2):  # two sets: a second use of a set finds its inputs out of L2
            x = torch.randn(T, d, device="cuda", generator=gen)
            wg = torch.randn(d, h, device="cuda", generator=gen) / d ** 0.5
            wu = torch.randn(d, h, device="cuda", generator=gen) / d ** 0.5
            wgu = torch.cat([wg, wu], dim=1)
            g = torch.empty(T, h, device="cuda")
            u = torch.empty(T, h, device="cuda")
            out = torch.empty(T, h, device="cuda")
            nb = {k: cuda.as_cuda_array(v) for k, v in
                  dict(x=x, wg=wg, wu=wu, g=g, u=u, out=out).items()}
            sets.append(dict(x=x, wg=wg, wu=wu, wgu=wgu, g=g, u=u, out=out, nb=nb))
        shape = [T, d, h]
        f_dual = dual_gemm.flops(T, d, h)
        f_one = gemm.flops(T, h, d)
        act_bytes = 3 * T * h * 4
        fused_bytes = (T * d + 2 * d * h + T * h) * 4  # operands once, output once

        def add(variant, timing, **extra):
            row = {"variant": variant, "dtype": "float32", "shape": shape, **timing.row(), **extra}
            rows.append(row)
            tf = (timing.flops_per_s or 0) / 1e12
            print(f"time {variant:34s} T={T:5d} h={h:6d}: {timing.median_s * 1e3:8.3f} ms "
                  f"(p10 {timing.p10_s * 1e3:.3f}, p90 {timing.p90_s * 1e3:.3f})  {tf:6.2f} TFLOP/s",
                  flush=True)
            return timing

        def args(*names, nb=True):
            return [tuple((s["nb"] if nb else s)[n] for n in names) for s in sets]

        # cuBLAS references
        for prec, label in (("highest", "strict"), ("high", "tf32")):
            torch.backends.cuda.matmul.allow_tf32 = prec == "high"
            torch.set_float32_matmul_precision(prec)
            add(f"cublas_{label}_gemm_x_wg", bench.measure(
                lambda x, w, o: torch.matmul(x, w, out=o), args("x", "wg", "g", nb=False),
                flops=f_one, reps=reps))
            add(f"cublas_{label}_two_gemms", bench.measure(
                lambda x, wg, wu, g, u: (torch.matmul(x, wg, out=g), torch.matmul(x, wu, out=u)),
                args("x", "wg", "wu", "g", "u", nb=False), flops=f_dual, reps=reps))
            add(f"cublas_{label}_concat_gemm", bench.measure(
                lambda x, w: torch.matmul(x, w), args("x", "wgu", nb=False),
                flops=f_dual, reps=reps))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

        add(f"elementwise_{ew_name}", bench.measure(ew, args("g", "u", "out"),
                                                    bytes_moved=act_bytes, reps=reps))
        for tname, tile in tiles.items():
            add(f"numba_gemm_{tname}", bench.measure(
                lambda x, w, o, tile=tile: gemm.matmul(x, w, o, tile=tile),
                args("x", "wg", "g"), flops=f_one, reps=reps), tile=tname)
            add(f"numba_dual_gemm_{tname}", bench.measure(
                lambda x, wg, wu, o, tile=tile: dual_gemm.swiglu_dual_gemm(x, wg, wu, o, tile=tile),
                args("x", "wg", "wu", "out"), flops=f_dual, bytes_moved=fused_bytes, reps=reps),
                tile=tname)

            def unfused(x, wg, wu, g, u, o, tile=tile):
                gemm.matmul(x, wg, g, tile=tile)
                gemm.matmul(x, wu, u, tile=tile)
                ew(g, u, o)

            add(f"numba_unfused_{tname}", bench.measure(
                unfused, args("x", "wg", "wu", "g", "u", "out"), flops=f_dual, reps=reps),
                tile=tname, elementwise=ew_name)
        del sets
        torch.cuda.empty_cache()
    return rows


def kernel_facts(tiles):
    """Registers and SASS instruction counts of every kernel launched (SASS needs nvdisasm)."""
    facts = {}
    for tname, tile in tiles.items():
        for kind, epi in (("gemm", None), ("dual", dual_gemm.silu_mul)):
            for checked in (False, True):
                name = f"{kind}_{tname}" + ("_edge" if checked else "")
                k = gemm.build_kernel(tile, epi, checked)
                f = facts[name] = {}
                try:
                    f["regs_per_thread"] = list(k.get_regs_per_thread().values())
                    f["shared_bytes"] = list(k.get_shared_mem_per_block().values())
                    f["local_bytes"] = list(k.get_local_mem_per_thread().values())
                except Exception as e:
                    f["error"] = repr(e)[:300]
                try:
                    sass = "\n".join(k.inspect_sass().values())
                    for op in ("FFMA", "LDS.128", "LDS.64", "LDS ", "LDG", "STS", "LDL", "STL",
                               "BAR", "MUFU"):
                        f[op.strip()] = sass.count(op)
                    if kind == "dual" and not checked and tname == "128x128_bk8":
                        f["sass_path"] = "dual_sass.txt"
                        Path(OUT_DIR, "dual_sass.txt").write_text(sass)
                except Exception as e:
                    f["sass_error"] = repr(e)[:300]
    return facts


def summarize(rows):
    out = {}
    for (T, d, h) in SHAPES:
        shp = [T, d, h]
        t = {r["variant"]: r["seconds"] for r in rows if r["shape"] == shp}
        duals = {k: v for k, v in t.items() if k.startswith("numba_dual_gemm_")}
        best = min(duals, key=duals.get)
        tname = best[len("numba_dual_gemm_"):]
        ew = next(k for k in t if k.startswith("elementwise_"))
        s = {
            "best_dual": best,
            "dual_s": t[best],
            "strict_two_gemms_s": t["cublas_strict_two_gemms"],
            "strict_concat_s": t["cublas_strict_concat_gemm"],
            "tf32_two_gemms_s": t["cublas_tf32_two_gemms"],
            "dual_fraction_of_strict": t["cublas_strict_two_gemms"] / t[best],
            "dual_fraction_of_strict_concat": t["cublas_strict_concat_gemm"] / t[best],
            "dual_fraction_of_tf32": t["cublas_tf32_two_gemms"] / t[best],
            "unfused_s": t[f"numba_unfused_{tname}"],
            "elementwise_s": t[ew],
            "two_numba_gemms_s": 2 * t[f"numba_gemm_{tname}"],
            "activation_free": t[best] <= t[f"numba_unfused_{tname}"] - t[ew],
            "fused_saving_s": t[f"numba_unfused_{tname}"] - t[best],
        }
        out[f"T{T}_d{d}_h{h}"] = s
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="default tile only")
    ap.add_argument("--variants", default=None, help="comma-separated names from VARIANTS")
    ap.add_argument("--command", default=" ".join([Path(sys.executable).name] + sys.argv))
    a = ap.parse_args()
    if book.gpu.SIMULATED:
        sys.exit("no CUDA GPU: this benchmark measures, and the simulator cannot (run it on a GPU)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    tiles = {"128x128_bk8": gemm.TILE} if a.quick else VARIANTS
    if a.variants:
        tiles = {k: VARIANTS[k] for k in a.variants.split(",")}
    t0 = time.time()
    result = {"provenance": provenance(a.command)}
    result["correctness"] = correctness(tiles)
    result["rows"] = timings(tiles, a.reps)
    global OUT_DIR
    OUT_DIR = a.out
    Path(a.out).mkdir(parents=True, exist_ok=True)
    result["kernels"] = kernel_facts(tiles)
    result["summary"] = summarize(result["rows"])
    result["wall_s"] = time.time() - t0
    Path(a.out).mkdir(parents=True, exist_ok=True)
    path = Path(a.out) / "gemm_bench.json"
    path.write_text(json.dumps(result, indent=1))
    for name, f in result["kernels"].items():
        print(name, {k: v for k, v in f.items() if k != "sass_path"})
    print()
    for key, s in result["summary"].items():
        print(f"{key}: best {s['best_dual']} {s['dual_s'] * 1e3:.2f} ms = "
              f"{s['dual_fraction_of_strict']:.1%} of strict cuBLAS (two GEMMs {s['strict_two_gemms_s'] * 1e3:.2f} ms; "
              f"concat {s['dual_fraction_of_strict_concat']:.1%}), {s['dual_fraction_of_tf32']:.1%} of TF32; "
              f"unfused {s['unfused_s'] * 1e3:.2f} ms, elementwise {s['elementwise_s'] * 1e3:.3f} ms, "
              f"activation free: {s['activation_free']}")
    print(f"wrote {path} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
