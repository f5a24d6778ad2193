"""What a child may do: never what root may. Student code runs as a uid of its own, with no
capability, no way back to root (no_new_privs) and a count of processes of its own
(RLIMIT_NPROC); the interpreter and packages it shares with the grader are read-only to it.

- ``share_read_only(libc, paths, own)``: in the child's own mount namespace (the driver's, as
  root, before the uid drop), every needed path read-only, and a closed folder on the way to
  one covered by an empty folder others may enter, with only the needed paths bound back.
- ``drop_to(uid, nproc)``, ``drop_capabilities()``: the drop itself (a uid), or, where the
  grader is not root and the child is in a user namespace of its own, every capability.
- ``privileged()``: why this process could still act as root ('' when it cannot). The driver
  asks before it runs a line of a submission and refuses to if the answer is not ''.
Where a folder on the way to a needed path is closed to other uids (/root is 0700 where pyenv
installs Python) a mount namespace shares the path anyway (``share_read_only``); without one
the grader checks first (permissions.py, uid.py) and refuses to give the child a uid that
cannot run, or to share what it could change.

Copied beside the driver as ``agprivilege.py`` (child.py, TRUSTED_FILES), with the standard
library, ``aglinux`` and ``agpermissions``.
"""

from __future__ import annotations

import ctypes
import os

from aglinux import MS_BIND, MS_RDONLY, MS_REC, MS_REMOUNT
from agpermissions import reachable

PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 24, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522


def _outermost(paths) -> list[str]:
    keep = sorted({os.path.abspath(p) for p in paths})
    return [p for p in keep if not any(p != q and p.startswith(q.rstrip(os.sep) + os.sep) for q in keep)]


def share_read_only(libc, paths, own, cover: bool = True) -> list[str]:
    """In this process's own mount namespace (its mounts private): each of ``paths`` read-only
    (a bind of itself), but for ``own`` (the child's working folder) and what holds it; and,
    with ``cover`` (the child will be another uid), where a folder on the way to one of them
    is closed to other uids, that folder covered by an empty read-only folder they may enter,
    with only the paths under it bound back. What could not be done, as notes."""
    notes = []
    own = os.path.realpath(own)
    paths = [p for p in _outermost(p for p in paths if os.path.exists(p))
             if not (p == own or own.startswith(p.rstrip(os.sep) + os.sep)
                     or p.startswith(own + os.sep))]
    covers: dict[str, list[str]] = {}
    for p in paths:
        closed = reachable(p) if cover else ""
        if closed and closed != p:
            covers.setdefault(closed, []).append(p)
    for top in _outermost(covers):   # a closed folder inside another is covered with it
        inside = [p for c, ps in covers.items() if c == top or c.startswith(top + os.sep) for p in ps]
        fds = {p: os.open(p, os.O_PATH) for p in inside}
        try:
            if libc.mount(b"tmpfs", top.encode(), b"tmpfs", 0, b"size=64k,mode=0755") != 0:
                notes.append(f"could not open {top} to other uids (errno {ctypes.get_errno()})")
                continue
            for p in sorted(inside):
                os.makedirs(p, exist_ok=True)
                if libc.mount(f"/proc/self/fd/{fds[p]}".encode(), p.encode(), None,
                              MS_BIND | MS_REC, None) != 0:
                    notes.append(f"could not share {p} (errno {ctypes.get_errno()})")
            libc.mount(None, top.encode(), None, MS_REMOUNT | MS_RDONLY, None)
        finally:
            for fd in fds.values():
                os.close(fd)
    for p in paths:
        if libc.mount(p.encode(), p.encode(), None, MS_BIND | MS_REC, None) != 0 or \
                libc.mount(None, p.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY, None) != 0:
            notes.append(f"could not make {p} read-only (errno {ctypes.get_errno()})")
    return notes


def no_new_privs(libc) -> None:
    """No program started from here may gain a privilege (setuid files, file capabilities)."""
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)


def drop_to(uid: int, nproc: int) -> str:
    """Become ``uid`` (its group too, no supplementary groups), with at most ``nproc`` processes
    and threads for that uid; '' when done and no way back is left, else why not."""
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
    except OSError as e:
        return f"could not drop privileges to uid {uid}: {e}"
    no_new_privs(ctypes.CDLL(None, use_errno=True))
    return privileged()


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def drop_capabilities() -> str:
    """Give up every capability (a user namespace's creator holds them all in it: with them a
    submission could undo the mounts that hide the grader's files); '' when done."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:
            break   # EINVAL: past the last capability this kernel knows
    data = (_CapData * 2)()
    if libc.capset(ctypes.byref(_CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)), data) != 0:
        return f"capset failed: {os.strerror(ctypes.get_errno())}"
    no_new_privs(libc)
    return privileged()


def privileged() -> str:
    """'' when this process is no root and holds no capability; else what it still holds."""
    ids = os.getresuid() + os.getresgid()
    if 0 in ids:
        return f"as root (uids {os.getresuid()}, gids {os.getresgid()})"
    try:
        with open("/proc/self/status") as f:
            caps = {k: int(v, 16) for k, v in (line.split(":", 1) for line in f)
                    if k in ("CapEff", "CapPrm")}
    except (OSError, ValueError):
        return "with capabilities it could not read (/proc/self/status)"
    held = {k: v for k, v in caps.items() if v}
    return f"with capabilities {held}" if held else ""
