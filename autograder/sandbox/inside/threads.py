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

A block that still cannot start is, as a rule, the grading sandbox's limit, not an error in
the submission's code, so the reply carries :func:`thread_failure` (what this process had and
what bounds it) and the grader reports it as its own problem (autograder/judge.py), but for
one case: the submission's own processes and threads, still running, held its limit of tasks
(a fork bomb, threads never joined). Then it is the submission's (:func:`own_fault`): its
tasks are counted from the moment its cells are loaded (:func:`set_baseline`), less the
simulator's threads."""

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


def _cgroup_file(controller: str, name: str) -> str | None:
    """The path of ``name`` in this process's cgroup of ``controller`` (v1), or of its cgroup-v2
    cgroup where the controller is not a v1 hierarchy of its own."""
    try:
        with open("/proc/self/cgroup") as f:
            lines = [ln.rstrip("\n").split(":", 2) for ln in f]
    except OSError:
        return None
    for _n, ctrls, path in lines:
        if controller in ctrls.split(","):
            return f"/sys/fs/cgroup/{controller}{path.rstrip('/')}/{name}"
    for _n, ctrls, path in lines:
        if ctrls == "":
            return f"/sys/fs/cgroup{path.rstrip('/')}/{name}"
    return None


def _pids() -> dict:
    """The pids cgroup this process is in (v1 or v2): its count and its limit, where readable."""
    out = {}
    for name in ("pids.current", "pids.max", "pids.peak"):
        path = _cgroup_file("pids", name)
        try:
            with open(path) as f:
                out[name] = f.read().strip()
        except (OSError, TypeError):
            pass
    if out:
        out["cgroup"] = os.path.dirname(_cgroup_file("pids", "x") or "")
    return out


def _uid_tasks(uid: int) -> int:
    """Processes and threads of ``uid`` that this process can see (what RLIMIT_NPROC counts)."""
    n = 0
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/status") as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
            if int(st["Uid"].split()[0]) == uid:
                n += int(st["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return n


#: set by the session just before the submission's cells run: how its tasks are counted
#: (``scope``: 'pids cgroup' or 'its own uid'; None where the count is not the submission's
#: alone, e.g. a grader that is not root: its children share its uid) and how many there were
#: then (the launcher, the driver and its threads: the grader's)
BASELINE: dict = {}


def tasks_now(scope: str | None) -> tuple[int | None, int | None]:
    """(tasks of this submission now, its limit) as ``scope`` counts them; (None, None)."""
    if scope == "pids cgroup":
        got = _pids()
        try:
            limit = got.get("pids.max", "max")
            return int(got["pids.current"]), (None if limit == "max" else int(limit))
        except (KeyError, ValueError):
            return None, None
    if scope == "its own uid":
        soft = resource.getrlimit(resource.RLIMIT_NPROC)[0]
        return _uid_tasks(os.getuid()), (None if soft == resource.RLIM_INFINITY else int(soft))
    return None, None


def set_baseline(own_uid: bool) -> None:
    """Before the submission's cells: what counts its tasks, and how many are the grader's."""
    scope = "pids cgroup" if _pids().get("pids.current") else "its own uid" if own_uid else None
    BASELINE.update(scope=scope, tasks=tasks_now(scope)[0])


def _simulator_threads() -> int:
    """Live threads of Numba's simulator (one per simulated CUDA thread of a block)."""
    try:
        from book.numba_compat import sim_block_thread_class

        cls = sim_block_thread_class()
    except Exception:
        return 0
    return sum(1 for t in threading.enumerate() if isinstance(t, cls) and t.is_alive())


#: the count at which a limit is taken as reached (a few threads may have ended since)
AT_LIMIT_SLACK = 8


def thread_failure() -> dict:
    """Facts of this process when a thread could not be started, and whose tasks held the room:
    ``own_tasks``, the submission's own processes and threads then (its count, less the
    simulator's threads and the grader's at load), ``at_limit``: whether the count was at the
    submission's limit of tasks."""
    scope = BASELINE.get("scope")
    tasks, limit = tasks_now(scope)
    sim = _simulator_threads()
    facts = {"threads_alive": threading.active_count(), **_status(),
             "stack_size": threading.stack_size(), "uid": os.getuid(),
             "RLIMIT_AS": _limit(resource.RLIMIT_AS), "RLIMIT_NPROC": _limit(resource.RLIMIT_NPROC),
             "RLIMIT_STACK": _limit(resource.RLIMIT_STACK), **_pids(),
             "simulator_threads": sim, "counted_by": scope}
    if tasks is not None and BASELINE.get("tasks") is not None:
        facts.update(tasks=tasks, tasks_limit=limit,
                     own_tasks=max(0, tasks - sim - BASELINE["tasks"]),
                     at_limit=limit is not None and tasks >= limit - AT_LIMIT_SLACK)
    return facts


def own_fault(facts: dict) -> bool:
    """Whether the threads a block needed were refused because the submission's own processes
    and threads held its limit: it had started some that were still running and the count was
    at the limit (the grader's facts of the child: ``thread_failure``). Otherwise (it had
    started none, or the refusal came from elsewhere: address space, the machine) it is not
    the submission's doing."""
    try:
        return bool(facts.get("at_limit")) and int(facts.get("own_tasks", 0)) > 0
    except (TypeError, ValueError):
        return False


def describe(facts: dict) -> str:
    """The facts in one line, for the grader's message."""
    return ", ".join(f"{k} {v}" for k, v in facts.items())
