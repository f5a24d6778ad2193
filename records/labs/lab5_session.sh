#!/bin/bash
# Record: `records/labs/lab5_master_h100.json`, `records/sanitizer/lab5_grade_sanitize_h100.csv`, `records/tests/gpu_h100.json`.
# A runbook kept beside its records (issue 44); the lab-5 probe it ran is now
# `benchmarks/lab_master_probe.py --lab 5`.
# One device session (under 10 minutes on the H100) for what lab 5 and the merged grader need
# from a GPU:
#
#   COURSE_COMMIT=$(git rev-parse HEAD) bash records/labs/lab5_session.sh $OUT
#   (device tool: carry .whl and .whl-nb, the wheels of CONTRIBUTING.md "Record on the
#    device machine"; the image has no Jupyter)
#
# 1. benchmarks/lab5_master_probe.py: lab 5's master against cuBLAS float16 + a compiled
#    SwiGLU, the figure its rubric's full-marks line is set from -> $OUT/lab5_master_h100.json
# 2. `grade --sanitize` of lab 5's master and its missing-cp.async-wait fixture (racecheck
#    must see the race the simulator cannot) -> $OUT/sanitize_lab5/
# 3. chapter 6 recorded again (its decode table's labels changed) -> $OUT/chapters-h100.tar.gz
# 4. the GPU test lane, `python -m tools.gpu_tests` -> $OUT/gpu_h100.json
#
# The grader report (`python -m tools.grader_report`) is a second call: it needs its own
# 10 minutes.
#
# Back here:
#   cp <files>/lab5_master_h100.json <files>/lab5_master_h100.log records/labs/
#   python -m tools.record --install <files>/chapters-h100.tar.gz
#   cp <files>/gpu_h100.json records/tests/
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/labs/lab5_session.sh OUTDIR}
. benchmarks/device_env.sh

echo "[1] lab 5 master probe ($SECONDS s)"
timeout 180 python3 benchmarks/lab5_master_probe.py --out "$OUT/lab5_master_h100.json" \
  > "$OUT/lab5_master_h100.log" 2>&1
echo "probe exit $?"; tail -25 "$OUT/lab5_master_h100.log"

echo "[2] grade --sanitize, lab 5 ($SECONDS s)"
timeout 150 python3 -m autograder grade lab5 solutions/lab5_tensor_core_dual_gemm.ipynb \
  tests/fixtures/lab5/missing_cp_async_wait.py --sanitize --quiet --out "$OUT/sanitize_lab5" \
  > "$OUT/sanitize_lab5.log" 2>&1
echo "sanitize exit $?"; tail -5 "$OUT/sanitize_lab5.log"
cat "$OUT/sanitize_lab5/grades.csv" 2>/dev/null
grep -h -A3 -i "sanitizer" "$OUT"/sanitize_lab5/*/feedback.md 2>/dev/null | head -30

echo "[3] record chapter 6 ($SECONDS s)"
python3 -m tools.record --out "$OUT" --timeout 120 --budget 130 chapters/06_saturating_bandwidth.ipynb
echo "record exit $?"

echo "[4] GPU test lane ($SECONDS s)"
timeout $((585 - SECONDS)) python3 -m tools.gpu_tests --out "$OUT/gpu_h100.json" \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu_tests exit $?"; tail -15 "$OUT/gpu_tests.log"
echo "done in $SECONDS s"
