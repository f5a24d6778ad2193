#!/bin/bash
# Record: `records/hopper/hopper_default_h100.json`, `records/bench/decode_tune_h100.json`, `records/labs/lesson_controls_h100.json`, `records/tests/`.
# A runbook kept beside its records (issue 44); the ncu and balance steps' scripts are retired
# (`git show 3faadbc:benchmarks/decode_ncu.py`, `.../sm_balance.py`; findings in records/bench/README.md).
# The open issues' GPU steps that no other session script holds, on the H100, each under its
# own timeout (a failing step is reported and the next one runs):
#
#   COURSE_COMMIT=$(git rev-parse --short HEAD) bash records/bench/open_issues_session.sh $OUT STEP...
#   (device tool: carry .whl, numpy < 2.5 for numba-cuda 0.30.4)
#
#   machine    what bounds processes and threads here (pids.max, ulimit -u, threads-max)
#   hopper     issue 27's open question, the cluster default: the wgmma variants and cuBLAS at
#              T = 2048 and 8192, three runs in three processes (about 40 s each)
#              -> $OUT/hopper_default_{1,2,3}.json, then a table of the three
#   tune       issue 31: the decode GEMVs at T = 4, 8, 16 over tiles, unrolls and splits
#              (benchmarks/decode_bench.py --tune-out)          -> $OUT/decode_tune_${GPU_TAG}.json
#   staged     issue 31: the staged tensor-core GEMV over warps, chunks and ring depths at
#              T = 1, 4, 16 beside both GEMVs       -> $OUT/decode_tune_staged_${GPU_TAG}.json
#   caps       issue 31: the default GEMVs at T = 4, 16 under register caps -> decode_tune_caps_h100.json
#   warps      issue 31: the tensor-core GEMV at 3-7 warps a block -> decode_tune_warps_h100.json
#   prefetch   issue 31: the CUDA-core GEMV loading its next piece ahead -> decode_tune_prefetch_h100.json
#   ncu        issue 31: Nsight Compute on the decode GEMVs (NCU_CASES=cc1,hg16: some) -> $OUT/decode_ncu_${GPU_TAG}.json
#   hgemv      issue 31: the Hopper decode GEMV over rings, boxes a stage, L2 promotion and
#              blocks an SM at T = $HGEMV_T (default 4,8,16), beside both GEMVs (HGEMV_WAVES=1,2,4:
#              grids of several waves instead; HGEMV_RESIDENT=1: x kept in shared memory against
#              x copied a stage)           -> $OUT/decode_tune_hopper_gemv_${GPU_TAG}.json
#   stream     issue 31: how fast each way of reading the weights streams them, no math (ldg,
#              TMA boxes, 1-D bulk copies) beside the GEMVs (benchmarks/weight_stream.py)
#              (STREAM_TILES=1: the GEMVs at more tiles too; STREAM_ARGS: more arguments, e.g.
#              --no-probes --tile PATH:T:TILE) -> $OUT/weight_stream_${GPU_TAG}.json
#   balance    issue 31: the wgmma GEMV traced over many launches: do the SMs read at one
#              rate, is a slow SM slow every launch (benchmarks/sm_balance.py) -> $OUT/sm_balance_${GPU_TAG}.json
#   dynamic    issue 31: the wgmma GEMV's dynamic ranges (WgmmaGemvTile.dynamic): their GPU
#              tests alone under a timeout (a wrong barrier phase hangs rather than fails), then
#              timed against the GPU's default tile at T = 4 and 16, one traced at 16
#              -> $OUT/gpu_dynamic_tests.log, $OUT/weight_stream_dynamic_${GPU_TAG}.json
#   bits       issue 31: the wgmma GEMV in bf16 and fp16 on each type's values and on the
#              other's bits (a time that follows the bytes, not the kernel, is the data's)
#              -> $OUT/weight_stream_bits_<type>_of_<type>_<gpu>.json
#   hswitch    issue 31: the wgmma GEMV against the wgmma dual GEMM at T = 8-64 (the switch)
#              -> $OUT/decode_tune_hopper_switch_${GPU_TAG}.json
#   htests     issue 31: pytest -m gpu tests/library/test_wgmma_gemv.py -> $OUT/gpu_wgmma_gemv_tests.*
#   final9     issue 31: the sweep (its sweep rows) merged here, then chapters 9 and 11 recorded (carry .whl-nb)
#   host       issue 31: the planned calls' host rows alone -> $OUT/decode_host_${GPU_TAG}.json
#   liblane    the GPU lane's library and chapters part -> $OUT/gpu_${GPU_TAG}.json
#   dtests     issue 31: pytest -m gpu tests/library/test_decode_mlp.py test_staged_gemv.py
#              -> $OUT/gpu_decode_tests.*
#   lab2       issue 28: lab 2's master and its "lesson not learned" control graded on their own
#              (benchmarks/lesson_controls_probe.py --labs lab2 --merge the committed record)
#              -> $OUT/lesson_controls_${GPU_TAG}.json
#   lane       the GPU lane (tools.gpu_tests): tests/grader, then tests/library and tests/chapters
#   record     issue 30: chapters 8, 9 and 11 recorded again (tools.record; carry .whl-nb too)
#   bounds4    issue 28: the GPU lane of test_bounds_grading for lab 4 (the GPU's grade and the
#              simulator's run beside it), with the machine's thread limits before and after
#              -> $OUT/gpu_bounds_lab4.{xml,log}
#
# Back here: records/hopper/README.md and records/bench/README.md say where each file goes.
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/bench/open_issues_session.sh OUTDIR STEP...}
shift
. benchmarks/device_env.sh
mkdir -p "$OUT"

limits() {
  echo "pids.max $(cat /sys/fs/cgroup/pids.max 2>/dev/null || echo '?')" \
       "pids.current $(cat /sys/fs/cgroup/pids.current 2>/dev/null || echo '?')" \
       "ulimit -u $(ulimit -u) threads-max $(cat /proc/sys/kernel/threads-max)" \
       "cpus $(nproc)"
}

for step in "$@"; do
  echo "[$step] ($SECONDS s)"
  case $step in
    machine) limits | tee "$OUT/machine_limits.txt" ;;
    hopper)
      for i in 1 2 3; do
        timeout 150 python3 benchmarks/hopper_bench.py --no-tensorcore \
          --only "^(wgmma_dual_gemm(_single)?|cublas_linear_(gemm|mlp_up_compiled))$" --out "$OUT/hopper_default_$i.json" \
          > "$OUT/hopper_default_$i.log" 2>&1
        echo "  run $i exit $? ($SECONDS s)"
      done
      python3 - "$OUT" <<'EOF'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
runs = [json.loads(p.read_text()) for p in sorted(out.glob("hopper_default_*.json"))]
names = sorted({r["variant"] for d in runs for r in d["rows"]})
for T in sorted({r["shape"][0] for d in runs for r in d["rows"]}):
    print(f"T={T}: median us (p10-p90) per run")
    for n in names:
        cells = []
        for d in runs:
            r = next((r for r in d["rows"] if r["variant"] == n and r["shape"][0] == T
                      and r["dtype"] == "bfloat16"), None)
            cells.append(f"{r['seconds'] * 1e6:7.1f} ({r.get('p10_s', 0) * 1e6:6.1f}-"
                         f"{r.get('p90_s', 0) * 1e6:6.1f})" if r else " " * 23)
        print(f"  {n:34s} " + "  ".join(cells))
EOF
      ;;
    tune)
      timeout 300 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_${GPU_TAG}.json" \
        --tune-t 4,8,16 --tune-splits None,1 --reps 10 > "$OUT/decode_tune_${GPU_TAG}.log" 2>&1
      echo "tune exit $?"; sed -n '/fastest per T/,$p' "$OUT/decode_tune_${GPU_TAG}.log" ;;
    staged)  # issue 31: the staged tensor-core GEMV (book.kernels.staged_gemv) beside both GEMVs
      timeout 330 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_staged_${GPU_TAG}.json" \
        --tune-t 1,4,16 --tune-paths cuda_cores,tensor_cores,staged --tune-splits None \
        --tune-stages 0,2 --reps 10 > "$OUT/decode_tune_staged_${GPU_TAG}.log" 2>&1
      echo "staged exit $?"; sed -n '/fastest per T/,$p' "$OUT/decode_tune_staged_${GPU_TAG}.log" ;;
    caps)    # issue 31: the default GEMVs at T = 4 and 16 under register caps (launch_bounds)
      timeout 240 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_caps_${GPU_TAG}.json" \
        --tune-t 4,16 --tune-paths cuda_cores,tensor_cores --tune-min-blocks 8,10,12,16,20,24 \
        --tune-splits None,2 --tune-stages 0 --reps 10 > "$OUT/decode_tune_caps_${GPU_TAG}.log" 2>&1
      echo "caps exit $?"; grep -E "min_blocks=[1-9]|default" "$OUT/decode_tune_caps_${GPU_TAG}.log" | cut -c1-160 ;;
    warps)   # issue 31: the tensor-core GEMV at 3-7 warps a block (one wave of blocks or two)
      timeout 240 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_warps_${GPU_TAG}.json" \
        --tune-t 1,4,8,16 --tune-paths tensor_cores --tune-warps 3,4,5,6,7 \
        --tune-splits None,2 --reps 10 > "$OUT/decode_tune_warps_${GPU_TAG}.log" 2>&1
      echo "warps exit $?"; grep -E "tensor_cores" "$OUT/decode_tune_warps_${GPU_TAG}.log" | cut -c1-160 ;;
    prefetch)  # issue 31: the CUDA-core GEMV loading its next piece ahead, T = 1, 2, 4
      timeout 200 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_prefetch_${GPU_TAG}.json" \
        --tune-t 1,2,4 --tune-paths cuda_cores --tune-prefetch --tune-splits None --reps 10 \
        > "$OUT/decode_tune_prefetch_${GPU_TAG}.log" 2>&1
      echo "prefetch exit $?"; grep -E "cuda_cores" "$OUT/decode_tune_prefetch_${GPU_TAG}.log" | cut -c1-160 ;;
    ncu)     # issue 31: Nsight Compute's counters on the decode GEMVs (benchmarks/decode_ncu.py)
      timeout 240 python3 benchmarks/decode_ncu.py --out "$OUT/decode_ncu_${GPU_TAG}.json" ${NCU_CASES:+--cases $NCU_CASES} \
        > "$OUT/decode_ncu_${GPU_TAG}.log" 2>&1
      echo "ncu exit $?"; cat "$OUT/decode_ncu_${GPU_TAG}.log" | cut -c1-400 ;;
    tune4)   # the CUDA-core GEMV at T = 4 over threads and rows (its HBM line)
      timeout 200 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune4_${GPU_TAG}.json" \
        --tune-t 4 --tune-splits None --reps 10 > "$OUT/decode_tune4_${GPU_TAG}.log" 2>&1
      echo "tune4 exit $?"; grep "cuda_cores" "$OUT/decode_tune4_${GPU_TAG}.log"
      sed -n '/fastest per T/,$p' "$OUT/decode_tune4_${GPU_TAG}.log" ;;
    rows)    # issue 31's rows and targets, the sweep and the host rows (decode_session.sh)
      bash records/bench/decode_session.sh "$OUT" rows sweep 2>&1 | grep -v "^WARNING: no Jupyter" ;;
    record)  # issue 30: chapters 8, 9 and 11 recorded again (carry .whl-nb too)
      timeout 480 python3 -m tools.record --out "$OUT" --budget 460 chapters/08_tensor_cores.ipynb \
        chapters/09_hopper.ipynb chapters/11_same_move_everywhere.ipynb > "$OUT/record.log" 2>&1
      echo "record exit $?"; tail -12 "$OUT/record.log" ;;
    lane)    # the whole GPU lane, in two records: the grader's tests, then the library's and chapters'
      timeout 330 python3 -m tools.gpu_tests --out "$OUT/gpu_${GPU_TAG}_grader.json" --under tests/grader \
        > "$OUT/gpu_lane_grader.log" 2>&1
      echo "grader lane exit $?"; tail -4 "$OUT/gpu_lane_grader.log"
      timeout 240 python3 -m tools.gpu_tests --out "$OUT/gpu_${GPU_TAG}.json" --under tests/library \
        --under tests/chapters > "$OUT/gpu_lane_library.log" 2>&1
      echo "library lane exit $?"; tail -4 "$OUT/gpu_lane_library.log" ;;
    ring)    # issue 31: the tensor-core GEMV's cp.async ring against its register path, T = 4, 8, 16;
             # then the CUDA-core GEMV at T = 4 over threads and rows
      timeout 330 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_ring_${GPU_TAG}.json" \
        --tune-t 4,8,16 --tune-paths tensor_cores --reps 10 > "$OUT/decode_tune_ring_${GPU_TAG}.log" 2>&1
      echo "ring exit $?"; grep -E "best|fastest" "$OUT/decode_tune_ring_${GPU_TAG}.log"
      timeout 120 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune4_${GPU_TAG}.json" \
        --tune-t 4 --tune-paths cuda_cores --tune-splits None --reps 10 \
        > "$OUT/decode_tune4_${GPU_TAG}.log" 2>&1
      echo "tune4 exit $?"; grep "cuda_cores" "$OUT/decode_tune4_${GPU_TAG}.log" ;;
    final)   # issue 31's rows and sweep on the H100, merged into book/data here, then chapters 8, 9
             # and 11 recorded on them (carry .whl-nb too); back here the same merge of the same
             # files gives the same book/data/h100.json
      bash records/bench/decode_session.sh "$OUT" rows sweep 2>&1 | grep -v "^WARNING: no Jupyter" \
        | grep -E "MISS|met|host|exit|correctness" | head -30
      python3 -m book.bench.merge "$OUT/decode_rows_${GPU_TAG}.json" "$OUT/decode_sweep_${GPU_TAG}.json" \
        > "$OUT/merge.log" 2>&1; echo "merge exit $?"; tail -3 "$OUT/merge.log"
      timeout 300 python3 -m tools.record --out "$OUT" --budget 280 chapters/08_tensor_cores.ipynb \
        chapters/09_hopper.ipynb chapters/11_same_move_everywhere.ipynb > "$OUT/record.log" 2>&1
      echo "record exit $?"; tail -8 "$OUT/record.log" ;;
    hgemv)   # issue 31: the Hopper decode GEMV (book.kernels.wgmma_gemv) over ring depths and
             # blocks an SM at T = 1-64, beside both GEMVs' defaults
      timeout 400 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_hopper_gemv_${GPU_TAG}.json" \
        --tune-t ${HGEMV_T:-4,8,16} --tune-paths cuda_cores,tensor_cores,hopper_gemv --tune-splits None \
        --tune-gemv-defaults ${HGEMV_WAVES:+--tune-waves $HGEMV_WAVES} ${HGEMV_RESIDENT:+--tune-resident} --reps 10 \
        > "$OUT/decode_tune_hopper_gemv_${GPU_TAG}.log" 2>&1
      echo "hgemv exit $?"; grep -E "hopper_gemv|default" "$OUT/decode_tune_hopper_gemv_${GPU_TAG}.log" | cut -c1-170
      sed -n '/fastest per T/,$p' "$OUT/decode_tune_hopper_gemv_${GPU_TAG}.log" | cut -c1-170
      # cuBLAS alone and with a compiled SwiGLU at the same T, the same session
      timeout 200 python3 benchmarks/decode_bench.py --out "$OUT/decode_cublas_${GPU_TAG}.json" \
        --only '^cublas_linear(_silu_compiled)?$' --ts 1,4,16,32,64 --dtypes bfloat16 --sweep '' \
        --reps 10 > "$OUT/decode_cublas_${GPU_TAG}.log" 2>&1
      echo "cublas exit $?"; grep -E "cublas" "$OUT/decode_cublas_${GPU_TAG}.log" | cut -c1-150 ;;
    stream)  # issue 31: the weights read by each load method with no math, beside the GEMVs
      timeout 300 python3 benchmarks/weight_stream.py --out "$OUT/weight_stream_${GPU_TAG}.json" ${STREAM_TILES:+--tiles} \
        ${STREAM_ARGS:-} \
        > "$OUT/weight_stream_${GPU_TAG}.log" 2>&1
      echo "stream exit $?"; tail -44 "$OUT/weight_stream_${GPU_TAG}.log" | cut -c1-160 ;;
    balance) # issue 31: is a slow SM slow every launch? the wgmma GEMV traced, T = 4 and 16
      timeout 200 python3 benchmarks/sm_balance.py --out "$OUT/sm_balance_${GPU_TAG}.json" ${BALANCE_ARGS:-} \
        > "$OUT/sm_balance_${GPU_TAG}.log" 2>&1
      echo "balance exit $?"; tail -20 "$OUT/sm_balance_${GPU_TAG}.log" | cut -c1-160 ;;
    dynamic) # issue 31: the dynamic ranges checked alone first, then timed beside the default
      timeout 240 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider -x \
        tests/library/test_wgmma_gemv.py -k dynamic > "$OUT/gpu_dynamic_tests.log" 2>&1
      rc=$?; echo "dynamic tests exit $rc"; tail -5 "$OUT/gpu_dynamic_tests.log" | cut -c1-300
      if [ $rc = 0 ]; then
        timeout 300 python3 benchmarks/weight_stream.py --out "$OUT/weight_stream_dynamic_${GPU_TAG}.json" \
          --no-probes --variant dynamic=2 --variant dynamic=4 --variant 'dynamic=2,pool=25' \
          --variant 'dynamic=1,pool=10' > "$OUT/weight_stream_dynamic_${GPU_TAG}.log" 2>&1
        echo "dynamic stream exit $?"; grep -E "^GEMV" "$OUT/weight_stream_dynamic_${GPU_TAG}.log" | cut -c1-160
      fi ;;
    bits)    # issue 31: is the wgmma GEMV's bf16 microsecond the kernel's or the bytes'? each
             # type's GEMV on its own values and on the other type's bits, a process each
      for spec in "bfloat16 bfloat16" "float16 float16" "bfloat16 float16" "float16 bfloat16"; do
        read -r kind made <<< "$spec"
        f="$OUT/weight_stream_bits_${kind}_of_${made}_${GPU_TAG}"
        timeout 150 python3 benchmarks/weight_stream.py --no-probes --dtype "$kind" \
          --bits-of "$made" --out "$f.json" > "$f.log" 2>&1
        echo "bits $kind of $made exit $?"; grep -E "^GEMV" "$f.log" | awk '{print $2, $3, $(NF-2), $(NF-1), $NF}'
      done ;;
    hswitch) # issue 31: the wgmma GEMV at its default tile against the wgmma dual GEMM, T = 8-64
      timeout 200 python3 benchmarks/decode_bench.py --tune-out "$OUT/decode_tune_hopper_switch_${GPU_TAG}.json" \
        --tune-t 8,16,24,32,48,64 --tune-paths hopper_gemv,hopper --tune-hopper-default --reps 10 \
        > "$OUT/decode_tune_hopper_switch_${GPU_TAG}.log" 2>&1
      echo "hswitch exit $?"; grep -E "^  T=" "$OUT/decode_tune_hopper_switch_${GPU_TAG}.log" | cut -c1-150 ;;
    htests)  # issue 31: the Hopper decode GEMV's GPU tests
      timeout 300 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider -x \
        tests/library/test_wgmma_gemv.py --junitxml="$OUT/gpu_wgmma_gemv_tests.xml" \
        > "$OUT/gpu_wgmma_gemv_tests.log" 2>&1
      echo "htests exit $?"; tail -30 "$OUT/gpu_wgmma_gemv_tests.log" | cut -c1-300 ;;
    final9)  # issue 31: the sweep again (the dispatcher's switch moved), its sweep rows merged
             # into book/data here, then chapters 9 and 11 recorded on it (carry .whl-nb too);
             # back here the same merge of the same file gives the same book/data/h100.json.
             # The run's host rows stay out of the merge: the book's come from the `host` step,
             # and a fresh machine's host can be far slower (torch.matmul 20.4 us against 12.0)
      bash records/bench/decode_session.sh "$OUT" sweep 2>&1 | grep -v "^WARNING: no Jupyter"
      python3 -m book.bench.merge "$OUT/decode_sweep_${GPU_TAG}.json" --variants '^sweep_' \
        > "$OUT/merge.log" 2>&1
      echo "merge exit $?"; tail -2 "$OUT/merge.log"
      timeout 500 python3 -m tools.record --out "$OUT" --budget 480 chapters/09_hopper.ipynb \
        chapters/11_same_move_everywhere.ipynb > "$OUT/record.log" 2>&1
      echo "record exit $?"; tail -8 "$OUT/record.log" ;;
    host)    # issue 31: the host rows of the planned calls alone, on a quiet host
      timeout 120 python3 benchmarks/decode_bench.py --out "$OUT/decode_host_${GPU_TAG}.json" \
        --only '^host_' > "$OUT/decode_host_${GPU_TAG}.log" 2>&1
      echo "host exit $?"; grep -E "host |met|MISS" "$OUT/decode_host_${GPU_TAG}.log" | tail -10 ;;
    liblane) # the GPU lane's library and chapters part only (records/tests/gpu_library_h100.json)
      timeout 300 python3 -m tools.gpu_tests --out "$OUT/gpu_${GPU_TAG}.json" --under tests/library \
        --under tests/chapters > "$OUT/gpu_lane_library.log" 2>&1
      echo "library lane exit $?"; tail -4 "$OUT/gpu_lane_library.log" ;;
    dtests)
      timeout 300 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider \
        tests/library/test_decode_mlp.py tests/library/test_staged_gemv.py \
        --junitxml="$OUT/gpu_decode_tests.xml" \
        > "$OUT/gpu_decode_tests.log" 2>&1
      echo "dtests exit $?"; tail -8 "$OUT/gpu_decode_tests.log" ;;
    lab2)
      timeout 400 python3 benchmarks/lesson_controls_probe.py --labs lab2 \
        --merge records/labs/lesson_controls_h100.json --out "$OUT/lesson_controls_${GPU_TAG}.json" \
        > "$OUT/lesson_controls_${GPU_TAG}.log" 2>&1
      echo "lab2 exit $?"; tail -8 "$OUT/lesson_controls_${GPU_TAG}.log" ;;
    bounds4)
      limits
      ( while sleep 5; do limits; done ) > "$OUT/bounds_limits.log" 2>&1 &
      watcher=$!
      timeout 300 python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider \
        "tests/grader/test_bounds_grading.py::test_on_a_gpu_a_store_past_the_end_is_caught_in_the_same_words[lab4_dual_gemm]" \
        --junitxml="$OUT/gpu_bounds_lab4.xml" > "$OUT/gpu_bounds_lab4.log" 2>&1
      echo "bounds4 exit $?"; kill $watcher 2>/dev/null
      tail -5 "$OUT/gpu_bounds_lab4.log"; grep -n "start new thread" "$OUT/gpu_bounds_lab4.log" | head -3
      sort -k4 -n "$OUT/bounds_limits.log" | tail -1
      grep -o "What the grading process had[^']*" "$OUT/gpu_bounds_lab4.log" | head -2
      # the simulator lane of the same fixtures, alone on this machine
      timeout 300 python3 -m pytest -q -rfEs -p no:cacheprovider \
        "tests/grader/test_bounds_grading.py::test_a_store_past_the_end_of_out_earns_no_correctness_points[lab4_dual_gemm]" \
        > "$OUT/sim_bounds_lab4.log" 2>&1
      echo "sim bounds4 exit $?"; tail -3 "$OUT/sim_bounds_lab4.log"
      grep -o "What the grading process had[^']*" "$OUT/sim_bounds_lab4.log" | head -2 ;;
    *) echo "unknown step $step" ;;
  esac
done
echo "done in $SECONDS s"
# the device tool brings back a few files a call: everything in one archive, with what an
# earlier run of this script in the same call archived (its files kept where this run wrote
# none of the same name)
( cd "$OUT" && if [ -f results.tgz ]; then tar -xzf results.tgz --skip-old-files; fi \
  && tar -czf /tmp/results.tgz --exclude=results.tgz . && rm -rf ./* \
  && mv /tmp/results.tgz results.tgz )
