"""Launch the dual GEMM a few times at T=2048, d=4096, h=8192 for Nsight Compute to read.

    ncu --clock-control none --kernel-name regex:tiled_gemm --launch-skip 2 --launch-count 1 \
        --metrics <list> python benchmarks/gemm_ncu_probe.py [--tile peeled]

Only launches; ncu does the measuring (issue-slot use, FMA-pipe use, warp stall reasons).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import book  # noqa: F401
import torch

from book.kernels import dual_gemm

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gemm_bench import VARIANTS

name = sys.argv[sys.argv.index("--tile") + 1] if "--tile" in sys.argv else "peeled"
T, d, h = 2048, 4096, 8192
x = torch.randn(T, d, device="cuda")
wg = torch.randn(d, h, device="cuda") / d ** 0.5
wu = torch.randn(d, h, device="cuda") / d ** 0.5
out = torch.empty(T, h, device="cuda")
for _ in range(3):
    dual_gemm.swiglu_dual_gemm(x, wg, wu, out, tile=VARIANTS[name])
torch.cuda.synchronize()
print("launched", name)
