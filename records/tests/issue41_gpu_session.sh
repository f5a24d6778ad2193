#!/bin/bash
# The runbook of one device call (2026-11-28, an H200): issue 41's GPU lane (lab 6's split-K
# faults, every lab's paths on a GPU's cases, the bounds and state fixtures, the graded
# compute-sanitizer case) and the new chapters recorded (07b reductions, 09b eight bits), side
# by side (16 cores, one GPU: the grading runs judge cases and time nothing); PARTS="splitk
# bounds_lab2 ..." runs only those parts (and records nothing). Writes, under OUT:
# lane.tar.gz (pytest's logs and JUnit reports per part, the recording's bundle) and
# gpu_grader_<gpu>.json (the summary, with provenance, that records/tests/ keeps).
#
#   COURSE_COMMIT=<sha> bash records/tests/issue41_gpu_session.sh $OUT   (device tool: carry .whl .whl-nb)
set -u
OUT=$1
mkdir -p "$OUT/work"
W=$OUT/work
source benchmarks/device_env.sh > "$W/env.log" 2>&1
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$W/gpu_before.csv"
part() {  # part NAME PYTEST_ARGS...: the gpu tests of one part, in a process of its own
  local name=$1; shift
  case " ${PARTS:-$name} " in *" $name "*) ;; *) return 0 ;; esac   # PARTS="a b": only those
  timeout "${PART_S:-460}" python3 -m pytest -m gpu -q -rfEs -p no:cacheprovider \
    --junitxml="$W/junit_$name.xml" "$@" > "$W/log_$name.txt" 2>&1
  echo "$name exit $?" >> "$W/exits.txt"
}
part splitk tests/grader/test_split_k_faults.py &
for lab in lab2 lab3 lab4 lab5 lab6; do
  part "bounds_$lab" tests/grader/test_bounds_grading.py -k "$lab" &
  part "paths_$lab" tests/grader/test_lab_paths.py -k "$lab" &
done
part sanitizer tests/grader/test_feedback.py -k compute_sanitizer &
part fp8gemv tests/library/test_fp8_gemv.py -k matches_its_model &
[ -n "${PARTS:-}" ] || (timeout "${RECORD_S:-460}" python3 -m tools.record --out "$W/chapters" --timeout 440 \
   chapters/07b_reductions.ipynb chapters/09b_eight_bits.ipynb > "$W/log_record.txt" 2>&1;
 echo "record exit $?" >> "$W/exits.txt") &
wait
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > "$W/gpu_after.csv"
python3 - "$W" "$OUT" <<'EOF'
import sys
from pathlib import Path

from book.provenance import provenance
from book.specs import slug
from book import gpu
from tools.gpu_tests import summary
import json

w, out = Path(sys.argv[1]), Path(sys.argv[2])
junits = sorted(w.glob("junit_*.xml"))
cmd = "bash records/tests/issue41_gpu_session.sh OUT"
parts = [ln for ln in (w / "exits.txt").read_text().split("\n") if ln]
rc = max([int(ln.rsplit(" ", 1)[1]) for ln in parts] + [0])
s = summary(junits, rc, cmd, provenance(cmd))
s["parts"] = parts
name = f"gpu_grader_{slug(gpu.device_info().name)}.json"
(out / name).write_text(json.dumps(s, indent=1, default=str) + "\n")
print(name, s["counts"])
for t in s["tests"]:
    if t["outcome"] not in ("passed", "skipped"):
        print("FAILED", t["test"], (t["message"] or "")[:300])
EOF
cat "$W/exits.txt"
tail -3 "$W"/log_record.txt
tar -czf "$OUT/lane.tar.gz" -C "$OUT" work
rm -rf "$W"
