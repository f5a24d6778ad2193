#!/bin/bash
# Issue 42's third H200 session (one device call, alone on the machine): the FP8 decode GEMV's
# bytes line (time against bytes: its streaming rate and what a launch costs whatever it reads),
# the bf16 dual GEMM's tiles at mid-size T beside cuBLAS + compile with the wave model, the FP8
# GEMV's GPU tests in their present form, then its tile sweep. Each step bounded, in turn.
#   COURSE_COMMIT=<sha> bash benchmarks/fp8_midt_session.sh      (carry .whl)
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
timeout 150 python3 benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_line_$GPU_TAG.json \
  --bytes-line --T 1 16 --rounds 4 2>&1 | grep -v Warning | tail -20
timeout 170 python3 benchmarks/hopper_bench.py --out $OUT/hopper_tiles_$GPU_TAG.json \
  --tiles 256,384,512,768,1024 --rounds 4 2>&1 | grep -v Warning | tail -45
timeout 90 python3 -m pytest tests/library/test_fp8_gemv.py -m gpu -q -x -rf -p no:cacheprovider \
  --junitxml=$OUT/gpu_fp8_gemv_$GPU_TAG.xml 2>&1 | tail -8
timeout 160 python3 benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_sweep_$GPU_TAG.json \
  --sweep --T 1 16 --rounds 3 2>&1 | grep -v Warning | tail -40
