"""When the simulator cannot start a thread: what the grader's own process had, in facts.

Numba's CUDA simulator starts a Python thread per simulated CUDA thread. A block it cannot
start (``RuntimeError: can't start new thread``) is the grading sandbox's limit, not an error
in the submission's code, so the reply carries :func:`thread_failure` (what this process had
and what bounds it) and the grader reports it as its own problem (autograder/judge.py)."""

from __future__ import annotations

import os
import resource
import threading

#: what CPython raises when pthread_create fails (any errno: EAGAIN for a process or pid
#: limit, ENOMEM for stack or address space)
MESSAGE = "can't start new thread"


def is_thread_failure(e: BaseException) -> bool:
    return isinstance(e, RuntimeError) and MESSAGE in str(e)


def _status() -> dict:
    try:
        with open("/proc/self/status") as f:
            d = dict(line.split(":", 1) for line in f if ":" in line)
        return {k: d[k].strip() for k in ("Threads", "VmSize", "VmPeak", "VmRSS") if k in d}
    except OSError as e:
        return {"error": str(e)}


def _limit(which) -> str:
    soft, _hard = resource.getrlimit(which)
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft)


def _pids() -> dict:
    """The pids cgroup (v2) this process is in: its count and its limit, where readable."""
    try:
        with open("/proc/self/cgroup") as f:
            path = next((ln.split(":", 2)[2].strip() for ln in f if ln.startswith("0::")), None)
    except OSError:
        return {}
    out = {"cgroup": path}
    for name in ("pids.current", "pids.max", "pids.peak"):
        try:
            with open(f"/sys/fs/cgroup{path}/{name}") as f:
                out[name] = f.read().strip()
        except (OSError, TypeError):
            pass
    return out


def thread_failure() -> dict:
    """Facts of this process when a thread could not be started."""
    return {"threads_alive": threading.active_count(), **_status(),
            "stack_size": threading.stack_size(), "uid": os.getuid(),
            "RLIMIT_AS": _limit(resource.RLIMIT_AS), "RLIMIT_NPROC": _limit(resource.RLIMIT_NPROC),
            "RLIMIT_STACK": _limit(resource.RLIMIT_STACK), **_pids()}


def describe(facts: dict) -> str:
    """The facts in one line, for the grader's message."""
    return ", ".join(f"{k} {v}" for k, v in facts.items())
