"""A decode-step timeline for chapter 10: a Python loop of launches against a CUDA-graph replay.

Record: `book/data/profile/decode_timeline_h100.json`.

One command on a GPU machine records ``book/data/profile/decode_timeline_<gpu>.json``:

    python -m benchmarks.profile_decode --out book/data/profile/decode_timeline_h100.json

The same ``STEPS`` launches of the fused SwiGLU at decode size (1 x 18944, float32) run twice
under ``torch.profiler`` (CUPTI's activity trace; Nsight Systems does not run on the course's
H100 machine): once from a Python loop (one Numba launch per step) and once as one replay of
a CUDA graph that holds the same launches (``book.kernels.elementwise.decode.GraphedSwiGLU``). The trace
is reduced to what the figure needs: for each kernel its start and end on the GPU, and for
each host API call that launched work (``cuLaunchKernel``, ``cudaGraphLaunch``...) its start
and end on the CPU, in microseconds from the first event of that run.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHAPE = (1, 18944)
STEPS = 20  # launches per decode step (a real step graph holds hundreds of kernels)
REPEATS = 5  # profiled runs of each mode; the record keeps the median run by span
API_WORDS = ("launch", "graph")  # host API calls kept (cuLaunchKernel, cudaGraphLaunch, ...)


def reduce_trace(path):
    """{kernels: [...], api: [...]} with ts/dur in µs from the trace's first kept event."""
    events = json.loads(Path(path).read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    api = [e for e in events if e.get("cat") in ("cuda_runtime", "cuda_driver")
           and e.get("ph") == "X" and any(w in e["name"].lower() for w in API_WORDS)]
    keep = kernels + api
    if not keep:
        return {"kernels": [], "api": []}
    t0 = min(float(e["ts"]) for e in keep)

    def row(e):
        return {"name": e["name"][:80], "ts_us": float(e["ts"]) - t0, "dur_us": float(e["dur"])}

    return {"kernels": sorted((row(e) for e in kernels), key=lambda r: r["ts_us"]),
            "api": sorted((row(e) for e in api), key=lambda r: r["ts_us"])}


def span(run):
    rows = run["kernels"] + run["api"]
    return max(r["ts_us"] + r["dur_us"] for r in rows) - min(r["ts_us"] for r in rows)


def last_run(trace, runs):
    """The events of the last of ``runs`` equal runs in one trace, re-timed from its start."""
    per_api = len(trace["api"]) // runs
    kernels = trace["kernels"][-STEPS:]
    api = trace["api"][-per_api:] if per_api else []
    t0 = min(r["ts_us"] for r in kernels + api)
    shift = lambda rows: [dict(r, ts_us=r["ts_us"] - t0) for r in rows]  # noqa: E731
    return {"kernels": shift(kernels), "api": shift(api)}


def profile(fn, tmpdir, tag):
    """Run ``fn`` under torch.profiler REPEATS times; return the median run (by span).

    Each profiling session runs ``fn`` twice and keeps the second run: CUPTI's first
    sight of a launch (the first cudaGraphLaunch above all) costs hundreds of µs that a
    program running step after step never pays again."""
    import torch
    from torch.profiler import ProfilerActivity, profile as tprofile

    runs = []
    for i in range(REPEATS):
        torch.cuda.synchronize()
        with tprofile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(2):
                fn()
                torch.cuda.synchronize()
        path = Path(tmpdir) / f"{tag}_{i}.json"
        prof.export_chrome_trace(str(path))
        trace = reduce_trace(path)
        if len(trace["kernels"]) != 2 * STEPS:
            raise SystemExit(f"{tag}: the trace holds {len(trace['kernels'])} kernels, "
                             f"expected {2 * STEPS}: {[k['name'] for k in trace['kernels']][:3]}")
        runs.append(last_run(trace, 2))
    runs.sort(key=span)
    return runs[len(runs) // 2]


def unprofiled_us(fn, reps=200):
    """Median host wall time of ``fn()`` + synchronize, no profiler attached (the control)."""
    import torch

    times = []
    for _ in range(reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return sorted(times)[reps // 2] * 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "book" / "data" / "profile"
                                         / "decode_timeline_h100.json"))
    args = ap.parse_args()
    import book

    if book.gpu.SIMULATED:
        print("not measured: no GPU here (the timeline is the GPU's own)")
        return 2
    import torch

    from book.kernels.elementwise import fused
    from book.kernels import reference as R
    from book.kernels.elementwise.decode import GraphedSwiGLU
    from book.provenance import provenance

    g, u = R.random_inputs(SHAPE, "float32", seed=0)
    gt, ut = (torch.from_numpy(a.ravel()).cuda() for a in (g, u))
    ot = torch.full((g.size,), float("nan"), device="cuda")
    fn = fused.swiglu_fused_fastmath
    graph = GraphedSwiGLU(fn, gt, ut, ot, repeat=STEPS)
    gd, ud, od = graph.args  # the same Numba views the graph launches on

    def python_loop():
        for _ in range(STEPS):
            fn(gd, ud, od)

    def graph_replay():
        graph.replay()

    for f in (python_loop, graph_replay):  # warm up both paths (compile, load, first replay)
        f()
        f()
    torch.cuda.synchronize()
    R.check(ot.cpu().numpy().reshape(SHAPE), g, u, "float32")
    ot.fill_(float("nan"))
    with tempfile.TemporaryDirectory() as tmp:
        loop = profile(python_loop, tmp, "python_loop")
        replay = profile(graph_replay, tmp, "graph_replay")
    # the same step without the profiler: what CUPTI's callbacks add to the host side
    loop["unprofiled_step_us"] = unprofiled_us(python_loop)
    replay["unprofiled_step_us"] = unprofiled_us(graph_replay)
    torch.cuda.synchronize()
    R.check(ot.cpu().numpy().reshape(SHAPE), g, u, "float32")  # the replay wrote out again
    doc = {
        "kernel": "fused_fastmath", "dtype": "float32", "shape": list(SHAPE), "steps": STEPS,
        "repeats": REPEATS,
        "method": ("torch.profiler (CUPTI activity trace), CPU + CUDA activities; each mode run "
                   f"{REPEATS} times (each session runs the step twice and keeps the second), "
                   "the run with the median span kept; times in µs from that run's first "
                   "kernel or launch call; unprofiled_step_us: median wall time of the step "
                   "plus a synchronize over 200 runs with no profiler attached"),
        "runs": {"python_loop": loop, "graph_replay": replay},
        "provenance": provenance("python -m benchmarks.profile_decode"),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    for name, run in doc["runs"].items():
        busy = sum(k["dur_us"] for k in run["kernels"])
        print(f"{name:13s} span {span(run):8.1f} us, kernels busy {busy:6.1f} us "
              f"({busy / span(run):.0%}), {len(run['api'])} launch calls; step without "
              f"profiler {run['unprofiled_step_us']:.1f} us")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
