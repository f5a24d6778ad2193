"""Where the host time of a SwiGLU call from torch tensors goes (issue 11), on a GPU.

Record: `records/launch/torch_call_profile_h100.json`.

Times each layer of one call on a decode-size input (1 x 18944, where the kernel takes
about 2 us and the host is the bottleneck) with ``book.bench.host_overhead`` (perf_counter
over many calls, GPU drained before and after), profiles the call with cProfile, and
compares the bandwidth at 8192 x 14336 when the wrapper gets torch tensors and Numba
arrays. The old conversion (``numba.cuda.as_cuda_array`` on every call, then a reshape) is
timed beside the cached one that ``book.kernels.launch`` uses now.

    COURSE_COMMIT=$(git rev-parse HEAD) python benchmarks/torch_call_profile.py --out FILE.json

The benchmark suite's own rows (``<variant>_torch_call``, ``<variant>_torch_tensors``,
``launch_layer_*``) are what the book shows; this is the diagnosis behind them.
"""

import argparse
import cProfile
import io
import json
import pstats
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def profile_lines(fn, args, calls=2000, top=18):
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(calls):
        fn(*args)
    pr.disable()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return [ln for ln in s.getvalue().splitlines() if ln.strip()][:top + 8]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import book

    if book.gpu.SIMULATED:
        print("not measured: no GPU here")
        return 2
    import torch
    from numba import cuda

    from book import bench
    from book.kernels import launch, vectorized
    from book.kernels.halfprec import half8_kernel, swiglu_half8
    from book.provenance import provenance

    rec = {"provenance": provenance("python benchmarks/torch_call_profile.py"), "layers": {},
           "profiles": {}, "bandwidth": {}}
    shape = (1, 18944)
    gen = torch.Generator(device="cuda").manual_seed(0)
    ts = [tuple(torch.randn(shape, device="cuda", generator=gen).half() for _ in range(3))
          for _ in range(4)]
    ns = [tuple(cuda.as_cuda_array(x) for x in s) for s in ts]
    flat = [tuple(a.reshape(a.size) for a in s) for s in ns]
    n = shape[0] * shape[1]
    b = vectorized.choose_block(n // 8, 256)
    grid = max(1, launch.cdiv(n // 8, 2 * b))

    def host(name, fn, sets, calls=2000):
        try:
            s = bench.host_overhead(fn, sets, calls=calls)
        except Exception as e:  # keep going: say what broke
            rec["layers"][name] = repr(e)
            print(f"{name:<34} FAILED {e!r}", flush=True)
            return None
        rec["layers"][name] = s
        print(f"{name:<34} {s * 1e6:8.2f} us", flush=True)
        return s

    host("torch_add", lambda g, u, o: torch.add(g, u, out=o), ts)
    host("raw_launch_numba_flat", lambda g, u, o: half8_kernel[grid, b](g, u, o), flat)
    host("wrapper_numba_arrays", swiglu_half8, ns)
    host("cai_property_x3", lambda g, u, o: (g.__cuda_array_interface__, u.__cuda_array_interface__,
                                             o.__cuda_array_interface__), ts)
    host("old_conversion_x3", lambda g, u, o: [cuda.as_cuda_array(x.detach()) for x in (g, u, o)], ts)
    host("old_conversion_and_reshape_x3",
         lambda g, u, o: [(lambda a: a.reshape(a.size))(cuda.as_cuda_array(x.detach()))
                          for x in (g, u, o)], ts)
    host("old_full_call", lambda g, u, o: swiglu_half8(
        *(cuda.as_cuda_array(x.detach()) for x in (g, u, o))), ts)
    host("new_conversion_x3", lambda g, u, o: [launch.as_device(x, "x") for x in (g, u, o)], ts)
    host("prepare_torch", lambda g, u, o: launch.prepare(g, u, o, ("float16",), "x"), ts)
    host("prepare_numba", lambda g, u, o: launch.prepare(g, u, o, ("float16",), "x"), ns)
    host("wrapper_torch_tensors", swiglu_half8, ts)
    host("wrapper_torch_tensors_out_none", lambda g, u, o: swiglu_half8(g, u), ts)

    # a launch with everything prepared once: cuda.core's launch of the compiled kernel
    try:
        from cuda.core import LaunchConfig, launch as core_launch
        from numba.cuda.cudadrv import driver

        half8_kernel[grid, b](*flat[0])
        kern = next(iter(half8_kernel.overloads.values()))
        cuk = kern._codelibrary.get_cufunc().kernel
        stream = driver._to_core_stream(0)
        cfg = LaunchConfig(grid=(grid, 1, 1), block=(b, 1, 1), shmem_size=0)
        prepared = []
        for s3 in flat:
            ka, retr = [], []
            for t, v in zip(kern.argument_types, s3):
                kern._prepare_args(t, v, 0, retr, ka)
            prepared.append((tuple(ka),))
        host("core_launch_prepared_args", lambda ka: core_launch(stream, cfg, cuk, *ka), prepared)
        # does it compute the same thing?
        o = flat[0][2]
        o_t = ts[0][2]
        o_t.fill_(float("nan"))
        core_launch(stream, cfg, cuk, *prepared[0][0])
        cuda.synchronize()
        g, u = ts[0][0].float(), ts[0][1].float()
        ok = bool(torch.allclose(o_t.float(), g * torch.sigmoid(g) * u, rtol=2e-3, atol=1e-6))
        rec["core_launch_correct"] = ok
        print("core launch correct:", ok, o.size)
    except Exception as e:
        rec["core_launch_error"] = repr(e)
        print("core launch prototype failed:", repr(e))

    # graph replay per call
    try:
        t = bench.measure(swiglu_half8, ts, graph=True, reps=20)
        rec["layers"]["graph_replay_gpu_per_call"] = t.median_s
        print(f"{'graph_replay_gpu_per_call':<34} {t.median_s * 1e6:8.2f} us")
    except Exception as e:
        rec["layers"]["graph_replay_gpu_per_call"] = repr(e)

    rec["profiles"]["old_full_call"] = profile_lines(
        lambda g, u, o: swiglu_half8(*(cuda.as_cuda_array(x.detach()) for x in (g, u, o))), ts[0])
    rec["profiles"]["wrapper_torch_tensors"] = profile_lines(swiglu_half8, ts[0])
    rec["profiles"]["raw_launch"] = profile_lines(lambda g, u, o: half8_kernel[grid, b](g, u, o),
                                                  flat[0])
    for k, v in rec["profiles"].items():
        print(f"\n--- cProfile {k}")
        print("\n".join(v))

    # bandwidth at the large shape, torch tensors vs Numba arrays vs torch.add: back to
    # back at the host's pace (host time shows), and primed (GPU time alone)
    big = (8192, 14336)
    for dtype, fn in (("float16", swiglu_half8), ("bfloat16", swiglu_half8),
                      ("float32", vectorized.swiglu_vec4)):
        tdt = getattr(torch, dtype)
        sets = [tuple((torch.randn(big, device="cuda", generator=gen) * 3).to(tdt) for _ in range(3))
                for _ in range(2)]

        def nv(x):
            return cuda.as_cuda_array(x.view(torch.int16) if x.dtype == torch.bfloat16 else x)

        nsets = [tuple(nv(x) for x in s) for s in sets]
        nbytes = 3 * big[0] * big[1] * sets[0][0].element_size()
        r = {}
        for name, f, a in (("torch_tensors", fn, sets), ("numba_arrays", fn, nsets),
                           ("torch_add", lambda g, u, o: torch.add(g, u, out=o), sets)):
            tm = bench.measure_back_to_back(f, a, bytes_moved=nbytes, reps=20)
            tp = bench.measure(f, a, bytes_moved=nbytes, reps=20)
            r[name] = {"seconds": tm.median_s, "bandwidth": tm.bandwidth,
                       "primed_seconds": tp.median_s, "primed_bandwidth": tp.bandwidth}
        r["host_per_call_torch_tensors"] = bench.host_overhead(fn, sets, calls=20)
        rec["bandwidth"][dtype] = r
        print(f"{dtype}: torch tensors {r['torch_tensors']['bandwidth'] / 1e12:.3f} TB/s, numba "
              f"{r['numba_arrays']['bandwidth'] / 1e12:.3f}, torch.add "
              f"{r['torch_add']['bandwidth'] / 1e12:.3f}; ratio torch-tensors/add "
              f"{r['torch_tensors']['bandwidth'] / r['torch_add']['bandwidth']:.3f}; host/call "
              f"{r['host_per_call_torch_tensors'] * 1e6:.1f} us", flush=True)
        del sets, nsets
        torch.cuda.empty_cache()
    Path(args.out).write_text(json.dumps(rec, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
