#!/bin/bash
# The seven device calls of 2026-11-28's fourth session (issues 42 and 43) on an H200, each
# one `run` (carry .whl), alone on the machine; what each settled is in records/hopper/README.md
# and records/fp8/README.md. Kept beside the records they made (a runbook, not an instrument).
#   COURSE_COMMIT=<sha> bash records/hopper/midt_fp8_sessions_h200.sh 1|2|3|4|5|6|7
# (lab6_master_probe.py, called by 2 and 3, is benchmarks/lab_master_probe.py --lab 6 since 1a8d186)
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
case "$1" in
1)  # at 24dcfed: the FP8 GEMV's bytes line, the dual GEMM's tiles at mid T, the FP8 GEMV's
    # GPU tests, its tile sweep
    nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
    timeout 150 python3 benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_line_$GPU_TAG.json \
      --bytes-line --T 1 16 --rounds 4 2>&1 | grep -v Warning | tail -20
    timeout 170 python3 benchmarks/hopper_bench.py --out $OUT/hopper_tiles_$GPU_TAG.json \
      --tiles 256,384,512,768,1024 --rounds 4 2>&1 | grep -v Warning | tail -45
    timeout 90 python3 -m pytest tests/library/test_fp8_gemv.py -m gpu -q -x -rf -p no:cacheprovider \
      --junitxml=$OUT/gpu_fp8_gemv_$GPU_TAG.xml 2>&1 | tail -8
    timeout 160 python3 benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_sweep_$GPU_TAG.json \
      --sweep --T 1 16 --rounds 3 2>&1 | grep -v Warning | tail -40
    ;;
2)  # at fbb643d: narrow tiles with and without cluster, multicast, inflight, group; the FP8
    # decode rows with their CUDA-graph times; lab 6's master (failed: a fixture's old path)
    T="--tile HopperTile() --tile HopperTile(cluster=1) --tile HopperTile(bn=64,stages=6)"
    T="$T --tile HopperTile(bn=64,stages=6,cluster=1) --tile HopperTile(bn=64,stages=6,multicast=True)"
    T="$T --tile HopperTile(bn=64,stages=6,inflight=1) --tile HopperTile(bn=64,stages=6,group=16)"
    timeout 200 python3 benchmarks/hopper_bench.py --out $OUT/hopper_tiles2_$GPU_TAG.json \
      --tiles 384,512,768 --rounds 5 $T 2>&1 | grep -v Warning | tail -30
    timeout 200 python3 benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_$GPU_TAG.json \
      2>&1 | grep -v Warning | tail -45
    timeout 150 python3 benchmarks/lab6_master_probe.py --out $OUT/lab6_master_$GPU_TAG.json \
      2>&1 | grep -v Warning | tail -20
    ;;
3)  # at ea969a8: the ColumnSplit's GPU tests, the wave model's choice at mid T, lab 6's master
    timeout 150 python3 -m pytest tests/library/test_hopper_gpu.py -m gpu -q -x -rf -p no:cacheprovider \
      -k "column_split or dual_gemm_against or repeated_call" \
      --junitxml=$OUT/gpu_hopper_split_$GPU_TAG.xml 2>&1 | tail -6
    timeout 260 python3 benchmarks/hopper_bench.py --out $OUT/hopper_tiles3_$GPU_TAG.json \
      --tiles 256,384,512,640,768,1024,2048 --rounds 6 --tile "HopperTile()" 2>&1 \
      | grep -v Warning | tail -40
    timeout 150 python3 benchmarks/lab6_master_probe.py --out $OUT/lab6_master_$GPU_TAG.json \
      2>&1 | grep -v Warning | tail -20
    ;;
4)  # at a977feb: the fused RMSNorm + e4m3's GPU tests, its timing (did not finish in 300 s)
    timeout 120 python3 -m pytest tests/library/test_norm_quant.py -m gpu -p no:randomly \
      -p no:cacheprovider -q -rf --junitxml=$OUT/gpu_norm_quant_$GPU_TAG.xml 2>&1 | tail -6
    timeout 300 python3 benchmarks/norm_quant_bench.py --out $OUT/norm_quant_$GPU_TAG.json
    ;;
5)  # at 97dc201: one byte count in five shapes; the norm-quant timing again (stuck at T = 1)
    timeout 170 python3 -u benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_geometry_$GPU_TAG.json \
      --geometry --T 1 16 --rounds 4
    timeout 230 python3 -u benchmarks/norm_quant_bench.py --out $OUT/norm_quant_$GPU_TAG.json \
      --T 1 2048 8192 --rounds 4
    ;;
6)  # at a9ebf4c: the FP8 GEMV's maps as 16-bit elements (tma_elem)
    timeout 110 python3 -u benchmarks/fp8_decode_bench.py --out $OUT/fp8_decode_tma2_$GPU_TAG.json \
      --sweep --T 1 16 --rounds 5 --changes '[{}, {"tma_elem": 2}, {"tma_elem": 2, "promotion": "none"}]'
    ;;
7)  # at a9ebf4c: the decode sweep through the dispatcher at mid T, two weight sets in turn
    timeout 120 python3 -u benchmarks/decode_bench.py --out $OUT/decode_sweep512_$GPU_TAG.json --ts '' \
      --dtypes bfloat16 --sweep 256,512,1024 --only 'sweep_(ours|cublas_compiled)?$' --reps 10
    ;;
esac
