"""Time the decode MLP-up (book.kernels.gemv.decode_mlp) beside cuBLAS, on a GPU.

Record: `book/data/h100.json` (its rows, through `python -m book.bench.merge`), `records/bench/decode_rows_h100.json`, `records/bench/decode_tune_h100.json`.

    python3 -m benchmarks.decode_bench --out $OUT/decode_h100.json            # rows, sweep, host
    python3 -m benchmarks.decode_bench --out $OUT/decode_h100.json --only 'decode_|cublas_linear'
    python3 -m benchmarks.decode_bench --out $OUT/decode_sweep_h200.json --only 'sweep_|host_'
    python3 -m benchmarks.decode_bench --tune-out $OUT/decode_tune_h100.json  # tiles and splits

Checks every path against float64 at full size first (outputs poisoned with NaN; the
plan-cached call bit-equal to the wrapper; a CUDA-graph replay), then measures the rows of
:mod:`book.bench.decode` with :func:`book.bench.measure` (CUDA events, warm-up, median, two
input sets in turn), prints them with issue 31's targets and writes JSON (provenance, rows,
checks, targets) that ``python -m book.bench.merge FILE`` merges into book/data/<gpu>.json.
On sm_90 the sweep times the wgmma GEMV beside its bare tile (``sweep_gemv_hopper_bare``,
``gemv_tile(..., fixes=False)``: the control of the default's fixes), its bits checked equal
to the default's first.

``--tune-out FILE`` instead times each path at a few tiles and split-K counts per T (the
GEMVs alone, weights d = 4096, h = 14336, bfloat16), prints the fastest per T beside the
default the dispatcher uses (and the fastest of the tensor-core GEMV's register path and of
its cp.async ring, ``--tune-stages``), and writes every row: the data to set the defaults of
``gemv_tile``, ``mma_gemv_tile``, ``CUDA_CORE_MAX_T`` and ``BLOCKS_PER_SM`` from (a record
for records/bench/, not book/data). The ring alone at the decode sizes it is meant for:

    python3 -m benchmarks.decode_bench --tune-out $OUT/decode_tune_ring_h100.json \
        --tune-t 4,8,16 --tune-paths tensor_cores
"""

from __future__ import annotations

import argparse
import os
import sys
import time


TUNE_T = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def tensor_core_tiles(T, stages=(0, 2, 3, 4), unrolls=(1,)):
    """The tensor-core GEMV tiles the tune times at T tokens: the default, one m-tile at 4 and
    8 warps, the default's m-tiles at 2 and 8 warps (the weights straight to registers);
    ``unrolls`` beyond 1 add the unrolled shapes (measured slower on the H100: more
    registers, less occupancy); each of ``stages`` beyond 0 adds the cp.async ring at one
    m-tile and 4 and 8 warps. Tiles that do not validate (48 KiB of shared memory) are left
    out."""
    from book.kernels.gemv import mma_gemv as mmv

    base = mmv.gemv_tile(T)
    shapes = {(base.mt, base.warps, base.unroll, 0), (1, 4, 1, 0), (1, 8, 1, 0),
              (base.mt, 2, base.unroll, 0), (base.mt, 8, base.unroll, 0)}
    # the unroll: 32-deep steps a warp loads before it multiplies (bytes in registers)
    shapes |= {(mt, w, u, 0) for mt in (1, 2) for w in (2, 4, 8) for u in unrolls if u > 1}
    # the ring: stages of one 32-deep step per warp in shared memory, filled by cp.async
    shapes |= {(1, w, 1, st) for w in (4, 8) for st in stages if st}
    tiles = []
    for mt, warps, unroll, st in sorted(shapes):
        try:
            tiles.append(mmv.MmaGemvTile(base.nt, mt, warps, unroll, st).validate())
        except ValueError:
            continue
    return tiles


def staged_tiles(T, stages=(0, 2, 3)):
    """The staged GEMV's tiles (book.kernels.gemv.staged_gemv) the tune times at T tokens: 4, 8
    and 16 warps, chunks of 256 to 1024 halves, the register path (stages 0) and cp.async
    rings 2 to 8 deep (``stages`` beyond 0 turn the rings on), two m-tiles at 8 warps; tiles
    that do not validate are left out."""
    from book.kernels.gemv.staged_gemv import StagedTile, gemv_tile as staged_tile

    base = staged_tile(T)
    ring = any(stages)
    shapes = {(1, 8, 512, 0)} if 0 in stages else set()
    if ring:
        shapes |= {(1, 8, 256, st) for st in (2, 4, 6)}
        shapes |= {(1, 8, 512, st) for st in (2, 3, 4, 6)}
        shapes |= {(1, 8, 1024, st) for st in (2, 3, 4)}
        shapes |= {(1, 4, 256, st) for st in (2, 4, 6, 8)}
        shapes |= {(1, 4, 512, st) for st in (2, 3, 4)}
        shapes |= {(1, 16, 1024, st) for st in (2, 3)}
        shapes |= {(2, 8, 512, st) for st in (2, 3)}
    tiles = []
    for mp, warps, chunk, st in sorted(shapes):
        try:
            tiles.append(StagedTile(base.nt, mp, warps, chunk, 0, st).validate())
        except ValueError:
            continue
    return tiles


def hopper_gemv_tiles(T, waves=(), resident=False, d=4096):
    """The Hopper GEMV's tiles (book.kernels.gemv.wgmma_gemv) the tune times at T tokens: N the
    tokens rounded up to 8; a stage of one, two and four 64-column boxes of each operand
    (a weight row read 128, 256, 512 contiguous bytes at a time) at ring depths that fit;
    the L2 promotion of 256 bytes, none and 128; two blocks an SM at one box a stage.
    ``waves``: instead, grids of these many waves at a few rings, boxes and blocks an SM;
    ``resident``: instead, x kept in shared memory against x copied a stage, a few rings.
    Each with the default tile's fixes (``FIXES``: a geometry timed as the default runs it)."""
    import dataclasses

    from book.kernels.gemv.wgmma_gemv import FIXES, MAX_T, WgmmaGemvTile, gemv_tile

    if T > MAX_T:
        return []
    n = gemv_tile(T).n
    shapes = [(6, 1, 1, p, 1) for p in ("256B", "none", "128B")]
    shapes += [(8, 1, 1, "256B", 1), (4, 2, 1, "256B", 1)]
    shapes += [(st, 1, 2, p, 1) for st in (3, 4, 6) for p in ("256B", "none")]
    shapes += [(st, 1, 4, p, 1) for st in (2, 3) for p in ("256B", "none")]
    if resident:  # x kept in shared memory, against the same rings with x a stage
        shapes = [(st, 1, kb, "256B", 1, xr) for xr in (True, False)
                  for st, kb in ((4, 1), (6, 1), (8, 1), (3, 2), (4, 2))]
    elif waves:  # grids of several waves: the hardware hands the ranges to free SMs
        shapes = [(st, cps, kb, "256B", w) for w in waves for st, cps, kb in
                  ((4, 1, 1), (6, 1, 1), (4, 1, 2), (4, 2, 1), (3, 2, 1))]
    tiles = []
    for st, cps, kb, prom, w, *xr in shapes:
        try:
            tile = dataclasses.replace(WgmmaGemvTile(n, st, cps, kb, prom, w, bool(xr and xr[0])),
                                       **FIXES).validate()
            if tile.fits(d):
                tiles.append(tile)
        except ValueError:
            continue
    return tiles


def tune(args):
    import torch

    from book import bench, gpu
    from book.bench.decode import D, H, weight_bytes
    from book.data import write
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.gemv import cuda_core_gemv as ccg, mma_gemv as mmv
    from book.kernels.gemv.wgmma_gemv import MAX_T as HOPPER_GEMV_MOST
    from book.kernels.gemv.wgmma_gemv import gemv_tile as hopper_gemv_tile
    from book.provenance import provenance

    prov = provenance("python3 -m benchmarks.decode_bench " + " ".join(sys.argv[1:]))
    print(f"{prov['gpu']}: decode GEMV tiles and splits, d={D} h={H} bfloat16", flush=True)
    gen = torch.Generator(device="cuda").manual_seed(1)
    wg = (torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5).bfloat16()
    wu = (torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5).bfloat16()
    rows, t0 = [], time.time()
    for T in [int(v) for v in args.tune_t.split(",")]:
        xs = [torch.randn(T, D, device="cuda", generator=gen).bfloat16() for _ in range(2)]
        outs = [torch.empty(T, H, device="cuda", dtype=torch.bfloat16) for _ in range(2)]
        configs = []
        if T <= dm.CUDA_CORE_MAX_T and "cuda_cores" in args.tune_paths:
            base = ccg.gemv_tile(T, D)
            for rows_, threads in sorted({(base.rows, base.threads), (base.rows, 128),
                                          (max(1, base.rows // 2), 256), (base.rows, 512),
                                          (base.rows, 64), (max(1, base.rows // 2), 128),
                                          (max(1, base.rows // 2), 64)}):
                try:
                    tile = ccg.GemvTile(base.tokens, rows_, threads).validate()
                except ValueError:
                    continue
                for split in args.tune_splits:
                    configs.append(("cuda_cores", tile, split))
        if "tensor_cores" in args.tune_paths:
            for tile in ([] if args.tune_warps else
                         tensor_core_tiles(T, args.tune_stages, args.tune_unroll)):
                for split in args.tune_splits:
                    configs.append(("tensor_cores", tile, split))
        for mb in args.tune_min_blocks:  # the defaults (and neighbours) under a register cap
            if T <= dm.CUDA_CORE_MAX_T and "cuda_cores" in args.tune_paths:
                base = ccg.gemv_tile(T, D)
                for threads in sorted({base.threads, 2 * base.threads}):
                    configs.append(("cuda_cores", ccg.GemvTile(base.tokens, base.rows, threads,
                                                              mb).validate(), None))
            if T > dm.CUDA_CORE_MAX_T and "tensor_cores" in args.tune_paths:
                base = mmv.gemv_tile(T)
                for split in args.tune_splits:
                    configs.append(("tensor_cores", mmv.MmaGemvTile(
                        base.nt, base.mt, base.warps, base.unroll, base.stages, mb).validate(),
                        split))
        if args.tune_prefetch and T <= dm.CUDA_CORE_MAX_T and "cuda_cores" in args.tune_paths:
            base = ccg.gemv_tile(T, D)  # each thread's next piece loaded before its FMAs
            for rows_ in sorted({base.rows, max(1, base.rows // 2)}):
                for threads in (64, 128, 256):
                    configs.append(("cuda_cores", ccg.GemvTile(base.tokens, rows_, threads, 0,
                                                              True).validate(), None))
        if args.tune_warps and "tensor_cores" in args.tune_paths:  # warps a block, one m-tile
            base = mmv.gemv_tile(T)
            for mt in (1, 2):
                for warps in args.tune_warps:
                    for split in args.tune_splits:
                        configs.append(("tensor_cores", mmv.MmaGemvTile(base.nt, mt, warps)
                                        .validate(), split))
        if "staged" in args.tune_paths:
            for tile in staged_tiles(T, args.tune_stages):
                for split in args.tune_splits:
                    configs.append(("staged", tile, split))
        if "hopper_gemv" in args.tune_paths and args.tune_hopper_default:
            if T <= HOPPER_GEMV_MOST:
                configs.append(("hopper_gemv", hopper_gemv_tile(T, D, prov["gpu"] or ""), None))
        elif "hopper_gemv" in args.tune_paths:  # split-K is its stream-K: no split to try
            configs.extend(("hopper_gemv", tile, None)
                           for tile in hopper_gemv_tiles(T, args.tune_waves, args.tune_resident))
        if "hopper" in args.tune_paths and T > dm.CUDA_CORE_MAX_T:
            configs.append(("hopper", None, None))  # where the dual GEMM would take over
        if args.tune_gemv_defaults:  # the two GEMVs at their defaults only, as the controls
            configs = [c for c in configs if c[0] in ("hopper_gemv", "hopper") or c[2] is None and (
                c[1] == (ccg.gemv_tile(T, D) if c[0] == "cuda_cores" else mmv.gemv_tile(T)))]
        for path, tile, split in configs:
            sets = [(xs[i], wg, wu, None, None, outs[i]) for i in range(2)]
            if path == "hopper":  # the wgmma dual GEMM as the dispatcher calls it
                launches = [dm.CallLaunch(dm.hopper_dual_gemm, s, s[-1], path) for s in sets]
            else:
                launches = [dm.prepare(path, *s, tile=tile, split=split) for s in sets]

            def call(i, launches=launches):
                launches[i].launch()

            try:
                tm = bench.measure(call, [(0,), (1,)], bytes_moved=weight_bytes(), reps=args.reps)
            except Exception as e:  # a configuration that does not run: say so, go on
                print(f"  T={T:4d} {path:12s} {tile} split={split}: FAILED {e!r}", flush=True)
                continue
            default = split is None and (
                (path == "cuda_cores" and tile == ccg.gemv_tile(T, D))
                or (path == "tensor_cores" and tile == mmv.gemv_tile(T))
                or (path == "hopper_gemv" and tile == hopper_gemv_tile(T, D, prov["gpu"] or "")))
            row = {"T": T, "path": path, "tile": repr(tile), "split": split,
                   "stages": getattr(tile, "stages", 0),
                   "splits_used": getattr(launches[0], "splits", 1), "grid": launches[0].grid,
                   "seconds": tm.median_s, "p10_s": tm.p10_s, "p90_s": tm.p90_s,
                   "weight_bandwidth": tm.bandwidth, "default": default}
            rows.append(row)
            print(f"  T={T:4d} {path:12s} {tile!r:56s} split={str(split):4s} (S={row['splits_used']},"
                  f" grid {row['grid']:5d}) {tm.median_s * 1e6:8.1f} us "
                  f"{tm.bandwidth / 1e12:5.2f} TB/s{'  (default)' if default else ''}", flush=True)
        del xs, outs
    print("\nfastest per T (and the default):")
    for T in sorted({r["T"] for r in rows}):
        rs = [r for r in rows if r["T"] == T]
        best, dflt = min(rs, key=lambda r: r["seconds"]), [r for r in rs if r["default"]]
        print(f"  T={T:4d} best {best['path']} {best['tile']} split={best['split']} "
              f"{best['seconds'] * 1e6:.1f} us; defaults "
              + ", ".join(f"{r['path']} {r['seconds'] * 1e6:.1f} us" for r in dflt))
        for label, sel in (("registers", [r for r in rs if r["path"] == "tensor_cores"
                                          and not r["stages"]]),
                           ("cp.async ring", [r for r in rs if r["path"] == "tensor_cores"
                                              and r["stages"]]),
                           ("staged", [r for r in rs if r["path"] == "staged"]),
                           ("hopper_gemv", [r for r in rs if r["path"] == "hopper_gemv"])):
            if sel:
                b = min(sel, key=lambda r: r["seconds"])
                print(f"         best {label}: {b['tile']} split={b['split']} "
                      f"{b['seconds'] * 1e6:.1f} us {b['weight_bandwidth'] / 1e12:.2f} TB/s")
    prov["elapsed_s"] = round(time.time() - t0, 1)
    write(args.tune_out, {"provenance": prov, "gpu": gpu.device_info().name, "rows": rows})
    print(f"wrote {args.tune_out}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", help="JSON file of the rows (mergeable into book/data)")
    ap.add_argument("--reps", type=int, default=20, help="timed samples per row")
    ap.add_argument("--only", help="rows whose name matches this regex (re.search)")
    ap.add_argument("--dtypes", default="bfloat16,float16")
    ap.add_argument("--ts", default="1,4,16,64,256", help="T of the decode rows")
    ap.add_argument("--sweep", default="1,2,4,8,16,32,64,128,256,512,1024,2048,4096,8192",
                    help="T of the sweep rows")
    ap.add_argument("--tune-out", help="time tiles and splits instead; write them here")
    ap.add_argument("--tune-t", default=",".join(map(str, TUNE_T)))
    ap.add_argument("--tune-splits", default="None,1,2,4",
                    help="split-K counts the tune tries (None: the dispatcher's choice)")
    ap.add_argument("--tune-stages", default="0,2,3,4",
                    help="cp.async ring depths of the tensor-core GEMV the tune tries (0: the "
                         "weights straight to registers)")
    ap.add_argument("--tune-unroll", default="1",
                    help="unrolls of the register path the tune tries (2,4 measured slower)")
    ap.add_argument("--tune-warps", default="",
                    help="instead of the tensor-core GEMV's usual tiles: one and two m-tiles at "
                         "these warps a block (e.g. 3,4,5,6; a block's warps set how many of "
                         "the grid's blocks an SM holds at once)")
    ap.add_argument("--tune-prefetch", action="store_true",
                    help="add the CUDA-core GEMV with its next piece loaded ahead (prefetch)")
    ap.add_argument("--tune-min-blocks", default="",
                    help="register caps (blocks an SM holds) tried on the default tiles, e.g. 8,12")
    ap.add_argument("--tune-waves", default="",
                    help="the Hopper GEMV at grids of these many waves (e.g. 1,2,4,8)")
    ap.add_argument("--tune-resident", action="store_true",
                    help="the Hopper GEMV with x kept in shared memory against x copied a stage")
    ap.add_argument("--tune-hopper-default", action="store_true",
                    help="the Hopper GEMV at its default tile only")
    ap.add_argument("--tune-gemv-defaults", action="store_true",
                    help="the CUDA-core and tensor-core GEMVs at their default tiles only")
    ap.add_argument("--tune-paths", default="cuda_cores,tensor_cores",
                    help="which GEMVs the tune times (cuda_cores, tensor_cores, staged, "
                         "hopper_gemv; hopper: the wgmma dual GEMM at the dispatcher's tile)")
    args = ap.parse_args(argv)
    args.tune_splits = [None if v == "None" else int(v) for v in args.tune_splits.split(",") if v]
    args.tune_stages = tuple(int(v) for v in args.tune_stages.split(",") if v)
    args.tune_unroll = tuple(int(v) for v in args.tune_unroll.split(",") if v)
    args.tune_paths = tuple(v for v in args.tune_paths.split(",") if v)
    args.tune_min_blocks = tuple(int(v) for v in args.tune_min_blocks.split(",") if v)
    args.tune_warps = tuple(int(v) for v in args.tune_warps.split(",") if v)
    args.tune_waves = tuple(int(v) for v in args.tune_waves.split(",") if v)
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book

    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here")
        return 2
    if args.tune_out:
        return tune(args)
    if not args.out:
        ap.error("give --out FILE (or --tune-out FILE)")
    from book.bench import decode
    from book.bench.suite import Suite
    from book.bench.targets import print_outcome
    from book.data import write
    from book.provenance import provenance

    sargs = argparse.Namespace(variants=None, only=args.only, reps=args.reps, quick=False,
                               verbose=False)
    suite = Suite(sargs)
    prov = provenance("python3 -m benchmarks.decode_bench " + " ".join(argv or sys.argv[1:]))
    print(f"{prov['gpu']}; torch {prov['torch']}, numba-cuda {prov['numba_cuda']}", flush=True)
    t0 = time.time()
    ts = tuple(int(v) for v in args.ts.split(",") if v)
    sweep = tuple(int(v) for v in args.sweep.split(",") if v)
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    try:
        decode.run(suite, ts, dtypes, sweep, reps=args.reps)
    finally:
        prov["elapsed_s"] = round(time.time() - t0, 1)
        doc = {"provenance": prov, "rows": suite.rows, "checks": suite.checks,
               "targets": decode.targets(suite.rows, suite.peak), "notes": suite.notes}
        if args.only:
            doc["only"] = args.only
        write(args.out, doc)
    return print_outcome(doc, args.out)


if __name__ == "__main__":
    sys.exit(main())
