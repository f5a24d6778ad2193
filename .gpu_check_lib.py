"""Throwaway device check for the book core (library engineer); not part of the course."""
import json, math, sys, time, traceback

import book
from book import bench, gpu, traffic, roofline, specs
import numpy as np
from numba import cuda, float32

out = {}


def section(name):
    def deco(f):
        t0 = time.perf_counter()
        try:
            out[name] = f()
        except Exception as e:  # keep going; report
            out[name] = {"error": f"{type(e).__name__}: {e}", "tb": traceback.format_exc()[-1500:]}
        print(f"== {name} ({time.perf_counter() - t0:.1f}s):", json.dumps(out[name], default=str)[:1500], flush=True)
        return f
    return deco


@section("device")
def _():
    info = gpu.device_info()
    return {"info": info.__dict__, "describe": gpu.describe(), "runnable": gpu.check_runnable(),
            "spec": specs.match(info.name).name if specs.match(info.name) else None}


@cuda.jit(fastmath=True)
def swiglu(g, u, o):
    i = cuda.grid(1)
    if i < o.size:
        x = g[i]
        o[i] = x / (float32(1.0) + math.exp(-x)) * u[i]


def launch(g, u, o, stream=0):
    n = o.size
    swiglu[(n + 255) // 256, 256, stream](g, u, o)


def numba_sets(n, k):
    rng = np.random.default_rng(0)
    g = rng.standard_normal(n, dtype=np.float32) * 3
    u = rng.standard_normal(n, dtype=np.float32) * 3
    return [(cuda.to_device(g), cuda.to_device(u), cuda.device_array(n, np.float32)) for _ in range(k)], g, u


@section("numba_fused_f32_8192x14336")
def _():
    T, h = 8192, 14336
    tr = traffic.activation(T, h, "float32", "fused")
    k = bench.rotation_count(tr.bytes)
    sets, g, u = numba_sets(T * h, k)
    t = bench.measure(launch, sets, bytes_moved=tr.bytes, flops=tr.flops)
    ref = g / (1 + np.exp(-g.astype(np.float64))) * u
    err = float(np.max(np.abs(sets[0][2].copy_to_host() - ref) / (1 + np.abs(ref))))
    pred = roofline.predict(tr, specs.match(gpu.device_info().name))
    r = t.row(); r.update(sets=k, max_rel_err=err, predicted_s=pred.time_s, frac_peak=t.bandwidth / gpu.device_info().peak_bandwidth)
    del sets
    return r


@section("numba_fused_f32_decode_1x18944")
def _():
    n = 18944
    tr = traffic.activation(1, n, "float32", "fused")
    k = bench.rotation_count(tr.bytes)
    sets, g, u = numba_sets(n, k)
    res = {"sets": k, "host_overhead_s": bench.host_overhead(launch, sets)}
    res["primed"] = bench.measure(launch, sets, bytes_moved=tr.bytes).row()
    res["graph"] = bench.measure(launch, sets, bytes_moved=tr.bytes, graph=True).row()
    # what a naive single-launch event timing shows (launch gaps included)
    s, e = cuda.event(), cuda.event()
    ts = []
    for i in range(50):
        s.record(); launch(*sets[i % k]); e.record(); e.synchronize(); ts.append(s.elapsed_time(e) * 1e-3)
    res["naive_single_event_median_s"] = float(np.median(ts))
    return res


@section("torch")
def _():
    import torch
    res = {"torch": torch.__version__}
    T, h = 8192, 14336
    tr = traffic.activation(T, h, "float32", "fused")
    k = bench.rotation_count(tr.bytes)
    sets = [(torch.randn(T, h, device="cuda"), torch.randn(T, h, device="cuda"), torch.empty(T, h, device="cuda")) for _ in range(k)]
    res["add_f32_8192x14336"] = bench.measure(lambda a, b, o: torch.add(a, b, out=o), sets, bytes_moved=tr.bytes).row()
    res["eager_swiglu_f32_8192x14336"] = bench.measure(lambda a, b, o: torch.nn.functional.silu(a) * b, sets, bytes_moved=tr.bytes).row()
    # numba kernel on torch tensors (views without the CAI stream sync)
    nsets = [tuple(cuda.as_cuda_array(x, sync=False) for x in s) for s in sets]
    res["numba_on_torch_views"] = bench.measure(launch, [tuple(x.reshape(x.size) for x in s) for s in nsets], bytes_moved=tr.bytes, reps=20).row()
    # raw torch tensors: numba syncs on the CUDA-array-interface stream at each launch
    res["numba_on_raw_torch"] = bench.measure(launch, [tuple(x.view(-1) for x in s) for s in sets], bytes_moved=tr.bytes, reps=10).row()
    del sets, nsets
    torch.cuda.empty_cache()
    n = 18944
    tr = traffic.activation(1, n, "float32", "fused")
    k = bench.rotation_count(tr.bytes)
    dsets = [(torch.randn(1, n, device="cuda"), torch.randn(1, n, device="cuda")) for _ in range(k)]
    f = lambda a, b: torch.nn.functional.silu(a) * b
    res["eager_decode_primed"] = bench.measure(f, dsets, bytes_moved=tr.bytes).row()
    res["eager_decode_graph"] = bench.measure(f, dsets, bytes_moved=tr.bytes, graph=True).row()
    res["eager_decode_host_overhead_s"] = bench.host_overhead(f, dsets)
    return res


import os
os.makedirs(os.environ.get("OUT", "/tmp/out"), exist_ok=True)
with open(os.path.join(os.environ.get("OUT", "/tmp/out"), "gpu_check.json"), "w") as fh:
    json.dump(out, fh, indent=1, default=str)
