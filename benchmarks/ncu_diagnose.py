"""Diagnosis profiles for chapter 10: what Nsight Compute's counters say about three kernels.

Record: `book/data/ncu/diagnosis_h100.json`.

One command on a GPU machine with ``ncu`` records ``book/data/ncu/diagnosis_<gpu>.json``:

    python -m benchmarks.ncu_diagnose --out book/data/ncu/diagnosis_h100.json

Each case runs in its own process under ``ncu --clock-control none`` (clocks as in normal
use, so the profile is comparable with ``book.bench``), which profiles the launches of its
last call (earlier calls compile and warm the caches). Cases, float32, 8192 x 14336:

- ``fused``: the one-element-per-thread fused kernel (``book.kernels.elementwise.fused.swiglu_fused``):
  its warp-state (stall) sampling, occupancy, DRAM bytes. The diagnosis of chapter 10.
- ``vec4``: the control, the same SwiGLU with 8 elements and 16-byte accesses per thread
  (``book.kernels.elementwise.vectorized.swiglu_vec4``): what the stall profile looks like after the fix.
- ``naive``: the two-kernel pair (silu -> tmp, tmp * up): DRAM bytes of both launches.
- ``coalesced``, ``strided2``, ``uncoalesced``: the coalescing variants of
  ``book.kernels.elementwise.coalescing`` (one fused fast-math kernel, neighbouring threads 1, 2 or 32
  elements apart): DRAM bytes and sectors per request.

Stall reasons are ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio``:
per issued instruction, how many warps were waiting for that reason. Their sum is the
warp cycles per issued instruction (``smsp__average_warp_latency_per_inst_issued.ratio``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHAPE = (8192, 14336)
CALLS = 3  # calls per case; ncu profiles the kernels of the last one
STALL_REGEX = r"regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$"
METRICS = [
    "gpu__time_duration.sum",
    "dram__bytes_read.sum", "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",  # achieved occupancy
    "smsp__issue_active.avg.pct_of_peak_sustained_active",  # cycles with an instruction issued
    "smsp__average_warp_latency_per_inst_issued.ratio",  # warp cycles per issued instruction
    "smsp__inst_executed.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
]
DESCRIPTIONS = {
    "fused": "fused, one element per thread, IEEE float32 math (swiglu_fused)",
    "vec4": "control: 8 elements per thread, 16-byte loads/stores (swiglu_vec4)",
    "naive": "naive pair: silu_kernel (gate -> tmp), then mul_kernel (tmp * up -> out)",
}


def coalescing_cases():
    """{case: wrapper} of book.kernels.elementwise.coalescing (chapter 6), if that module exists."""
    try:
        from book.kernels.elementwise import coalescing
    except ImportError:
        return {}
    return {name: getattr(coalescing, f"swiglu_{name}") for name in coalescing.STRIDES}


def wrapper(case):
    from book.kernels.elementwise import fused, naive, vectorized

    known = {"fused": fused.swiglu_fused, "vec4": vectorized.swiglu_vec4,
             "naive": naive.swiglu_naive}
    known.update(coalescing_cases())
    if case not in known:
        raise SystemExit(f"unknown case {case!r}; cases: {sorted(known)}")
    return known[case]


def profile_target(case):
    """What ncu profiles: CALLS calls of one case on fresh random inputs."""
    import numpy as np
    from numba import cuda

    from book.kernels import reference as R

    g, u = R.random_inputs(SHAPE, "float32", seed=0)
    out = np.full(SHAPE, np.nan, np.float32)
    gd, ud, od = (cuda.to_device(a.ravel()) for a in (g, u, out))
    fn = wrapper(case)
    for _ in range(CALLS):
        fn(gd, ud, od)
    cuda.synchronize()
    R.check(od.copy_to_host().reshape(SHAPE), g, u, "float32")  # a wrong kernel is no diagnosis


def parse_ncu(text):
    """[{kernel, metrics: {name: value}}] per profiled launch, bytes in bytes, times in s."""
    from book.bench import ncu

    return [{"kernel": launch.kernel, "metrics": launch.metrics}
            for launch in ncu.launches(text)]


def kernels_per_call(case):
    return 2 if case == "naive" else 1


def run_case(case, binary):
    from book.bench import ncu

    n = kernels_per_call(case)
    cmd = ncu.command(binary, ["--clock-control", "none", "--csv",
                               "--metrics", ",".join(METRICS + [STALL_REGEX]),
                               "--launch-skip", str(n * (CALLS - 1)), "--launch-count", str(n)],
                      "benchmarks.ncu_diagnose", "--profile", case)
    res = ncu.run(cmd, timeout=500)
    launches = parse_ncu(res.stdout)
    if res.returncode != 0 or not launches:
        print(res.stdout[-3000:], res.stderr[-3000:])
        raise SystemExit(f"ncu failed on {case} (exit code {res.returncode})")
    return launches, ncu.shown(cmd)


def summarise(case, launches, command):
    total = lambda m: sum(l["metrics"].get(m, 0.0) for l in launches)  # noqa: E731
    n = math.prod(SHAPE)
    dram = total("dram__bytes_read.sum") + total("dram__bytes_write.sum")
    ld_req = total("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum")
    st_req = total("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum")
    return {
        "description": DESCRIPTIONS.get(case, f"book.kernels.elementwise.coalescing.swiglu_{case}"),
        "command": command,
        "launches": launches,
        "gpu_time_s": total("gpu__time_duration.sum"),
        "dram_bytes": dram,
        "minimum_bytes": 3 * 4 * n,
        "dram_over_minimum": dram / (3 * 4 * n),
        "sectors_per_load_request": (total("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum") / ld_req
                                     if ld_req else None),
        "sectors_per_store_request": (total("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum")
                                      / st_req if st_req else None),
    }


def stalls(launch):
    """{reason: warps stalled per issued instruction} from one launch's metrics."""
    pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    return {k[len(pre):-len(post)]: v for k, v in launch["metrics"].items()
            if k.startswith(pre) and k.endswith(post)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", metavar="CASE", help="(internal) the process ncu profiles")
    ap.add_argument("--out", default=str(ROOT / "book" / "data" / "ncu" / "diagnosis_h100.json"))
    ap.add_argument("--cases", default=None, help="comma-separated subset of the cases")
    args = ap.parse_args()
    import book

    if args.profile:
        profile_target(args.profile)
        return 0
    if book.gpu.SIMULATED:
        print("not measured: no GPU here (ncu profiles real kernels)")
        return 2
    from book.bench import ncu

    binary = ncu.require()
    cases = ["fused", "vec4", "naive", *coalescing_cases()]
    if args.cases:
        cases = args.cases.split(",")
    from book.provenance import provenance

    doc = {"dtype": "float32", "shape": list(SHAPE),
           "note": ("stall ratios: warps stalled for each reason per issued instruction "
                    "(ncu WarpStateStats); DRAM writes can fall short of the output size "
                    "when the last lines are still dirty in L2 at the kernel's end"),
           "cases": {}}
    for case in cases:
        launches, command = run_case(case, binary)
        doc["cases"][case] = summarise(case, launches, command)
        for l in launches:
            l["stalls"] = stalls(l)
        c = doc["cases"][case]
        top = sorted(launches[0]["stalls"].items(), key=lambda kv: -kv[1])[:3]
        print(f"{case:12s} {c['gpu_time_s'] * 1e6:8.1f} us  DRAM {c['dram_bytes'] / 1e9:6.3f} GB "
              f"({c['dram_over_minimum']:.2f}x min)  ld sectors/req "
              f"{c['sectors_per_load_request'] or 0:5.2f}  top stalls "
              + ", ".join(f"{k} {v:.1f}" for k, v in top), flush=True)
    # the command as a reader re-runs it (the output path is where the record is committed)
    doc["provenance"] = provenance("python -m benchmarks.ncu_diagnose"
                                   + (f" --cases {args.cases}" if args.cases else ""))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
