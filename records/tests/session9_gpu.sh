#!/bin/bash
# What the ninth session (2026-11-29, no device time left: 98 s) leaves for the next device
# calls, in order (one H100 or H200; carry .whl and .whl-nb; COURSE_COMMIT=<sha>):
#   1  the grader's GPU tests of what changed without a GPU: the kernel proof now replays every
#      passing case (one trusted-replay request each; tests/grader/test_proof_every_case.py's
#      gpu test), what the student reads after the hidden cases began (autograder/results.py
#      `withheld`: the timing call's exception, a stopped child), then the bounds-grading tests
#      the eighth session's call left (records/tests/gpu_grader_paths_bounds_h200.json), all
#      under a budget that keeps what ran (tools.gpu_tests --budget; --continue RECORD after).
#   2  the FP8 GEMV's short settle: records/fp8/pdl_session.sh 4 (its GPU tests, then the sweep).
#   3  the launch branch (issue 44): `git rebase main`, then its own runbook,
#      records/tests/launch_gpu_session.sh on that branch; merge after both pass.
#   COURSE_COMMIT=<sha> bash records/tests/session9_gpu.sh 1
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
case "$1" in
1)  timeout 585 python3 -m tools.gpu_tests --budget 560 --out $OUT/gpu_grader_session9_$GPU_TAG.json \
      --under tests/grader/test_proof_every_case.py --under tests/grader/test_feedback.py \
      --under tests/grader/test_bounds_grading.py 2>&1 | grep -v Warning | tail -8
    ;;
2)  bash records/fp8/pdl_session.sh 4
    ;;
esac
