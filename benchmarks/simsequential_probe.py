"""The simulator's two ways to run a block: every thread a Python thread (numba-cuda's), or a
barrier-free block's threads in turn on one Python thread (book/simsequential.py), on the CPU.

Record: `records/simulator/simsequential_cpu.json`.

Each call runs in a fresh process twice, ``BOOK_SIM_SEQUENTIAL=0`` (threads) and ``=1`` (in
turn, the default); the outputs must be the same bytes, and the script prints the process's CPU
seconds and wall seconds for the call, and the ratios. The calls: the masters of labs 2 and 3 on
their first simulated hidden case (``KernelLab.call_here``, as the grader calls it) and
``check()`` (public cases, no performance, no access trace); chapter 4's two-kernel SwiGLU and
chapter 5's fused one at n = 4096 and 16384, blocks of 256. No GPU: it forces the simulator.

    python3 benchmarks/simsequential_probe.py --out records/simulator/simsequential_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

ONE = r'''
import contextlib, hashlib, io, json, resource, sys, time
import numpy as np
import book
what, arg = sys.argv[1], sys.argv[2]

def clock():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return time.perf_counter(), r.ru_utime + r.ru_stime

def sha(a):
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()[:16]

if what == "lab":
    from autograder import labs
    from autograder.check import check
    from tools.lab_ptx import master_cells
    lab, how = arg.split(":")
    spec = labs.get(lab)
    ns = {"__name__": "__main__"}
    for cid, src in master_cells(lab):
        exec(compile(src, f"<{lab} {cid}>", "exec"), ns)
    fn = ns[spec.function]
    if how == "hidden":
        case = spec.hidden_cases(np.random.default_rng(0), simulated=True)[0]
        w0, c0 = clock(); got, _ = spec.call_here(fn, case); w1, c1 = clock()
        out = sha(got)
    else:
        with contextlib.redirect_stdout(io.StringIO()):
            w0, c0 = clock(); ok = check(fn, perf=False, access=False); w1, c1 = clock()
        out = str(bool(ok))
else:
    from numba import cuda
    from book.kernels import fused, naive
    n = int(arg)
    rng = np.random.default_rng(n)
    g, u = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    f = {"naive": naive.swiglu_naive, "fused": fused.swiglu_fused}[what]
    dg, du = cuda.to_device(g), cuda.to_device(u)
    w0, c0 = clock(); o = f(dg, du, block=256); w1, c1 = clock()
    out = sha(o.copy_to_host())
print(json.dumps({"wall": w1 - w0, "cpu": c1 - c0, "out": out}))
'''

CALLS = [("lab", "lab2_packed_swiglu:hidden"), ("lab", "lab2_packed_swiglu:check"),
         ("lab", "lab3_half_precision:hidden"), ("lab", "lab3_half_precision:check"),
         ("naive", "4096"), ("fused", "4096"), ("naive", "16384"), ("fused", "16384")]


def run(what: str, arg: str, sequential: str) -> dict:
    env = dict(os.environ, BOOK_SIMULATOR="1", BOOK_QUIET="1", PYTHONPATH=str(ROOT),
               BOOK_SIM_SEQUENTIAL=sequential)
    p = subprocess.run([sys.executable, "-c", ONE, what, arg], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"{what} {arg} (BOOK_SIM_SEQUENTIAL={sequential}) failed:\n"
                         f"{p.stdout[-2000:]}{p.stderr[-2000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "records/simulator/simsequential_cpu.json")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from autograder import labs
    from book.provenance import provenance

    known = set(labs.names())
    rows = []
    print(f"{'call':40s} {'threads cpu':>11s} {'in turn cpu':>11s} {'ratio':>6s} "
          f"{'wall ratio':>10s}")
    for what, arg in CALLS:
        if what == "lab" and arg.split(":")[0] not in known:
            raise SystemExit(f"no lab {arg.split(':')[0]}: the registry has {sorted(known)}")
        threads, turn = run(what, arg, "0"), run(what, arg, "1")
        assert threads["out"] == turn["out"], (what, arg, threads, turn)
        rows.append({"call": f"{what} {arg}", "threads": threads, "in_turn": turn,
                     "cpu_ratio": threads["cpu"] / turn["cpu"],
                     "wall_ratio": threads["wall"] / turn["wall"]})
        print(f"{what + ' ' + arg:40s} {threads['cpu']:11.2f} {turn['cpu']:11.2f} "
              f"{rows[-1]['cpu_ratio']:5.1f}x {rows[-1]['wall_ratio']:9.1f}x")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "provenance": provenance("python3 benchmarks/simsequential_probe.py"),
        "what": "one call each, in a fresh process, with a barrier-free block's threads as "
                "Python threads (BOOK_SIM_SEQUENTIAL=0) and in turn on one (=1): the process's "
                "CPU seconds and wall seconds for the call; the same output bytes both ways",
        "rows": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
