#!/bin/bash
# Issue 42's fifth H200 session (one device call): the ColumnSplit's GPU tests and the dual
# GEMM's, then the wave model's choice at every mid-size T against the default tile and
# cuBLAS + compile (and the dispatcher as a model calls it); lab 6's master (issue 43).
#   COURSE_COMMIT=<sha> bash benchmarks/fp8_midt_session3.sh
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
timeout 150 python3 -m pytest tests/library/test_hopper_gpu.py -m gpu -q -x -rf -p no:cacheprovider \
  -k "column_split or dual_gemm_against or repeated_call" \
  --junitxml=$OUT/gpu_hopper_split_$GPU_TAG.xml 2>&1 | tail -6
timeout 260 python3 benchmarks/hopper_bench.py --out $OUT/hopper_tiles3_$GPU_TAG.json \
  --tiles 256,384,512,640,768,1024,2048 --rounds 6 --tile "HopperTile()" 2>&1 \
  | grep -v Warning | tail -40
timeout 150 python3 benchmarks/lab6_master_probe.py --out $OUT/lab6_master_$GPU_TAG.json \
  2>&1 | grep -v Warning | tail -20
