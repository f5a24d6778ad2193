"""What Nsight Compute's counters say about the decode GEMVs (issue 31's HBM line).

Record: `records/bench/decode_ncu_h100.json`.

    python3 benchmarks/decode_ncu.py --out $OUT/decode_ncu_h100.json [--cases cc1,tc4,...]

Each case (a path, a tile, T; d = 4096, h = 14336, bfloat16, no biases) runs in its own
process under ``ncu --clock-control none``, which profiles the last of ``CALLS`` launches
(the only one between ``cudaProfilerStart`` and ``Stop``):
DRAM bytes and throughput, achieved occupancy and what limits it, bytes in flight (the
loads and cp.async copies a warp has issued and not yet used), and the stall reasons per
issued instruction (as ``benchmarks/ncu_diagnose.py`` reads them). The question: why the
T = 1 CUDA-core GEMV reads the weights at 3.0 TB/s and the tensor-core GEMVs at 2.7-2.8.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

CALLS = 4

#: name -> (path, tile as a constructor expression or None for the default, T)
CASES = {
    "cc1": ("cuda_cores", None, 1),
    "cc4": ("cuda_cores", None, 4),
    "tc4": ("tensor_cores", None, 4),
    "tc16": ("tensor_cores", None, 16),
    "st4": ("staged", "StagedTile(nt=1, warps=8, chunk=512, stages=2)", 4),
    "st4r4": ("staged", "StagedTile(nt=1, warps=8, chunk=512, stages=4)", 4),
    "st1": ("staged", "StagedTile(nt=1, warps=8, chunk=512, stages=2)", 1),
    "st16": ("staged", "StagedTile(nt=2, warps=8, chunk=512, stages=2)", 16),
    "st16r4": ("staged", "StagedTile(nt=2, warps=4, chunk=256, stages=2)", 16),
    "hg4": ("hopper_gemv", None, 4),
    "hg16": ("hopper_gemv", None, 16),
    "hg16x": ("hopper_gemv", "WgmmaGemvTile(n=16, stages=6)", 16),
}

METRICS = [
    "gpu__time_duration.sum", "dram__bytes_read.sum", "dram__bytes_read.sum.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
    "launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks", "launch__grid_size",
    "launch__block_size", "lts__t_sector_hit_rate.pct", "lts__t_sectors_srcunit_tex_op_read.sum",
    "smsp__inst_executed.sum", "l1tex__t_sector_hit_rate.pct", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    # how evenly the SMs were kept busy, and all of L2's traffic (TMA's included)
    "sm__cycles_active.min", "sm__cycles_active.max", "sm__cycles_active.avg",
    "lts__t_bytes.sum", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
]
STALL_REGEX = "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"


def profile_target(name):
    import torch

    from book.bench.decode import D, H
    from book.kernels import decode_mlp as dm
    from book.kernels.staged_gemv import StagedTile  # noqa: F401 (the cases' tiles)
    from book.kernels.wgmma_gemv import WgmmaGemvTile  # noqa: F401

    path, tile, T = CASES[name]
    tile = eval(tile) if tile else None
    gen = torch.Generator(device="cuda").manual_seed(1)
    wg = (torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5).bfloat16()
    wu = (torch.randn(H, D, device="cuda", generator=gen) / D ** 0.5).bfloat16()
    x = torch.randn(T, D, device="cuda", generator=gen).bfloat16()
    out = torch.empty(T, H, device="cuda", dtype=torch.bfloat16)
    launch = dm.prepare(path, x, wg, wu, None, None, out, tile=tile)
    for _ in range(CALLS - 1):  # compiled and warm
        launch.launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()  # ncu --profile-from-start off: only this launch
    launch.launch()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", help="(internal) the process ncu profiles")
    ap.add_argument("--out")
    ap.add_argument("--cases", default=",".join(CASES))
    args = ap.parse_args(argv)
    import book

    if args.profile:
        profile_target(args.profile)
        return 0
    if book.gpu.SIMULATED:
        print("not measured: no GPU here (ncu profiles real kernels)")
        return 2
    from ncu_diagnose import parse_ncu

    from book.data import write
    from book.provenance import provenance

    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    doc = {"provenance": provenance("python3 benchmarks/decode_ncu.py " + " ".join(argv or sys.argv[1:])),
           "cases": {}}
    for name in args.cases.split(","):
        cmd = [ncu, "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS + [STALL_REGEX]),
               "--profile-from-start", "off",
               sys.executable, str(Path(__file__).resolve()), "--profile", name]
        res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ), timeout=300)
        launches = parse_ncu(res.stdout)
        if res.returncode or not launches:
            print(f"{name}: ncu failed ({res.returncode})", res.stdout[-1500:], res.stderr[-1500:])
            continue
        m = launches[-1]["metrics"]
        doc["cases"][name] = {"case": CASES[name], "kernel": launches[-1]["kernel"], "metrics": m}
        st = {k.split("stalled_")[1].split("_per_issue")[0]: v for k, v in m.items()
              if "stalled_" in k and v >= 0.5}
        print(f"{name:6s} {m.get('gpu__time_duration.sum', 0) * 1e6:7.1f} us "
              f"dram {m.get('dram__bytes_read.sum.per_second', 0) / 1e12:5.2f} TB/s "
              f"({m.get('dram__bytes_read.sum', 0) / 1e6:6.1f} MB) "
              f"warps {m.get('sm__warps_active.avg.pct_of_peak_sustained_active', 0):5.1f}% "
              f"regs {m.get('launch__registers_per_thread', 0):.0f} "
              f"lim r/s/w/b {m.get('launch__occupancy_limit_registers', 0):.0f}/"
              f"{m.get('launch__occupancy_limit_shared_mem', 0):.0f}/"
              f"{m.get('launch__occupancy_limit_warps', 0):.0f}/"
              f"{m.get('launch__occupancy_limit_blocks', 0):.0f} "
              f"L2 hit {m.get('lts__t_sector_hit_rate.pct', 0):4.1f}% "
              f"L1->L2 {m.get('lts__t_sectors_srcunit_tex_op_read.sum', 0) * 32 / 1e6:6.1f} MB "
              f"L1 hit {m.get('l1tex__t_sector_hit_rate.pct', 0):4.1f}% "
              f"L2 {m.get('lts__t_bytes.sum', 0) / 1e6:6.1f} MB "
              f"({m.get('lts__throughput.avg.pct_of_peak_sustained_elapsed', 0):4.1f}%) "
              f"SM active min/avg/max {m.get('sm__cycles_active.min', 0) / 1e3:.0f}/"
              f"{m.get('sm__cycles_active.avg', 0) / 1e3:.0f}/"
              f"{m.get('sm__cycles_active.max', 0) / 1e3:.0f} kcycles "
              f"stalls {', '.join(f'{k} {v:.1f}' for k, v in sorted(st.items(), key=lambda kv: -kv[1]))}",
              flush=True)
    if args.out:
        write(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
