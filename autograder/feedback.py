"""Feedback that shows the problem: the student's access pattern.

``check()`` asks, beyond "are the values right?": does the student's kernel waste bandwidth?
:func:`access_advice` runs the host function once on the lab's first (small) public case
under :mod:`book.tracer` in Numba's CUDA simulator, and a sentence names each array whose
warp loads or stores touch more 32-byte sectors than the bytes they ask for need ("warp 0's
loads of x touch 16 sectors where 8 would do"), with the line that issued them. Empty when
the pattern is tight. When the tracer cannot run the kernel (an unsupported intrinsic, too
many threads, a time limit) the answer is ONE line naming the reason and the limit; never a
hang. In a GPU session the student's code runs again in a simulator process (rerun.py;
``python -m autograder.feedback JOB`` is that process). The other question, races and
out-of-bounds accesses under compute-sanitizer, is sanitize.py's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .rerun import child_env, command, run_job, student_source, write_job

__all__ = ["access_advice", "NOT_AVAILABLE", "TRACE_TIMEOUT_S"]

NOT_AVAILABLE = "not available on this machine"
# the tracer's budget: lab 2's public case takes under a second here, lab 4's tiled GEMM
# (256 threads, every shared access recorded) 10 to 35 s on this 2-core machine
TRACE_TIMEOUT_S = 60.0
_CHILD_START_S = 60.0        # a fresh process imports numpy, numba and the course first


# ------------------------------------------------------------------------------ the case
def _small_case(lab):
    """The public case with the most outputs: still a page's worth of simulated threads (the
    public cases are tiny), and the one whose warps are fullest, so the pattern shows."""
    cases = lab.public_cases
    return max(cases, key=lambda c: lab.out_size(c))


def _case_arrays(lab, case):
    """Host arrays in the order of the student's parameters (output filled with NaN)."""
    import numpy as np

    from .inputs import generate

    ins = {n: generate(s) for n, s in lab.input_specs(case).items()}
    o = lab.out_spec(case)
    ins[lab.output] = np.full(o["shape"], np.nan, dtype=o["dtype"])
    return [ins[p] for p in lab.params]


# ------------------------------------------------------------------------------ advice
def access_advice(lab, fn, *, timeout_s: float = TRACE_TIMEOUT_S, source=None) -> list[str]:
    """Sentences about wasted bandwidth in the student's kernels, [] when the pattern is tight.

    ``lab``: a lab's spec (``autograder.labs.get(name)``) or its name; ``fn``: the student's host function.
    In a simulator session the trace runs here; in a GPU session the student's code is re-run
    in a simulator process (module docstring). One line naming the reason and the limit when
    the tracer cannot run the kernel; never longer than about ``timeout_s`` (plus a fresh
    process's start on a GPU).
    """
    from . import labs as _labs

    lab = lab if isinstance(lab, _labs.LabSpec) else _labs.get(lab)
    if not lab.kernel:
        return []
    import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
    from book import gpu

    if not gpu.SIMULATED:
        return _advice_in_child(lab, fn, source, timeout_s)
    return _advice_here(lab, fn, timeout_s)


def _advice_here(lab, fn, timeout_s) -> list[str]:
    """Trace in this (simulator) process, in a worker thread with a deadline: the tracer stops
    a launch that keeps accessing memory past ``timeout_s``; the join's deadline covers one
    that spins without touching memory (its simulated threads are left to finish)."""
    from book import tracer

    case = _small_case(lab)
    box = {}

    def work():
        try:
            from numba import cuda

            dev = [cuda.to_device(a) for a in _case_arrays(lab, case)]
            box["trace"] = tracer.trace_call(fn, *dev, names=list(lab.params),
                                             timeout_s=timeout_s)
        except tracer.TracerError as e:
            box["error"] = str(e)
        except Exception as e:  # the student's own error: check() reports values, not this
            box["error"] = f"your function raised {type(e).__name__}: {e}"

    t = threading.Thread(target=work, daemon=True, name="access-advice")
    t.start()
    t.join(timeout_s + 2)
    if t.is_alive():
        # a launch spinning without touching memory (the tracer's deadline fires on an
        # access) cannot be stopped from outside: its Python threads run on, so say so
        return [f"access pattern not traced: the traced call ran past the tracer's {timeout_s:.0f}"
                f" s limit on {lab.describe(case)} without touching memory (a loop that never "
                "ends?); its simulated threads are still running: restart the kernel before "
                "running more kernels here"]
    if "error" in box:
        # the simulator prefixes a thread's error with its ids: not the student's business here
        why = re.sub(r"tid=\[[^\]]*\] ctaid=\[[^\]]*\]: ", "", box["error"])
        if "time limit" in why:
            why += f" (the limit: {timeout_s:.0f} s on {lab.describe(case)})"
        return [f"access pattern not traced: {why}"]
    return tracer.advice(box["trace"])   # the one access advice, with its default thresholds


# ------------------------------------------------------------------------------ in a fresh process
def _advice_in_child(lab, fn, source, timeout_s, cells=None) -> list[str]:
    try:
        src = student_source(fn, source=source, cells=cells)
    except ValueError as e:
        return [f"access pattern not traced: {e}"]
    with tempfile.TemporaryDirectory(prefix="ag-advice-") as tmp:
        tmp = Path(tmp)
        job = write_job(tmp, lab, src, timeout_s)
        limit = timeout_s + _CHILD_START_S
        try:
            p = subprocess.run(command("autograder.feedback", job),
                               capture_output=True, text=True, timeout=limit,
                               env=child_env(True), cwd=tmp)
        except subprocess.TimeoutExpired:
            return [f"access pattern not traced: the simulator process did not finish within "
                    f"{limit:.0f} s (the tracer's limit is {timeout_s:.0f} s)"]
        res = tmp / "result.json"
        if not res.exists():
            tail = (p.stderr or p.stdout).strip().splitlines() or ["no message"]
            return [f"access pattern not traced: the simulator process failed ({tail[-1]})"]
        lines = json.loads(res.read_text())["lines"]
    # lines of student.py are reported as "line N": say where the student wrote them
    return [re.sub(r"line (\d+)(?=[:)])", lambda m: src.where(int(m.group(1))), s)
            for s in lines]


def _advice_job(lab, fn, job) -> int:
    """The re-run process's work: the advice, written where the parent reads it."""
    lines = _advice_here(lab, fn, job["timeout_s"])
    Path(job["result"]).write_text(json.dumps({"lines": lines}))
    return 0


if __name__ == "__main__":
    sys.exit(run_job(sys.argv[1], _advice_job))
