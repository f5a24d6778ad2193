"""The Hopper rows of book/data on an H100 (or H200), with chapter 8's tensor-core rows of the

Record: `records/hopper/hopper_bench_h100.json`, `book/data/h100.json` (its rows).
same run, so every cuBLAS figure the two chapters compare with comes from one run.

    python3 benchmarks/hopper_bench.py --out $OUT/hopper_h100.json [--no-tensorcore]

Checks every wgmma kernel against a float64 reference first (whole tiles and edges: T = 1,
64, 200), then times the rows of :mod:`book.bench.hopper` (each shape's rows interleaved,
:func:`book.bench.measure_interleaved`) and of :mod:`book.bench.tensorcore`, records what
ptxas made of the wgmma kernel (registers, spills, HGMMA count and setmaxnreg in the SASS
where cuobjdump is on the PATH), prints the targets and writes JSON (provenance, rows,
checks, targets). Merge it into book/data/<gpu>.json with ``python -m book.bench.merge FILE``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def kernel_report():
    """Registers, spills and SASS facts of each wgmma kernel as compiled for this GPU."""
    from book.kernels import wgmma_gemm as W

    out = {}
    for epi in W.EPILOGUES:
        k = W.build_kernel(W.TILE, epi)
        for sig, compiled in k.overloads.items():
            lib = compiled.library
            entry = {}
            try:
                entry["registers"] = compiled.regs_per_thread
                entry["local_bytes"] = compiled.local_mem_per_thread
            except Exception as e:  # an API this numba-cuda lacks
                entry["error"] = repr(e)
            if shutil.which("cuobjdump"):
                with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
                    cubin = lib.get_cubin()
                    f.write(bytes(getattr(cubin, "code", cubin)))
                    f.flush()
                    sass = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True,
                                          text=True).stdout
                entry.update(hgmma=sass.count("HGMMA"), usetmaxreg=sass.count("USETMAXREG"),
                             local_ops=sass.count("LDL") + sass.count("STL"))
            out[epi] = entry
            break
    for name, v in out.items():
        print(f"  {name:<10} {v}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--only", help="rows whose name matches this regex (re.search)")
    ap.add_argument("--no-tensorcore", action="store_true", help="the Hopper rows only")
    ap.add_argument("--rounds", type=int, default=6, help="interleaved rounds per shape")
    args = ap.parse_args(argv)
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book
    from book.bench import hopper, tensorcore
    from book.bench.suite import Suite
    from book.bench.targets import print_outcome
    from book.data import write
    from book.provenance import provenance

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    sargs = argparse.Namespace(variants=None, only=args.only, reps=20, quick=False,
                               verbose=False)
    suite = Suite(sargs)
    prov = provenance("python3 benchmarks/hopper_bench.py " + " ".join(argv or sys.argv[1:]))
    print(f"{prov['gpu']}; torch {prov['torch']}, numba-cuda {prov['numba_cuda']}", flush=True)
    t0 = time.time()
    doc = {"provenance": prov}
    try:
        print("[Hopper]", flush=True)
        hopper.run(suite, rounds=args.rounds)
        if not args.no_tensorcore:
            print("[tensor cores]", flush=True)
            tensorcore.run(suite, reps=20)
        print("[kernels]", flush=True)
        doc["kernels"] = kernel_report()
    finally:
        prov["elapsed_s"] = round(time.time() - t0, 1)
        doc.update(rows=suite.rows, checks=suite.checks, notes=suite.notes,
                   targets=hopper.targets(suite.rows) + tensorcore.targets(suite.rows))
        write(args.out, doc)
    return print_outcome(doc, args.out)


if __name__ == "__main__":
    sys.exit(main())
