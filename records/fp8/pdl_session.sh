#!/bin/bash
# The next device call for the FP8 GEMV's 85% line (issue 42): the dependent launch
# (Fp8GemvTile.pdl, added 2026-11-29 without a GPU: compiled by ptxas for sm_90a, never run)
# checked on the GPU, then timed beside the default tile, T = 1, 4, 16, each T's tiles in
# turn; the norm-quant timing (its hang fixed at c4499c4); the plain calls' host time (the
# planned route, ca331c0); then the lane's two grader files the seventh session's device time
# did not reach.
# 3: what the eight-bit kernel pays beyond chapter 9's bf16 GEMV on the same 117 MB (issue 42):
# the GEMV's GPU tests (the candidate fixes bit for bit against the default; the probes without
# wgmma run to their end), then one sweep at T = 1 and 16: the default, the dependent launch,
# the probes (Fp8GemvTile.probe: the ring alone, no wgmma, no scale read, no seam, no token
# copied; their outputs are not the layer's and are not compared) and the fixes (preload:
# the epilogue's scales read into registers ahead; unguarded: its arithmetic outside the
# bounds test), with the dependent launch too. records/fp8/README.md reads the table.
# 4: the seams' settle in short (Fp8GemvTile.short_settle: the finisher's chain of round trips
# cut to the counter's atomic and one round of loads): the fixes' GPU tests (short_settle bit
# for bit against the default, alone and with preload + pdl), then T = 1, 4, 16: the default,
# preload + pdl, the same with short_settle, and the same without seams (probe noseam).
#   COURSE_COMMIT=<sha> bash records/fp8/pdl_session.sh 1|2|3|4
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
3)  timeout 100 python3 -m pytest tests/library/test_fp8_gemv.py -m gpu -q -rf \
      -p no:cacheprovider --junitxml=$OUT/gpu_fp8_gemv_probe_$GPU_TAG.xml 2>&1 | tail -8
    timeout 160 python3 -u -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_probe_$GPU_TAG.json \
      --sweep --T 1 16 --rounds 5 --changes '[{}, {"pdl": true}, {"probe": "stream"},
      {"probe": "stream", "pdl": true}, {"probe": "nowgmma"}, {"probe": "noscale"},
      {"probe": "noseam"}, {"probe": "nox"}, {"preload": true},
      {"preload": true, "unguarded": true}, {"preload": true, "unguarded": true, "pdl": true}]' \
      2>&1 | grep -v Warning | tail -26
    ;;
4)  timeout 60 python3 -m pytest tests/library/test_fp8_gemv.py -m gpu -k candidate_fixes -q -rf \
      -p no:cacheprovider --junitxml=$OUT/gpu_fp8_gemv_settle_$GPU_TAG.xml 2>&1 | tail -8
    timeout 200 python3 -u -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_settle_$GPU_TAG.json \
      --sweep --T 1 4 16 --rounds 4 --changes '[{}, {"preload": true, "pdl": true},
      {"short_settle": true, "preload": true, "pdl": true},
      {"probe": "noseam", "preload": true, "pdl": true}]' 2>&1 | grep -v Warning | tail -16
    ;;
esac
