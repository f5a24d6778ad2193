"""Containment: every process a submission starts dies with it.

The launcher makes a PID namespace whose init is the driver; killing the init kills every
process in the namespace, whatever session, process group or parent it has moved to, and no
process in it can see or signal another submission's processes. Where a PID namespace cannot
be made the launcher puts the submission in a cgroup (v2) killed as a whole. Where neither
exists but the grader is root (a container with Docker's default limits, as on Gradescope:
no CAP_SYS_ADMIN, namespaces refused by seccomp, the cgroup file system read-only) the
child's own uid is the containment: every process of that uid is the submission's, and the
grader kills them all after each run (the launcher too, if the grader dies), with a count of
processes per uid (RLIMIT_NPROC). With none of the three a student submission is refused,
with the cause and the fix, unless the instructor says to go on without (``allow_uncontained``
or AUTOGRADER_ALLOW_UNCONTAINED=1); then the launcher stays as the subreaper of the tree and
kills everything below it when the driver ends.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import time

from .inside.linux import CLONE_NEWNS, CLONE_NEWPID
from .uid import uid_drop_support

ALLOW_ENV = "AUTOGRADER_ALLOW_UNCONTAINED"
_support: dict | None = None
_support_lock = threading.Lock()


class ContainmentUnavailable(SystemExit):
    """No way to make every process of a submission die with it: grading students here
    would let one of them leave a process behind that slows or robs the next ones. Raised
    (it stops the grading run) with the cause and the fix."""


def _probe_unshare(flag: int, name: str, fork: bool) -> str:
    """'' when this process may unshare(``flag``) (and, with ``fork``, fork into the new PID
    namespace as its PID 1), else why not."""
    code = ("import ctypes, os, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"if libc.unshare({flag}) != 0:\n"
            f"    sys.exit('unshare({name}): ' + os.strerror(ctypes.get_errno()))\n")
    if fork:
        code += ("pid = os.fork()\n"
                 "if pid == 0:\n"
                 "    os._exit(0 if os.getpid() == 1 else 3)\n"
                 "_, st = os.waitpid(pid, 0)\n"
                 "sys.exit(0 if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0 else 'fork into the namespace failed')\n")
    try:
        r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"probe failed: {e}"
    return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["unknown error"])[-1]


def _probe_pidns() -> str:
    """'' when this process may make a PID namespace and fork into it, else why not."""
    return _probe_unshare(CLONE_NEWPID, "CLONE_NEWPID", fork=True)


def cgroup2_dir() -> tuple[str | None, str]:
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
    """What this machine allows, probed once: {'pidns': bool, 'cgroup': dir or None, 'uid':
    bool, 'mountns': bool, 'why_not_pidns', 'why_not_cgroup', 'why_not_uid', 'why_not_mountns':
    str, 'best': 'pidns'|'cgroup'|'uid'|'none'}. 'uid': the grader is root and a child can run
    as a uid of its own (uid.uid_drop_support; with a mount namespace the driver shares the
    grader's installation with it)."""
    global _support
    with _support_lock:
        if _support is None or refresh:
            why_pid = _probe_pidns()
            why_mnt = _probe_unshare(CLONE_NEWNS, "CLONE_NEWNS", fork=False)
            cg, why_cg = cgroup2_dir()
            uid_ok, why_uid = uid_drop_support(mountns=not why_mnt)
            _support = {"pidns": not why_pid, "why_not_pidns": why_pid, "cgroup": cg,
                        "why_not_cgroup": why_cg, "uid": uid_ok, "why_not_uid": why_uid,
                        "mountns": not why_mnt, "why_not_mountns": why_mnt,
                        "best": "pidns" if not why_pid else ("cgroup" if cg else
                                                             "uid" if uid_ok else "none")}
        return dict(_support)


def refusal_message(support: dict) -> str:
    if os.getuid() == 0:   # root: what stops it is the uid drop (no override), its reason the fix
        return root_refusal(support) + (f" (and no PID namespace: {support['why_not_pidns']}; no "
                                         f"cgroup: {support['why_not_cgroup']})")
    else:
        fix = ("Fix: run the grader as root (in any container: without CAP_SYS_ADMIN each child "
               "then runs as a uid of its own), or give it a writable cgroup-v2 directory (e.g. "
               "`systemd-run --user --scope -p Delegate=yes python -m autograder grade ...`). ")
    return ("refusing to grade student code: a process it starts could outlive its grading "
            "(a new session, a double fork or a spawned interpreter escape a process-group kill) "
            "and slow or rob the submissions graded after it. No PID namespace: "
            f"{support['why_not_pidns']}; no cgroup to kill as a whole: {support['why_not_cgroup']}; "
            f"no uid of its own to find its processes by: {support['why_not_uid']}. {fix}To grade "
            f"anyway, knowing that, set {ALLOW_ENV}=1.")


def root_refusal(support: dict) -> str:
    """Why student code is not run here at all: as root, it would run as root."""
    return ("refusing to run student code as root, and the grader (root) cannot give it a uid of "
            f"its own: {support['why_not_uid']}")


def resolve_containment(contain: str = "auto", allow_uncontained: bool | None = None,
                        untrusted: bool = True) -> tuple[str, str]:
    """(mode, note). ``contain``: 'auto' (the strongest available), 'pidns', 'cgroup', 'uid' or
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
                                     + sup[f"why_not_{contain}"])
    if contain != "none":
        return contain, ""
    if untrusted and not allow_uncontained:
        raise ContainmentUnavailable(refusal_message(sup))
    return "none", ("no containment: processes the submission starts can outlive it ("
                    + "; ".join(sup[f"why_not_{k}"] for k in ("pidns", "cgroup", "uid")) + ")")


# --------------------------------------------------------------------------- cgroups
# A child's cgroups (its containment's, its pids limit's) are named after its working folder
# (ag-<grader pid>-...-c, -p), and its grader holds a lock on each (flock) as on the folder: the
# next grader removes those no living grader holds (storage.sweep_stale_storage).
_cg_locks: dict[str, int] = {}


def new_cgroup(base: str, name: str) -> str:
    """Make the cgroup ``name`` of this grader's under ``base``, held until remove_cgroup; its
    path."""
    d = os.path.join(base, name)
    os.mkdir(d)
    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_SH)
    except OSError:
        os.rmdir(d)
        raise
    _cg_locks[d] = fd
    return d


def remove_cgroup(path: str, timeout: float = 3.0) -> None:
    """Remove an emptied cgroup; its last tasks may take a moment to leave it (EBUSY). This
    grader's hold on it ends."""
    fd = _cg_locks.pop(path, None)
    if fd is not None:
        os.close(fd)
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
