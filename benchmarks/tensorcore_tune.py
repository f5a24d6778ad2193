"""Sweep tile shapes of the tensor-core GEMM on a GPU: main-loop ceiling and dual GEMM.

Record: `records/tensorcore/tensorcore_tune_h100.json`.

    python3 -m benchmarks.tensorcore_tune --out $OUT/tensorcore_tune.json [--T 2048]

For each :class:`book.kernels.gemms.mma_gemm.MmaTile` in ``CONFIGS`` (or ``--configs`` names):
check the dual GEMM against cuBLAS (bf16 tolerance), then time the ceiling kernel and the
dual GEMM (:func:`book.bench.measure`, two input sets), and print TFLOP/s, the ratio to
cuBLAS bf16 and registers per thread. Writes the table with provenance.
"""

from __future__ import annotations

import argparse
import math
import sys
import time


CONFIGS = {
    "w2x2_m4n8_k32_s3": dict(),
    "w2x2_m4n8_k32_s4": dict(stages=4),
    "w2x2_m4n8_k32_s5": dict(stages=5),
    "w2x2_m4n8_k64_s3": dict(bk=64),
    "w2x2_m4n8_k64_s4": dict(bk=64, stages=4),
    "w2x4_m4n8_k32_s3": dict(warps_n=4),
    "w2x4_m4n8_k32_s4": dict(warps_n=4, stages=4),
    "w4x2_m4n8_k32_s4": dict(warps_m=4, stages=4),
    "w2x2_m4n8_k16_s6": dict(bk=16, stages=6),
    "w2x4_m4n8_k64_s2": dict(warps_n=4, bk=64, stages=2),
    "w2x4_m4n8_k64_s3": dict(warps_n=4, bk=64, stages=3),
    "w4x2_m4n8_k64_s2": dict(warps_m=4, bk=64, stages=2),
    "w4x4_m4n8_k32_s3": dict(warps_m=4, warps_n=4, stages=3),
    "w2x4_m4n8_k64_s2_g16": dict(warps_n=4, bk=64, stages=2, group_m=16),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--configs", nargs="*", help="names from CONFIGS (default: all)")
    args = ap.parse_args(argv)
    import torch

    import book
    from book import bench
    from book.data import write
    from book.kernels.gemms import mma_gemm as mg
    from book.provenance import provenance

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    prov = provenance("python3 -m benchmarks.tensorcore_tune " + " ".join(sys.argv[1:]))
    T, d, h = args.T, 4096, 14336
    fl = mg.flops(T, d, h)
    gen = torch.Generator(device="cuda").manual_seed(5)
    xs = [torch.randn(T, d, device="cuda", generator=gen).bfloat16() for _ in range(2)]
    wg = (torch.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wu = (torch.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wcat = torch.cat([wg, wu], 1).contiguous()
    outs = [torch.empty(T, h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    gus = [torch.empty(T, 2 * h, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
    ref = (torch.nn.functional.silu((xs[0] @ wg).float()) * (xs[0] @ wu).float()).double()
    cub = bench.measure(lambda a, o: torch.matmul(a, wcat, out=o), list(zip(xs, gus)), flops=fl,
                        reps=args.reps)
    print(f"cuBLAS bf16 x @ [Wg|Wu], T={T}: {cub.median_s * 1e6:.0f} us "
          f"{cub.flops_per_s / 1e12:.0f} TFLOP/s", flush=True)
    rows = []
    for name in args.configs or CONFIGS:
        t0 = time.time()
        try:
            tile = mg.MmaTile(**CONFIGS[name]).validate()
            outs[0].fill_(float("nan"))
            mg.swiglu_mma(xs[0], wg, wu, outs[0], tile=tile)
            torch.cuda.synchronize()
            err = float(((outs[0].double() - ref).norm() / ref.norm()).item())
            ce = bench.measure(lambda a, w, o: mg.ceiling_mma(a, w, o, tile=tile),
                               [(x, wcat, g) for x, g in zip(xs, gus)], flops=fl, reps=args.reps)
            du = bench.measure(lambda a, o: mg.swiglu_mma(a, wg, wu, o, tile=tile),
                               list(zip(xs, outs)), flops=fl, reps=args.reps)
            k = mg.build_kernel(tile, "swiglu")
            regs = list(k.get_regs_per_thread().values())
            local = list(k.get_local_mem_per_thread().values())
            row = {"config": name, "tile": CONFIGS[name], "rel_error": err,
                   "ceiling_s": ce.median_s, "dual_s": du.median_s,
                   "ceiling_tflops": ce.flops_per_s / 1e12, "dual_tflops": du.flops_per_s / 1e12,
                   "dual_over_ceiling": ce.median_s / du.median_s,
                   "dual_over_cublas": cub.median_s / du.median_s, "registers": regs,
                   "local_bytes": local}
            print(f"{name:<24} err {err:.1e}  ceiling {row['ceiling_tflops']:6.1f}  dual "
                  f"{row['dual_tflops']:6.1f} TFLOP/s  dual/ceiling {row['dual_over_ceiling']:.3f}"
                  f"  dual/cuBLAS {row['dual_over_cublas']:.3f}  regs {regs} local {local}  "
                  f"({time.time() - t0:.0f} s)", flush=True)
        except Exception as e:
            row = {"config": name, "tile": CONFIGS.get(name), "error": repr(e)[:500]}
            print(f"{name:<24} FAILED {e!r}"[:400], flush=True)
        rows.append(row)
        write(args.out, {"provenance": prov, "T": T, "d": d, "h": h, "cublas_s": cub.median_s,
                         "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
