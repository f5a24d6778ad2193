"""How fast each way of reading the decode weights streams them, beside the GEMVs that read
them that way (book.kernels.probes.stream_probes): the ceiling each load method leaves a GEMV.

Record: `records/bench/weight_stream_h100.json`.

    python3 -m benchmarks.weight_stream --out $OUT/weight_stream_h100.json

wg and wu [14336, 4096] bfloat16 (235 MB, the decode MLP-up's weights; ``--dtype float16``,
and ``--bits-of`` for one type's values read as the other's); each probe reads
both once and does nothing with the bytes (ldg: 16-byte loads by every thread, as the
CUDA-core GEMV; tma: the wgmma GEMV's ring of 2-D boxes; cp.async: the same boxes copied by
a warp's 16-byte cp.async; bulk: the same ring filled by 1-D bulk copies of contiguous spans), timed interleaved with the GEMVs themselves
(:func:`book.bench.measure_interleaved`: a clock drift falls on every row alike). Prints
each row's time and its share of the HBM peak; writes JSON (provenance, rows).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys


# (name, kind, parameters): the probes, then the GEMVs at the T whose HBM line is open
LDG = [(2, 256), (1, 256), (2, 128), (4, 128), (4, 64)]
# stages, kblocks, box (columns, rows), swizzle, L2 promotion[, rotate: tile m from step m r]
TMA = [(6, 1, (64, 64), "128B", "256B"), (6, 4, (64, 64), "128B", "256B"),
       (6, 1, (64, 64), "128B", "none"), (12, 1, (64, 64), "128B", "256B"),
       (4, 1, (256, 32), "none", "256B"), (3, 1, (256, 64), "none", "256B"),
       (6, 1, (256, 16), "none", "256B"), (8, 1, (64, 64), "128B", "none"),
       (4, 2, (64, 64), "128B", "none"), (6, 1, (64, 64), "128B", "128B"),
       (6, 1, (64, 64), "128B", "64B"), (12, 1, (64, 64), "128B", "none"),
       (4, 2, (64, 64), "128B", "none", 1), (4, 2, (64, 64), "128B", "none", 5),
       (6, 1, (64, 64), "128B", "none", 1), (6, 1, (64, 64), "128B", "none", 7)]
# stages, kblocks, warps copying (the TMA probe's 64 x 64 boxes by cp.async)
CPASYNC = [(8, 1, 1), (4, 2, 1), (12, 1, 1), (6, 2, 1), (8, 1, 2), (8, 1, 4)]
# stages, chunk bytes, blocks an SM
BULK = [(6, 8192, 1), (4, 16384, 1), (12, 4096, 1), (8, 8192, 1), (6, 4096, 2),
        (3, 16384, 2), (12, 2048, 1)]
# path, T, tile (None: the dispatcher's default)
GEMVS = [("cuda_cores", 1, None), ("cuda_cores", 4, None), ("hopper_gemv", 4, None),
         ("hopper_gemv", 16, None)]
# more tiles beside the defaults (--tiles): the controls of this session's defaults (the
# CUDA-core GEMV's 64 threads at 4 tokens, the wgmma GEMV's one box a stage in 6 stages), x
# copied a stage, and the consumer handing each stage back before the next one's wgmma
# (hold=0); records/bench/README.md keeps the runs that chose them
EXTRA = [("cuda_cores", 4, "GemvTile(tokens=4, rows=2, threads=64)"),
         ("hopper_gemv", 4, "WgmmaGemvTile(n=8, stages=6, x_resident=True)"),
         ("hopper_gemv", 4, "WgmmaGemvTile(n=8, stages=4, kblocks=2)"),
         ("hopper_gemv", 16, "WgmmaGemvTile(n=16, stages=6, x_resident=True)"),
         ("hopper_gemv", 16, "WgmmaGemvTile(n=16, stages=4, kblocks=2)"),
         ("hopper_gemv", 16, "WgmmaGemvTile(n=16, stages=3, kblocks=2, x_resident=True, hold=0)")]


def gemv_timeline(T, xo, wg, wu, launches=5, tile=None):
    """The wgmma GEMV at T traced (``WgmmaGemvTile.trace``): every block's timeline, from
    the launch (of ``launches``) whose last block ended soonest; printed as the spread over
    blocks of each event (us from the earliest start) and of the time between them."""
    import numpy as np

    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.gemv.wgmma_gemv import BM, gemv_tile, traced_runs

    x, o = xo
    # (without pdl: a traced launch runs alone, traced_runs, with no kernel before it to
    # overlap, and the tile refuses the two together)
    tile = dataclasses.replace(tile or gemv_tile(T, x.shape[1]), trace=True, pdl=False)
    ln = dm.prepare("hopper_gemv", x, wg, wu, None, None, o, tile=tile)
    best = min(traced_runs(ln, -(-wg.shape[0] // BM), launches), key=lambda tl: tl["end"].max())
    us = {k: v / 1e3 for k, v in best.items() if k != "smid"}
    spans = {"start": us["start"], "first_copy": us["first_copy"],
             "first_landed": us["first_landed"], "last_copy": us["last_copy"],
             "last_wgmma": us["last_wgmma"], "end": us["end"],
             "tail (end - last_wgmma)": us["end"] - us["last_wgmma"],
             "finisher_end": us["finisher_end"],
             "consumer at seams": us["meet_ns"], "finisher busy": us["sum_ns"],
             "consumer starved": us["starved_ns"], "producer blocked": us["blocked_ns"]}
    print(f"\nthe wgmma GEMV at T={T}, traced ({tile}): us over {ln.grid} blocks")
    print(f"  {'event':28s} {'min':>7s} {'median':>7s} {'max':>7s}")
    for k, v in spans.items():
        print(f"  {k:28s} {v.min():7.2f} {np.median(v):7.2f} {v.max():7.2f}")
    # the slowest readers: the same SMs every launch, or not? (each block's SM is kept)
    late = np.argsort(us["last_copy"])[-8:][::-1]
    print("  the 8 latest last copies: SM " + ", ".join(
        f"{int(best['smid'][b])} ({us['last_copy'][b]:.1f})" for b in late))
    return {"tile": repr(tile), "blocks": ln.grid, "smid": [int(v) for v in best["smid"]],
            "us": {k: [round(float(a), 3) for a in v] for k, v in spans.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--tiles", action="store_true", help="time the GEMVs at more tiles too")
    ap.add_argument("--tile", action="append", default=[], metavar="PATH:T:TILE",
                    help="a GEMV row more, e.g. 'hopper_gemv:16:WgmmaGemvTile(n=16, prefetch=2)' "
                         "(repeatable)")
    ap.add_argument("--no-probes", action="store_true", help="the GEMVs only")
    ap.add_argument("--variant", action="append", default=[], metavar="FIELD=VALUE,...",
                    help="the wgmma GEMV's default tile for this GPU at each T it is timed at, "
                         "with these fields changed, e.g. 'dynamic=2,pool=25' (repeatable; a "
                         "traced timeline of each at T = 16 too)")
    ap.add_argument("--dtype", choices=("bfloat16", "float16"), default="bfloat16",
                    help="the weights' and tokens' type (the GEMVs' multiply)")
    ap.add_argument("--bits-of", choices=("bfloat16", "float16"), default=None,
                    help="the weights made in this type and their bits read as --dtype: does "
                         "a time follow the kernel or the bytes it reads?")
    ap.add_argument("--h", type=int, default=None,
                    help="rows of each weight (default the MLP-up's 14336; 7168 reads 117 MB "
                         "of bf16, the FP8 GEMV's bytes: the probes' ceiling at that size)")
    ap.add_argument("--timeline", action="append", default=[], metavar="T:TILE",
                    help="a traced timeline more, of a wgmma GEMV tile (repeatable)")
    args = ap.parse_args(argv)

    import torch
    from numba import cuda

    from book import bench, gpu
    from book.bench.decode import D, H
    from book.bench.decode import weight_bytes as _wb
    from book.data import write
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.gemv import cuda_core_gemv as ccg
    from book.kernels.probes import stream_probes as sp
    from book.kernels.host.launch import MAX_SHARED, KernelLaunch, as_device, sm_count
    from book.kernels.gemms.stream_k import stream_k
    from book.kernels.gemms.wgmma_gemm import tensor_maps
    from book.kernels.gemv.wgmma_gemv import WgmmaGemvTile, gemv_tile
    from book.provenance import provenance

    H = args.h or H

    def weight_bytes():
        return _wb(D, H)

    prov = provenance("python3 -m benchmarks.weight_stream " + " ".join(sys.argv[1:]))
    info = gpu.device_info()
    peak = prov.get("peak_bandwidth") or info.peak_bandwidth
    sms = sm_count()
    tdt = getattr(torch, args.dtype)
    made = args.bits_of or args.dtype
    print(f"{prov['gpu']}: reading wg, wu [{H}, {D}] {args.dtype} ({weight_bytes() / 1e6:.0f} MB"
          + (f", the bits of {made} values" if made != args.dtype else "") + f"), {sms} SMs",
          flush=True)
    gen = torch.Generator(device="cuda").manual_seed(1)
    wg, wu = ((torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5)
              .to(getattr(torch, made)).view(tdt) for _ in range(2))
    wgd, wud = as_device(wg, "wg"), as_device(wu, "wu")
    fg, fu = wgd.reshape(H * D), wud.reshape(H * D)
    sink = cuda.device_array(1, dtype="uint32")
    row_bytes = D * 2

    launches = {}  # name -> (KernelLaunch-like with .launch(), description)
    probes = not args.no_probes
    for rows, threads in LDG * probes:
        k = sp.ldg_kernel(rows, threads)
        launches[f"ldg r{rows} t{threads}"] = (
            KernelLaunch(k, -(-H // rows), threads, (fg, fu, sink, D, H), None),
            {"kind": "ldg", "rows": rows, "threads": threads})
    for st, kb, box, mode, promo, *rot in TMA * probes:
        rot = rot[0] if rot else 0
        k = sp.tma_kernel(st, kb, box, rot)
        lay = sp.ring_layout(st, 2 * kb * box[0] * box[1] * 2)
        if lay["shared"] > MAX_SHARED:
            continue
        maps = tensor_maps([wgd, wud], [box, box], promo, mode)
        mt, nk = H // box[1], D // (box[0] * kb)
        sk = cuda.to_device(stream_k(mt, nk, sms))
        launches[f"tma {box[0]}x{box[1]} {mode} kb{kb} st{st} p{promo}" + (f" r{rot}" if rot else "")] = (
            KernelLaunch(k, sms, sp.THREADS, (maps, sk, D), None, lay["shared"]),
            {"kind": "tma", "stages": st, "kblocks": kb, "box": list(box), "swizzle": mode,
             "promotion": promo, "rotate": rot})
    for st, kb, warps in CPASYNC * probes:
        k = sp.cpasync_kernel(st, kb, warps)
        lay = sp.ring_layout(st, 2 * kb * 64 * 64 * 2)
        if lay["shared"] > MAX_SHARED:
            continue
        sk = cuda.to_device(stream_k(H // 64, D // (64 * kb), sms))
        launches[f"cp.async 64x64 kb{kb} st{st} w{warps}"] = (
            KernelLaunch(k, sms, 32 * (warps + 1), (fg, fu, sk, D, H), None, lay["shared"]),
            {"kind": "cpasync", "stages": st, "kblocks": kb, "warps": warps})
    for st, chunk, cps in BULK * probes:
        k = sp.bulk_kernel(st, chunk)
        lay = sp.ring_layout(st, 2 * chunk)
        spans = cuda.to_device(sp.bulk_spans(H, row_bytes, sms * cps))
        launches[f"bulk {chunk // 1024}K st{st} x{cps}"] = (
            KernelLaunch(k, sms * cps, sp.THREADS, (fg, fu, spans), None, lay["shared"]),
            {"kind": "bulk", "stages": st, "chunk": chunk, "ctas_per_sm": cps})
    xs = {}

    def tokens(T):  # x [T, D] and out [T, H], one pair for every row at T
        if T not in xs:
            xs[T] = (torch.randn(T, D, device="cuda", generator=gen).to(tdt),
                     torch.empty(T, H, device="cuda", dtype=tdt))
        return xs[T]

    more = [(p, int(t), tl) for p, t, tl in (a.split(":", 2) for a in args.tile)]
    hopper_ts = sorted({T for p, T, _ in GEMVS if p == "hopper_gemv"})
    variants = [(T, dataclasses.replace(gemv_tile(T, D, prov["gpu"] or ""), **eval(f"dict({v})")))
                for v in args.variant for T in hopper_ts]
    more += [("hopper_gemv", T, repr(tile)) for T, tile in variants]
    for path, T, tile in GEMVS + (EXTRA if args.tiles else []) + more:
        x, o = tokens(T)
        t = eval(tile, {"GemvTile": ccg.GemvTile, "WgmmaGemvTile": WgmmaGemvTile}) if tile else None
        launches[f"GEMV {path} T={T}" + (f" {tile}" if tile else "")] = (
            dm.prepare(path, x, wg, wu, None, None, o, tile=t),
            {"kind": "gemv", "path": path, "T": T, "tile": tile or "default"})
    for name, (ln, _) in launches.items():  # each runs (and compiles) once before timing
        ln.launch()
    cuda.synchronize()

    cands = {name: (lambda ln=ln: ln.launch(), [()], {"bytes_moved": weight_bytes()})
             for name, (ln, _) in launches.items()}
    timed = bench.measure_interleaved(cands, rounds=args.rounds, reps=args.reps)
    rows = []
    print(f"\n{'probe':40s} {'us':>7s} {'TB/s':>6s} {'of HBM':>7s}")
    width = max(map(len, launches))
    for name, (ln, meta) in launches.items():
        tm = timed[name]
        row = {"name": name, **meta, "grid": ln.grid, "block": ln.block,
               "shared": getattr(ln, "shared", 0), "seconds": tm.median_s, "p10_s": tm.p10_s,
               "p90_s": tm.p90_s, "weight_bandwidth": tm.bandwidth,
               "of_peak": tm.bandwidth / peak}
        if tm.bandwidth > peak:  # a reader faster than HBM did not read every byte
            row["invalid"] = "faster than the HBM peak: it cannot have read every weight byte"
        rows.append(row)
        print(f"{name:{width}s} {tm.median_s * 1e6:7.1f} {tm.bandwidth / 1e12:6.2f} "
              f"{100 * tm.bandwidth / peak:6.1f}%" + ("  IMPOSSIBLE" if "invalid" in row else ""),
              flush=True)
    gpu_name = prov["gpu"] or ""  # (the dispatcher's default tile is the GPU's own)
    timelines = {str(T): gemv_timeline(T, tokens(T), wg, wu, tile=gemv_tile(T, D, gpu_name))
                 for T in hopper_ts}
    for T, tile in variants:
        if T == 16:
            timelines[f"16:{tile!r}"] = gemv_timeline(T, tokens(T), wg, wu, tile=tile)
    for spec in args.timeline:
        T, tile = spec.split(":", 1)
        timelines[spec] = gemv_timeline(int(T), tokens(int(T)), wg, wu, tile=eval(
            tile, {"WgmmaGemvTile": WgmmaGemvTile}))
    write(args.out, {"provenance": prov, "gpu": info.name, "peak_bandwidth": peak,
                     "dtype": args.dtype, "bits_of": made,
                     "weight_bytes": weight_bytes(), "rows": rows, "timelines": timelines})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
