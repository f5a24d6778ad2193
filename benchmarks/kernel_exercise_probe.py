"""Chapter 5's fix-the-kernel exercise on a real GPU (the simulator cannot show this path).

Record: `records/labs/kernel_exercise_h100.json`.

On a GPU a missing bounds check does not fault here: `book.exercises` runs the reader's kernel
on views of padded arrays, so the stray stores land in padding and the check reports them.

    python benchmarks/kernel_exercise_probe.py --out DIR   # writes DIR/kernel_exercise.json
"""

import argparse
import json
import math
from pathlib import Path

import book  # decides GPU or simulator before numba.cuda
from numba import cuda, float32

from book import exercises
from book.provenance import provenance

BUGGY = '''@cuda.jit
def my_fused(gate, up, out):
    i = cuda.grid(1)
    g = gate[i]
    out[i] = g / (float32(1.0) + math.exp(g)) * up[i]'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    ns = {"cuda": cuda, "float32": float32, "math": math}
    fix = exercises.fix_fused_kernel()
    exec(BUGGY, ns)
    wrong = str(fix.check(ns["my_fused"]))
    exec(fix.solution_source, ns)
    right = str(fix.check(ns["my_fused"]))
    r = {"provenance": provenance("python benchmarks/kernel_exercise_probe.py"),
         "simulated": book.gpu.SIMULATED, "wrong": wrong, "right": right,
         "ok": wrong.startswith("Not yet. The kernel") and "past the end" in wrong
         and right.startswith("Right.")}
    print(json.dumps({k: v for k, v in r.items() if k != "provenance"}, indent=1))
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "kernel_exercise.json").write_text(json.dumps(r, indent=1) + "\n")
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
