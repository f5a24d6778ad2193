#!/bin/bash
# The device calls of 2026-11-29's seventh session on an H200, each one `run` (carry .whl),
# alone on the machine: the GPU lane owed since the sixth session's moves (tile protocol,
# cluster_launch, the decode GEMVs by job) and the grader's GPU tests; the norm-quant timing
# that stuck twice, under faulthandler. What each settled is in the session's note and
# records/tests/README (if any) or records/fp8/README.md.
#   COURSE_COMMIT=<sha> bash records/tests/lane_h200_session.sh 1|2
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
case "$1" in
1)  # the library's and the chapters' GPU tests; the norm-quant timing's stuck point
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv,noheader
    timeout 400 python3 -m tools.gpu_tests --out $OUT/gpu_library_$GPU_TAG.json \
      --under tests/library 2>&1 | grep -v Warning | grep -E "passed|failed|FAILED|ERROR|wrote|error" | tail -40
    timeout 60 python3 -m tools.gpu_tests --out $OUT/gpu_chapters_$GPU_TAG.json \
      --under tests/chapters 2>&1 | grep -v Warning | tail -5
    PYTHONFAULTHANDLER=1 timeout -s ABRT 75 python3 -u benchmarks/norm_quant_bench.py \
      --out $OUT/norm_quant_$GPU_TAG.json --T 1 16 --rounds 2 2>&1 | grep -v Warning | tail -45
    ;;
2)  # the grader's GPU tests (bounds, split-K faults, lab paths, isolation, feedback's sanitizer)
    timeout 560 python3 -m tools.gpu_tests --out $OUT/gpu_grader_$GPU_TAG.json \
      --under tests/grader 2>&1 | grep -v Warning | grep -E "passed|failed|FAILED|ERROR|wrote|error" | tail -40
    ;;
esac
