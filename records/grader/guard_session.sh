#!/bin/bash
# Record: `records/grader/h100-guard/`, `records/labs/lesson_controls_h100.json`, `records/tests/gpu_h100.json`.
# Issue 28 (part A) on the H100: guard zones, bounds fixtures and "lesson not learned" controls,
# in device calls of under 10 minutes each (device tool: carry .whl, numpy < 2.5 for
# numba-cuda 0.30.4; no Jupyter needed):
#
#   COURSE_COMMIT=$(git rev-parse --short HEAD) bash records/grader/guard_session.sh $OUT report
#     1. python3 -m tools.grader_report $OUT/h100 --only hostile,labs         (about 8 min)
#        lab 2's master and neighbours beside every hostile file, its bounds fixtures and its
#        control; labs 1, 3, 4, 5 with their own fixtures, bounds fixtures and controls
#     2. python3 benchmarks/lesson_controls_probe.py --from-report $OUT/h100/summary.json
#          --out $OUT/lesson_controls_h100.json                             (no GPU time)
#        each control's fraction of the master (scored by that report) -> the rubrics' lines
#
#   COURSE_COMMIT=... bash records/grader/guard_session.sh $OUT tests             (about 4 min)
#     3. the GPU lane of the new tests: check() and grade catch a store past the end of `out`
#        on the H100 in the simulator's words (tests/grader/test_guard_zones.py,
#        tests/grader/test_bounds_grading.py, marker gpu) -> $OUT/gpu_guard_*.xml, .log
#
#   COURSE_COMMIT=... bash records/grader/guard_session.sh $OUT probe             (about 5 min)
#     4. only if step 2 found no fraction: the probe on its own (grades each lab's master and
#        controls) -> $OUT/lesson_controls_h100.json
#
# Back here:
#   cp <files>/h100/report.md <files>/h100/summary.json records/grader/h100/
#   cp <files>/lesson_controls_h100.json records/labs/
#   python benchmarks/lesson_controls_probe.py --apply records/labs/lesson_controls_h100.json
#   (then the rubrics hold the measured lines; tests/grader/test_lesson_controls.py checks them)
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/grader/guard_session.sh OUTDIR report|tests|probe}
WHAT=${2:-report}
mkdir -p "$OUT"
. benchmarks/device_env.sh

case "$WHAT" in
report)
  echo "[1] grader report: hostile, labs ($SECONDS s)"
  timeout 540 python3 -m tools.grader_report "$OUT/h100" --only hostile,labs \
    > "$OUT/grader_report.log" 2>&1
  echo "grader report exit $?"; grep -E "^== |rc=" "$OUT/grader_report.log" | tail -12
  echo "[2] lesson controls from the report ($SECONDS s)"
  python3 benchmarks/lesson_controls_probe.py --from-report "$OUT/h100/summary.json" \
    --out "$OUT/lesson_controls_h100.json" 2>&1 | tee "$OUT/lesson_controls_h100.log"
  ;;
tests)
  echo "[3] GPU lane: guard zones and bounds ($SECONDS s)"
  for f in tests/grader/test_guard_zones.py tests/grader/test_bounds_grading.py; do
    n=$(basename "$f" .py)
    timeout 420 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider \
      --junitxml="$OUT/gpu_guard_$n.xml" "$f" > "$OUT/gpu_guard_$n.log" 2>&1
    echo "$n: pytest exit $?"; tail -4 "$OUT/gpu_guard_$n.log"
  done
  ;;
probe)
  echo "[4] lesson controls probe, grading on its own ($SECONDS s)"
  timeout 560 python3 benchmarks/lesson_controls_probe.py --out "$OUT/lesson_controls_h100.json" \
    2>&1 | tee "$OUT/lesson_controls_h100.log"
  ;;
*)
  echo "unknown step $WHAT: report, tests or probe"; exit 2
  ;;
esac
echo "done in $SECONDS s"
