"""The cheap launch path's per-call Python work, timed on the CPU with the driver call stubbed.

Everything ``FastCall.__call__`` does up to ``cuLaunchKernel`` is CPU work: the type tests,
the key read from the three tensors, the plan and stream lookups, the argument list, the
error test and the counter. This script times that work on any machine (no GPU, no driver):
it gives a :class:`book.kernels.fastcall.FastCall` a stand-in driver whose
``cuLaunchKernel`` returns success at once, a plan for CPU tensors, and times

* ``call``: the whole ``__call__`` with the stand-in launch;
* ``launch_stub``: the stand-in launch alone, called with the same arguments (subtract it
  from ``call``: the rest is the path's own Python work);
* ``key``: building the key alone (the 15 tensor reads the checks depend on);
* ``lookup``: the key's plan lookup alone.

Only this script stubs the launch; the tests run the real thing (the simulator's ordinary
wrapper here, the driver on a GPU). On the GPU, ``benchmarks/fastcall_probe.py`` and the
suite's ``launch_layer_fastcall`` rows time the real call.

    PYTHONPATH=. python benchmarks/fastcall_host_profile.py [--calls 20000] [--reps 9] [--profile]
    PYTHONPATH=. python benchmarks/fastcall_host_profile.py --planned decode   # or swiglu_mma

``--planned NAME`` times a :class:`book.kernels.fastcall.PlannedCall` instead (the decode
entry point: x, wg, wu, bg, bu, out, six tensors in its key; ``swiglu_mma``: four), its
planning stubbed as the launch is: the per-call path up to ``cuLaunchKernel``.
"""

import argparse
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class StubDriver:
    """What FastCall uses of cuda-bindings' driver module, doing nothing."""

    class CUstream(int):
        pass

    @staticmethod
    def cuLaunchKernel(*args):
        return (0,)

    @staticmethod
    def cuGetErrorName(err):
        return (0, b"CUDA_SUCCESS")


def per_call(fn, args, calls, reps):
    """Median and p10/p90 of ``reps`` rounds, each the mean of ``calls`` calls, in ns of this
    thread's CPU time (``time.thread_time_ns``: on a shared machine, time the thread spent
    descheduled does not count; the work itself does)."""
    samples = []
    for _ in range(reps):
        t0 = time.thread_time_ns()
        for _ in range(calls):
            fn(*args)
        samples.append((time.thread_time_ns() - t0) / calls)
    samples.sort()
    q = statistics.quantiles(samples, n=10)
    return statistics.median(samples), q[0], q[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--variant", default="half8", help="vec4 (float32) or half8 (bfloat16)")
    ap.add_argument("--profile", action="store_true", help="also print a cProfile of the calls")
    ap.add_argument("--planned", metavar="NAME",
                    help="time planned(NAME) (decode, swiglu_mma, ...) instead of a FastCall")
    args = ap.parse_args()
    if args.planned:
        return planned_main(args)

    import book  # noqa: F401  (first: decides GPU or simulator)
    import torch

    from book.kernels import fastcall

    dtype = torch.float32 if args.variant == "vec4" else torch.bfloat16
    g, u, o = (torch.ones(1, 18944, dtype=dtype) for _ in range(3))
    fc = fastcall.FastCall(args.variant)
    # the stand-in driver, on a path that believes it has one
    fc._cu, fc.fast, fc._multi_gpu = StubDriver, True, False
    fc._launch = StubDriver.cuLaunchKernel
    fastcall.current_raw_stream = lambda: (lambda device: 0)
    plan = fastcall.Plan(StubDriver.CUstream(1), 74, 32,
                          fastcall.PackedParams([0] * 21), g.get_device())

    def plan_it(key, *_tensors):  # what _plan stores, without the wrapper's GPU launch
        fc._plans[key] = plan

    fc._plan = plan_it
    fc(g, u, o)  # plans
    fc(g, u, o)
    if fc.stats["fast"] != 1:
        raise SystemExit(f"the stubbed path did not take the fast branch: {fc.stats}")
    key = next(iter(fc._plans))
    launch_args = (plan.function, plan.grid, 1, 1, plan.block, 1, 1, 0, 0, plan.address, 0)

    def key_of(gate, up, out):
        return (gate.data_ptr(), up.data_ptr(), out.data_ptr(),
                gate.shape, up.shape, out.shape,
                gate.dtype, up.dtype, out.dtype,
                gate.is_contiguous(), up.is_contiguous(), out.is_contiguous(),
                gate.get_device(), up.get_device(), out.get_device())

    plans = fc._plans
    rows = {
        "call": (fc, (g, u, o)),
        "launch_stub": (StubDriver.cuLaunchKernel, launch_args),
        "key": (key_of, (g, u, o)),
        "lookup": (plans.get, (key, None)),
    }
    print(f"FastCall({args.variant!r}) with the launch stubbed, torch {torch.__version__}, "
          f"Python {sys.version.split()[0]}: ns per call, median (p10-p90) of {args.reps} rounds "
          f"of {args.calls} calls, CPU time of this thread")
    result = {}
    for name, (fn, a) in rows.items():
        med, lo, hi = per_call(fn, a, args.calls, args.reps)
        result[name] = med
        print(f"  {name:12s} {med:8.0f} ({lo:.0f}-{hi:.0f})")
    print(f"  the path's own Python work (call - launch_stub): "
          f"{result['call'] - result['launch_stub']:.0f} ns")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            fc(g, u, o)
        prof.disable()
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(12)
        print(s.getvalue())


def planned_main(args):
    import book  # noqa: F401  (first: decides GPU or simulator)
    import torch

    from book.kernels import fastcall

    if args.planned not in fastcall.PLANNED:
        raise SystemExit(f"--planned: one of {sorted(fastcall.PLANNED)}")
    bf = torch.bfloat16
    if args.planned.startswith(("decode", "gemv")):  # x, wg, wu, bg, bu, out (nn.Linear)
        call_args = (torch.ones(1, 4096, dtype=bf), torch.ones(8, 4096, dtype=bf),
                     torch.ones(8, 4096, dtype=bf), torch.ones(8, dtype=bf),
                     torch.ones(8, dtype=bf), torch.ones(1, 8, dtype=bf))
    elif args.planned == "matmul_mma":
        call_args = (torch.ones(1, 4096, dtype=bf), torch.ones(4096, 8, dtype=bf),
                     torch.ones(1, 8, dtype=bf))
    else:  # x, wg, wu, out ([d, h] weights)
        call_args = (torch.ones(1, 4096, dtype=bf), torch.ones(4096, 8, dtype=bf),
                     torch.ones(4096, 8, dtype=bf), torch.ones(1, 8, dtype=bf))
    pc = fastcall.PlannedCall(args.planned, prepare=None)
    pc._cu, pc.fast, pc._multi_gpu = StubDriver, True, False
    pc._launch = StubDriver.cuLaunchKernel
    pc._tensor, pc._raw_stream = torch.Tensor, (lambda device: 0)
    plan = fastcall.Plan(StubDriver.CUstream(1), 896, 128, fastcall.PackedParams([0] * 40),
                         -1, shared=0)

    def plan_it(key, *_rest):  # what _plan stores, without the ordinary GPU launch
        pc._plans.put(key, plan)

    pc._plan = plan_it
    pc(*call_args)
    pc(*call_args)
    if pc.stats["fast"] != 1:
        raise SystemExit(f"the stubbed path did not take the fast branch: {pc.stats}")
    launch_args = (plan.function, plan.grid, 1, 1, plan.block, 1, 1, 0, 0, plan.address, 0)
    rows = {"call": (pc, call_args), "launch_stub": (StubDriver.cuLaunchKernel, launch_args),
            "key": (lambda *a: (0, *map(fastcall._tensor_key, a)), call_args)}
    print(f"planned({args.planned!r}) with the launch stubbed, {len(call_args)} arguments, torch "
          f"{torch.__version__}, Python {sys.version.split()[0]}: ns per call, median (p10-p90) "
          f"of {args.reps} rounds of {args.calls} calls, CPU time of this thread")
    result = {}
    for name, (fn, a) in rows.items():
        med, lo, hi = per_call(fn, a, args.calls, args.reps)
        result[name] = med
        print(f"  {name:12s} {med:8.0f} ({lo:.0f}-{hi:.0f})")
    print(f"  the path's own Python work (call - launch_stub): "
          f"{result['call'] - result['launch_stub']:.0f} ns")


if __name__ == "__main__":
    main()
