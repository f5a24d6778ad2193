"""RMSNorm fused with the per-token e4m3 quantization against the unfused pair and torch.compile.

Record: `records/fp8/norm_quant_h200.json` (or `_h100`: the GPU's tag in the name).

    python3 -m benchmarks.norm_quant_bench --out $OUT/norm_quant_h200.json [--T 1 16 2048 8192]

The rows are :func:`book.bench.norm_quant.norm_quant_rows`' (d = 4096, float16 by default):
:func:`book.kernels.elementwise.norm_quant.rmsnorm_quant` (``norm_quant_fused``), the same kernel at
another tile (``norm_quant_fused_c4``) and the staged kernel it replaced
(``norm_quant_staged``), our RMSNorm then ``quantize_torch``, the two written in torch and
``torch.compile``d, and our RMSNorm alone; SM clock and power read after
each turn (``book.gpu.state``, by the harness). Prints a table and writes JSON (provenance, rows,
checks); exits 1 if a fused kernel's codes are not its model's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main(argv=None):
    from book.bench.norm_quant import D, TS

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--T", type=int, nargs="+", default=list(TS))
    ap.add_argument("--d", type=int, default=D)
    ap.add_argument("--dtype", default="float16", choices=["float16", "float32"])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--reps", type=int, default=8)
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book
    from book.bench.norm_quant import norm_quant_rows
    from book.data import write
    from book.provenance import provenance

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    prov = provenance("python3 -m benchmarks.norm_quant_bench " + " ".join(argv or sys.argv[1:]))
    t0 = time.time()
    rows, checks = norm_quant_rows(args.T, args.d, args.dtype, rounds=args.rounds,
                                   reps=args.reps)
    prov["elapsed_s"] = round(time.time() - t0, 1)
    write(args.out, {"provenance": prov, "rows": rows, "checks": checks})
    print(f"{prov['gpu']}; {args.dtype}, d = {args.d}")
    print(f"{'row':<30} {'T':>5} {'median us':>9} {'p10-p90':>15} {'GB/s':>6} {'SM MHz':>6} "
          f"{'W':>4}")
    for r in rows:
        print(f"{r['name']:<30} {r['shape'][0]:>5} {r['median_us']:>9.2f} "
              f"{r['p10_us']:>7.2f}-{r['p90_us']:<7.2f} {r['gb_per_s']:>6.0f} "
              f"{r['sm_mhz_median'] or 0:>6.0f} {r['power_w_median'] or 0:>4.0f}")
    for c in checks:
        print("check", c)
    return 0 if all(c.get("ok", True) for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
