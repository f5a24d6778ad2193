"""Launch each tensor-core kernel once at T x 4096 x 14336, for ncu to profile.

Record: `records/tensorcore/tensorcore_ncu_h100.txt` (ncu's text report of its launches).

    ncu --clock-control none --kernel-name regex:mma_gemm --section SpeedOfLight \
        --section WarpStateStats --metrics <see tensorcore_ncu.METRICS> \
        python3 benchmarks/tensorcore_ncu.py [--T 2048] [--config NAME]

Order of launches: ceiling, dual GEMM (SwiGLU), identity epilogue, gate|up store.
``--config`` names a tile of benchmarks/tensorcore_tune.py (default: the library's TILE).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

METRICS = ",".join([
    "gpu__time_duration.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_bytes.sum.per_second",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "smsp__inst_executed.sum",
])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--T", type=int, default=2048)
    ap.add_argument("--config", default=None)
    args = ap.parse_args()
    import torch

    from book.kernels import mma_gemm as mg

    tile = mg.TILE
    if args.config:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from tensorcore_tune import CONFIGS

        tile = mg.MmaTile(**CONFIGS[args.config]).validate()
    T, d, h = args.T, 4096, 14336
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(T, d, device="cuda", generator=gen).bfloat16()
    wg = (torch.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wu = (torch.randn(d, h, device="cuda", generator=gen) / math.sqrt(d)).bfloat16()
    wcat = torch.cat([wg, wu], 1).contiguous()
    out = torch.empty(T, h, device="cuda", dtype=torch.bfloat16)
    out2 = torch.empty(T, h, device="cuda", dtype=torch.bfloat16)
    gu = torch.empty(T, 2 * h, device="cuda", dtype=torch.bfloat16)
    mg.ceiling_mma(x, wcat, gu, tile=tile)
    mg.swiglu_mma(x, wg, wu, out, tile=tile)
    mg.swiglu_mma_identity(x, wg, wu, out, tile=tile)
    mg.gate_up_mma(x, wg, wu, out, out2, tile=tile)
    torch.cuda.synchronize()
    print("launched ceiling, swiglu, identity, store2 with", tile)


if __name__ == "__main__":
    main()
