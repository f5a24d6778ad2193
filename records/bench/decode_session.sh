#!/bin/bash
# Record: `records/bench/` (`decode_rows_h100.json`, `decode_sweep_h100.json`, `decode_tune_h100.json`), `records/labs/` (`lab6_master_h100.json`), `book/data/h100.json`.
# A runbook kept beside its records (issue 44); the lab-6 probe it ran is now
# `benchmarks/lab_master_probe.py --lab 6`.
# Issue 31 on the H100, in one device session: the decode MLP-up rows, the T sweep for the
# book's figure, the host rows of the cheap call, the decode tiles, lab 6's master probe and
# the GPU-lane tests of the decode paths.
#
#   COURSE_COMMIT=$(git rev-parse HEAD) bash records/bench/decode_session.sh $OUT [STEP...]
#   (device tool: carry .whl, the numpy wheel of benchmarks/device_env.sh)
#
# STEPs (default: all, in this order; each under its own timeout, a failing step is reported
# and the next one runs). All of them take about 15 minutes (estimated: not yet run): to stay
# under a call's 10 minutes run "tests rows", then "sweep lab6", then "tune", three calls.
#   tests  pytest -m gpu tests/library/test_decode_mlp.py: every path at full d against float64,
#          the planned calls bit-equal to the wrappers, a CUDA-graph replay, no small-grid
#          warning, swiglu_mma at T = 1, 64, 200          -> $OUT/gpu_decode_tests.xml (.log)
#   rows   benchmarks/decode_bench.py --only 'decode_|cublas_linear': the checks, then ours
#          (dispatcher, each path), cuBLAS F.linear alone, + compiled and eager SiLU*up at
#          T = 1, 4, 16, 64, 256 in bf16 and fp16, GB/s of weights -> $OUT/decode_rows_${GPU_TAG}.json
#   sweep  the same with --only 'sweep_|host_': the T sweep 1..8192 (bf16) and the host rows of
#          the planned calls beside torch.matmul and F.linear      -> $OUT/decode_sweep_${GPU_TAG}.json
#   tune   benchmarks/decode_bench.py --tune-out: each path at a few tiles and split-K counts
#          per T                                                  -> $OUT/decode_tune_${GPU_TAG}.json
#   lab6   benchmarks/lab6_master_probe.py: the master against cuBLAS + compile at the grader's
#          shape (its full-marks line), the fixtures as fractions of it -> $OUT/lab6_master_${GPU_TAG}.json
#
# Back here:
#   python -m book.bench.merge <files>/decode_rows_h100.json <files>/decode_sweep_h100.json
#   cp <files>/decode_*_h100.json <files>/*.log records/bench/     (the raw runs and their logs)
#   cp <files>/lab6_master_h100.json <files>/lab6_master_h100.log records/labs/
#   then set autograder/rubrics/lab6_decode_mlp_up.toml's full_at from the probe's "suggested"
#   (tests/grader/test_lab6_decode.py holds the rubric to the record), and the defaults of
#   book/kernels/decode_mlp.py (CUDA_CORE_MAX_T, gemv_tile, mma_gemv_tile) from the tune run.
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/bench/decode_session.sh OUTDIR [STEP...]}
shift
STEPS=${*:-tests rows sweep tune lab6}
. benchmarks/device_env.sh
mkdir -p "$OUT"

for step in $STEPS; do
  echo "[$step] ($SECONDS s)"
  case $step in
    tests)
      timeout 300 python3 -m pytest -m gpu -q -rfEs tests/library/test_decode_mlp.py \
        --junitxml="$OUT/gpu_decode_tests.xml" > "$OUT/gpu_decode_tests.log" 2>&1
      echo "tests exit $?"; tail -6 "$OUT/gpu_decode_tests.log" ;;
    rows)
      timeout 480 python3 benchmarks/decode_bench.py --out "$OUT/decode_rows_${GPU_TAG}.json" \
        --only 'decode_|cublas_linear' --reps 20 > "$OUT/decode_rows_${GPU_TAG}.log" 2>&1
      echo "rows exit $?"; grep -E "FAILED|Error|correctness:" "$OUT/decode_rows_${GPU_TAG}.log" | tail -8 ;;
    sweep)
      timeout 420 python3 benchmarks/decode_bench.py --out "$OUT/decode_sweep_${GPU_TAG}.json" \
        --only 'sweep_|host_' --reps 10 > "$OUT/decode_sweep_${GPU_TAG}.log" 2>&1
      echo "sweep exit $?"; grep -E "FAILED|Error" "$OUT/decode_sweep_${GPU_TAG}.log" | tail -5 ;;
    tune)
      timeout 500 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_${GPU_TAG}.json" \
        --reps 10 > "$OUT/decode_tune_${GPU_TAG}.log" 2>&1
      echo "tune exit $?"; sed -n '/fastest per T/,$p' "$OUT/decode_tune_${GPU_TAG}.log" ;;
    lab6)
      timeout 300 python3 benchmarks/lab6_master_probe.py --out "$OUT/lab6_master_${GPU_TAG}.json" \
        > "$OUT/lab6_master_${GPU_TAG}.log" 2>&1
      echo "lab6 exit $?"; tail -12 "$OUT/lab6_master_${GPU_TAG}.log" ;;
    *) echo "unknown step $step (tests rows sweep tune lab6)" ;;
  esac
done

# the short table: ours against cuBLAS + compile per dtype and T, GB/s of weights; the targets
python3 - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
for name in sorted(p.name for p in out.glob("decode_[rs][ow]*_*.json")):
    p = out / name
    if not p.exists():
        continue
    doc = json.loads(p.read_text())
    rows = {(r["variant"], r["dtype"], r["shape"][0]): r for r in doc["rows"]}
    if name.startswith("decode_rows"):
        cols = ("decode_mlp_up", "decode_gemv_cuda_cores", "decode_gemv_tensor_cores",
                "cublas_linear", "cublas_linear_silu_compiled", "cublas_linear_silu_eager")
        print("\nus (GB/s of weights)   " + "  ".join(f"{c[:18]:>18s}" for c in cols))
        for dt in ("bfloat16", "float16"):
            for T in sorted({k[2] for k in rows if k[1] == dt}):
                cells = []
                for c in cols:
                    r = rows.get((c, dt, T))
                    cells.append(f"{r['seconds'] * 1e6:7.1f} ({r['bandwidth'] / 1e9:5.0f})"
                                 if r else " " * 15)
                print(f"{dt:8s} T={T:<4d}         " + "  ".join(f"{c:>18s}" for c in cells))
    else:
        host = [r for r in doc["rows"] if r["variant"].startswith("host_")]
        for r in host:
            print(f"host {r['variant']:<26s} {r['seconds'] * 1e6:6.1f} us per call")
    for tg in doc.get("targets", []):
        print(f"  [{'met' if tg['met'] else 'MISS'}] {tg['target']}: {tg['value']:.3f} "
              f"(goal {tg['goal']}); {tg['detail']}")
EOF
ls -la "$OUT"
echo "done in $SECONDS s"
