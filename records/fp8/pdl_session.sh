#!/bin/bash
# The next device call for the FP8 GEMV's 85% line (issue 42): the dependent launch
# (Fp8GemvTile.pdl, added 2026-11-29 without a GPU: compiled by ptxas for sm_90a, never run)
# checked on the GPU, then timed beside the default tile, T = 1, 4, 16, each T's tiles in
# turn; the norm-quant timing (its hang fixed at c4499c4); the plain calls' host time (the
# planned route, ca331c0); then the lane's two grader files the seventh session's device time
# did not reach.
#   COURSE_COMMIT=<sha> bash records/fp8/pdl_session.sh 1|2
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
case "$1" in
1)  timeout 150 python3 -m pytest tests/library/test_fp8_gemv.py tests/library/test_bench.py -m gpu -q -rf \
      -p no:cacheprovider --junitxml=$OUT/gpu_fp8_gemv_pdl_$GPU_TAG.xml 2>&1 | tail -8
    timeout 200 python3 -u -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_pdl_$GPU_TAG.json \
      --sweep --T 1 4 16 --rounds 5 --changes '[{}, {"pdl": true}]' 2>&1 | grep -v Warning | tail -30
    timeout 150 python3 -u -m benchmarks.norm_quant_bench --out $OUT/norm_quant_$GPU_TAG.json \
      --rounds 4 2>&1 | grep -v Warning | tail -25
    timeout 90 python3 -u -m benchmarks.decode_bench --out $OUT/decode_host_$GPU_TAG.json \
      --only 'host_' 2>&1 | grep -v Warning | tail -15
    ;;
2)  for f in test_bounds_grading test_lab_paths; do
      timeout 290 python3 -m tools.gpu_tests --out $OUT/gpu_${f#test_}_$GPU_TAG.json \
        --under tests/grader/$f.py 2>&1 | grep -v Warning | tail -12
    done
    ;;
esac
