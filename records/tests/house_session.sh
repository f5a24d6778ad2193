#!/bin/bash
# Record: `records/tests/` (`gpu_grader_h100.json`, `gpu_library_h100.json`: the lane in two parts), `records/grader/h100-house/`, `records/chapters/h100/` (chapter 8).
# Issue 29 on the H100: the restructured grader (the child's code a package started by its entry
# point, one way to load a child, the recording through book/numba_compat.py) and the library's
# reaches into numba-cuda behind one module (the prepared launch, fastcall, allow_shared, the
# Hopper plan, the simulated warp), run for real, in device calls of under 10 minutes each
# (device tool: carry .whl, numpy < 2.5 for numba-cuda 0.30.4; .whl-nb for step 4):
#
#   COURSE_COMMIT=$(git rev-parse HEAD) bash records/tests/house_session.sh $OUT grader   (~8 min)
#     1. the GPU lane of tests/grader (the sandbox, the recording and its replay, NVML, the
#        budgets, the grader's GPU grading) -> $OUT/gpu_grader_h100.json, .log
#   COURSE_COMMIT=... bash records/tests/house_session.sh $OUT library                   (~8 min)
#     2. the GPU lane of tests/library and tests/chapters (every launch path, fastcall and the
#        planned calls, the tensor-core and Hopper kernels, the decode paths)
#        -> $OUT/gpu_library_h100.json, .log
#   COURSE_COMMIT=... bash records/tests/house_session.sh $OUT report                    (~8 min)
#     3. python3 -m tools.grader_report $OUT/h100 --only hostile,labs: every lab's master and
#        fixtures graded on the GPU, one neighbour's CUDA start failed by tests/grader/faults.py
#        (graded again alone), nothing left running -> $OUT/h100/report.md, summary.json
#   COURSE_COMMIT=... bash records/tests/house_session.sh $OUT chapter8                  (~3 min)
#     4. chapter 8 recorded again (it shows make_mma_gemm, which now reads MmaGeometry)
#        -> $OUT/chapters-h100.tar.gz, record-summary.json
#
# Back here:
#   cp <files>/gpu_grader_h100.json <files>/gpu_library_h100.json records/tests/  (the lane in
#   two parts; records/tests/README.md)
#   cp <files>/h100/report.md <files>/h100/summary.json records/grader/h100-house/
#   python -m tools.record --install <files>/chapters-h100.tar.gz; commit records/chapters/h100/
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/tests/house_session.sh OUTDIR grader|library|report|chapter8}
WHAT=${2:-grader}
mkdir -p "$OUT"
. benchmarks/device_env.sh

case "$WHAT" in
grader)
  echo "[1] GPU lane: tests/grader ($SECONDS s)"
  timeout 560 python3 -m tools.gpu_tests --out "$OUT/gpu_grader_h100.json" --under tests/grader \
    > "$OUT/gpu_grader.log" 2>&1
  echo "gpu_tests exit $?"; tail -15 "$OUT/gpu_grader.log"
  ;;
library)
  echo "[2] GPU lane: tests/library, tests/chapters ($SECONDS s)"
  timeout 560 python3 -m tools.gpu_tests --out "$OUT/gpu_library_h100.json" --under tests/library \
    --under tests/chapters --under tests/tooling > "$OUT/gpu_library.log" 2>&1
  echo "gpu_tests exit $?"; tail -15 "$OUT/gpu_library.log"
  ;;
report)
  echo "[3] grader report: hostile, labs ($SECONDS s)"
  timeout 560 python3 -m tools.grader_report "$OUT/h100" --only hostile,labs \
    > "$OUT/grader_report.log" 2>&1
  echo "grader report exit $?"; grep -E "^== |rc=" "$OUT/grader_report.log" | tail -14
  ;;
chapter8)
  echo "[4] chapter 8 recorded ($SECONDS s)"
  timeout 560 python3 -m tools.record --out "$OUT" chapters/08_tensor_cores.ipynb \
    > "$OUT/record.log" 2>&1
  echo "record exit $?"; tail -8 "$OUT/record.log"
  ;;
*)
  echo "unknown step $WHAT: grader, library, report or chapter8"; exit 2
  ;;
esac
echo "done in $SECONDS s"
