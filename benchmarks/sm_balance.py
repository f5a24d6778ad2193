"""Do the SMs read the decode weights at one rate, and is a slow SM slow launch after launch?
The wgmma GEMV traced (``WgmmaGemvTile.trace``) over many launches at T = 4 and 16.

Record: `records/bench/sm_balance_h100.json`.

    python3 benchmarks/sm_balance.py --out $OUT/sm_balance_h100.json

Every block of the GEMV reads the same bytes (stream-K, +- one k-block), so the blocks' read
times say how fast each SM reads while all of them compete for HBM. Per launch, each block's
rate is its weight bytes over the time from its first landed stage to its last wgmma; printed:
the spread of the rates, how alike two launches' per-SM rates are (Pearson's r over the SMs,
the mean over pairs of launches: near 1, a slow SM is slow every launch and a share per SM
worked out once would balance it; near 0, it is not and only a share taken at run time
would), and what the launch would take if every SM's share were sized to its rate (the
bytes over the rates' sum, after the median first landed stage).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def traced(T, wg, wu, launches, gen, tile=None):
    import numpy as np
    import torch

    from book.kernels import decode_mlp as dm
    from book.kernels.stream_k import ENTRY
    from book.kernels.wgmma_gemv import BK, BM, gemv_tile, traced_runs

    H, D = wg.shape
    x = torch.randn(T, D, device="cuda", generator=gen).bfloat16()
    o = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
    tile = dataclasses.replace(tile or gemv_tile(T, D), trace=True)
    ln = dm.prepare("hopper_gemv", x, wg, wu, None, None, o, tile=tile)
    sk = ln.args[1].copy_to_host()
    mt = -(-H // BM)
    nk = -(-D // (BK * tile.kblocks))
    G = ln.grid
    stages = np.array([sk[ENTRY * b + 2] + sk[ENTRY * b + 4] * nk for b in range(G)])
    nbytes = stages * tile.kblocks * 2 * tile.w_bytes
    traced_runs(ln, mt, 1)  # compiled and run once before the traced launches
    rates, ends, est = [], [], []
    for tl in traced_runs(ln, mt, launches):
        dur = (tl["last_wgmma"] - tl["first_landed"]) / 1e9
        r = np.full(1024, np.nan)
        r[tl["smid"]] = nbytes / dur  # indexed by SM, not by block
        rates.append(r)
        ends.append(tl["end"].max() / 1e3)
        est.append((np.median(tl["first_landed"]) / 1e9 + nbytes.sum() / np.nansum(r)) * 1e6)
    R = np.array(rates)
    seen = ~np.isnan(R).any(axis=0)  # the SMs every launch ran a block on
    sms = np.flatnonzero(seen)
    R = R[:, seen]
    pairs = [np.corrcoef(R[i], R[j])[0, 1] for i in range(len(R)) for j in range(i + 1, len(R))]
    mean_rate = R.mean(axis=0)
    z = (R - R.mean(axis=1, keepdims=True)) / R.std(axis=1, keepdims=True)
    slow = np.argsort(mean_rate)[:8]
    print(f"\nT={T} ({tile}), {G} blocks, {launches} traced launches")
    print(f"  SMs that ran a block in every launch: {len(sms)} of {G} blocks")
    print(f"  a block's rate GB/s: min {R.min() / 1e9:.1f} median {np.median(R) / 1e9:.1f} "
          f"max {R.max() / 1e9:.1f} (per launch max/min {np.median(R.max(1) / R.min(1)):.2f})")
    print(f"  per-SM rates alike between launches: r = {np.mean(pairs):.2f} "
          f"(min {np.min(pairs):.2f}, max {np.max(pairs):.2f})")
    print(f"  last block's end us: median {np.median(ends):.1f} (min {np.min(ends):.1f}, max "
          f"{np.max(ends):.1f}); sized to the rates: median {np.median(est):.1f}")
    print("  slowest SMs on average (SM: mean z over launches): " + ", ".join(
        f"{sms[s]}: {z[:, s].mean():+.1f}" for s in slow))
    return {"T": T, "tile": repr(tile), "blocks": G, "launches": launches,
            "bytes": [int(v) for v in nbytes], "sms": [int(v) for v in sms],
            "rates_gbs": [[round(float(v) / 1e9, 2) for v in r] for r in R],
            "pearson_pairs": {"mean": float(np.mean(pairs)), "min": float(np.min(pairs)),
                              "max": float(np.max(pairs))},
            "end_us": [round(float(v), 2) for v in ends],
            "balanced_estimate_us": [round(float(v), 2) for v in est]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--launches", type=int, default=12)
    ap.add_argument("--tokens", default="4,16")
    ap.add_argument("--tile", action="append", default=[], metavar="T:TILE",
                    help="a wgmma GEMV tile to trace at T (repeatable; beside --tokens' defaults)")
    ap.add_argument("--rows", type=int, default=0,
                    help="h (rows of each weight) if not the model's: e.g. 1792, whose 29 MB of "
                         "weights stay in L2 between launches (how fast can an SM consume?)")
    args = ap.parse_args(argv)

    import torch

    from book import gpu
    from book.bench.decode import D, H
    from book.data import write
    from book.kernels.wgmma_gemv import WgmmaGemvTile
    from book.provenance import provenance

    H = args.rows or H

    prov = provenance("python3 benchmarks/sm_balance.py " + " ".join(sys.argv[1:]))
    gen = torch.Generator(device="cuda").manual_seed(1)
    wg = (torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5).bfloat16()
    wu = (torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5).bfloat16()
    print(f"wg, wu [{H}, {D}] bfloat16")
    runs = [traced(int(T), wg, wu, args.launches, gen) for T in args.tokens.split(",") if T]
    for spec in args.tile:
        T, tile = spec.split(":", 1)
        runs.append(traced(int(T), wg, wu, args.launches, gen,
                           eval(tile, {"WgmmaGemvTile": WgmmaGemvTile})))
    write(args.out, {"provenance": prov, "h": H, "d": D, "gpu": gpu.device_info().name, "runs": runs})
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
