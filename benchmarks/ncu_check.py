"""Cross-check the timing harness against Nsight Compute's DRAM counters.

Record: `book/data/ncu/h100.json`.

For one large fused run (the vec4 kernel, float32, 8192 x 14336) this script

1. times the kernel with ``book.bench.measure`` and computes the harness's effective
   bandwidth (minimum bytes / median time), then
2. re-runs itself under ``ncu`` (``--profile``), which reads the DRAM bytes and the
   kernel duration from hardware counters for a few launches, and
3. compares: ncu's measured DRAM bytes/s against the harness's effective bandwidth
   (goal: within 5%), and ncu's DRAM bytes against the minimum bytes (extra traffic
   would show up here).

Usage on a GPU machine with ncu:  python -m benchmarks.ncu_check --out OUT.json
(``--clock-control none``: ncu would otherwise lock the clocks to base and change the
timing it is compared with.)
"""

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHAPE = (8192, 14336)
METRICS = ["dram__bytes_read.sum", "dram__bytes_write.sum", "dram__bytes.sum.per_second",
           "gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed"]
SKIP, COUNT = 2, 3  # profile launches 3..5 (the first ones warm caches and the TLB)


def buffers(seed=0):
    import numpy as np
    from numba import cuda

    from book.kernels import reference as R

    g, u = R.random_inputs(SHAPE, "float32", seed=seed)
    out = np.full(SHAPE, np.nan, np.float32)
    return cuda.to_device(g.ravel()), cuda.to_device(u.ravel()), cuda.to_device(out.ravel()), (g, u)


def profile_target():
    """What ncu profiles: a few launches of the vec4 kernel, nothing else on the GPU."""
    from numba import cuda

    from book.kernels.elementwise import vectorized

    g, u, o, _ = buffers()
    for _ in range(SKIP + COUNT):
        vectorized.swiglu_vec4(g, u, o)
    cuda.synchronize()


def harness():
    from numba import cuda

    from book import bench
    from book.kernels import reference as R
    from book.kernels.elementwise import vectorized

    sets = [buffers(seed=s) for s in range(2)]  # two sets of 1.4 GB: far beyond the 50 MB L2
    g, u, o, host = sets[0]
    vectorized.swiglu_vec4(g, u, o)
    cuda.synchronize()
    R.check(o.copy_to_host().reshape(SHAPE), host[0], host[1], "float32")
    n = math.prod(SHAPE)
    t = bench.measure(vectorized.swiglu_vec4, [s[:3] for s in sets], bytes_moved=3 * 4 * n, reps=50)
    return t, n


def parse_ncu(text):
    """{metric: [values per profiled launch]} from ncu --csv output (units normalised)."""
    from book.bench import ncu

    launches = ncu.launches(text)
    unknown = ncu.unknown_units(launches)
    if unknown:
        print(f"warning: unknown ncu units {unknown} (values kept unscaled)")
    out = {}
    for launch in launches:
        for name, v in launch.metrics.items():
            out.setdefault(name, []).append(v)
    out["units"] = sorted({f"{name}: {unit}" for launch in launches
                           for name, unit in launch.units.items()})
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", action="store_true", help="(internal) the process ncu profiles")
    ap.add_argument("--out", default=str(ROOT / "book" / "data" / "ncu" / "h100.json"))
    args = ap.parse_args()
    import book
    from book.bench import ncu

    if args.profile:
        profile_target()
        return 0
    if book.gpu.SIMULATED:
        print("not measured: no GPU here")
        return 2
    t, n = harness()
    cmd = ncu.command(ncu.require(),
                      ["--clock-control", "none", "--csv", "--metrics", ",".join(METRICS),
                       "--launch-skip", str(SKIP), "--launch-count", str(COUNT)],
                      "benchmarks.ncu_check", "--profile")
    res = ncu.run(cmd)
    if res.returncode != 0:
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"ncu failed with exit code {res.returncode}")
    m = parse_ncu(res.stdout)
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    dram_bps = med(m["dram__bytes.sum.per_second"])
    dram_bytes = med([r + w for r, w in zip(m["dram__bytes_read.sum"], m["dram__bytes_write.sum"])])
    ncu_time = med(m["gpu__time_duration.sum"])
    min_bytes = 3 * 4 * n
    doc = {
        "kernel": "vec4", "dtype": "float32", "shape": list(SHAPE),
        "harness": {"seconds": t.median_s, "p10_s": t.p10_s, "p90_s": t.p90_s,
                    "effective_bandwidth": t.bandwidth, "method": t.method},
        "ncu": {"dram_bytes_per_second": dram_bps, "dram_bytes": dram_bytes,
                "gpu_time_s": ncu_time, "per_launch": m,
                "command": ncu.shown(cmd)},
        "minimum_bytes": min_bytes,
        "note": ("DRAM writes can fall short of the output size: the last output lines may "
                 "still sit dirty in L2 when the kernel ends and are written back later"),
        "ratio_harness_over_ncu_bandwidth": t.bandwidth / dram_bps,
        "ratio_ncu_bytes_over_minimum": dram_bytes / min_bytes,
        "ratio_harness_time_over_ncu_time": t.median_s / ncu_time,
        "within_5_percent": abs(t.bandwidth / dram_bps - 1) <= 0.05,
    }
    from book.provenance import provenance

    doc["provenance"] = provenance("python -m benchmarks.ncu_check")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"harness: {t.median_s * 1e6:.1f} us, effective {t.bandwidth / 1e12:.3f} TB/s")
    print(f"ncu:     {ncu_time * 1e6:.1f} us, DRAM {dram_bps / 1e12:.3f} TB/s, "
          f"{dram_bytes / 1e9:.3f} GB moved (minimum {min_bytes / 1e9:.3f} GB)")
    print(f"harness / ncu bandwidth = {doc['ratio_harness_over_ncu_bandwidth']:.3f} "
          f"({'within' if doc['within_5_percent'] else 'NOT within'} 5%); "
          f"DRAM bytes / minimum = {doc['ratio_ncu_bytes_over_minimum']:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
