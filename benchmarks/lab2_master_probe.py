"""Lab 2's master kernel on this GPU: elements per thread and block size against `torch.add`.

The grader's full-marks line is drawn from the master's measured fraction of `torch.add` (the
three-stream ceiling). On the H100 the master (4 outputs per thread, 256 threads) sat at 0.96 of
it; on an H200 at 0.84. An H200 moves 1.4x the bytes per second with about the same latency, so
by Little's law it needs about 1.4x the bytes in flight per multiprocessor: this probe measures
the master's shape of kernel with more outputs per thread (more independent loads issued before
the first use) and other block sizes, on the grader's timing shape, each against `torch.add` on
three [M, F] float32 tensors timed the same way (CUDA events, median, input sets rotated).

    COURSE_COMMIT=<sha> python3 benchmarks/lab2_master_probe.py --out DIR   # DIR/lab2_master_<gpu>.json
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import book  # noqa: F401  (decides GPU or simulator before numba.cuda is imported)
import numpy as np
from book.provenance import provenance

M, F = 4096, 14336       # the grader's timing case for lab 2 (autograder/labs/lab2_packed_swiglu.py)


def make_kernel(ept: int):
    """The master's kernel with `ept` outputs per thread (the master's text, EPT a parameter)."""
    from numba import cuda, float32

    @cuda.jit(fastmath=True)
    def kernel(x, out, M, F):
        g = cuda.local.array(ept, float32)
        u = cuda.local.array(ept, float32)
        base = cuda.blockIdx.x * (cuda.blockDim.x * ept) + cuda.threadIdx.x
        for row in range(cuda.blockIdx.y, M, cuda.gridDim.y):
            for e in range(ept):
                j = base + e * cuda.blockDim.x
                if j < F:
                    g[e] = x[row, 2 * j]
                    u[e] = x[row, 2 * j + 1]
            for e in range(ept):
                j = base + e * cuda.blockDim.x
                if j < F:
                    out[row, j] = g[e] / (float32(1.0) + math.exp(-g[e])) * u[e]
    return kernel


def time_sets(fn, sets, reps=30, warm=5):
    import torch
    for k in range(warm):
        fn(*sets[k % len(sets)])
    torch.cuda.synchronize()
    times = []
    for r in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for s in sets:
            fn(*s)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / len(sets) * 1e-3)
    return float(np.median(times)), float(np.min(times)), float(np.max(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    args = ap.parse_args()
    import torch
    from numba import cuda

    nbytes = 3 * M * F * 4
    sets_ref = [(torch.randn(M, F, device="cuda"), torch.randn(M, F, device="cuda"),
                 torch.empty(M, F, device="cuda")) for _ in range(4)]
    ref = time_sets(lambda a, b, c: torch.add(a, b, out=c), sets_ref)
    print(f"torch.add: {ref[0] * 1e6:.1f} us, {nbytes / ref[0] / 1e12:.3f} TB/s", flush=True)

    xs = [torch.randn(M, 2 * F, device="cuda") * 3 for _ in range(4)]
    outs = [torch.empty(M, F, device="cuda") for _ in range(4)]
    xd = [cuda.as_cuda_array(t) for t in xs]
    od = [cuda.as_cuda_array(t) for t in outs]
    rows = []
    for ept in (4, 8):
        kern = make_kernel(ept)
        for threads in (128, 256):
            for ymax in (65535, 4096 // ept, 2048 // ept, 1024 // ept, 512 // ept, 256 // ept):
                bx = (F + threads * ept - 1) // (threads * ept)
                grid = (bx, min(M, ymax))

                def launch(x, o, kern=kern, grid=grid, threads=threads):
                    kern[grid, threads](x, o, M, F)
                launch(xd[0], od[0])
                cuda.synchronize()
                g = xs[0][:, 0::2].double()
                u = xs[0][:, 1::2].double()
                err = float(((outs[0].double() - g * torch.sigmoid(g) * u).abs().max()).item())
                med, lo, hi = time_sets(launch, list(zip(xd, od)))
                frac = ref[0] / med
                rows.append({"ept": ept, "threads": threads, "grid": list(grid), "median_s": med,
                             "min_s": lo, "max_s": hi, "tb_s": nbytes / med / 1e12,
                             "fraction_of_torch_add": frac, "max_abs_err": err})
                print(f"ept={ept:2d} threads={threads:3d} grid={grid}: {med * 1e6:8.1f} us "
                      f"{nbytes / med / 1e12:.3f} TB/s  {frac:.3f} of torch.add  err {err:.1e}",
                      flush=True)
    # the ceiling again, after: clocks may have moved during the sweep
    ref2 = time_sets(lambda a, b, c: torch.add(a, b, out=c), sets_ref)
    print(f"torch.add again: {ref2[0] * 1e6:.1f} us", flush=True)
    prov = provenance("python3 benchmarks/lab2_master_probe.py")
    doc = {"provenance": prov, "shape": {"M": M, "F": F}, "bytes": nbytes,
           "torch_add_s": [ref[0], ref2[0]], "rows": rows}
    name = re.sub(r"[^a-z0-9]+", "_", (prov.get("gpu") or "gpu").lower()).strip("_")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / f"lab2_master_{name}.json").write_text(json.dumps(doc, indent=1) + "\n")


if __name__ == "__main__":
    main()
