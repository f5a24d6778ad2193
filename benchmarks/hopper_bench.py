"""The Hopper rows of book/data on an H100 (or H200), with chapter 8's tensor-core rows of the
same run, so every cuBLAS figure the two chapters compare with comes from one run.

Record: `records/hopper/hopper_bench_h100.json`, `book/data/h100.json` (its rows).

    python3 -m benchmarks.hopper_bench --out $OUT/hopper_h100.json [--no-tensorcore]
    python3 -m benchmarks.hopper_bench --out $OUT/hopper_tiles_h200.json --tiles 256,384,512,768,1024

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


def kernel_report():
    """Registers, spills and SASS facts of each wgmma kernel as compiled for this GPU."""
    from book.kernels.gemms import wgmma_gemm as W

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


#: the dual GEMM's tiles ``--tiles`` times at mid-size T (the dispatcher's default first): half
#: the columns a tile (twice the tiles: a fuller last wave), half the rows, each without the
#: cluster, and a deeper ring for the narrow tile
MID_TILES = ("HopperTile()", "HopperTile(bn=64)", "HopperTile(bn=64, cluster=1)",
             "HopperTile(bm=64)", "HopperTile(bm=64, cluster=1)", "HopperTile(bn=64, stages=6)")


def mid_t(args, prov):
    """The wgmma dual GEMM at each T of ``--tiles`` at every tile of :data:`MID_TILES`,
    beside cuBLAS (F.linear on [wg; wu]) alone and + a compiled SiLU*up (compiled for the
    T), every row of a T in turn, round after round, the SM clock and power after each turn;
    each tile's result checked against torch's first; the wave model beside each row
    (:mod:`book.kernels.gemms.waves`: rounds, and the predicted time in rounds of the wide tile),
    and the dispatcher's choice (``choose``: a tile or a ColumnSplit) as a row of its own."""
    import torch
    import torch.nn.functional as F

    from book.bench import measure_interleaved
    from book.bench.decode import D, H
    from book.kernels.host.launch import sm_count
    from book.kernels.host.fastcall import planned
    from book.kernels.gemms.waves import choose, predicted, rounds
    from book.kernels.gemms.wgmma_gemm import swiglu_wgmma
    from book.kernels.gemms.wgmma_gemm_tile import ColumnSplit, HopperTile

    blocks = sm_count()
    gen = torch.Generator(device="cuda").manual_seed(7)
    ws = [[(torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5).bfloat16()
           for _ in range(2)] for _ in range(2)]
    cat = [torch.cat(w).contiguous() for w in ws]
    doc = {"provenance": prov, "rows": [], "checks": [], "blocks": blocks}
    tiles = {name: eval(name, {"HopperTile": HopperTile}).validate()
             for name in (args.tile or MID_TILES)}
    for T in [int(v) for v in args.tiles.split(",")]:
        xs = [torch.randn(T, D, device="cuda", generator=gen).bfloat16() for _ in range(2)]
        outs = [torch.empty(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(2)]

        @torch.compile(dynamic=False)
        def silu_mul(gu):
            return F.silu(gu[:, :H]) * gu[:, H:]

        gu = F.linear(xs[0], cat[0])
        ref = (F.silu(gu[:, :H].float()) * gu[:, H:].float())
        cands = {}
        per_t = dict(tiles, dispatcher=choose(T, H, blocks))
        for name, tile in per_t.items():
            def call(i, tile=tile):
                return swiglu_wgmma(xs[i], ws[i][0], ws[i][1], outs[i], tile=tile)
            call(0)
            err = float(((outs[0].float() - ref).norm() / ref.norm()).item())
            doc["checks"].append({"T": T, "tile": name, "rel_error_vs_cublas": err,
                                  "ok": err < 1e-2})
            cands[name] = call
        decode = planned("decode")  # the dispatcher, as a model calls it

        def dispatched(i):
            return decode(xs[i], ws[i][0], ws[i][1], None, None, outs[i])
        dispatched(0)
        err = float(((outs[0].float() - ref).norm() / ref.norm()).item())
        doc["checks"].append({"T": T, "tile": "planned_decode", "rel_error_vs_cublas": err,
                              "ok": err < 1e-2})
        cands["planned_decode"] = dispatched
        cands["cublas_gemm"] = lambda i: F.linear(xs[i], cat[i])
        cands["cublas_compiled"] = lambda i: silu_mul(F.linear(xs[i], cat[i]))
        fl = 4 * T * D * H
        timed = measure_interleaved({name: (fn, [(0,), (1,)], {"flops": fl})
                                     for name, fn in cands.items()}, rounds=args.rounds, reps=8,
                                    warmup=3)
        ref_us = timed["cublas_compiled"].median_s * 1e6
        for name in cands:
            med = timed[name].median_s
            row = {"name": name, "T": T, "shape": [T, D, H], **timed[name].record_fields(),
                   "tflops": fl / med / 1e12, "vs_cublas_compiled": ref_us / (med * 1e6)}
            if name in per_t:
                tile = per_t[name]
                one = tile.wide if isinstance(tile, ColumnSplit) else tile
                r = rounds(T, H, one, blocks)
                row.update(tile=repr(tile), tiles=r.tiles, waves=r.waves,
                           predicted_rounds=predicted(T, H, tile, blocks))
            doc["rows"].append(row)
            print(f"T={T:5d} {name:34s} {med * 1e6:8.1f} us {fl / med / 1e12:6.0f} TFLOP/s "
                  f"{ref_us / (med * 1e6):5.3f}x cuBLAS+compile"
                  + (f"  waves {row['waves']:.2f} predicted {row['predicted_rounds']:.2f} rounds"
                     if name in per_t else ""), flush=True)
        write_doc(args.out, doc)
    return doc


def write_doc(path, doc):
    from book.data import write
    write(path, doc)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--only", help="rows whose name matches this regex (re.search)")
    ap.add_argument("--no-tensorcore", action="store_true", help="the Hopper rows only")
    ap.add_argument("--rounds", type=int, default=6, help="interleaved rounds per shape")
    ap.add_argument("--tiles", metavar="T,T,...",
                    help="instead of the rows: the dual GEMM's MID_TILES at these T beside "
                         "cuBLAS + compile, with the wave model (its own record)")
    ap.add_argument("--tile", action="append", default=[], metavar="EXPR",
                    help="with --tiles: these tiles instead of MID_TILES, e.g. "
                         "'HopperTile(bn=64, stages=6)' (repeatable; the first is the control)")
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
    prov = provenance("python3 -m benchmarks.hopper_bench " + " ".join(argv or sys.argv[1:]))
    print(f"{prov['gpu']}; torch {prov['torch']}, numba-cuda {prov['numba_cuda']}", flush=True)
    t0 = time.time()
    if args.tiles:
        doc = mid_t(args, prov)
        prov["elapsed_s"] = round(time.time() - t0, 1)
        write(args.out, doc)
        return 0 if all(c["ok"] for c in doc["checks"]) else 1
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
