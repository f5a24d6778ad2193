#!/bin/bash
# Record: `records/launch/host_rows_h100.json`, `book/data/h100.json`, `records/chapters/h100/`.
# A runbook kept beside its records (issue 44); step 4's probe is retired
# (`git show 3faadbc:benchmarks/fastcall_probe.py`, its findings in records/launch/README.md).
# One device session for the decode section's host rows, the compiled MLP-up rows and the
# chapters that show them, inside 9 minutes on the H100 (bench capped at 200 s, expected ~90;
# recording budget 300 s, expected ~240: ch6 54 s, ch7 169 s, ch8 10 s when last recorded):
#
#   COURSE_COMMIT=$(git rev-parse HEAD) bash records/launch/host_session.sh $OUT
#   (device tool: carry .whl and .whl-nb, the wheels of CONTRIBUTING.md "Record on the
#    device machine"; the image has no Jupyter)
#
# 1. one benchmark run, one provenance: every row chapter 6's decode section shows at 1x18944
#    (the host rows as one interleaved group, the kernels' and torch's GPU rows, the graph
#    replays) and chapter 7's torch MLP-up rows, eager and torch.compile'd
#    -> $OUT/host_rows_h100.json
# 2. those rows merged into this copy's book/data/h100.json, so that the chapters recorded next
#    read them (back here the same merge gives the same file);
# 3. chapters 6, 7 and 8 recorded -> $OUT/chapters-h100.tar.gz, $OUT/record-summary.json;
# 4. if time is left, benchmarks/fastcall_probe.py: the cheap path's outputs bit-equal to the
#    wrapper's, its packing equal to numba-cuda's, graph replay -> $OUT/fastcall_probe_h100.json
#
# Back here:
#   python -m book.bench.merge <files>/host_rows_h100.json     # book/data/h100.json
#   cp <files>/host_rows_h100.json records/launch/
#   python -m tools.record --install <files>/chapters-h100.tar.gz
#   (and, if step 4 ran, cp <files>/fastcall_probe_h100.json records/launch/)
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/launch/host_session.sh OUTDIR}
. benchmarks/device_env.sh

DECODE='^(vec4|half8|torch_eager|torch_compile|torch_eager_graph)$|launch_layer|_torch_call$|python_launch|raw_launch|checks_only'
MLP_UP='^torch_mlp_up'
echo "[1] bench rows ($SECONDS s)"
timeout 200 python3 -m book.bench --dtypes float32 bfloat16 --shapes 1x18944 --no-tensorcore \
  --only "$DECODE|$MLP_UP" --rows-out "$OUT/host_rows_h100.json" > "$OUT/host_rows_h100.log" 2>&1
echo "bench exit $?"
grep -E "launch_layer_fastcall|torch_call|torch_mlp_up|MISS|met\]|FAILED|correctness|wrote" "$OUT/host_rows_h100.log" | tail -40
[ -s "$OUT/host_rows_h100.json" ] || { tail -30 "$OUT/host_rows_h100.log"; exit 1; }

echo "[2] merge ($SECONDS s)"
python3 -m book.bench.merge "$OUT/host_rows_h100.json" || exit 1

echo "[3] record chapters 6, 7, 8 ($SECONDS s)"
python3 -m tools.record --out "$OUT" --timeout 240 --budget 300 \
  chapters/06_saturating_bandwidth.ipynb chapters/08_tensor_cores.ipynb chapters/07_epilogue_fusion.ipynb
echo "record exit $?"

if [ "$SECONDS" -lt 460 ]; then
  echo "[4] fastcall probe ($SECONDS s)"
  timeout $((530 - SECONDS)) python3 benchmarks/fastcall_probe.py \
    --out "$OUT/fastcall_probe_h100.json" > "$OUT/fastcall_probe_h100.log" 2>&1
  echo "probe exit $?"; tail -12 "$OUT/fastcall_probe_h100.log"
fi
echo "done in $SECONDS s"
