"""The one timing harness of the course: book, labs and autograder all call :func:`measure`.

How a time is taken (and why):

* CUDA events on the stream the work runs on, never the host clock: the GPU
  timestamps its own work.
* Warm-up first (at least one call per argument set), which also triggers JIT
  compilation; none of it is timed.
* Inputs rotate: ``arg_sets`` is cycled so that the bytes touched between two
  uses of the same buffers exceed the L2 cache (see :func:`rotation_count`);
  otherwise a repeated kernel reads from L2 and reports an impossible bandwidth.
* The queue is primed: before the start event a short single-thread "delay"
  kernel keeps the GPU busy while Python enqueues the start event, the launches
  and the end event. The GPU then runs them back to back and the events measure
  GPU time, not the ~30 us Python needs to launch a Numba kernel.
  If the delay ran out before the host finished enqueueing (seen with
  ``Event.query``), the sample is retaken with a longer delay.
* Short work is batched: when one call is shorter than ``min_batch_s``, a sample
  times ``n`` back-to-back calls between two events and divides by ``n`` (the
  event clock has about half a microsecond of resolution). ``graph=True``
  captures the ``n`` calls in a CUDA graph (torch.cuda.graph) and times replays.
* Many samples (``reps``); the median is reported with the 10th and 90th
  percentiles as the spread.
* Effective bandwidth = minimum bytes moved / median time (the caller supplies
  the minimum bytes, e.g. from :mod:`book.traffic`).

In Numba's CUDA simulator nothing is timed: :func:`measure` raises
:class:`SimulatorTimingError`.

What it trusts (for the autograder): the CUDA driver, Numba's event API and the
Python interpreter of the process it runs in. It keeps no module-level settings
that change a result (every parameter is an argument; the only module state is
a cache of the compiled delay kernel, in ``delay``), and it returns every raw sample. Code
that runs in the same process before or during ``measure`` could still replace
these functions, so a grader must time untrusted code in a process whose
harness the student's code cannot reach (or re-time it in a clean process) and
should flag results above the measured copy bandwidth.

The map: ``delay`` primes the queue for :func:`measure`; ``suite`` runs the suite (``__main__``: ``python -m book.bench``; the run, its checks,
tuning and targets; ``--only REGEX --rows-out FILE`` a few rows, ``--shapes TxH ...`` only those
elementwise shapes, ``--no-decode``/``--no-elementwise`` skip phases), its rows in
``elementwise_rows`` and ``gemm_rows``, a record's rows found by ``rows``; ``merge`` puts rows
into ``book/data/<gpu>.json`` (``--retarget``, ``--variants REGEX``); ``targets``: the goals as
measured ratios and the sizes they are judged at (the suite writes them, the merge recomputes
them). The phases, each also run alone from benchmarks/: ``tensorcore`` (the bf16 tensor-core
rows and targets; tensorcore_bench.py), ``hopper`` (the Hopper rows on sm_90, measured
interleaved, the epilogue rule at several d; hopper_bench.py, with chapter 8's rows of the same
run), ``decode`` (the decode MLP-up rows, the T sweep, the planned calls' host rows, issue 31's
targets; decode_bench.py), ``norm_quant`` (norm_quant_bench.py). ``ncu``: Nsight Compute, the
counters' side, once for the instruments that profile under it (ncu_check.py, ncu_diagnose.py,
coalescing.py, tensorcore_ncu.py): where ncu is, its command and run, its reports read.
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass, field

from .. import gpu
from .delay import primed

__all__ = [
    "SimulatorTimingError",
    "Timing",
    "measure",
    "effective_bandwidth",
    "summarize",
    "rotation_count",
    "batch_size",
    "host_overhead",
    "host_timings",
    "measure_back_to_back",
    "measure_interleaved",
    "DEFAULT_MIN_BATCH_S",
]

#: A sample shorter than this is batched (n calls between two events).
DEFAULT_MIN_BATCH_S = 200e-6
MAX_BATCH = 4096


class SimulatorTimingError(RuntimeError):
    """Raised instead of a time when kernels run in Numba's CUDA simulator."""


_SIM_MESSAGE = (
    "not measured: kernels are running in Numba's CUDA simulator on the CPU, so any time "
    "would describe the simulator, not a GPU. Run on a CUDA GPU (e.g. a Colab GPU runtime) "
    "to measure; the book's figures come from recorded runs in book/data/."
)


@dataclass(frozen=True)
class Timing:
    median_s: float
    p10_s: float
    p90_s: float
    reps: int
    method: str
    bytes_moved: int | None = None
    flops: int | None = None
    batch: int = 1  # calls per sample
    samples_s: tuple = field(default=(), repr=False)  # seconds per call, each sample
    notes: tuple = ()
    #: the GPU's state read right after the samples (book.gpu.state: SM clock, power,
    #: temperature, clock-event reasons), one reading per measurement pooled
    gpu_states: tuple = field(default=(), repr=False)

    @property
    def sm_mhz(self) -> float | None:
        """The median SM clock of the readings (None without one)."""
        v = [s["sm_mhz"] for s in self.gpu_states if "sm_mhz" in s]
        return summarize(v)[0] if v else None

    @property
    def power_w(self) -> float | None:
        """The median power draw of the readings (None without one)."""
        v = [s["power_w"] for s in self.gpu_states if "power_w" in s]
        return summarize(v)[0] if v else None

    @property
    def bandwidth(self) -> float | None:
        """Effective bandwidth in bytes/s (None when bytes_moved is unknown)."""
        if self.bytes_moved is None:
            return None
        return effective_bandwidth(self.bytes_moved, self.median_s)

    @property
    def flops_per_s(self) -> float | None:
        if self.flops is None:
            return None
        return self.flops / self.median_s

    def row(self) -> dict:
        """A JSON-ready dict (the format of book/data rows)."""
        return {
            "seconds": self.median_s,
            "p10_s": self.p10_s,
            "p90_s": self.p90_s,
            "reps": self.reps,
            "batch": self.batch,
            "method": self.method,
            "bytes": self.bytes_moved,
            "bandwidth": self.bandwidth,
            "flops": self.flops,
            "flops_per_s": self.flops_per_s,
            "notes": list(self.notes),
            "sm_mhz": self.sm_mhz,
            "power_w": self.power_w,
            "gpu_states": [dict(s) for s in self.gpu_states],
        }

    def record_fields(self) -> dict:
        """The fields of a benchmark record's row (records/fp8, records/hopper: times in us):
        median and p10/p90, the samples, the GPU readings and their medians."""
        return {"median_us": self.median_s * 1e6, "p10_us": self.p10_s * 1e6,
                "p90_us": self.p90_s * 1e6, "samples": len(self.samples_s) or self.reps,
                "gpu_states": [dict(s) for s in self.gpu_states],
                "sm_mhz_median": self.sm_mhz, "power_w_median": self.power_w}

    def __str__(self) -> str:
        s = f"{self.median_s * 1e6:,.2f} µs (p10 {self.p10_s * 1e6:,.2f}, p90 {self.p90_s * 1e6:,.2f})"
        if self.bandwidth is not None:
            s += f", {self.bandwidth / 1e9:,.0f} GB/s"
        if self.flops_per_s is not None:
            s += f", {self.flops_per_s / 1e12:.2f} TFLOP/s"
        return s + f" [{self.method}]"


def _reading() -> tuple:
    """The GPU's state now, as a Timing's ``gpu_states`` (book.gpu.state; empty if none)."""
    st = gpu.state()
    return (st,) if st else ()


# --------------------------------------------------------------------------
# Pure helpers (tested directly)


def effective_bandwidth(bytes_moved: float, seconds: float) -> float:
    """Minimum bytes moved divided by time, in bytes/s."""
    if seconds is None or not seconds > 0 or not math.isfinite(seconds):
        raise ValueError(f"time must be a positive number of seconds, got {seconds!r}")
    if bytes_moved is None or bytes_moved < 0:
        raise ValueError(f"bytes_moved must be a non-negative number, got {bytes_moved!r}")
    return bytes_moved / seconds


def _percentile(sorted_xs, q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of sorted data."""
    if len(sorted_xs) == 1:
        return float(sorted_xs[0])
    pos = (len(sorted_xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return float(sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo))


def summarize(samples) -> tuple[float, float, float]:
    """(median, p10, p90) of a non-empty list of positive times."""
    xs = sorted(float(x) for x in samples)
    if not xs:
        raise ValueError("no samples to summarize")
    if xs[0] <= 0 or not all(math.isfinite(x) for x in xs):
        raise ValueError(f"samples must be positive finite times, got {xs[:3]}...")
    return _percentile(xs, 50), _percentile(xs, 10), _percentile(xs, 90)


def rotation_count(bytes_per_set: int, l2_bytes: int | None = None, factor: float = 2.0) -> int:
    """How many argument sets to cycle so each set is cold in L2 when it is used again.

    Between two uses of one set the other ``n - 1`` sets are touched; they must
    exceed ``factor`` x the L2 size: n = 1 + ceil(factor * L2 / bytes_per_set).
    ``l2_bytes`` defaults to this GPU's L2. In the simulator (no cache to defeat,
    nothing timed) it returns 1 so notebooks do not allocate copies for nothing.
    """
    if not bytes_per_set or bytes_per_set <= 0:
        raise ValueError(f"bytes_per_set must be positive, got {bytes_per_set!r}")
    if l2_bytes is None:
        if gpu.SIMULATED:
            return 1
        l2_bytes = gpu.device_info().l2_bytes
        if not l2_bytes:
            raise ValueError("this GPU did not report its L2 size: pass l2_bytes explicitly")
    return 1 + math.ceil(factor * l2_bytes / bytes_per_set)


def batch_size(single_s: float, min_batch_s: float = DEFAULT_MIN_BATCH_S,
               max_batch: int = MAX_BATCH) -> int:
    """Calls per timed sample so that a sample lasts at least ``min_batch_s``."""
    if not single_s > 0:
        raise ValueError(f"single-call time must be positive, got {single_s!r}")
    if min_batch_s <= 0:
        return 1
    # round first: 200e-6 / 2e-6 is 100.00000000000001 in floating point
    return int(min(max_batch, max(1, math.ceil(round(min_batch_s / single_s, 9)))))


def host_overhead(fn, arg_sets, calls: int = 50) -> float:
    """Host seconds per call of ``fn`` (the Python launch cost), GPU drained before and after."""
    from numba import cuda

    if gpu.SIMULATED:
        raise SimulatorTimingError(_SIM_MESSAGE)
    arg_sets = _check_arg_sets(arg_sets)
    for i in range(min(calls, len(arg_sets))):  # warm-up: JIT, first use of each set
        fn(*arg_sets[i])
    cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(calls):
        fn(*arg_sets[i % len(arg_sets)])
    t1 = time.perf_counter()
    cuda.synchronize()
    return (t1 - t0) / calls


def host_timings(calls_by_name, *, calls: int = 500, reps: int = 15, warmup: int = 3) -> dict:
    """Host seconds per call of several functions, with their spread: ``{name: Timing}``.

    ``calls_by_name``: ``{name: (fn, arg_sets)}``. Each sample is the mean host time of
    ``calls`` calls (perf_counter, GPU drained before and after, as :func:`host_overhead`);
    the functions take turns, one sample each per round, for ``reps`` rounds, so a drift of
    the host (another process, a clock change) reaches every row alike and two rows of one
    run are compared under the same conditions."""
    from numba import cuda

    if gpu.SIMULATED:
        raise SimulatorTimingError(_SIM_MESSAGE)
    if reps < 1 or calls < 1:
        raise ValueError(f"reps and calls must be at least 1, got {reps} and {calls}")
    jobs = {name: (fn, _check_arg_sets(sets)) for name, (fn, sets) in calls_by_name.items()}
    for fn, sets in jobs.values():  # warm-up: JIT, first use of each set
        for i in range(max(warmup, len(sets))):
            fn(*sets[i % len(sets)])
    cuda.synchronize()
    samples = {name: [] for name in jobs}
    for _ in range(reps):
        for name, (fn, sets) in jobs.items():
            k = len(sets)
            cuda.synchronize()
            t0 = time.perf_counter()
            for i in range(calls):
                fn(*sets[i % k])
            t1 = time.perf_counter()
            cuda.synchronize()
            samples[name].append((t1 - t0) / calls)
    method = (f"host time per call: perf_counter over {calls} calls, GPU drained before and "
              f"after; median and p10/p90 of {reps} rounds, the rows of one group taking turns")
    out = {}
    for name, xs in samples.items():
        med, p10, p90 = summarize(xs)
        out[name] = Timing(med, p10, p90, reps, method, batch=calls, samples_s=tuple(xs))
    return out


def measure_back_to_back(fn, arg_sets, *, bytes_moved=None, flops=None, calls: int = 20,
                         reps: int = 20, warmup: int = 3) -> Timing:
    """Time ``calls`` back-to-back calls of ``fn`` at the host's own pace: what a reader
    who calls it in a loop gets.

    Unlike :func:`measure`, no delay kernel keeps the GPU queue ahead of the host: the
    start event is recorded on an idle GPU and the calls are enqueued as fast as Python
    makes them, so wherever one call's host time exceeds its GPU time the GPU waits and
    the time per call shows it. (For a kernel longer than its launch, the two agree.)
    """
    from numba import cuda

    if gpu.SIMULATED:
        raise SimulatorTimingError(_SIM_MESSAGE)
    if reps < 1 or calls < 1:
        raise ValueError(f"reps and calls must be at least 1, got {reps} and {calls}")
    arg_sets = _check_arg_sets(arg_sets)
    n_sets = len(arg_sets)
    for i in range(max(warmup, n_sets)):
        fn(*arg_sets[i % n_sets])
    cuda.synchronize()
    samples = []
    k = 0
    for _ in range(reps):
        start, end = cuda.event(), cuda.event()
        start.record()
        for _ in range(calls):
            fn(*arg_sets[k % n_sets])
            k += 1
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / calls)
    med, p10, p90 = summarize(samples)
    method = (f"CUDA events around {calls} back-to-back calls from Python, no delay kernel: "
              "host time shows wherever it exceeds GPU time")
    return Timing(med, p10, p90, reps, method, bytes_moved, flops, calls, tuple(samples),
                  gpu_states=_reading())


def _check_arg_sets(arg_sets):
    if callable(arg_sets) or not hasattr(arg_sets, "__len__"):
        raise TypeError("arg_sets must be a list of argument tuples, e.g. [(gate, up, out)]")
    sets = [tuple(a) if isinstance(a, (list, tuple)) else (a,) for a in arg_sets]
    if not sets:
        raise ValueError("arg_sets is empty: give at least one argument tuple")
    return sets


def _accepts_stream(fn) -> bool:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return False
    return "stream" in sig.parameters or any(
        p.kind is p.VAR_KEYWORD for p in sig.parameters.values())


def measure(fn, arg_sets, *, bytes_moved=None, flops=None, warmup: int = 3, reps: int = 50,
            min_batch_s: float = DEFAULT_MIN_BATCH_S, graph: bool = False,
            l2_bytes: int | None = None) -> Timing:
    """Time ``fn(*args)`` on the GPU; return per-call median and spread.

    ``fn`` enqueues GPU work on the default stream (a Numba kernel launch or a
    host wrapper, or torch CUDA ops). ``arg_sets`` is a list of argument tuples
    cycled call after call (build enough of them with :func:`rotation_count`).
    ``bytes_moved`` and ``flops`` are per call (minimum traffic) and give the
    bandwidth and flop rate.

    ``graph=True`` captures the calls in a CUDA graph with ``torch.cuda.graph``
    and times replays. Torch ops are captured as they are; Numba launches must
    go to the capture stream, so ``fn`` must then accept ``stream=`` (a Numba
    stream wrapping the capture stream) and launch with it.
    """
    if gpu.SIMULATED:
        raise SimulatorTimingError(_SIM_MESSAGE)
    if reps < 1:
        raise ValueError(f"reps must be at least 1, got {reps}")
    arg_sets = _check_arg_sets(arg_sets)
    from numba import cuda

    notes = []
    n_sets = len(arg_sets)
    if bytes_moved:
        l2 = l2_bytes if l2_bytes is not None else gpu.device_info().l2_bytes
        if l2 and (n_sets - 1) * bytes_moved < l2:
            notes.append(
                f"inputs not rotated beyond L2: {n_sets} argument set(s) of {bytes_moved} bytes "
                f"against {l2} bytes of L2 (use rotation_count); bandwidth may exceed DRAM's"
            )

    # Warm-up: JIT-compiles, touches every buffer, measures the host cost.
    for i in range(max(warmup, n_sets)):
        fn(*arg_sets[i % n_sets])
    cuda.synchronize()
    t0 = time.perf_counter()
    probe_calls = max(3, min(20, n_sets))
    for i in range(probe_calls):
        fn(*arg_sets[i % n_sets])
    host_s = (time.perf_counter() - t0) / probe_calls
    cuda.synchronize()

    if graph:
        return _measure_graph(fn, arg_sets, bytes_moved, flops, reps, min_batch_s, host_s, notes)

    counter = [0]

    def run(n):
        for _ in range(n):
            fn(*arg_sets[counter[0] % n_sets])
            counter[0] += 1

    def sample(n, delay_s):
        def timed():
            start, end = cuda.event(), cuda.event()
            start.record()
            run(n)
            end.record()
            return start, end

        return primed(timed, delay_s, notes)

    # one call, primed, to size the batch
    delay_s = 1.5 * host_s + 50e-6
    single, delay_s = sample(1, delay_s)
    n = batch_size(single, min_batch_s)
    delay_s = 1.5 * host_s * n + 50e-6
    samples = []
    for _ in range(reps):
        t, delay_s = sample(n, delay_s)
        samples.append(t / n)
    med, p10, p90 = summarize(samples)
    if n == 1:
        method = "CUDA events, 1 call per sample, queued behind a delay kernel"
    else:
        method = (f"CUDA events, {n} back-to-back calls per sample (one call is shorter than "
                  f"{min_batch_s * 1e6:.0f} us), queued behind a delay kernel")
    return Timing(med, p10, p90, reps, method, bytes_moved, flops, n, tuple(samples), tuple(notes),
                  _reading())


def _measure_graph(fn, arg_sets, bytes_moved, flops, reps, min_batch_s, host_s, notes):
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError("graph=True needs torch with CUDA (torch.cuda.graph)") from exc
    if not torch.cuda.is_available():
        raise RuntimeError("graph=True needs torch with CUDA; torch.cuda.is_available() is False")
    from numba import cuda

    n_sets = len(arg_sets)
    pass_stream = _accepts_stream(fn)
    side = torch.cuda.Stream()

    def call(i, nb_stream):
        args = arg_sets[i % n_sets]
        if pass_stream:
            fn(*args, stream=nb_stream)
        else:
            fn(*args)

    # torch asks for warm-up on a side stream before capture
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        nb = cuda.external_stream(side.cuda_stream)
        for i in range(max(3, n_sets)):
            call(i, nb)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()

    def capture(n):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            nb_s = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
            for i in range(n):
                call(i, nb_s)
        return g

    replay_stream = torch.cuda.Stream()
    nb_replay = cuda.external_stream(replay_stream.cuda_stream)

    def sample(g, delay_s):
        def timed():
            with torch.cuda.stream(replay_stream):
                start = torch.cuda.Event(enable_timing=True)
                end = torch.cuda.Event(enable_timing=True)
                start.record()
                g.replay()
                end.record()
            return start, end

        return primed(timed, delay_s, notes, nb_replay)

    g1 = capture(1)
    single, delay_s = sample(g1, 200e-6)
    n = batch_size(single, min_batch_s)
    g = capture(n) if n > 1 else g1
    samples = []
    for _ in range(reps):
        t, delay_s = sample(g, delay_s)
        samples.append(t / n)
    torch.cuda.synchronize()
    med, p10, p90 = summarize(samples)
    method = f"CUDA graph replay ({n} calls captured per graph), CUDA events, queued behind a delay kernel"
    return Timing(med, p10, p90, reps, method, bytes_moved, flops, n, tuple(samples), tuple(notes),
                  _reading())


def measure_interleaved(candidates, *, rounds: int = 6, reps: int = 8,
                        warmup: int | None = None, **kw) -> dict:
    """``{name: Timing}`` for ``candidates`` (``{name: (fn, arg_sets, extra)}``, ``extra`` a
    dict of :func:`measure` arguments such as ``flops``): each candidate measured ``reps``
    samples at a time, in turn, ``rounds`` times over, and its samples pooled, with the GPU
    state read after each turn (``Timing.gpu_states``: one reading a turn). ``warmup``:
    calls before each turn's samples (default 3 in the first round, 1 after).

    Why: a card's clocks drift over a run (power and temperature: seen on the H100 as a
    10% swing of the same cuBLAS GEMM between minutes of one session), so rows measured one
    after the other can differ by more than the kernels do. Interleaved, a drift falls on
    every candidate alike and their ratios hold."""
    pooled = {name: [] for name in candidates}
    states = {name: [] for name in candidates}
    first = {}
    for r in range(rounds):
        for name, (fn, sets, extra) in candidates.items():
            w = warmup if warmup is not None else 3 if r == 0 else 1
            t = measure(fn, sets, reps=reps, warmup=w, **{**kw, **extra})
            pooled[name].extend(t.samples_s)
            states[name].extend(t.gpu_states)
            first.setdefault(name, t)
    out = {}
    for name, samples in pooled.items():
        t = first[name]
        med, p10, p90 = summarize(samples)
        method = (f"{t.method}; interleaved with {len(candidates) - 1} other rows, "
                  f"{rounds} rounds of {reps} samples")
        out[name] = Timing(med, p10, p90, len(samples), method, t.bytes_moved, t.flops,
                           t.batch, tuple(samples), t.notes, tuple(states[name]))
    return out
