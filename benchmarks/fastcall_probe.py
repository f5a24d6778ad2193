"""The cheap launch path (book.kernels.fastcall) on a GPU: correct, packed as Numba packs, and how cheap.

Record: `records/launch/fastcall_probe_h100.json`.

For f32 ``vec4`` and bf16 ``half8`` at decode size (1 x 18944) and one prefill size:

* the fast path's output equals the ordinary wrapper's bit for bit (output poisoned with
  NaN first) and the float64 reference's within the dtype's tolerance;
* the parameters it packed equal what numba-cuda's own marshalling
  (``_Kernel._prepare_args``) produces for the same arrays;
* it replays inside ``torch.cuda.graph`` (it launches on torch's current stream);
* host time per call, interleaved rounds with spread (``book.bench.host_timings``):
  ``torch.add``, eager ``F.silu(g) * u``, the ordinary wrapper, Numba's raw
  ``kernel[grid, block]``, the fast path; a cProfile of the fast path.

    COURSE_COMMIT=$(git rev-parse HEAD) python benchmarks/fastcall_probe.py --out FILE.json

The suite's rows (``fastcall_*``, ``launch_layer_*``) are what the book shows; this is the
check and the diagnosis behind them.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from torch_call_profile import profile_lines  # noqa: E402  (benchmarks/, beside this script)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    import book

    if book.gpu.SIMULATED:
        print("not measured: no GPU here")
        return 2
    import torch
    from numba.cuda.dispatcher import _Kernel

    from book import bench
    from book.kernels import VARIANTS, fastcall, launch, reference, vectorized
    from book.provenance import provenance

    F = torch.nn.functional
    rec = {"provenance": provenance("python benchmarks/fastcall_probe.py"), "cases": []}
    gen = torch.Generator(device="cuda").manual_seed(0)
    ok_all = True
    for variant, dtype in (("vec4", "float32"), ("half8", "bfloat16")):
        tdt = getattr(torch, dtype)
        for shape in ((1, 18944), (2048, 8192)):
            case = {"variant": variant, "dtype": dtype, "shape": list(shape)}
            sets = [tuple((torch.randn(shape, device="cuda", generator=gen) * 3).to(tdt)
                          for _ in range(3)) for _ in range(4)]
            fc = fastcall.FastCall(variant)
            ordinary = VARIANTS[variant].fn
            g, u, o = sets[0]
            o2 = torch.empty_like(o)
            for _ in range(3):  # the first call plans, later ones launch through the driver
                o.fill_(float("nan"))
                fc(g, u, o)
            o2.fill_(float("nan"))
            ordinary(g, u, o2)
            torch.cuda.synchronize()
            case["bitwise_equal_to_wrapper"] = bool(torch.equal(o.view(torch.int16 if o.element_size() == 2 else torch.int32),
                                                                o2.view(torch.int16 if o2.element_size() == 2 else torch.int32)))
            try:
                reference.check_device(o, g, u, dtype)
                case["reference_ok"] = True
            except AssertionError as e:
                case["reference_ok"] = False
                case["reference_error"] = str(e)[:300]
            case["stats"] = dict(fc.stats)
            # packing: ours against numba-cuda's own marshalling of the same flat arrays
            p = launch.prepare(g, u, o, fc.dtypes, variant)
            plan = next(v for v in fc._plans.values() if v is not None)
            numba_args = []
            kern = fc.kernel.overloads[tuple(fc.kernel.typeof_pyval(a) for a in (p.gate, p.up, p.out))]
            for a, ty in zip((p.gate, p.up, p.out), kern.argument_types):
                _Kernel._prepare_args(kern, ty, a, 0, [], numba_args)
            numba_args = [int(getattr(x, "value", x) or 0) for x in numba_args]
            case["packed_equal_numba"] = numba_args == plan.params.tolist()
            case["grid_block"] = [plan.grid, plan.block]
            case["grid_block_wrapper"] = list(vectorized.vector_config(p.n, fc.width))
            # graph capture: the fast path launches on torch's current stream
            try:
                gg = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    fc(g, u, o)  # plan this key for the capture stream (first call of it there)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(gg):
                    fc(g, u, o)
                o.fill_(float("nan"))
                gg.replay()
                torch.cuda.synchronize()
                reference.check_device(o, g, u, dtype)
                case["graph_replay_ok"] = True
            except Exception as e:
                case["graph_replay_ok"] = False
                case["graph_error"] = f"{type(e).__name__}: {e}"[:300]
            ok = (case["bitwise_equal_to_wrapper"] and case["reference_ok"]
                  and case["packed_equal_numba"] and case["graph_replay_ok"]
                  and case["grid_block"] == case["grid_block_wrapper"])
            ok_all &= ok
            if shape == (1, 18944):
                flat = [tuple(launch.flat(launch.as_device(x, "x"), "x") for x in s3) for s3 in sets]
                grid, b = vectorized.vector_config(p.n, fc.width)
                kernel = fc.kernel
                t = bench.host_timings({
                    "torch_add": (lambda g, u, o: torch.add(g, u, out=o), sets),
                    "torch_eager": (lambda g, u, o: F.silu(g) * u, sets),
                    "wrapper": (ordinary, sets),
                    "raw_numba_launch": (lambda g, u, o: kernel[grid, b](g, u, o), flat),
                    "fastcall": (fc, sets),
                }, calls=args.calls, reps=args.reps)
                case["host"] = {k: v.row() | {"samples_s": list(v.samples_s)} for k, v in t.items()}
                for k, v in t.items():
                    print(f"  {variant:<6} {dtype:<9} {k:<18} {v.median_s * 1e6:7.2f} us "
                          f"(p10 {v.p10_s * 1e6:6.2f}, p90 {v.p90_s * 1e6:6.2f})", flush=True)
                case["fast_over_add"] = t["fastcall"].median_s / t["torch_add"].median_s
                print(f"  fastcall / torch.add = {case['fast_over_add']:.2f}", flush=True)
                case["profile_fastcall"] = profile_lines(fc, sets[0], calls=3000, top=14)
                print("\n".join(case["profile_fastcall"][:22]))
            print(f"{variant} {dtype} {shape}: ok={ok} " + json.dumps(
                {k: case[k] for k in ("bitwise_equal_to_wrapper", "reference_ok",
                                      "packed_equal_numba", "graph_replay_ok", "grid_block")}),
                flush=True)
            rec["cases"].append(case)
            del sets
            torch.cuda.empty_cache()
    rec["ok"] = ok_all
    Path(args.out).write_text(json.dumps(rec, indent=1) + "\n")
    return 0 if ok_all else 1


if __name__ == "__main__":
    sys.exit(main())
