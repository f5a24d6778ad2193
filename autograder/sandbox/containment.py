"""Containment: every process a submission starts dies with it.

The launcher makes a PID namespace whose init is the driver; killing the init kills every
process in the namespace, whatever session, process group or parent it has moved to, and no
process in it can see or signal another submission's processes. Where a PID namespace cannot
be made the launcher puts the submission in a cgroup (v2) killed as a whole; where neither
exists a student submission is refused, with the cause and the fix, unless the instructor
says to go on without (``allow_uncontained`` or AUTOGRADER_ALLOW_UNCONTAINED=1); then the
launcher stays as the subreaper of the tree and kills everything below it when the driver
ends.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from .linux import CLONE_NEWPID

ALLOW_ENV = "AUTOGRADER_ALLOW_UNCONTAINED"
_support: dict | None = None
_support_lock = threading.Lock()


class ContainmentUnavailable(SystemExit):
    """No way to make every process of a submission die with it: grading students here
    would let one of them leave a process behind that slows or robs the next ones. Raised
    (it stops the grading run) with the cause and the fix."""


def _probe_pidns() -> str:
    """'' when this process may make a PID namespace and fork into it, else why not."""
    code = ("import ctypes, os, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"if libc.unshare({CLONE_NEWPID}) != 0:\n"
            "    sys.exit('unshare(CLONE_NEWPID): ' + os.strerror(ctypes.get_errno()))\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(0 if os.getpid() == 1 else 3)\n"
            "_, st = os.waitpid(pid, 0)\n"
            "sys.exit(0 if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0 else 'fork into the namespace failed')\n")
    try:
        r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"probe failed: {e}"
    return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["unknown error"])[-1]


def _cgroup2_dir() -> tuple[str | None, str]:
    """This process's cgroup-v2 directory if a child cgroup can be made and killed there."""
    try:
        rel = next(line.split("::", 1)[1].strip() for line in open("/proc/self/cgroup")
                   if line.startswith("0::"))
        mounts = [line.split() for line in open("/proc/self/mountinfo")]
    except (OSError, StopIteration):
        return None, "no cgroup v2 hierarchy for this process"
    for m in mounts:
        fstype = m[m.index("-") + 1] if "-" in m else ""
        if fstype == "cgroup2":
            d = os.path.join(m[4], rel.lstrip("/"))
            if not os.path.isdir(d):
                continue
            if not os.access(d, os.W_OK):
                return None, f"the cgroup {d} is not writable by uid {os.getuid()}"
            probe = os.path.join(d, f"ag-probe-{os.getpid()}")
            try:
                os.mkdir(probe)
            except OSError as e:
                return None, f"cannot make a cgroup under {d}: {e.strerror}"
            try:
                if not (os.path.exists(os.path.join(probe, "cgroup.kill"))
                        or os.path.exists(os.path.join(probe, "cgroup.freeze"))):
                    return None, f"cgroups under {d} have neither cgroup.kill nor cgroup.freeze (kernel too old)"
            finally:
                os.rmdir(probe)
            return d, ""
    return None, "no cgroup v2 file system is mounted"


def containment_support(refresh: bool = False) -> dict:
    """What this machine allows, probed once: {'pidns': bool, 'cgroup': dir or None,
    'why_not_pidns': str, 'why_not_cgroup': str, 'best': 'pidns'|'cgroup'|'none'}."""
    global _support
    with _support_lock:
        if _support is None or refresh:
            why_pid = _probe_pidns()
            cg, why_cg = _cgroup2_dir()
            _support = {"pidns": not why_pid, "why_not_pidns": why_pid, "cgroup": cg,
                        "why_not_cgroup": why_cg,
                        "best": "pidns" if not why_pid else ("cgroup" if cg else "none")}
        return dict(_support)


def refusal_message(support: dict) -> str:
    return ("refusing to grade student code: a process it starts could outlive its grading "
            "(a new session, a double fork or a spawned interpreter escape a process-group kill) "
            "and slow or rob the submissions graded after it. No PID namespace: "
            f"{support['why_not_pidns']}; no cgroup to kill as a whole: {support['why_not_cgroup']}. "
            "Fix: run the grader as root (or in a container with CAP_SYS_ADMIN, e.g. "
            "`docker run --cap-add SYS_ADMIN`), or give it a writable cgroup-v2 directory (e.g. "
            "`systemd-run --user --scope -p Delegate=yes python -m autograder grade ...`). To grade "
            f"anyway, knowing that, set {ALLOW_ENV}=1.")


def resolve_containment(contain: str = "auto", allow_uncontained: bool | None = None,
                        untrusted: bool = True) -> tuple[str, str]:
    """(mode, note). ``contain``: 'auto' (the strongest available), 'pidns', 'cgroup' or
    'none'. Untrusted code without containment raises ContainmentUnavailable unless allowed."""
    if allow_uncontained is None:
        allow_uncontained = os.environ.get(ALLOW_ENV, "") not in ("", "0")
    if contain == "none":
        return "none", "containment switched off by the caller"
    sup = containment_support()
    if contain == "auto":
        contain = sup["best"]
    elif not sup[contain]:
        raise ContainmentUnavailable(f"containment {contain!r} was asked for but is not available: "
                                     + sup["why_not_pidns" if contain == "pidns" else "why_not_cgroup"])
    if contain != "none":
        return contain, ""
    if untrusted and not allow_uncontained:
        raise ContainmentUnavailable(refusal_message(sup))
    return "none", ("no containment: processes the submission starts can outlive it ("
                    + sup["why_not_pidns"] + "; " + sup["why_not_cgroup"] + ")")


# --------------------------------------------------------------------------- cgroups
# A child's cgroups (its containment's, its pids limit's) are named ag-<grader pid>-...: the
# next grader removes those of graders that are gone (storage.sweep_stale_storage).
_cg_seq = [0]


def new_cgroup(base: str) -> str:
    """Make a cgroup of this grader's under ``base``; its path."""
    _cg_seq[0] += 1
    d = os.path.join(base, f"ag-{os.getpid()}-{_cg_seq[0]}-{time.monotonic_ns() % 10**9}")
    os.mkdir(d)
    return d


def remove_cgroup(path: str, timeout: float = 3.0) -> None:
    """Remove an emptied cgroup; its last tasks may take a moment to leave it (EBUSY)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
