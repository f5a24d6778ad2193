#!/bin/bash
# The eighth session's device calls (2026-11-29; one H200, no H100 lent), after
# records/fp8/pdl_session.sh 1 (the dependent launch, the norm-quant timing, host rows):
#   1  the bf16 decode sweep at T = 1..8192 on the code as it is (issue 42's "no T where cuBLAS
#      wins"; the last full sweep on an H200 was 581129d, before the tiles and the rotation of
#      weight sets); chapters 9 and 9b recorded again (issue 43: what the library prints now);
#      then the grader files the last two sessions' calls could not finish, under a budget that
#      keeps what ran (tools.gpu_tests --budget).
#   2  the FP8 GEMV's probes and candidate fixes (records/fp8/pdl_session.sh 3, its GPU tests
#      cut to the new ones for the time), chapter 9 recorded again (HOPPER_GEMV_MIN_T is 2: its
#      printout of the dispatcher's ranges), and the sweep at T = 2 and 32 (the two T below 1.0x
#      in call 1's sweep).
#   3  the norm-quant kernel rewritten for bandwidth (its GPU tests, then its timing beside the
#      replaced kernel and torch.compile), and what the seams still cost the FP8 GEMV once its
#      scales are preloaded and it is launched as a dependent (the probe noseam with both).
#   COURSE_COMMIT=<sha> bash records/tests/session8_h200.sh 1|2     (carry .whl, .whl-nb)
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
case "$1" in
1)  timeout 120 python3 -u -m benchmarks.decode_bench --out $OUT/decode_sweep_$GPU_TAG.json \
      --only 'sweep_|host_' --reps 10 2>&1 | grep -v Warning | grep -E "sweep_(ours|cublas_compiled)|met|wrote" | tail -40
    mkdir -p $OUT/chapters
    timeout 330 python3 -m tools.record --out $OUT/chapters --timeout 300 --budget 310 \
      chapters/09_hopper.ipynb chapters/09b_eight_bits.ipynb 2>&1 | tail -6
    left=$((575 - SECONDS))
    echo "grader files: ${left} s"
    timeout $((left + 15)) python3 -m tools.gpu_tests --budget $left \
      --out $OUT/gpu_grader_paths_bounds_$GPU_TAG.json --under tests/grader/test_lab_paths.py \
      --under tests/grader/test_bounds_grading.py 2>&1 | grep -v Warning | tail -6
    ;;
2)  timeout 90 python3 -m pytest tests/library/test_fp8_gemv.py -m gpu -q -rf -p no:cacheprovider \
      -k "candidate_fixes or probes_without" --junitxml=$OUT/gpu_fp8_gemv_probe_$GPU_TAG.xml 2>&1 | tail -4
    timeout 170 python3 -u -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_probe_$GPU_TAG.json \
      --sweep --T 1 16 --rounds 5 --changes '[{}, {"pdl": true}, {"probe": "stream"},
      {"probe": "stream", "pdl": true}, {"probe": "nowgmma"}, {"probe": "noscale"},
      {"probe": "noseam"}, {"probe": "nox"}, {"preload": true},
      {"preload": true, "unguarded": true}, {"preload": true, "unguarded": true, "pdl": true}]' \
      2>&1 | grep -v Warning | grep -A30 "^row"
    mkdir -p $OUT/chapters
    timeout 80 python3 -m tools.record --out $OUT/chapters --timeout 70 chapters/09_hopper.ipynb 2>&1 | tail -3
    timeout 70 python3 -u -m benchmarks.decode_bench --out $OUT/decode_sweep_t2_$GPU_TAG.json --ts '' \
      --dtypes bfloat16 --sweep 2,32 --only 'sweep_(ours|cublas_compiled|gemv_hopper)?$' --reps 10 \
      2>&1 | grep -v Warning | grep -E "sweep_|wrote" | tail -8
    ;;
3)  timeout 60 python3 -m pytest tests/library/test_norm_quant.py -m gpu -q -rf -p no:cacheprovider \
      --junitxml=$OUT/gpu_norm_quant_$GPU_TAG.xml 2>&1 | tail -3
    timeout 90 python3 -u -m benchmarks.norm_quant_bench --out $OUT/norm_quant_$GPU_TAG.json \
      --rounds 4 2>&1 | grep -v Warning | grep -E "^(norm|rms|comp)|ok|False" | tail -40
    timeout 75 python3 -u -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_seamcost_$GPU_TAG.json \
      --sweep --T 1 16 --rounds 4 --changes '[{}, {"preload": true, "pdl": true},
      {"probe": "noseam", "preload": true, "pdl": true}]' 2>&1 | grep -v Warning | grep -A8 "^row"
    ;;
esac
