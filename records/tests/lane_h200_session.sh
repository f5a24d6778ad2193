#!/bin/bash
# The device calls of 2026-11-29's seventh session on an H200, each one `run` (carry .whl),
# alone on the machine: the GPU lane owed since the sixth session's moves (tile protocol,
# cluster_launch, the decode GEMVs by job) and the grader's GPU tests; the norm-quant timing
# that stuck twice, under faulthandler. What each settled is in the session's note and
# records/tests/README (if any) or records/fp8/README.md.
#   COURSE_COMMIT=<sha> bash records/tests/lane_h200_session.sh 1|2|3
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
2)  # the grader's GPU tests owed since the fifth session: bounds, split-K faults, lab paths
    for f in test_bounds_grading test_split_k_faults test_lab_paths; do
      timeout 280 python3 -m tools.gpu_tests --out $OUT/gpu_${f#test_}_$GPU_TAG.json \
        --under tests/grader/$f.py 2>&1 | grep -v Warning | grep -E "passed|failed|FAILED|ERROR|wrote|error" | tail -12
    done
    ;;
3)  # the rest of the grader's GPU tests; the norm-quant timing's stuck point, every thread's
    # stack dumped from a watchdog after 45 s (1's ABRT cut the dump short); lab paths in what
    # is left of the call (2 ran out in bounds, over 280 s where the H200 took 61 s on 73b8e0b)
    for f in test_grader_gpu test_feedback test_guard_zones test_isolation test_lab5_t4; do
      timeout 150 python3 -m tools.gpu_tests --out $OUT/gpu_${f#test_}_$GPU_TAG.json \
        --under tests/grader/$f.py 2>&1 | grep -v Warning | grep -E "passed|failed|FAILED|ERROR|wrote|error" | tail -12
      echo "[$SECONDS s]"
    done
    timeout 70 python3 -u -c "import faulthandler, runpy, sys; faulthandler.dump_traceback_later(45, exit=True); \
sys.argv = ['norm_quant_bench.py', '--out', '$OUT/norm_quant_$GPU_TAG.json', '--T', '1', '--rounds', '2']; \
runpy.run_path('benchmarks/norm_quant_bench.py', run_name='__main__')" 2>&1 | grep -v Warning | tail -60
    echo "[$SECONDS s]"
    timeout $((570 - SECONDS)) python3 -m tools.gpu_tests --out $OUT/gpu_lab_paths_$GPU_TAG.json \
      --under tests/grader/test_lab_paths.py 2>&1 | grep -v Warning | tail -15
    ;;
esac
