#!/bin/bash
# The tenth session's (2026-11-29) last device call, alone on the machine: chapters 9 and 9b
# recorded again on this GPU (reader pass 8's code-cell fixes: the tables' ratio first, the
# record's HBM peak, the dispatcher's "T = 1"), on the tree with the launch branch merged;
# then the launch branch's own checks (records/tests/launch_gpu_session.sh).
#   COURSE_COMMIT=<sha> bash records/tests/session10_final_gpu.sh
source benchmarks/device_env.sh
export NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS=0
timeout 130 python3 -m tools.record --out $OUT chapters/09_hopper.ipynb chapters/09b_eight_bits.ipynb \
  2>&1 | tail -4
bash records/tests/launch_gpu_session.sh
ls $OUT
