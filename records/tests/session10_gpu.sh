#!/bin/bash
# The tenth session's (2026-11-29) fourth device call, alone on the machine:
#   chapter 9 recorded again on this GPU (reader pass 7's L6 / L7 / L9: the refusal says why
#   for the GPU at hand, sm_120 among those asked about; the loop alone called a reference,
#   not a ceiling, in the printed line; the ratio column right after T);
#   which tensor-core instructions cuBLAS's bf16 GEMM issues, counted by ncu beside the
#   course's wgmma and mma.sync dual GEMMs as controls (reader pass 5's L6);
#   the grader's store-past-the-end GPU test for lab 6, which the last calls' budgets left.
#   COURSE_COMMIT=<sha> bash records/tests/session10_gpu.sh
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
timeout 120 python3 -m tools.record --out $OUT chapters/09_hopper.ipynb 2>&1 | tail -3
timeout 220 python3 -u -m benchmarks.tensorcore_ncu --instructions $OUT/cublas_instructions_$GPU_TAG.json \
  2>&1 | grep -v Warning | tail -16
timeout 130 python3 -m tools.gpu_tests --budget 120 --under tests/grader/test_bounds_grading.py \
  --out $OUT/gpu_grader_bounds_store_lab6_$GPU_TAG.json -k "store_past_the_end and lab6" 2>&1 \
  | grep -v Warning | tail -4
ls $OUT
