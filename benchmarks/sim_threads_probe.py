"""Where a simulated grading child's address space goes, on this machine.

Record: `records/grader/sim_threads_<gpu>.json`.

The grader runs a submission in Numba's CUDA simulator under RLIMIT_AS (the rubric's memory,
6 GiB by default: autograder/sandbox/inside/launcher.py), and the simulator starts a Python
thread per simulated CUDA thread. On the H100 machine (16 CPUs) a lab-4 kernel of 16 x 16
threads failed there with "can't start new thread"; on a 2-CPU machine it never did. This
probe does what such a child does (the limit, 1 MiB thread stacks, the simulator, the course
library, blocks of 256 and 1024 threads) in fresh processes, with and without a cap on
glibc's malloc arenas (MALLOC_ARENA_MAX), and reports the virtual size after each launch,
the largest mappings, and the launch that failed:

    python3 benchmarks/sim_threads_probe.py --out $OUT/sim_threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, os, resource, sys, threading
limit = int(sys.argv[1])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
threading.stack_size(1 << 20)
os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

def status():
    d = dict(l.split(":", 1) for l in open("/proc/self/status"))
    return {k: d[k].strip() for k in ("VmSize", "VmPeak", "VmRSS", "Threads")}

def biggest(n=12):
    out = []
    for line in open("/proc/self/maps"):
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        out.append((hi - lo, parts[5] if len(parts) > 5 else "[anon]"))
    by = {}
    for size, name in out:
        by[name] = by.get(name, 0) + size
    return sorted(((v >> 20, k) for k, v in by.items()), reverse=True)[:n]

steps = [{"step": "start", **status()}]
import book  # noqa: F401
import numpy as np
from numba import cuda
steps.append({"step": "import book", **status()})

@cuda.jit
def k(a):
    i, j = cuda.grid(2)
    if i < a.shape[0] and j < a.shape[1]:
        a[i, j] = i * j

a = cuda.to_device(np.zeros((64, 64), np.float32))
err = None
try:
    for block in ((16, 16), (16, 16), (32, 32), (32, 32)):
        k[(2, 2), block](a)
        steps.append({"step": f"launch {block}", **status()})
except Exception as e:
    err = repr(e)
print(json.dumps({"steps": steps, "error": err, "maps_mib": biggest()}))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--limit-gib", type=float, default=6.0)
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from book.provenance import provenance

    rec = {"provenance": provenance("python3 benchmarks/sim_threads_probe.py "
                                    + " ".join(argv or sys.argv[1:])),
           "cpus": os.cpu_count(), "limit_bytes": int(args.limit_gib * (1 << 30)), "runs": {}}
    for name, extra in (("default", {}), ("MALLOC_ARENA_MAX=2", {"MALLOC_ARENA_MAX": "2"})):
        env = dict(os.environ, PYTHONPATH=str(ROOT), **extra)
        env.pop("BOOK_SIMULATOR", None)
        p = subprocess.run([sys.executable, "-c", CHILD, str(rec["limit_bytes"])], env=env,
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
        try:
            res = json.loads(p.stdout.strip().splitlines()[-1])
        except (IndexError, json.JSONDecodeError):
            res = {"error": f"exit {p.returncode}: {(p.stdout + p.stderr)[-1500:]}"}
        rec["runs"][name] = res
        print(f"{name}: error {res.get('error')}")
        for s in res.get("steps", []):
            print(f"  {s['step']:22s} VmSize {s['VmSize']:>12s} VmPeak {s['VmPeak']:>12s} "
                  f"threads {s['Threads']}")
        for mib, what in res.get("maps_mib", [])[:8]:
            print(f"    {mib:7d} MiB  {what}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
