"""Time the bf16 tensor-core (mma.sync) dual GEMM beside its controls and cuBLAS, on a GPU.

Record: `records/tensorcore/tensorcore_h100.json`, `book/data/h100.json` (its rows).

    python3 -m benchmarks.tensorcore_bench --out $OUT/tensorcore_h100.json

Checks every kernel against a float64 reference first (small shape) and the dual GEMM
against cuBLAS at full size, then times the rows of :mod:`book.bench.tensorcore` with
:func:`book.bench.measure` (CUDA events, warm-up, median; two input sets in turn), prints
them and the issue's targets, and writes JSON (provenance, rows, checks, targets). The rows
merge into book/data/<gpu>.json with ``python -m book.bench.merge FILE``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def kernel_resources(tile):
    """Registers and local memory (spills) per thread of each compiled tensor-core kernel."""
    from book.kernels.gemms import mma_gemm as mg

    out = {}
    for epi in mg.EPILOGUES:
        k = mg.build_kernel(tile, epi)
        try:
            regs, local = k.get_regs_per_thread(), k.get_local_mem_per_thread()
            shared = k.get_shared_mem_per_block()
            for i, sig in enumerate(regs):
                out[f"{epi} #{i}"] = {"registers": regs[sig], "local_bytes": local[sig],
                                         "shared_bytes": shared[sig]}
        except Exception as e:  # an API this numba-cuda lacks: say so, keep the run
            out[epi] = repr(e)
    for name, v in out.items():
        print(f"  {name[:40]:<40} {v}")
    return out


def pick_tile(spec):
    from book.kernels.gemms import mma_gemm as mg

    if not spec:
        return mg.TILE
    from benchmarks.tensorcore_tune import CONFIGS

    if spec.startswith("best:"):
        import json

        rows = [r for r in json.loads(Path(spec[5:]).read_text())["rows"] if "dual_s" in r]
        spec = min(rows, key=lambda r: r["dual_s"])["config"]
    return mg.MmaTile(**CONFIGS[spec]).validate()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--reps", type=int, default=20, help="timed samples per row")
    ap.add_argument("--only", help="rows whose name matches this regex (re.search)")
    ap.add_argument("--shapes", default="2048,8192", help="T values (d=4096, h=14336)")
    ap.add_argument("--share", default="1,64,2048,8192", help="T values of the share rows")
    ap.add_argument("--tile", help="a configuration of benchmarks/tensorcore_tune.py's CONFIGS, "
                                   "or 'best:FILE' (the fastest dual GEMM of a tune JSON)")
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book
    from book.bench import tensorcore
    from book.bench.suite import Suite
    from book.bench.targets import print_outcome
    from book.data import write
    from book.provenance import provenance

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    sargs = argparse.Namespace(variants=None, only=args.only, reps=args.reps, quick=False,
                               verbose=False)
    suite = Suite(sargs)
    prov = provenance("python3 -m benchmarks.tensorcore_bench " + " ".join(argv or sys.argv[1:]))
    print(f"{prov['gpu']}; torch {prov['torch']}, numba-cuda {prov['numba_cuda']}", flush=True)
    t0 = time.time()
    tile = pick_tile(args.tile)
    prov["tile"] = repr(tile)
    print("tile:", tile, flush=True)
    shapes = [(int(T), 4096, 14336) for T in args.shapes.split(",") if T]
    share_t = tuple(int(T) for T in args.share.split(",") if T)
    try:
        tensorcore.run(suite, shapes, share_t, reps=args.reps, tile=tile)
    finally:
        prov["elapsed_s"] = round(time.time() - t0, 1)
        doc = {"provenance": prov, "rows": suite.rows, "checks": suite.checks,
               "targets": tensorcore.targets(suite.rows), "notes": suite.notes,
               "kernels": kernel_resources(tile)}
        write(args.out, doc)
    for r in suite.rows:
        if "share" in r:
            print(f"  share {r['variant']:<26} T={r['shape'][0]:<5} {r['share']:.1%}")
    return print_outcome(doc, args.out)


if __name__ == "__main__":
    sys.exit(main())
