"""The simulator's threads in a sandbox with an address-space limit, and what to say when one
cannot start.

Numba's CUDA simulator starts a Python thread per simulated CUDA thread, all of a block's at
once where the kernel waits at a barrier. Under RLIMIT_AS (the rubric's memory: 6 GiB) two
things take address space per thread: its stack (1 MiB here, driver.py) and glibc's malloc
arenas: a thread that finds the arenas busy makes one of its own, 64 MiB of address space
reserved each, up to 8 per CPU. On the 16-CPU H100 machine a lab-4 block died at 105 threads
with VmSize 6.29 GB and 135 MB resident ("can't start new thread"); a 2-CPU machine, at 16
arenas, never got there. :func:`limit_malloc_arenas` caps them (glibc's M_ARENA_MAX, and
MALLOC_ARENA_MAX for any process started from here), so the room a block needs no longer grows
with the host's CPUs.

A block that still cannot start is the grading sandbox's limit, not an error in the
submission's code, so the reply carries :func:`thread_failure` (what this process had and what
bounds it) and the grader reports it as its own problem (autograder/judge.py)."""

from __future__ import annotations

import os
import resource
import threading

#: what CPython raises when pthread_create fails (any errno: EAGAIN for a process or pid
#: limit, ENOMEM for stack or address space)
MESSAGE = "can't start new thread"


#: malloc arenas a simulated child may have (glibc's default: 8 per CPU)
ARENAS = 2
#: mallopt's parameter number for the arena cap (glibc malloc.h)
M_ARENA_MAX = -8


def limit_malloc_arenas(n: int = ARENAS) -> bool:
    """Cap glibc's malloc arenas in this process at ``n`` (before the simulator starts
    threads) and in processes started from it. False where the C library has no mallopt
    (not glibc): nothing changes there."""
    import ctypes
    import ctypes.util

    os.environ["MALLOC_ARENA_MAX"] = str(n)
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_ARENA_MAX, n))
    except (OSError, AttributeError):
        return False


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
