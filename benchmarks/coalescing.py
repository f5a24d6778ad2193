"""Chapter 6's measurements in one GPU run: coalescing, the IEEE-math controls, launch spread.

Record: `book/data/ncu/coalescing_h100.json`, `book/data/h100.json` (its rows), `records/bench/coalescing_rows_h100.json`, `records/bench/coalescing_h100.log`.

1. **Coalescing** (``book/data/ncu/coalescing_h100.json``): the ``coalesced``, ``strided2``
   and ``uncoalesced`` kernels of :mod:`book.kernels.elementwise.coalescing`, with ``vec4`` and
   ``fused_fastmath`` beside them, at 8192 x 14336 float32: time and effective bandwidth from
   :func:`book.bench.measure`, and from Nsight Compute (this script re-runs itself under
   ``ncu --clock-control none``) the kernel duration, DRAM bytes read and written, and the
   global-load sectors per request,
   ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum``.
2. **Bench rows** (``bench_rows.json``, the schema of ``book/data/<gpu>.json``): every new
   variant (the ``*_ieee`` controls and the three coalescing kernels) at every shape of
   :data:`book.bench.suite.SHAPES`, and their fast-math twins in the same run, each checked
   against float64 at full size first. ``--merge FILE`` adds the new variants' rows to
   ``book/data/h100.json`` until the next full ``python -m book.bench`` replaces them.
3. **Host launch spread** (``host_launch_h100.json``, committed as
   ``book/data/launch/host_h100.json``): the host time of one Python launch, repeated,
   with median and 10th/90th percentiles, so that chapter 6 can plot a spread.

Usage on a GPU machine:  python -m benchmarks.coalescing --out-dir DIR
(``COURSE_COMMIT=<sha>`` names the commit where there is no .git.)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LARGE = (8192, 14336)
#: what ncu profiles, in launch order (each launched twice; the second launch is kept)
PROFILED = ["coalesced", "strided2", "uncoalesced", "vec4", "fused_fastmath"]
METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "lts__t_sectors_srcunit_tex_op_read.sum",
]
#: the variants this script adds to the bench suite, and the twin each is compared with
NEW = {"ilp4_ieee": "ilp4", "vec2_ieee": "vec2", "vec4_ieee": "vec4",
       "half4_ieee": "half4", "half8_ieee": "half8",
       "coalesced": "fused_fastmath", "strided2": "coalesced", "uncoalesced": "coalesced"}
TWINS = ["ilp4", "vec2", "vec4", "half4", "half8", "fused_fastmath"]


# ---------------------------------------------------------------------- 1. under ncu
def profile_target():
    """What ncu profiles: each PROFILED variant launched twice on the same buffers.

    The inputs are made on the host and copied, so that no other kernel (torch's random
    numbers, a fill) is launched: ncu's launches are exactly these, in this order."""
    from numba import cuda

    from book.kernels import VARIANTS, reference

    gh, uh = reference.random_inputs(LARGE, "float32", seed=1)
    g, u = cuda.to_device(gh), cuda.to_device(uh)
    o = cuda.device_array(LARGE, "float32")
    for name in PROFILED:
        for _ in range(2):
            VARIANTS[name].fn(g, u, o)
    cuda.synchronize()


def parse_ncu(text):
    """[{"id", "kernel", metric: value, ...}] per profiled launch from ``ncu --csv``."""
    from book.bench import ncu

    return [{"id": launch.id, "kernel": launch.kernel, **launch.metrics, "units": launch.units}
            for launch in ncu.launches(text)]


def run_ncu():
    from book.bench import ncu

    cmd = ncu.command(ncu.require(), ["--clock-control", "none", "--print-units", "base", "--csv",
                                      "--metrics", ",".join(METRICS)],
                      "benchmarks.coalescing", "--profile")
    res = ncu.run(cmd)
    if res.returncode != 0:
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"ncu failed with exit code {res.returncode}")
    launches = parse_ncu(res.stdout)
    if len(launches) != 2 * len(PROFILED):
        raise SystemExit(f"expected {2 * len(PROFILED)} profiled launches, got {len(launches)}: "
                         + ", ".join(x["kernel"][:40] for x in launches))
    return {name: launches[2 * k + 1] for k, name in enumerate(PROFILED)}, ncu.shown(cmd, bare=True)


# ---------------------------------------------------------------------- 1. timing
def coalescing_record(reps):
    import torch

    from book import bench, traffic
    from book.bench.suite import numba_view, torch_sets
    from book.kernels import VARIANTS, reference

    n = math.prod(LARGE)
    minimum = traffic.activation(*LARGE, "float32", "fused").bytes
    sets = torch_sets(LARGE, "float32", bench.rotation_count(minimum), seed=1)
    nsets = [tuple(numba_view(x) for x in s) for s in sets]
    timed = {}
    for name in PROFILED:
        fn = VARIANTS[name].fn
        sets[0][2].fill_(float("nan"))
        fn(*nsets[0])
        torch.cuda.synchronize()
        reference.check_device(sets[0][2], sets[0][0], sets[0][1], "float32")
        t = bench.measure(fn, nsets, bytes_moved=minimum, flops=traffic.FLOPS_PER_ELEMENT * n,
                          reps=reps)
        timed[name] = t
        print(f"  {name:16s} {t}", flush=True)
    del sets, nsets
    torch.cuda.empty_cache()
    return timed, minimum


# ---------------------------------------------------------------------- 2. bench rows
def bench_rows(reps, shapes):
    import torch

    from book import bench, dtypes, traffic
    from book.bench.suite import numba_view, torch_sets
    from book.kernels import VARIANTS, reference

    rows, checks = [], []
    names = list(NEW) + TWINS
    for dtype in ("float32", "float16", "bfloat16"):
        for shape in shapes:
            n = math.prod(shape)
            nb = n * dtypes.ITEMSIZE[dtype]
            sets = torch_sets(shape, dtype, min(bench.rotation_count(3 * nb), 64), seed=2)
            nsets = [tuple(numba_view(x) for x in s) for s in sets]
            for name in names:
                v = VARIANTS[name]
                if dtype not in v.dtypes:
                    continue
                ok, err = True, None
                try:
                    sets[0][2].fill_(float("nan"))
                    v.fn(*nsets[0])
                    torch.cuda.synchronize()
                    reference.check_device(sets[0][2], sets[0][0], sets[0][1], dtype)
                except AssertionError as e:
                    ok, err = False, str(e)
                checks.append({"variant": name, "dtype": dtype, "shape": list(shape), "ok": ok,
                               "error": err})
                t = bench.measure(v.fn, nsets, bytes_moved=3 * nb,
                                  flops=traffic.FLOPS_PER_ELEMENT * n, reps=reps)
                rows.append({"kind": "kernel", "variant": name, "dtype": dtype,
                             "shape": list(shape), **t.row(), "correct": ok,
                             "transfers_per_element": v.transfers_per_element,
                             "bytes_actual": v.transfers_per_element * nb,
                             "description": v.description})
                print(f"  {name:16s} {dtype:9s} {'x'.join(map(str, shape)):12s} "
                      f"{t.median_s * 1e6:10.2f} us {t.bandwidth / 1e12:6.3f} TB/s"
                      + ("" if ok else "  CHECK FAILED"), flush=True)
            del sets, nsets
            torch.cuda.empty_cache()
    return rows, checks


# ---------------------------------------------------------------------- 3. host spread
def host_spread(samples=25, calls=100):
    """Host seconds per Python launch, ``samples`` times over, cases interleaved so that a
    slow spell of the host shows up in every case alike."""
    from book import bench
    from book.bench.suite import numba_view, torch_sets
    from book.kernels import VARIANTS
    from book.kernels.elementwise import fused
    from book.kernels.host import launch

    cases = []
    for dtype, best in (("float32", "vec4"), ("float16", "half8")):
        for shape in ((1, 12288), (1, 18944)):
            s = [tuple(numba_view(x) for x in torch_sets(shape, dtype, 1)[0])]
            flat = [tuple(a.reshape(a.size) for a in s[0])]
            nn = flat[0][0].size
            cases += [
                (f"{best}_python_launch", dtype, shape, VARIANTS[best].fn, s),
                ("fused_kernel_raw_launch", dtype, shape,
                 lambda g, u, o, nn=nn: fused.fused_kernel[launch.cdiv(nn, 256), 256](g, u, o),
                 flat),
            ]
    got = {k: [] for k in range(len(cases))}
    order = []
    for sample in range(samples):
        for k, (_, _, _, fn, args) in enumerate(cases):
            got[k].append(bench.host_overhead(fn, args, calls=calls))
            order.append(k)
    out = []
    for k, (variant, dtype, shape, _, _) in enumerate(cases):
        xs = sorted(got[k])

        def q(p, xs=xs):
            return xs[min(len(xs) - 1, int(p * (len(xs) - 1) + 0.5))]
        out.append({"variant": variant, "dtype": dtype, "shape": list(shape),
                    "median_s": statistics.median(xs), "p10_s": q(0.1), "p90_s": q(0.9),
                    "min_s": xs[0], "max_s": xs[-1], "samples_s": got[k],
                    "calls_per_sample": calls})
        print(f"  host {variant:24s} {dtype:8s} {shape}: median {statistics.median(xs) * 1e6:.1f}"
              f" us (p10 {q(0.1) * 1e6:.1f}, p90 {q(0.9) * 1e6:.1f}, max {xs[-1] * 1e6:.1f})",
              flush=True)
    return out


# ---------------------------------------------------------------------- merge (local)
def merge(rows_file, data_file):
    """Add the NEW variants' rows of ``rows_file`` to ``data_file`` (replacing same keys)."""
    doc = json.loads(Path(rows_file).read_text())
    data = json.loads(Path(data_file).read_text())
    new = [r for r in doc["rows"] if r["variant"] in NEW]
    keys = {(r["variant"], r["dtype"], tuple(r["shape"])) for r in new}
    data["rows"] = [r for r in data["rows"]
                    if (r["variant"], r["dtype"], tuple(r["shape"])) not in keys] + [
        dict(r, provenance_note=f"merged from {doc['provenance'].get('command')} "
                                f"({doc['provenance'].get('date')})") for r in new]
    data.setdefault("checks", []).extend(c for c in doc["checks"] if c["variant"] in NEW)
    data.setdefault("notes", []).append(
        f"{len(new)} rows of {sorted({r['variant'] for r in new})} merged from "
        f"{doc['provenance'].get('command')} on {doc['provenance'].get('date')} "
        f"(commit {doc['provenance'].get('commit')})")
    Path(data_file).write_text(json.dumps(data, indent=1, default=float) + "\n")
    print(f"merged {len(new)} rows into {data_file}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", action="store_true", help="(internal) what ncu profiles")
    ap.add_argument("--out-dir", default=".", help="where the three JSON records go")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--merge", nargs=2, metavar=("ROWS", "DATA"),
                    help="add the new variants' rows of ROWS (bench_rows.json) to DATA")
    args = ap.parse_args()
    if args.merge:
        merge(*args.merge)
        return 0
    os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    import book

    if args.profile:
        profile_target()
        return 0
    if book.gpu.SIMULATED:
        print("not measured: no CUDA GPU here (Numba's simulator cannot time kernels)")
        return 2
    from book.bench import suite
    from book.provenance import provenance

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m benchmarks.coalescing " + " ".join(sys.argv[1:])
    t0 = time.time()

    print("[coalescing: timing]", flush=True)
    timed, minimum = coalescing_record(args.reps)
    print("[coalescing: ncu]", flush=True)
    prof, ncu_command = run_ncu()
    kernels = {}
    for name in PROFILED:
        p, t = prof[name], timed[name]
        ld_req = p["l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"]
        st_req = p["l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"]
        kernels[name] = {
            "seconds": t.median_s, "p10_s": t.p10_s, "p90_s": t.p90_s,
            "effective_bandwidth": t.bandwidth, "method": t.method,
            "ncu_gpu_time_s": p["gpu__time_duration.sum"],
            "dram_bytes_read": p["dram__bytes_read.sum"],
            "dram_bytes_write": p["dram__bytes_write.sum"],
            "ld_sectors": p["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"],
            "ld_requests": ld_req,
            "ld_sectors_per_request": p["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] / ld_req,
            "st_sectors_per_request": (p["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"] / st_req
                                       if st_req else None),
            "l2_sectors_read": p["lts__t_sectors_srcunit_tex_op_read.sum"],
            "ncu_kernel_name": p["kernel"], "ncu_units": p["units"],
        }
        k = kernels[name]
        print(f"  {name:16s} {k['seconds'] * 1e6:9.1f} us  DRAM read "
              f"{k['dram_bytes_read'] / 1e9:6.3f} GB  {k['ld_sectors_per_request']:5.2f} "
              "sectors/request", flush=True)
    record = {
        "what": "coalescing on the GPU: the same fused kernel with warps reading elements 1, 2 "
                "and 32 apart, beside vec4 and fused_fastmath (book/kernels/elementwise/coalescing.py)",
        "dtype": "float32", "shape": list(LARGE),
        "minimum_bytes": minimum, "minimum_bytes_read": 2 * 4 * math.prod(LARGE),
        "metrics": METRICS, "ncu_command": ncu_command, "kernels": kernels,
        "provenance": provenance(command),
    }
    (out / "coalescing_h100.json").write_text(json.dumps(record, indent=1) + "\n")

    print("[bench rows: IEEE controls and coalescing variants]", flush=True)
    rows, checks = bench_rows(args.reps, suite.SHAPES)
    doc = {"provenance": dict(provenance(command), elapsed_s=round(time.time() - t0, 1)),
           "rows": rows, "checks": checks}
    (out / "bench_rows.json").write_text(json.dumps(doc, indent=1, default=float) + "\n")

    print("[host launch spread]", flush=True)
    spread = host_spread()
    (out / "host_launch_h100.json").write_text(json.dumps(
        {"what": "host seconds per Python launch at decode sizes, repeated (cases interleaved)",
         "cases": spread, "provenance": provenance(command)}, indent=1) + "\n")
    bad = [c for c in checks if not c["ok"]]
    print(f"correctness: {len(checks) - len(bad)}/{len(checks)} checks passed; "
          f"{time.time() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
