"""GEMM and epilogue-fused dual GEMM on a GPU: correctness at full size, then timings.

Record: `records/bench/gemm_h100.json`.

Run on a CUDA GPU (the course ran it on the lent H100 through the device tool):

    COURSE_COMMIT=$(git rev-parse HEAD) python -m benchmarks.gemm_bench --out DIR \
        [--variants peeled,flat_u2,...] [--full flat_u2] [--reps 20]

Writes DIR/gemm_bench.json (provenance, correctness, rows, kernel facts, summary) and
prints a table. Everything is timed with the course's harness ``book.bench.measure`` (CUDA
events, warm-up excluded, medians; two input sets used in turn) in ONE process, so the
rows of a run are comparable: for every tile variant the dual GEMM; for the ``--full``
variants also the plain GEMM, the unfused path (GEMM, GEMM, standalone vec4 SwiGLU), and
the identity-epilogue control (the same dual kernel storing ``gate + up``). References:
``torch.matmul`` in strict float32 (``set_float32_matmul_precision("highest")``, TF32
off: cuBLAS SGEMM) and with TF32 tensor cores.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import book
import torch

from book import bench
from book.kernels.gemms import dual_gemm, gemm
from book.provenance import provenance

VARIANTS = gemm.TILE_VARIANTS  # name -> Tile; "flat_u2" is the library default (gemm.TILE)
SHAPES = [(2048, 4096, 8192), (512, 4096, 14336)]  # (T, d, h)
RAGGED = [(127, 100, 130), (129, 100, 130), (1, 100, 130), (300, 1000, 700)]


def rel_err(out, ref):
    out = out.double()
    nan = int(torch.isnan(out).sum())
    if nan:
        return float("nan"), nan
    return float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref)), 0


def silu_mul64(g, u):
    return g / (1 + torch.exp(-g)) * u


def inputs(T, d, h, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(T, d, device="cuda", generator=gen)
    wg = torch.randn(d, h, device="cuda", generator=gen) / d ** 0.5
    wu = torch.randn(d, h, device="cuda", generator=gen) / d ** 0.5
    return x, wg, wu


def check(results, tname, tile, x, wg, wu, g64, u64, full):
    """Relative error against float64 (cuBLAS DGEMM) references, outputs poisoned with NaN."""
    T, h = x.shape[0], wg.shape[1]
    out = torch.full((T, h), float("nan"), device="cuda")
    rec = {"tile": tname, "shape": [T, x.shape[1], h]}
    dual_gemm.swiglu_dual_gemm(x, wg, wu, out, tile=tile)
    rec["dual_rel_err"], rec["dual_unwritten"] = rel_err(out, silu_mul64(g64, u64))
    if full:
        out.fill_(float("nan"))
        gemm.matmul(x, wg, out, tile=tile)
        rec["gemm_rel_err"], rec["gemm_unwritten"] = rel_err(out, g64)
        out.fill_(float("nan"))
        dual_gemm.dual_gemm_identity(x, wg, wu, out, tile=tile)
        rec["identity_rel_err"], rec["identity_unwritten"] = rel_err(out, g64 + u64)
    torch.cuda.synchronize()
    results.append(rec)
    errs = {k: v for k, v in rec.items() if k.endswith("_rel_err")}
    ok = all(v < 1e-5 for v in errs.values()) and not any(
        rec.get(k) for k in rec if k.endswith("_unwritten"))
    rec["ok"] = ok
    print(f"check {tname:10s} {'x'.join(map(str, rec['shape'])):16s} "
          + " ".join(f"{k[:-8]} {v:.2e}" for k, v in errs.items()) + ("" if ok else "  FAILED"),
          flush=True)


def run(tiles, full, reps):
    rows, checks = [], []
    ew_name, ew = "vec4", __import__("book.kernels.elementwise.vectorized", fromlist=["x"]).swiglu_vec4
    for tname in full:  # ragged shapes: the guarded edge kernels (library tiles only)
        for (T, d, h) in RAGGED:
            x, wg, wu = inputs(T, d, h, 1)
            check(checks, tname, tiles[tname], x, wg, wu, x.double() @ wg.double(),
                  x.double() @ wu.double(), True)
    for (T, d, h) in SHAPES:
        shape = [T, d, h]
        sets = []
        for seed in (2, 3):  # two sets used in turn: a call never finds its inputs in L2
            x, wg, wu = inputs(T, d, h, seed)
            g, u, out = (torch.empty(T, h, device="cuda") for _ in range(3))
            sets.append(dict(x=x, wg=wg, wu=wu, wgu=torch.cat([wg, wu], dim=1), g=g, u=u, out=out))
        x, wg, wu = sets[0]["x"], sets[0]["wg"], sets[0]["wu"]
        g64, u64 = x.double() @ wg.double(), x.double() @ wu.double()
        for tname, tile in list(tiles.items()):
            try:
                check(checks, tname, tile, x, wg, wu, g64, u64, tname in full)
            except Exception as e:  # a variant that does not compile must not end the run
                print(f"check {tname}: {e!r}"[:400], flush=True)
                checks.append({"tile": tname, "shape": shape, "ok": False, "error": repr(e)[:400]})
                del tiles[tname]
        del g64, u64
        f_dual, f_one = dual_gemm.flops(T, d, h), gemm.flops(T, h, d)
        fused_bytes = (T * d + 2 * d * h + T * h) * 4  # operands once, output once

        def add(variant, timing, **extra):
            row = {"variant": variant, "dtype": "float32", "shape": shape, **timing.row(), **extra}
            rows.append(row)
            tf = (timing.flops_per_s or 0) / 1e12
            print(f"time {variant:34s} T={T:5d} h={h:6d}: {timing.median_s * 1e3:8.3f} ms "
                  f"(p10 {timing.p10_s * 1e3:.3f}, p90 {timing.p90_s * 1e3:.3f})  {tf:6.2f} TFLOP/s",
                  flush=True)

        def args(*names):
            return [tuple(s[n] for n in names) for s in sets]

        for prec, label in (("highest", "strict"), ("high", "tf32")):
            torch.backends.cuda.matmul.allow_tf32 = prec == "high"
            torch.set_float32_matmul_precision(prec)
            add(f"cublas_{label}_gemm_x_wg", bench.measure(
                lambda x, w, o: torch.matmul(x, w, out=o), args("x", "wg", "g"),
                flops=f_one, reps=reps))
            add(f"cublas_{label}_two_gemms", bench.measure(
                lambda x, wg, wu, g, u: (torch.matmul(x, wg, out=g), torch.matmul(x, wu, out=u)),
                args("x", "wg", "wu", "g", "u"), flops=f_dual, reps=reps))
            if label == "strict":
                add(f"cublas_{label}_concat_gemm", bench.measure(
                    lambda x, w: torch.matmul(x, w), args("x", "wgu"), flops=f_dual, reps=reps))
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")

        add(f"elementwise_{ew_name}", bench.measure(ew, args("g", "u", "out"),
                                                    bytes_moved=3 * T * h * 4, reps=reps))
        for tname, tile in tiles.items():
            add(f"numba_dual_gemm_{tname}", bench.measure(
                lambda x, wg, wu, o, tile=tile: dual_gemm.swiglu_dual_gemm(x, wg, wu, o, tile=tile),
                args("x", "wg", "wu", "out"), flops=f_dual, bytes_moved=fused_bytes, reps=reps),
                tile=tname)
            if tname not in full:
                continue
            add(f"numba_dual_gemm_identity_{tname}", bench.measure(
                lambda x, wg, wu, o, tile=tile: dual_gemm.dual_gemm_identity(x, wg, wu, o, tile=tile),
                args("x", "wg", "wu", "out"), flops=f_dual, bytes_moved=fused_bytes, reps=reps),
                tile=tname)
            add(f"numba_gemm_{tname}", bench.measure(
                lambda x, w, o, tile=tile: gemm.matmul(x, w, o, tile=tile),
                args("x", "wg", "g"), flops=f_one, reps=reps), tile=tname)

            def unfused(x, wg, wu, g, u, o, tile=tile):
                gemm.matmul(x, wg, g, tile=tile)
                gemm.matmul(x, wu, u, tile=tile)
                ew(g, u, o)

            add(f"numba_unfused_{tname}", bench.measure(
                unfused, args("x", "wg", "wu", "g", "u", "out"), flops=f_dual, reps=reps),
                tile=tname, elementwise=ew_name)
        sets.clear()
        torch.cuda.empty_cache()
    return rows, checks


def kernel_facts(tiles, out_dir):
    """Registers, local memory and SASS instruction counts of every kernel this run compiled."""
    facts = {}
    epis = {"gemm": None, "dual": dual_gemm.silu_mul, "identity": dual_gemm.gate_plus_up}
    for tname, tile in tiles.items():
        for kind, epi in epis.items():
            for checked in (False, True):
                k = gemm.build_kernel(tile, epi, checked)
                if not k.overloads:  # never launched in this run
                    continue
                name = f"{kind}_{tname}" + ("_edge" if checked else "")
                f = facts[name] = {}
                try:
                    f["regs_per_thread"] = list(k.get_regs_per_thread().values())
                    f["shared_bytes"] = list(k.get_shared_mem_per_block().values())
                    f["local_bytes"] = list(k.get_local_mem_per_thread().values())
                    sass = "\n".join(k.inspect_sass().values())
                    for op in ("FFMA", "LDS.128", "LDG", "STS", "LDL", "STL", "BAR", "MUFU"):
                        f[op] = sass.count(op)
                    if kind == "dual" and not checked:
                        Path(out_dir, f"sass_{name}.txt").write_text(sass)
                except Exception as e:  # SASS needs nvdisasm
                    f["error"] = repr(e)[:300]
    return facts


def summarize(rows, tiles, full):
    out = {}
    for (T, d, h) in SHAPES:
        t = {r["variant"]: r["seconds"] for r in rows if r["shape"] == [T, d, h]}
        strict2 = 2 * t["cublas_strict_gemm_x_wg"]
        s = {"cublas_strict_gemm_x_wg_s": t["cublas_strict_gemm_x_wg"],
             "cublas_strict_two_gemms_s": t["cublas_strict_two_gemms"],
             "elementwise_s": t["elementwise_vec4"], "tiles": {}}
        for tname in tiles:
            dual = t[f"numba_dual_gemm_{tname}"]
            r = {"dual_s": dual,
                 # same matrix work as the dual kernel: two strict-f32 cuBLAS GEMMs x @ W
                 "dual_fraction_of_strict": strict2 / dual,
                 "dual_fraction_of_strict_two_gemms": t["cublas_strict_two_gemms"] / dual,
                 "dual_fraction_of_tf32": t["cublas_tf32_two_gemms"] / dual}
            if tname in full:
                unf, ident = t[f"numba_unfused_{tname}"], t[f"numba_dual_gemm_identity_{tname}"]
                r.update(identity_s=ident, unfused_s=unf, gemm_s=t[f"numba_gemm_{tname}"],
                         epilogue_cost_s=dual - ident,
                         fused_limit_s=unf - t["elementwise_vec4"],
                         activation_free=dual <= unf - t["elementwise_vec4"],
                         fused_saving_s=unf - dual)
            s["tiles"][tname] = r
        s["best"] = min(s["tiles"], key=lambda k: s["tiles"][k]["dual_s"])
        out[f"T{T}_d{d}_h{h}"] = s
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--variants", default=",".join(VARIANTS),
                    help="comma-separated names from VARIANTS (timed: dual GEMM)")
    ap.add_argument("--full", default="flat_u2",
                    help="variants also timed as GEMM, unfused and identity control")
    ap.add_argument("--command", default=" ".join(["python", "-m", "benchmarks.gemm_bench"]
                                                  + sys.argv[1:]))
    a = ap.parse_args()
    if book.gpu.SIMULATED:
        sys.exit("no CUDA GPU: this benchmark measures, and the simulator cannot (run it on a GPU)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    tiles = {k: VARIANTS[k] for k in a.variants.split(",")}  # (a failing variant is dropped)
    full = [k for k in a.full.split(",") if k]
    for k in full:
        tiles.setdefault(k, VARIANTS[k])
    t0 = time.time()
    Path(a.out).mkdir(parents=True, exist_ok=True)
    result = {"provenance": provenance(a.command),
              "tiles": {k: repr(v) for k, v in tiles.items()}}
    result["rows"], result["correctness"] = run(tiles, full, a.reps)
    result["tiles_timed"] = list(tiles)
    result["kernels"] = kernel_facts(tiles, a.out)
    result["summary"] = summarize(result["rows"], tiles, full)
    result["wall_s"] = time.time() - t0
    path = Path(a.out) / "gemm_bench.json"
    path.write_text(json.dumps(result, indent=1))
    print()
    for name, f in result["kernels"].items():
        print(f"{name:22s}", {k: v for k, v in f.items()})
    print()
    for key, s in result["summary"].items():
        print(f"{key}: cuBLAS strict x@Wg {s['cublas_strict_gemm_x_wg_s'] * 1e3:.3f} ms, "
              f"two GEMMs {s['cublas_strict_two_gemms_s'] * 1e3:.3f} ms, "
              f"vec4 SwiGLU {s['elementwise_s'] * 1e3:.3f} ms")
        for tname, r in s["tiles"].items():
            line = (f"  {tname:10s} dual {r['dual_s'] * 1e3:7.3f} ms = "
                    f"{r['dual_fraction_of_strict']:6.1%} of strict cuBLAS")
            if "identity_s" in r:
                line += (f"; identity {r['identity_s'] * 1e3:.3f}, unfused {r['unfused_s'] * 1e3:.3f}"
                         f" (limit {r['fused_limit_s'] * 1e3:.3f}: {r['activation_free']})")
            print(line)
    bad = [c for c in result["correctness"] if not c["ok"]]
    print(f"correctness: {len(result['correctness']) - len(bad)} ok, {len(bad)} failed")
    print(f"wrote {path} in {result['wall_s']:.0f} s")


if __name__ == "__main__":
    main()
