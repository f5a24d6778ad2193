"""The queue primer of :func:`book.bench.measure`: a one-thread "delay" kernel that keeps the GPU
busy while Python enqueues a sample's start event, its launches and its end event, so that the
events time the GPU's work back to back and not the ~30 us the host needs per Numba launch.

:func:`delay` queues the busy chain (calibrated once per process: the time of one iteration from
the difference of two lengths); :func:`primed` takes one sample behind it and retakes it with a
longer delay when the GPU caught up with the host (the start event already reached).
"""

from __future__ import annotations

import math

_DELAY = {}  # compiled delay kernel and its calibration (cache only)
# One thread per block would do; 128 blocks keep Numba's low-occupancy warning
# (grids under 128 blocks) quiet. Each block runs the same chain on its own SM,
# so the duration is that of one chain; the racing stores go to a scratch cell.
_DELAY_GRID = 128


def _delay_py(out, iters, a, b):
    # One thread runs a dependent chain of fused multiply-adds: a busy GPU
    # that the host can queue work behind. Storing x keeps the loop alive.
    x = out[0]
    for _ in range(iters):
        x = x * a + b
    out[0] = x


def _delay_kernel():
    if "kernel" not in _DELAY:
        import numpy as np
        from numba import cuda

        k = cuda.jit(_delay_py)
        buf = cuda.to_device(np.zeros(1, dtype=np.float32))
        _DELAY.update(kernel=k, buf=buf)
        # per-iteration time from the difference of two lengths (the launch
        # gap cancels out)
        ts = []
        for iters in (1 << 14, 1 << 16):
            best = math.inf
            for _ in range(3):
                s, e = cuda.event(), cuda.event()
                s.record()
                k[_DELAY_GRID, 1](buf, iters, np.float32(0.999), np.float32(0.001))
                e.record()
                e.synchronize()
                best = min(best, s.elapsed_time(e) * 1e-3)
            ts.append(best)
        per_iter = max((ts[1] - ts[0]) / ((1 << 16) - (1 << 14)), 1e-10)
        _DELAY["per_iter_s"] = per_iter
    return _DELAY


def delay(seconds: float, stream=None) -> None:
    import numpy as np

    d = _delay_kernel()
    iters = max(1, int(seconds / d["per_iter_s"]))
    args = (d["buf"], iters, np.float32(0.999), np.float32(0.001))
    if stream is None:
        d["kernel"][_DELAY_GRID, 1](*args)
    else:
        d["kernel"][_DELAY_GRID, 1, stream](*args)


#: retakes of a sample whose start event the GPU had reached before the host was done
RETAKES = 3
NOT_PRIMED = "queue could not be kept ahead of the GPU: host launch gaps may be included"


def primed(timed, delay_s, notes, stream=None):
    """One sample queued behind the delay kernel: ``timed()`` records its start event,
    enqueues the work and its end event, and returns (start, end) events that have
    ``query()``, ``synchronize()`` and ``elapsed_time()`` (milliseconds; Numba's and torch's
    both do). If the GPU had already finished the delay when ``timed`` returned (the start
    event had been reached), host launch gaps could be inside the sample: retake it with
    twice the delay, RETAKES times at most. Returns (seconds, the delay that worked).

    Where no delay worked, the delay given comes back, not the longest tried: a call that
    waits for the GPU itself (a host-to-device copy of a Python number, ``.item()``) reaches
    the start event whatever the delay, and each sample handed the next one sixteen times its
    delay (the norm-quant timing ran for hours on an H200, 2026-11-28/29: torch.tensor(448.0,
    device=...) in every call). The note says so once."""
    tried = delay_s
    for _attempt in range(RETAKES + 1):
        delay(tried, stream)
        start, end = timed()
        primed = not start.query()  # GPU still busy with the delay: no gaps
        end.synchronize()
        t = start.elapsed_time(end) * 1e-3
        if primed:
            return t, tried
        tried *= 2
    if NOT_PRIMED not in notes:
        notes.append(NOT_PRIMED)
    return t, delay_s


