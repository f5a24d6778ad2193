#!/bin/bash
# Record: `records/tensorcore/` (the sweep, the rows, ncu's reports).
# The tensor-core measurements on a GPU machine, in one go (the device tool's copy of the tree,
# numpy < 2.5 for numba-cuda 0.30.4 unpacked from a carried wheel when there is one):
#   bash records/tensorcore/tensorcore_h100.sh $OUT
# 1. tile sweep at T=2048 (tensorcore_tune.py), 2. the full rows with the fastest tile
# (tensorcore_bench.py), 3. ncu on the ceiling and the dual GEMM with that tile.
set -u
OUT=${1:?usage: tensorcore_h100.sh OUTDIR}
if ls .whl/numpy-2.4*.whl >/dev/null 2>&1; then
  python3 -m zipfile -e .whl/numpy-2.4*.whl /tmp/np >/dev/null && export PYTHONPATH=/tmp/np:$PWD
else
  export PYTHONPATH=$PWD
fi
CONFIGS=${CONFIGS:-"w2x2_m4n8_k32_s3 w2x2_m4n8_k32_s4 w2x2_m4n8_k64_s3 w2x4_m4n8_k64_s2 w2x4_m4n8_k32_s3 w4x2_m4n8_k64_s2"}
timeout 200 python3 benchmarks/tensorcore_tune.py --out "$OUT/tensorcore_tune_h100.json" --configs $CONFIGS 2>&1 | tail -8
timeout 240 python3 benchmarks/tensorcore_bench.py --out "$OUT/tensorcore_h100.json" --reps 10 \
  --tile "best:$OUT/tensorcore_tune_h100.json" > "$OUT/tensorcore_h100.log" 2>&1
tail -32 "$OUT/tensorcore_h100.log"
BEST=$(python3 -c "import json,sys; r=[x for x in json.load(open('$OUT/tensorcore_tune_h100.json'))['rows'] if 'dual_s' in x]; print(min(r,key=lambda x:x['dual_s'])['config'])")
M=$(python3 -c "import sys; sys.path.insert(0,'benchmarks'); import tensorcore_ncu as m; print(m.METRICS)")
timeout 120 ncu --clock-control none --kernel-name regex:mma_gemm --launch-count 2 --section WarpStateStats \
  --metrics "$M" python3 benchmarks/tensorcore_ncu.py --T 2048 --config "$BEST" > "$OUT/tensorcore_ncu_h100.txt" 2>&1
grep -E "gpu__time|hmma|lts__throughput|inst_executed.sum|Warp Cycles Per Issued" "$OUT/tensorcore_ncu_h100.txt"
