#!/bin/bash
# Record: `records/tests/gpu_h100_sm75.json`.
# The T4 path run for real (issue 30): the GPU test lane on an H100 (or any newer GPU) held to
# the T4's instructions by the switch COURSE_TARGET_CC=7.5 (book/target.py): Numba compiles
# every kernel for sm_75 (ptxas refuses cp.async and bf16 mma there), chapter 8 is recorded
# under the switch (tests/chapters/test_chapter8_t4.py), lab 5's master goes through `check` and
# `grade` (tests/grader/test_lab5_t4.py), the T4 branches of book.kernels.mma_gemm run against
# float64 (tests/library/test_tensorcore.py), and the rest of the lane runs as it does anyway.
#
#   COURSE_COMMIT=$(git rev-parse HEAD) bash records/tests/t4_path_session.sh $OUT
#   (device tool: carry .whl and .whl-nb, the wheels of CONTRIBUTING.md "Record on the
#    device machine"; chapter 8's test executes the chapter in a Jupyter kernel)
#
# Writes $OUT/preflight_sm75.log, $OUT/gpu_tests_sm75.log and $OUT/gpu_h100_sm75.json (the
# lane's summary: provenance with target_cc "7.5", each test's outcome). Back here:
#   cp <files>/gpu_h100_sm75.json records/tests/
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/tests/t4_path_session.sh OUTDIR}
mkdir -p "$OUT"
. benchmarks/device_env.sh
export COURSE_TARGET_CC=7.5
# a fresh kernel cache: nothing compiled for sm_90 by an earlier run may be loaded instead
NUMBA_CACHE_DIR=$(mktemp -d)
export NUMBA_CACHE_DIR

echo "[1] preflight: the switch, Numba's PTX target, one T4-path launch ($SECONDS s)"
timeout 120 python3 - > "$OUT/preflight_sm75.log" 2>&1 <<'EOF'
import numpy as np
import book
from numba import cuda
from numba.cuda.core import config
from book.kernels import mma_gemm as mg, tensorcore as tc

print("target:", tc.target_description(), "| Numba compiles for:", config.FORCE_CUDA_CC)
t = mg.default_tile()
T, d, h = t.bm, 2 * t.bk, t.bn // 2
rng = np.random.default_rng(0)
x = rng.standard_normal((T, d)).astype(np.float16)
wg, wu = ((rng.standard_normal((d, h)) / 8).astype(np.float16) for _ in range(2))
out = mg.swiglu_mma(*(cuda.to_device(a) for a in (x, wg, wu))).copy_to_host()
G, U = (x.astype(np.float64) @ w.astype(np.float64) for w in (wg, wu))
ref = G / (1 + np.exp(-G)) * U
print("kind:", mg.kind_for("float16", tc.target_cc()), "| max error / 2^-10 max|ref|:",
      float(np.abs(out.astype(np.float64) - ref).max() / (2.0 ** -10 * np.abs(ref).max())))
EOF
echo "preflight exit $?"; cat "$OUT/preflight_sm75.log"

echo "[2] GPU test lane under COURSE_TARGET_CC=7.5 ($SECONDS s)"
timeout $((590 - SECONDS)) python3 -m tools.gpu_tests --out "$OUT/gpu_h100_sm75.json" \
  > "$OUT/gpu_tests_sm75.log" 2>&1
echo "gpu_tests exit $?"; tail -25 "$OUT/gpu_tests_sm75.log"
python3 - "$OUT/gpu_h100_sm75.json" <<'EOF'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    sys.exit(f"no summary: {e}")
p = s["provenance"]
print(f"{p.get('gpu')}, target_cc {p.get('target_cc')}, commit {str(p.get('commit'))[:7]}: "
      f"{s['counts']} (pytest exit status {s['pytest_exit_status']})")
for t in s["tests"]:
    print(f"  {t['outcome']:8s} {t['seconds']:6.1f} s  {t['test']}")
EOF
echo "done in $SECONDS s"
