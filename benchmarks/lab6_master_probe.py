"""Where does lab 6's master stand against cuBLAS in float16 plus a compiled SwiGLU, and where

Record: `records/labs/` (`lab6_master_h100.json`).
do its fixtures stand against the master, on this GPU? The numbers the rubric's lines of
autograder/rubrics/lab6_decode_mlp_up.toml are set from (issue 31).

The master's own cells (solutions/lab6_decode_mlp_up.ipynb, less the check cells, the
instructor's hidden tests and the setup cells) are executed once; its ``decode_swiglu`` is
checked against the float64 reference on the grader's timing shape (``timing_case`` of the lab
module: T = 4, d = 4096, h = 14336), then timed with book.bench.measure on that shape against
the lab's reference runner (``make_reference_runner``: one cuBLAS F.linear on [wg; wu] with
the biases, float16, then torch.compile's SiLU * up), in GB/s of the weight bytes, in the same
process; then at T = 1, 8 and 16. The lab's fixtures (tests/fixtures/lab6: the lesson's
control, weights read twice, atomics) are checked and timed on the timing shape too, each as a
fraction of the master: where they land against the rubric's lines. The course's own GEMV
(book.kernels.decode_mlp.swiglu_decode, float16) is timed beside them for the record.

    python3 benchmarks/lab6_master_probe.py --out $OUT/lab6_master_h100.json

Prints one line per row and the suggested full-marks line = master's fraction / 1.25 (in the
reference's units; in the rubric's master units, basis = "master", that line is 1 / 1.25 =
0.80). Writes every row with provenance.
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

LAB = "lab6_decode_mlp_up"
MARGIN = 1.25  # the master stands this far above the full-marks line (as lab 5's)
EXTRA_T = (1, 8, 16)
#: the fixtures timed beside the master, by their path under tests/fixtures (the lesson's
#: control is the rubric's control, tests/fixtures/controls since issue 44's derived fixtures)
FIXTURES = {"one_thread_per_output": "controls/lab6_one_thread_per_output.py",
            "reads_weights_twice": "lab6/reads_weights_twice.py", "atomics": "lab6/atomics.py"}


def namespace_of(cells_src) -> dict:
    ns: dict = {"__name__": "__main__"}
    for i, src in enumerate(cells_src):
        exec(compile(src, f"<{LAB} cell {i}>", "exec"), ns)
    return ns


def master_cells() -> list:
    from autograder.submission import read_cells

    out = []
    for c in read_cells(ROOT / "solutions" / f"{LAB}.ipynb"):
        src = c["source"]
        if (re.match(r"\s*check\(", src) or src.lstrip().startswith("# autograder: setup")
                or "### BEGIN HIDDEN TESTS" in src):
            continue
        out.append(src)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args(argv)
    import numpy as np
    import torch
    from numba import cuda

    from autograder.inputs import generate
    from autograder.labs import get
    from book import gpu
    from book.bench import measure
    from book.kernels import decode_mlp as dm
    from book.kernels.fastcall import planned
    from book.provenance import provenance

    if gpu.SIMULATED:
        raise SystemExit("this probe measures: it needs a CUDA GPU")
    lab = get(LAB)
    info = gpu.device_info()
    rec = {"provenance": provenance("python3 benchmarks/lab6_master_probe.py --out " + str(args.out)),
           "gpu": info.name, "margin": MARGIN, "rows": [], "fixtures": []}
    fns = {"master": namespace_of(master_cells())[lab.function]}
    for name in FIXTURES:
        fns[name] = namespace_of([(ROOT / "tests" / "fixtures" / FIXTURES[name])
                                  .read_text()])[lab.function]
    print(f"{info.name}: lab 6's master against cuBLAS float16 + compiled SwiGLU, GB/s of weights")

    def dev_inputs(case):
        host = {n: generate(s) for n, s in lab.input_specs(case).items()}
        return host, [cuda.to_device(host[p]) for p in lab.inputs]

    def correct(fn, case):
        host, dev = dev_inputs(case)
        out = cuda.to_device(np.full(tuple(lab.out_spec(case)["shape"]), np.nan, dtype=lab.dtype))
        fn(*dev, out)
        cuda.synchronize()
        return lab.check(out.copy_to_host(), case, lab.reference(host))

    case = lab.timing_case(False, 12345)
    ok, msg = correct(fns["master"], case)
    rec["timing_case_correct"] = {"ok": ok, "message": msg}
    print(("correct: " if ok else "WRONG: ") + msg)

    def torch_sets(T, d, h, n=2):
        sets = []
        for _ in range(n):
            ts = [torch.randn(T, d, device="cuda", dtype=torch.float16),
                  torch.randn(h, d, device="cuda", dtype=torch.float16) / d ** 0.5,
                  torch.randn(h, device="cuda", dtype=torch.float16),
                  torch.randn(h, d, device="cuda", dtype=torch.float16) / d ** 0.5,
                  torch.randn(h, device="cuda", dtype=torch.float16),
                  torch.empty(T, h, device="cuda", dtype=torch.float16)]
            sets.append(ts)
        return sets

    timing_T = case["T"]
    d, h = case["d"], case["h"]
    master_s = None
    for T in (timing_T,) + EXTRA_T:
        c = {"name": f"T={T}", "T": T, "d": d, "h": h, "seed": 1}
        wb = lab.min_bytes(c)
        ref_fn, ref_sets = lab.make_reference_runner(c)
        ref = measure(ref_fn, ref_sets, bytes_moved=wb, reps=args.reps)
        sets = torch_sets(T, d, h)
        numba_sets = [tuple(cuda.as_cuda_array(t) for t in s) for s in sets]
        mine = measure(fns["master"], numba_sets, bytes_moved=wb, reps=args.reps)
        ours = measure(planned("decode"), [(s[0], s[1], s[3], s[2], s[4], s[5]) for s in sets],
                       bytes_moved=wb, reps=args.reps)
        frac = ref.median_s / mine.median_s
        row = {"T": T, "d": d, "h": h, "grader_timing_shape": T == timing_T,
               "master_s": mine.median_s, "master_weight_GBps": wb / mine.median_s / 1e9,
               "reference_s": ref.median_s, "reference_weight_GBps": wb / ref.median_s / 1e9,
               "course_gemv_s": ours.median_s, "course_gemv_weight_GBps": wb / ours.median_s / 1e9,
               "course_gemv_path": dm.path_for(T, info.compute_capability),
               "fraction_of_reference": frac, "suggested_full_at_reference_units": frac / MARGIN,
               "method": mine.method}
        rec["rows"].append(row)
        if T == timing_T:
            master_s = mine.median_s
        print(f"T={T:3d} d={d} h={h}  master {row['master_weight_GBps']:7.0f} GB/s  cuBLAS+compiled "
              f"{row['reference_weight_GBps']:7.0f} GB/s  (fraction {frac:.3f})  course GEMV "
              f"{row['course_gemv_weight_GBps']:7.0f} GB/s"
              + ("  (the grader's timing shape)" if row["grader_timing_shape"] else ""), flush=True)
        del sets, numba_sets, ref_sets
        torch.cuda.empty_cache()
    main_row = rec["rows"][0]
    rec["suggested"] = {
        "fraction_of_reference": main_row["fraction_of_reference"],
        "full_at_reference_units": main_row["suggested_full_at_reference_units"],
        "full_at_master_units": 1 / MARGIN,
    }
    # the fixtures at the timing shape, as fractions of the master (the rubric's units)
    wb = lab.min_bytes(case)
    sets = torch_sets(timing_T, d, h)
    numba_sets = [tuple(cuda.as_cuda_array(t) for t in s) for s in sets]
    for name in FIXTURES:
        fok, fmsg = correct(fns[name], case)
        tm = measure(fns[name], numba_sets, bytes_moved=wb, reps=max(5, args.reps // 2))
        f = {"fixture": name, "correct": fok, "message": fmsg, "seconds": tm.median_s,
             "weight_GBps": wb / tm.median_s / 1e9, "fraction_of_master": master_s / tm.median_s}
        rec["fixtures"].append(f)
        print(f"  fixture {name:24s} {'correct' if fok else 'WRONG'}  {f['weight_GBps']:7.0f} GB/s  "
              f"{f['fraction_of_master']:.3f} of the master", flush=True)
    print(f"suggested rubric line: full_at = {1 / MARGIN:.2f} (master units, basis = \"master\"), "
          f"i.e. {main_row['suggested_full_at_reference_units']:.3f} of cuBLAS float16 + compiled "
          f"SwiGLU on this GPU (the master's fraction {main_row['fraction_of_reference']:.3f} / {MARGIN})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0 if rec["timing_case_correct"]["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
