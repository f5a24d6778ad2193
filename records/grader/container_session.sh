#!/bin/bash
# Record: `records/grader/container_h100/` (the summary, the CSV and the GPU tests' log).
# Issue 28, part B, on one H100 (one device call, under 10 minutes): the sandbox as it now is
# on a GPU. Student code never runs as root (a uid of its own always, the grader's Python
# shared read-only in the child's mount namespace, the driver's own check), the trusted
# replay process starts with `python -I` (its path given explicitly: the carried numpy must
# still win), performance is measured, not pending.
#
#   COURSE_COMMIT=$(git rev-parse HEAD) bash records/grader/container_session.sh $OUT
#   (device tool: carry .whl, the numpy wheel of benchmarks/device_env.sh)
#
# 1. lab 2 graded as shipped: its master, an honest neighbour and the container fixtures
#    (tests/fixtures/container: read the seed, forge and kill, plant code, threads without
#    end): the master and the neighbour at full marks with performance measured, the hostile
#    ones 0, every child's uid its own, nothing of theirs left -> $OUT/container_grade_h100.json
#    (and the run's grades.csv and log: four files in all with step 2's)
# 2. the GPU tests of the sandbox and the grader (tests/grader/test_isolation.py: NVML names
#    the child's processes, an escaped GPU process dies with it, the GPU memory budget;
#    tests/grader/test_grader_gpu.py: identical masters, the same full marks)
#    -> $OUT/container_gpu_tests.txt
#
# Back here: nothing to commit unless it fails; its lines go in the report of issue 28.
# SIMULATOR=1 runs step 1 without a GPU (a rehearsal of this script; performance pending).
set -u
OUT=${1:?usage: COURSE_COMMIT=<sha> bash records/grader/container_session.sh OUTDIR}
PY=${PY:-python3}   # (a rehearsal here: PY=.venv/bin/python)
mkdir -p "$OUT"
if [ -z "${SIMULATOR:-}" ]; then
  . benchmarks/device_env.sh
  SIM=""
else
  export COURSE_COMMIT="${COURSE_COMMIT:-$(git rev-parse --short HEAD)}"
  export PYTHONPATH="$PWD"
  SIM="--simulator"
fi
GRADED=/tmp/container_grade   # (outside $OUT: only the summary and the CSV come back)
rm -rf "$GRADED" /tmp/ag-planted-ran-*
cp tests/fixtures/submissions/honest_simple.py /tmp/neighbour.py

echo "[1] grade lab 2 with the container fixtures ($SECONDS s)"
timeout 420 "$PY" -m autograder grade lab2 solutions/lab2_packed_swiglu.ipynb /tmp/neighbour.py \
  tests/fixtures/container/reads_seed.py tests/fixtures/container/forges_and_kills.py \
  tests/fixtures/container/plants_code.py tests/fixtures/container/threads_without_end.py \
  --out "$GRADED" $SIM > "$OUT/container_grade.log" 2>&1
echo "grade exit $?"; tail -12 "$OUT/container_grade.log"
cp "$GRADED/grades.csv" "$OUT/container_grades.csv" 2>/dev/null
"$PY" - "$GRADED" "$OUT/container_grade_h100.json" <<'EOF'
import glob, json, os, sys
from book.provenance import provenance
graded, out = sys.argv[1], sys.argv[2]
rows = {}
for rj in sorted(glob.glob(f"{graded}/*/results.json")):
    d = json.load(open(rj))
    e = d["extra_data"]
    iso = e.get("isolation") or {}
    perf = e.get("performance") or {}
    printed = [ln for ln in e.get("printed", "").splitlines()
               if ln.split(" ")[0] in ("READ-OK", "READ-DENIED", "NET-OK", "NET-DENIED", "FORGE-OK",
                                       "FORGE-DENIED", "KILLED", "PLANT-OK", "PLANT-DENIED", "THREADS")]
    rows[e["id"]] = {"score": d["score"], "max": e["max_score"], "pending": e.get("pending_points"),
                     "status": e["status"], "fraction": perf.get("fraction"),
                     "containment": iso.get("containment"), "uid": iso.get("uid"),
                     "uid_drop": iso.get("uid_drop"), "network": iso.get("network"),
                     "missing": iso.get("missing"), "notes": iso.get("notes"), "said": printed[:12]}
left = []
for d in os.listdir("/proc"):
    if d.isdigit():
        try:
            uid = int(open(f"/proc/{d}/status").read().split("Uid:")[1].split()[0])
        except (OSError, IndexError, ValueError):
            continue
        if 0x50000000 <= uid < 0x51000000:
            left.append(d)
planted = glob.glob("/tmp/ag-planted-ran-*")
s = {"provenance": provenance("bash records/grader/container_session.sh"), "results": rows,
     "child_uid_processes_left": left, "planted_code_ran": planted}
json.dump(s, open(out, "w"), indent=1, default=str)
print(f"{'id':<22} {'score':>6} {'max':>4} {'pend':>4} {'status':<10} {'frac':>6} {'contain':<8} uid_drop")
for k, r in rows.items():
    frac = f"{r['fraction']:.3f}" if r["fraction"] else "-"
    print(f"{k:<22} {r['score']:>6} {r['max']:>4} {r['pending']!s:>4} {r['status']:<10} {frac:>6} "
          f"{r['containment']!s:<8} {r['uid_drop']}")
print("left:", left, "planted code ran:", planted)
EOF

if [ -z "${SIMULATOR:-}" ]; then
  echo "[2] GPU tests of the sandbox and the grader ($SECONDS s)"
  for f in tests/grader/test_isolation.py tests/grader/test_grader_gpu.py; do
    timeout $((585 - SECONDS)) "$PY" -m pytest -m gpu -q -rfEs -p no:cacheprovider "$f" \
      >> "$OUT/container_gpu_tests.txt" 2>&1
    echo "$f exit $?"
  done
  tail -20 "$OUT/container_gpu_tests.txt"
fi
echo "done in $SECONDS s"
