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

Part of the child's side (this package, copied whole into every child): the standard library,
``linux`` and ``permissions``.
"""

from __future__ import annotations

import ctypes
import os

from .linux import MS_BIND, MS_RDONLY, MS_REC, MS_REMOUNT
from .permissions import reachable

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


# --------------------------------------------------------------------------- Landlock
# Landlock (Linux 5.13+; allowed by Docker's default seccomp profile since Docker 23) lets a
# process with no privilege refuse itself access rights for good, for it and everything it
# starts. The child refuses itself every write outside its own folders: a file written to a
# place every uid shares (/tmp, /var/tmp, /dev/shm without a mount namespace; /var/tmp and
# /run/lock with one) could otherwise outlive it and be read by the next child (the kernel
# proof's, another submission's). Reading is left to permissions, as before.
_LANDLOCK_NR = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
# access rights (include/uapi/linux/landlock.h): what a rule on a file may grant, then the
# rights that create, remove or change entries of a folder; each with the ABI it came in
FS_WRITE_FILE, FS_TRUNCATE = 1 << 1, 1 << 14
FILE_RIGHTS = ((FS_WRITE_FILE, 1), (FS_TRUNCATE, 3))
DIR_RIGHTS = ((1 << 4, 1), (1 << 5, 1), (1 << 6, 1), (1 << 7, 1), (1 << 8, 1), (1 << 9, 1),
              (1 << 10, 1), (1 << 11, 1), (1 << 12, 1), (1 << 13, 2))   # REMOVE_DIR .. REFER
# scopes (ABI 6): no connecting to an abstract Unix socket, nor signalling a process, outside
# the child's own domain (another child's, the grader's)
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1, 2


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _landlock_calls(libc):
    import platform

    m = platform.machine().lower()
    nrs = _LANDLOCK_NR.get({"amd64": "x86_64", "arm64": "aarch64"}.get(m, m))
    libc.syscall.restype = ctypes.c_long
    return nrs


def landlock_abi() -> tuple[int, str]:
    """(the Landlock ABI this kernel offers, '') or (0, why there is none)."""
    libc = ctypes.CDLL(None, use_errno=True)
    nrs = _landlock_calls(libc)
    if nrs is None:
        return 0, "no Landlock system calls are known for this architecture"
    abi = libc.syscall(nrs[0], None, 0, LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 1:
        err = ctypes.get_errno()
        why = {38: "the kernel has no Landlock (ENOSYS: older than Linux 5.13, or a seccomp "
                   "profile refuses it, as Docker's did before Docker 23)",
               95: "Landlock is built into the kernel but not enabled (EOPNOTSUPP: the boot's "
                   "lsm= list leaves it out)",
               1: "Landlock is refused here (EPERM: a seccomp profile)"}
        return 0, why.get(err, f"landlock_create_ruleset failed: {os.strerror(err)}")
    return int(abi), ""


def confine_writes(folders, files=(), write_beneath=("/proc",)) -> str:
    """From now on this process (and all it starts) may create, change or remove files only
    beneath ``folders``, and write (not create) only the existing ``files`` (devices: /dev/null,
    a GPU's) and files beneath ``write_beneath`` (/proc: a thread's name, which libraries set;
    what else there is not its own root refuses); with ABI 6 it may also signal and reach
    abstract Unix sockets only within itself. '' when done (the caller has set no_new_privs or
    holds CAP_SYS_ADMIN), else why not."""
    abi, why = landlock_abi()
    if not abi:
        return why
    libc = ctypes.CDLL(None, use_errno=True)
    nrs = _landlock_calls(libc)
    file_rights = sum(r for r, since in FILE_RIGHTS if abi >= since)
    handled = file_rights + sum(r for r, since in DIR_RIGHTS if abi >= since)
    attr = _RulesetAttr(handled, 0, (SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = libc.syscall(nrs[0], ctypes.byref(attr), size, 0)
    if ruleset < 0:
        return f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}"
    try:
        for path, rights in [*((f, handled) for f in folders),
                             *((f, file_rights) for f in (*files, *write_beneath))]:
            try:
                fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                rule = _PathBeneath(rights, fd)
                if libc.syscall(nrs[1], ruleset, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0) != 0:
                    return f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}"
            finally:
                os.close(fd)
        if libc.syscall(nrs[2], ruleset, 0) != 0:
            return f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}"
    finally:
        os.close(ruleset)
    return ""


def device_files(gpu: bool) -> list[str]:
    """The devices a child writes (never creates): /dev/null and its kind, the terminal, and on a
    GPU the NVIDIA driver's (/dev/nvidia*, /dev/nvidia-caps/*, /dev/dri/*)."""
    out = [f"/dev/{n}" for n in ("null", "zero", "full", "random", "urandom", "tty", "ptmx")]
    if gpu:
        for d in ("/dev", "/dev/nvidia-caps", "/dev/dri"):
            try:
                out += [os.path.join(d, n) for n in sorted(os.listdir(d))
                        if d != "/dev" or n.startswith("nvidia")]
            except OSError:
                pass
    return [p for p in out if os.path.exists(p) and not os.path.isdir(p)]
