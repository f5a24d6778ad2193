"""The uid a child runs as. Student code never runs as root: as root, the grader gives each
child a uid of its own (the driver drops to it before any student code, and refuses to run
that code if it still could act as root). A per-user limit (RLIMIT_NPROC counts every process
and thread of a uid, whatever its namespace) that one submission exhausts is then exhausted
for it alone; where there is neither a PID namespace nor a cgroup, that uid is also how the
grader finds and kills every process of the submission (containment.py, 'uid').

The child must be able to run the grader's interpreter and read its packages, and must not
be able to change them (the grader runs them next). With a mount namespace the driver makes
them readable and read-only for it (privilege.share_read_only); without one (Docker's default
limits, as on Gradescope) their permissions must already say so, and ``uid_drop_support``
checks them, and runs the interpreter as such a uid, before any child is started.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading

from .paths import grader_paths, shared_paths
from .permissions import reachable, writable_by_others

NOBODY = 65534
CHILD_UID_BASE, CHILD_UID_SPAN = 0x50000000, 1 << 24   # a range no account uses
SYSTEM_PREFIXES = ("/", "/usr", "/usr/local")
_support: dict = {}
_lock = threading.Lock()


def _probe(uid: int) -> str:
    """'' when ``uid`` can run the grader's interpreter and import numpy and numba from its path."""
    code = f"import sys; sys.path[:0] = {grader_paths()!r}; import numpy, numba"
    try:
        r = subprocess.run([sys.executable, "-I", "-c", code], user=uid, group=uid, extra_groups=[],
                           cwd="/", env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                           timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return f"uid {uid} could not start the interpreter: {e}"
    if r.returncode:
        return f"uid {uid} could not run the interpreter: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
    return ""


def uid_drop_support(mountns: bool) -> tuple[bool, str]:
    """(True, '') when a child can be given a uid of its own, else (False, why and the fix).
    ``mountns``: the driver will have a mount namespace to share the installation in."""
    if os.getuid() != 0:
        return False, (f"the grader is not root (uid {os.getuid()}): it cannot give a child a uid "
                       "of its own")
    key = bool(mountns)
    with _lock:
        if key in _support:
            return _support[key]
        why = ""
        if not mountns:   # the permissions themselves must let the child read and not write
            closed = {p: reachable(p) for p in shared_paths()}
            closed = {p: c for p, c in closed.items() if c}
            # (not a system prefix whole: /usr is the OS's, not the grader's installation)
            changeable = [] if closed else writable_by_others(
                p for p in shared_paths() if p not in SYSTEM_PREFIXES)
            if closed:
                p, c = next(iter(closed.items()))
                why = (f"{p} (the grader's Python) is closed to other users at {c}, and no mount "
                       "namespace can open it here. Fix: make the interpreter and its packages "
                       f"readable by every user (`chmod o+rx` on {c} and `chmod -R o+rX` below it), "
                       "or install Python where they are (e.g. /usr/local, a venv in /opt)")
            elif changeable:
                why = (f"other users may change {', '.join(changeable[:3])} (in the grader's Python, "
                       "which the grader runs after every submission): a submission could plant "
                       "code there. Fix: `chmod -R o-w` on it (pip installs with the umask 022)")
            else:
                why = _probe(CHILD_UID_BASE + CHILD_UID_SPAN - 1)
        _support[key] = (not why, why)
        return _support[key]


def can_drop_uid(mountns: bool = True) -> bool:
    """Whether a child may become an unprivileged uid and still run the grader's interpreter."""
    return uid_drop_support(mountns)[0]


def uids_in_use() -> set[int]:
    """The real uids of every process this grader can see."""
    out = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/status") as f:
                    out.update(int(line.split()[1]) for line in f if line.startswith("Uid:"))
            except (OSError, IndexError, ValueError):
                pass
    return out


def new_child_uid(taken) -> int:
    """A uid from the children's range that no open child holds and no process runs as (a
    process of a killed grader's child must never share the new child's uid)."""
    busy = set(taken) | uids_in_use()
    while True:
        uid = CHILD_UID_BASE + secrets.randbelow(CHILD_UID_SPAN)
        if uid not in busy:
            return uid
