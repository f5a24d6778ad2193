#!/bin/bash
# The FP8 GEMV's fixes as the default tile (issue 42; tenth session, 2026-11-29): the GEMV's GPU
# tests (the bare tile against the default bit for bit, the dependent launch, the probes), the
# decode rows again (the default beside its bare control, cuBLASLt FP8 + compile, chapter 9's
# bf16 path; graph times), book/data/fp8 rebuilt from them, chapter 9b recorded on this GPU;
# then the grader's GPU tests the last call's budget left (a store past the end, lab by lab),
# in what time is left.
#   COURSE_COMMIT=<sha> bash records/fp8/default_session.sh
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
timeout 150 python3 -m pytest tests/library/test_fp8_gemv.py -m gpu -q -rf -p no:cacheprovider \
  --junitxml=$OUT/gpu_fp8_gemv_default_$GPU_TAG.xml 2>&1 | tail -6
timeout 120 python3 -u -m benchmarks.fp8_decode_bench --out $OUT/fp8_decode_$GPU_TAG.json 2>&1 \
  | grep -v Warning | tail -34
cp $OUT/fp8_decode_$GPU_TAG.json records/fp8/fp8_decode_$GPU_TAG.json
python3 -m book.fp8_data records/fp8/fp8_bench_$GPU_TAG.json records/fp8/fp8_decode_$GPU_TAG.json \
  --out $OUT/fp8_data_$GPU_TAG.json 2>&1 | tail -2 && cp $OUT/fp8_data_$GPU_TAG.json book/data/fp8/$GPU_TAG.json
timeout 150 python3 -m tools.record --out $OUT chapters/09b_eight_bits.ipynb 2>&1 | tail -4
timeout 170 python3 -m tools.gpu_tests --budget 150 --under tests/grader/test_bounds_grading.py \
  --out $OUT/gpu_grader_bounds_store_$GPU_TAG.json -k store_past_the_end 2>&1 | grep -v Warning | tail -4
ls $OUT
