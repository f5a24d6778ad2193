"""Where does lab 5's master stand against cuBLAS in float16 plus a compiled SwiGLU on this GPU?

Record: `records/labs/lab5_master_h100.json`.
The number the full-marks line of autograder/rubrics/lab5_tensor_core_dual_gemm.toml is set
from (issue 23: the master at or above 1.25x the full-marks line).

The master's own cells (solutions/lab5_tensor_core_dual_gemm.ipynb: every code cell the
grader runs, less the check cells, the instructor's hidden tests and the setup cells) are
executed once; its ``linear_swiglu_tc`` is checked against the float64 reference on the
grader's timing shape (``timing_case`` of the lab module), then timed with book.bench.measure
on that shape against the lab's reference runner (``make_reference_runner``: one cuBLAS
F.linear on [wg; wu] with the biases, float16, then torch.compile's SiLU * up), in the same
process. Also its bfloat16 path where the GPU has it (sm_80+), against the same reference in
bfloat16, and two more shapes (decode T=1, a mid-size prefill) for the record.

    python3 benchmarks/lab5_master_probe.py --out $OUT/lab5_master_h100.json

Prints, per shape: TFLOP/s of both, the master's fraction of the reference, and the suggested
full-marks line = fraction / 1.25 (in the reference's units; in the rubric's master units,
basis = "master", that line is always 1 / 1.25 = 0.80). Writes every row with provenance.
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

LAB = "lab5_tensor_core_dual_gemm"
MARGIN = 1.25  # the master stands this far above the full-marks line (issue 23)
EXTRA_SHAPES = [(1, 4096, 14336), (512, 4096, 14336)]


def master_namespace() -> dict:
    """The master's graded code, executed: the names its cells define."""
    from autograder.submission import read_cells

    ns: dict = {"__name__": "__main__"}
    for c in read_cells(ROOT / "solutions" / f"{LAB}.ipynb"):
        src = c["source"]
        if (re.match(r"\s*check\(", src) or src.lstrip().startswith("# autograder: setup")
                or "### BEGIN HIDDEN TESTS" in src):
            continue
        exec(compile(src, f"<{LAB} cell {c['index']}>", "exec"), ns)
    return ns


def _bf16_view(t):
    """torch bfloat16 -> what the master takes: its bits, viewed as int16, as a Numba array."""
    from numba import cuda

    return cuda.as_cuda_array(t.view(__import__("torch").int16))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    import torch
    from numba import cuda

    from autograder.inputs import generate
    from autograder.labs import get
    from book import gpu
    from book.bench import measure
    from book.provenance import provenance

    if gpu.SIMULATED:
        raise SystemExit("this probe measures: it needs a CUDA GPU")
    lab = get(LAB)  # the lab's spec (autograder/labs/lab5_tensor_core_dual_gemm.py)
    info = gpu.device_info()
    rec = {"provenance": provenance("python3 benchmarks/lab5_master_probe.py --out " + str(args.out)),
           "gpu": info.name, "margin": MARGIN, "rows": []}
    ns = master_namespace()
    fn = ns[lab.function]
    cc = ns.get("CC")
    print(f"{info.name} (sm_{cc[0]}{cc[1]}): lab 5's master against cuBLAS float16 + compiled SwiGLU")

    # correctness on the timing shape first (float16, the grader's dtype)
    case = lab.timing_case(False, 12345)
    host = {n: generate(s) for n, s in lab.input_specs(case).items()}
    out = cuda.device_array(tuple(lab.out_spec(case)["shape"]), dtype=lab.dtype)
    fn(*[cuda.to_device(host[p]) for p in lab.inputs], out)
    cuda.synchronize()
    ok, msg = lab.check(out.copy_to_host(), case, lab.reference(host))
    rec["timing_case_correct"] = {"ok": ok, "message": msg}
    print(("correct: " if ok else "WRONG: ") + msg)

    shapes = [(case["T"], case["d"], case["h"])] + EXTRA_SHAPES
    dtypes = ["float16"] + (["bfloat16"] if cc >= (8, 0) else [])
    for dt in dtypes:
        tdt = getattr(torch, dt)
        for T, d, h in shapes:
            c = {"name": f"T={T} d={d} h={h}", "T": T, "d": d, "h": h, "seed": 1}
            flops = lab.flops(c)
            ref_fn, ref_sets = lab.make_reference_runner(c)
            if dt != "float16":  # the same runner on bfloat16 copies of its tensors
                ref_sets = [tuple(a.to(tdt) for a in st) for st in ref_sets]
            ref = measure(ref_fn, ref_sets, flops=flops)
            sets = []
            for k in range(2):
                ts = [torch.randn(T, d, device="cuda", dtype=tdt),
                      torch.randn(h, d, device="cuda", dtype=tdt) / d ** 0.5,
                      torch.randn(h, device="cuda", dtype=tdt),
                      torch.randn(h, d, device="cuda", dtype=tdt) / d ** 0.5,
                      torch.randn(h, device="cuda", dtype=tdt),
                      torch.empty(T, h, device="cuda", dtype=tdt)]
                sets.append(tuple(cuda.as_cuda_array(t) if dt == "float16" else _bf16_view(t)
                                  for t in ts))
            mine = measure(fn, sets, flops=flops)
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
    main_row = next(r for r in rec["rows"] if r["grader_timing_shape"] and r["dtype"] == "float16")
    rec["suggested"] = {
        "fraction_of_reference": main_row["fraction_of_reference"],
        "full_at_reference_units": main_row["suggested_full_at_reference_units"],
        "full_at_master_units": 1 / MARGIN,
    }
    print(f"suggested rubric line: full_at = {1 / MARGIN:.2f} (master units, basis = \"master\"), "
          f"i.e. {main_row['suggested_full_at_reference_units']:.3f} of cuBLAS float16 + compiled "
          f"SwiGLU on this GPU (the master's fraction {main_row['fraction_of_reference']:.3f} / {MARGIN})")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1, default=str))
    print(f"wrote {args.out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
