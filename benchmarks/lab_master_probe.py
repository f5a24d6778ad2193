"""Where does a lab's master stand on this GPU against the lab's own reference?

Record: `records/labs/` (`lab2_master_ceiling_h100.json`, `lab5_master_h100.json`,
`lab6_master_h200.json`: the lab and the GPU's tag in the name).

    python3 -m benchmarks.lab_master_probe --lab 2 --out $OUT/lab2_master_ceiling_h200.json
    python3 -m benchmarks.lab_master_probe --lab 5 --out $OUT/lab5_master_h100.json
    python3 -m benchmarks.lab_master_probe --lab 6 --out $OUT/lab6_master_h200.json

What every lab shares: the master's graded code (solutions/<lab>.ipynb: every code cell the
grader runs, less the check cells, the instructor's hidden tests and the setup cells) is
executed, checked on the grader's timing shape (``timing_case`` of the lab module) against the
float64 reference by the lab's own check (the output poisoned with NaN first), and timed with
book.bench.measure against the lab's reference runner (``make_reference_runner``) in the same
process. Lab 5's and lab 6's full-marks line follows from it: the master's fraction of the
reference / MARGIN (in the rubric's master units, basis = "master", that line is always
1 / 1.25 = 0.80). What each lab adds:

- ``--lab 2`` (issue 18: the master should stand at the ceiling on every GPU it is measured on;
  on an H200 it stood well below its H100 fraction of torch.add): only the constants cell and
  the kernel cell, executed once per variant of THREADS (threads per block), EPT (output
  elements per thread: EPT x 8 bytes of loads in flight per thread before any math) and ROWS
  (the most rows of blocks the launch asks for; each block loops over the rows it is given),
  each timed against torch.add on three [M, F] float32 tensors. About a minute.
- ``--lab 5`` (issue 23: the master at or above 1.25x the full-marks line of
  autograder/rubrics/lab5_tensor_core_dual_gemm.toml): ``linear_swiglu_tc`` against one cuBLAS
  F.linear on [wg; wu] with the biases, float16, then torch.compile's SiLU * up, in TFLOP/s; its
  bfloat16 path too where the GPU has it (sm_80+), and two more shapes (decode T = 1, a mid-size
  prefill) for the record.
- ``--lab 6`` (issue 31, and issue 43: what the master reaches): ``decode_swiglu`` against the
  same reference in GB/s of the weight bytes, at the timing shape (T = 4, d = 4096, h = 14336)
  and at T = 1, 8 and 16, the course's own GEMV (``planned("decode")``, float16) beside it; the
  lab's fixtures (the lesson's control, weights read twice, atomics) checked and timed on the
  timing shape, each as a fraction of the master: where they land against the rubric's lines of
  autograder/rubrics/lab6_decode_mlp_up.toml. ``--reps`` 20 by default here.

Prints one line per row; writes every row with provenance. Until issue 44 these were three
scripts (lab2_master_ceiling_probe.py, lab5_master_probe.py, lab6_master_probe.py; in the
history at 3faadbc); the records they wrote keep their names and fields.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import book  # noqa: F401  (decides GPU or simulator before numba.cuda)

LABS = {2: "lab2_packed_swiglu", 5: "lab5_tensor_core_dual_gemm", 6: "lab6_decode_mlp_up"}
MARGIN = 1.25  # the master stands this far above the full-marks line (issue 23)

# lab 2's (THREADS, EPT, most rows of blocks): the third is the cap in the launch's
# `min(M, ROWS)`. With one row of blocks per row of x (the cap at 65535), an H200 ran 57,000
# short blocks and fell well short of torch.add; blocks that loop over a few rows each reach it.
LAB2_VARIANTS = [(256, 4, 1024), (256, 4, 65535), (128, 4, 1024), (256, 8, 1024), (256, 4, 256),
                 (512, 4, 1024)]
LAB5_EXTRA_SHAPES = [(1, 4096, 14336), (512, 4096, 14336)]
LAB6_EXTRA_T = (1, 8, 16)
#: lab 6's fixtures timed beside the master (the record's name: the submission the lab module
#: derives from its master; the lesson's control is the rubric's)
LAB6_FIXTURES = {"one_thread_per_output": "lab6_one_thread_per_output",
                 "reads_weights_twice": "reads_weights_twice", "atomics": "atomics"}


def graded_cells(name: str) -> list[str]:
    """The master's graded code (autograder.master: the cells the grader runs, less the check
    cells, the instructor's hidden tests and the setup cells)."""
    from autograder import master

    return [c.source for c in master.graded_cells(name)]


def namespace(name: str, sources: list[str]) -> dict:
    """The names the cells define, executed in order as a notebook runs them."""
    ns: dict = {"__name__": "__main__"}
    for i, src in enumerate(sources):
        exec(compile(src, f"<{name} cell {i}>", "exec"), ns)
    return ns


def derived(name: str, fixture: str) -> dict:
    """The names of a submission lab ``name`` derives from its master (LabSpec.derived)."""
    from autograder import master
    from autograder.labs import get

    return namespace(fixture, [master.derive(name, get(name).derived_named(fixture))])


class Probe:
    """What every lab's probe does: its lab, the GPU, the provenance, the timing shape, the
    lab's inputs on the GPU, a function checked on a case, the reference runner timed."""

    def __init__(self, args, argv):
        from autograder.labs import get
        from book import gpu
        from book.provenance import provenance

        if gpu.SIMULATED:
            raise SystemExit("this probe measures: it needs a CUDA GPU")
        self.name = LABS[args.lab]
        self.lab = get(self.name)
        self.info = gpu.device_info()
        self.provenance = provenance("python3 -m benchmarks.lab_master_probe "
                                     + " ".join(sys.argv[1:] if argv is None else argv))
        self.case = self.lab.timing_case(False, 12345)
        self.reps = {} if args.reps is None else {"reps": args.reps}

    def inputs(self, case):
        """(host arrays by name, the lab's inputs on the GPU in its parameter order)."""
        from numba import cuda

        from autograder.inputs import generate

        host = {n: generate(s) for n, s in self.lab.input_specs(case).items()}
        return host, [cuda.to_device(host[p]) for p in self.lab.inputs]

    def output(self, case):
        """The lab's output array on the GPU, poisoned with NaN."""
        import numpy as np
        from numba import cuda

        return cuda.to_device(np.full(tuple(self.lab.out_spec(case)["shape"]), np.nan,
                                      dtype=self.lab.dtype))

    def correct(self, fn, case) -> tuple[bool, str]:
        """``fn`` called once on ``case``, its output checked by the lab against float64."""
        from numba import cuda

        host, dev = self.inputs(case)
        out = self.output(case)
        fn(*dev, out)
        cuda.synchronize()
        return self.lab.check(out.copy_to_host(), case, self.lab.reference(host))

    def reference(self, case, cast=None, **units):
        """The lab's reference runner on ``case`` timed (``cast``: its tensors in that dtype)."""
        from book.bench import measure

        ref_fn, ref_sets = self.lab.make_reference_runner(case)
        if cast is not None:
            ref_sets = [tuple(a.to(cast) for a in st) for st in ref_sets]
        return measure(ref_fn, ref_sets, **units, **self.reps)


def torch_sets(T, d, h, dtype, n=2) -> list[list]:
    """``n`` sets of [x, wg, bg, wu, bu, out] in torch on the GPU (labs 5 and 6)."""
    import torch

    return [[torch.randn(T, d, device="cuda", dtype=dtype),
             torch.randn(h, d, device="cuda", dtype=dtype) / d ** 0.5,
             torch.randn(h, device="cuda", dtype=dtype),
             torch.randn(h, d, device="cuda", dtype=dtype) / d ** 0.5,
             torch.randn(h, device="cuda", dtype=dtype),
             torch.empty(T, h, device="cuda", dtype=dtype)] for _ in range(n)]


def suggest(rec: dict, main_row: dict) -> None:
    """The rubric's full-marks line from the master's fraction at the grader's timing shape."""
    rec["suggested"] = {
        "fraction_of_reference": main_row["fraction_of_reference"],
        "full_at_reference_units": main_row["suggested_full_at_reference_units"],
        "full_at_master_units": 1 / MARGIN,
    }
    print(f"suggested rubric line: full_at = {1 / MARGIN:.2f} (master units, basis = \"master\"), "
          f"i.e. {main_row['suggested_full_at_reference_units']:.3f} of cuBLAS float16 + compiled "
          f"SwiGLU on this GPU (the master's fraction {main_row['fraction_of_reference']:.3f} / {MARGIN})")


def lab2_cells(name: str) -> list[str]:
    """Lab 2's constants cell and kernel cell, nothing else."""
    keep = [s for s in graded_cells(name)
            if re.search(r"^THREADS\s*=", s, re.M) or "_swiglu_interleaved_kernel" in s]
    if len(keep) != 2:
        raise SystemExit(f"expected the constants cell and the kernel cell, found {len(keep)}")
    return keep


def lab2_variant(cells, threads: int, ept: int, rows: int):
    """Lab 2's master with THREADS, EPT and the launch's row cap replaced."""
    src = "\n".join(cells)
    src, n = re.subn(r"min\(M, \d+\)", f"min(M, {rows})", src)
    if n != 1:
        raise SystemExit(f"expected one launch capped as min(M, ROWS) in the master, found {n}")
    src = re.sub(r"^THREADS\s*=.*$", f"THREADS = {threads}", src, count=1, flags=re.M)
    src = re.sub(r"^EPT\s*=.*$", f"EPT = {ept}", src, count=1, flags=re.M)
    ns: dict = {}
    exec(compile(src, f"<lab2 master THREADS={threads} EPT={ept} ROWS={rows}>", "exec"), ns)
    return ns["swiglu_interleaved"]


def lab2(p: Probe) -> tuple[dict, int]:
    """Lab 2's master at each of LAB2_VARIANTS' launch constants against torch.add."""
    from book.bench import measure

    lab, case = p.lab, p.case
    rec = {"provenance": p.provenance, "rows": []}
    nbytes = lab.min_bytes(case)
    sets = [(*p.inputs(c)[1], p.output(c))
            for c in (dict(case, seed=case["seed"] + k) for k in range(3))]
    ref = p.reference(case, bytes_moved=nbytes)
    rec["torch_add"] = {"bandwidth": ref.bandwidth, "median_s": ref.median_s, "method": ref.method}
    print(f"{p.info.name}: torch.add {ref.bandwidth / 1e12:.3f} TB/s effective")
    cells = lab2_cells(p.name)
    src = "\n".join(cells)
    shipped = tuple(int(re.search(rf"^{k}\s*=\s*(\d+)", src, re.M).group(1)) for k in ("THREADS", "EPT"))
    shipped += (int(re.search(r"min\(M, (\d+)\)", src).group(1)),)
    rec["shipped"] = {"threads": shipped[0], "ept": shipped[1], "rows": shipped[2]}
    for threads, ept, rows in LAB2_VARIANTS:
        fn = lab2_variant(cells, threads, ept, rows)
        ok, _ = p.correct(fn, case)
        m = measure(fn, sets, bytes_moved=nbytes, **p.reps)
        row = {"threads": threads, "ept": ept, "rows": rows, "correct": ok, "bandwidth": m.bandwidth,
               "median_s": m.median_s, "fraction_of_torch_add": ref.median_s / m.median_s,
               "shipped": (threads, ept, rows) == shipped}
        rec["rows"].append(row)
        print(f"THREADS={threads:4d} EPT={ept:3d} ROWS={rows:5d}  {m.bandwidth / 1e12:.3f} TB/s  "
              f"{row['fraction_of_torch_add']:.3f} of torch.add  correct={ok}"
              + ("  (shipped)" if row["shipped"] else ""))
    return rec, 0


def lab5(p: Probe) -> tuple[dict, int]:
    """Lab 5's master in float16 (and bfloat16 on sm_80+) at the timing shape and two more."""
    import torch
    from numba import cuda

    from book.bench import measure

    lab, case = p.lab, p.case
    rec = {"provenance": p.provenance, "gpu": p.info.name, "margin": MARGIN,
           "reference": lab.reference_name, "rows": []}   # what every reference_* field timed
    ns = namespace(p.name, graded_cells(p.name))
    fn, cc = ns[lab.function], ns.get("CC")   # the capability the master is built for
    print(f"{p.info.name} (sm_{cc[0]}{cc[1]}): lab 5's master against cuBLAS float16 + compiled SwiGLU")
    ok, msg = p.correct(fn, case)   # on the timing shape first (float16, the grader's dtype)
    rec["timing_case_correct"] = {"ok": ok, "message": msg}
    print(("correct: " if ok else "WRONG: ") + msg)

    def bf16_view(t):
        """torch bfloat16 -> what the master takes: its bits, viewed as int16, as a Numba array."""
        return cuda.as_cuda_array(t.view(torch.int16))

    shapes = [(case["T"], case["d"], case["h"])] + LAB5_EXTRA_SHAPES
    for dt in ["float16"] + (["bfloat16"] if cc >= (8, 0) else []):
        tdt = getattr(torch, dt)
        for T, d, h in shapes:
            c = {"name": f"T={T} d={d} h={h}", "T": T, "d": d, "h": h, "seed": 1}
            flops = lab.flops(c)
            # the same runner on bfloat16 copies of its tensors
            ref = p.reference(c, cast=None if dt == "float16" else tdt, flops=flops)
            sets = [tuple(cuda.as_cuda_array(t) if dt == "float16" else bf16_view(t) for t in ts)
                    for ts in torch_sets(T, d, h, tdt)]
            mine = measure(fn, sets, flops=flops, **p.reps)
            frac = ref.median_s / mine.median_s
            row = {"dtype": dt, "T": T, "d": d, "h": h, "grader_timing_shape": (T, d, h) == shapes[0],
                   "master_s": mine.median_s, "master_tflops": flops / mine.median_s / 1e12,
                   "reference_s": ref.median_s, "reference_tflops": flops / ref.median_s / 1e12,
                   "fraction_of_reference": frac, "suggested_full_at_reference_units": frac / MARGIN,
                   "method": mine.method}
            rec["rows"].append(row)
            print(f"{dt:8s} T={T:5d} d={d} h={h:5d}  master {row['master_tflops']:7.1f} TFLOP/s  "
                  f"cuBLAS+compiled {row['reference_tflops']:7.1f} TFLOP/s  fraction {frac:.3f}  "
                  f"-> full-marks line {frac / MARGIN:.3f} of the reference"
                  + ("  (the grader's timing shape)" if row["grader_timing_shape"] else ""))
    suggest(rec, next(r for r in rec["rows"] if r["grader_timing_shape"] and r["dtype"] == "float16"))
    return rec, 0 if ok else 1


def lab6(p: Probe) -> tuple[dict, int]:
    """Lab 6's master in GB/s of weights at T = 4, 1, 8, 16, the course's GEMV beside it, and
    the lab's fixtures as fractions of the master."""
    import torch
    from numba import cuda

    from book.bench import measure
    from book.kernels.gemv import decode_mlp as dm
    from book.kernels.host.fastcall import planned

    lab, case = p.lab, p.case
    p.reps = p.reps or {"reps": 20}
    rec = {"provenance": p.provenance, "gpu": p.info.name, "margin": MARGIN,
           "reference": lab.reference_name, "rows": [], "fixtures": []}   # reference_*: it
    fns = {"master": namespace(p.name, graded_cells(p.name))[lab.function]}
    for name, fixture in LAB6_FIXTURES.items():
        fns[name] = derived(p.name, fixture)[lab.function]
    print(f"{p.info.name}: lab 6's master against cuBLAS float16 + compiled SwiGLU, GB/s of weights")
    ok, msg = p.correct(fns["master"], case)
    rec["timing_case_correct"] = {"ok": ok, "message": msg}
    print(("correct: " if ok else "WRONG: ") + msg)

    timing_T, d, h = case["T"], case["d"], case["h"]
    master_s = None
    for T in (timing_T,) + LAB6_EXTRA_T:
        c = {"name": f"T={T}", "T": T, "d": d, "h": h, "seed": 1}
        wb = lab.min_bytes(c)
        ref = p.reference(c, bytes_moved=wb)
        sets = torch_sets(T, d, h, torch.float16)
        numba_sets = [tuple(cuda.as_cuda_array(t) for t in s) for s in sets]
        mine = measure(fns["master"], numba_sets, bytes_moved=wb, **p.reps)
        ours = measure(planned("decode"), [(s[0], s[1], s[3], s[2], s[4], s[5]) for s in sets],
                       bytes_moved=wb, **p.reps)
        frac = ref.median_s / mine.median_s
        row = {"T": T, "d": d, "h": h, "grader_timing_shape": T == timing_T,
               "master_s": mine.median_s, "master_weight_GBps": wb / mine.median_s / 1e9,
               "reference_s": ref.median_s, "reference_weight_GBps": wb / ref.median_s / 1e9,
               "course_gemv_s": ours.median_s, "course_gemv_weight_GBps": wb / ours.median_s / 1e9,
               "course_gemv_path": dm.path_for(T, p.info.compute_capability),
               "fraction_of_reference": frac, "suggested_full_at_reference_units": frac / MARGIN,
               "method": mine.method}
        rec["rows"].append(row)
        if T == timing_T:
            master_s = mine.median_s
        print(f"T={T:3d} d={d} h={h}  master {row['master_weight_GBps']:7.0f} GB/s  cuBLAS+compiled "
              f"{row['reference_weight_GBps']:7.0f} GB/s  (fraction {frac:.3f})  course GEMV "
              f"{row['course_gemv_weight_GBps']:7.0f} GB/s"
              + ("  (the grader's timing shape)" if row["grader_timing_shape"] else ""), flush=True)
        del sets, numba_sets
        torch.cuda.empty_cache()
    # the fixtures at the timing shape, as fractions of the master (the rubric's units)
    wb = lab.min_bytes(case)
    numba_sets = [tuple(cuda.as_cuda_array(t) for t in s) for s in torch_sets(timing_T, d, h, torch.float16)]
    for name in LAB6_FIXTURES:
        fok, fmsg = p.correct(fns[name], case)
        tm = measure(fns[name], numba_sets, bytes_moved=wb, reps=max(5, p.reps["reps"] // 2))
        f = {"fixture": name, "correct": fok, "message": fmsg, "seconds": tm.median_s,
             "weight_GBps": wb / tm.median_s / 1e9, "fraction_of_master": master_s / tm.median_s}
        rec["fixtures"].append(f)
        print(f"  fixture {name:24s} {'correct' if fok else 'WRONG'}  {f['weight_GBps']:7.0f} GB/s  "
              f"{f['fraction_of_master']:.3f} of the master", flush=True)
    suggest(rec, rec["rows"][0])
    return rec, 0 if ok else 1


PROBES = {2: lab2, 5: lab5, 6: lab6}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", type=int, choices=sorted(LABS), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=None,
                    help="timed calls per measurement (default: book.bench.measure's; lab 6: 20)")
    args = ap.parse_args(argv)
    rec, status = PROBES[args.lab](Probe(args, argv))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"wrote {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
