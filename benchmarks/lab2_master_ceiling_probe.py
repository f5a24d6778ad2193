"""Where does lab 2's master stand against torch.add on this GPU, and which of its launch

Record: `records/labs/lab2_master_ceiling_h100.json` (and `_h200`).
constants put it at the ceiling? (issue 18: the master should stand at the ceiling on every GPU
it is measured on; on an H200 it stood well below its H100 fraction of torch.add.)

The master's own cells (solutions/lab2_packed_swiglu.ipynb: the constants cell and the kernel
cell, nothing else) are executed once per variant with THREADS (threads per block) and EPT
(output elements per thread: EPT x 8 bytes of loads in flight per thread before any math) and
ROWS (the most rows of blocks the launch asks for; each block loops over the rows it is given)
replaced, and each variant is timed with book.bench.measure on the grader's timing shape
against the lab's torch reference (torch.add on three [M, F] float32 tensors), the same way
`check()` times a student's function. Every variant's output is checked against the float64
reference first.

    python3 benchmarks/lab2_master_ceiling_probe.py --out $OUT/lab2_master_ceiling_h200.json

About a minute on an H100 or H200. Prints one row per variant (TB/s, fraction of torch.add) and
writes them with provenance.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import book  # noqa: E402,F401  (decides GPU or simulator before numba.cuda)

# (THREADS, EPT, most rows of blocks): the third is the cap in the launch's `min(M, ROWS)`. With
# one row of blocks per row of x (the cap at 65535), an H200 ran 57,000 short blocks and fell
# well short of torch.add; blocks that loop over a few rows each reach it.
VARIANTS = [(256, 4, 1024), (256, 4, 65535), (128, 4, 1024), (256, 8, 1024), (256, 4, 256),
            (512, 4, 1024)]


def master_cells() -> list[str]:
    from autograder.submission import read_cells

    cells = read_cells(ROOT / "solutions" / "lab2_packed_swiglu.ipynb")
    keep = [c["source"] for c in cells
            if re.search(r"^THREADS\s*=", c["source"], re.M) or "_swiglu_interleaved_kernel" in c["source"]]
    if len(keep) != 2:
        raise SystemExit(f"expected the constants cell and the kernel cell, found {len(keep)}")
    return keep


def variant(cells, threads: int, ept: int, rows: int):
    src = "\n".join(cells)
    src, n = re.subn(r"min\(M, \d+\)", f"min(M, {rows})", src)
    if n != 1:
        raise SystemExit(f"expected one launch capped as min(M, ROWS) in the master, found {n}")
    src = re.sub(r"^THREADS\s*=.*$", f"THREADS = {threads}", src, count=1, flags=re.M)
    src = re.sub(r"^EPT\s*=.*$", f"EPT = {ept}", src, count=1, flags=re.M)
    ns: dict = {}
    exec(compile(src, f"<lab2 master THREADS={threads} EPT={ept} ROWS={rows}>", "exec"), ns)
    return ns["swiglu_interleaved"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import numpy as np
    from numba import cuda

    from autograder.inputs import generate
    from autograder.labs import get
    from book import gpu
    from book.bench import measure
    from book.provenance import provenance

    lab = get("lab2")
    if gpu.SIMULATED:
        raise SystemExit("this probe measures: it needs a CUDA GPU")
    rec = {"provenance": provenance("python3 benchmarks/lab2_master_ceiling_probe.py --out " + str(args.out)),
           "rows": []}
    case = lab.timing_case(False, 12345)
    nbytes = lab.min_bytes(case)
    sets, host = [], None
    for k in range(3):
        c = dict(case, seed=case["seed"] + k)
        h = {n: generate(s) for n, s in lab.input_specs(c).items()}
        host = host or (c, h)
        o = lab.out_spec(c)
        sets.append((cuda.to_device(h["x"]), cuda.device_array(tuple(o["shape"]), dtype=o["dtype"])))
    ref_fn, ref_sets = lab.make_reference_runner(case)
    ref = measure(ref_fn, ref_sets, bytes_moved=nbytes)
    rec["torch_add"] = {"bandwidth": ref.bandwidth, "median_s": ref.median_s, "method": ref.method}
    print(f"{gpu.device_info().name}: torch.add {ref.bandwidth / 1e12:.3f} TB/s effective")
    c0, h0 = host
    expect = lab.reference(h0)
    cells = master_cells()
    src = "\n".join(cells)
    shipped = tuple(int(re.search(rf"^{k}\s*=\s*(\d+)", src, re.M).group(1)) for k in ("THREADS", "EPT"))
    shipped += (int(re.search(r"min\(M, (\d+)\)", src).group(1)),)
    rec["shipped"] = {"threads": shipped[0], "ept": shipped[1], "rows": shipped[2]}
    for threads, ept, rows in VARIANTS:
        fn = variant(cells, threads, ept, rows)
        x, out = sets[0]
        fn(x, out)
        cuda.synchronize()
        got = out.copy_to_host()
        ok = bool(np.allclose(got, expect, rtol=lab.rtol, atol=lab.atol))
        m = measure(fn, sets, bytes_moved=nbytes)
        row = {"threads": threads, "ept": ept, "rows": rows, "correct": ok, "bandwidth": m.bandwidth,
               "median_s": m.median_s, "fraction_of_torch_add": ref.median_s / m.median_s,
               "shipped": (threads, ept, rows) == shipped}
        rec["rows"].append(row)
        print(f"THREADS={threads:4d} EPT={ept:3d} ROWS={rows:5d}  {m.bandwidth / 1e12:.3f} TB/s  "
              f"{row['fraction_of_torch_add']:.3f} of torch.add  correct={ok}"
              + ("  (shipped)" if row["shipped"] else ""))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
