"""The process table as /proc shows it, and killing a tree, a cgroup or a uid whole.

Shared by the grader (``Child``) and the launcher inside every child, so it depends on the
standard library alone: the launcher, in the child, uses it too (this package is copied whole
into every child).
"""

from __future__ import annotations

import os
import signal
import time

def pid_namespace(pid: int) -> int | None:
    """The inode of ``pid``'s PID namespace (None when it is gone or not ours to read)."""
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def parent_pid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def alive(pid: int) -> bool:
    """Running or sleeping, not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def pids_in_namespace(inode: int) -> set[int]:
    """Host PIDs of every process whose PID namespace is ``inode``."""
    return {p for p in all_pids() if pid_namespace(p) == inode}


def descendants(root: int) -> set[int]:
    """``root`` and every process below it in the process tree (host PIDs)."""
    children: dict[int, list[int]] = {}
    for p in all_pids():
        pp = parent_pid(p)
        if pp is not None:
            children.setdefault(pp, []).append(p)
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out


def process_info(pid: int) -> dict:
    """{pid, cmdline, uid} of a process, for a log (empty fields where /proc does not say)."""
    info = {"pid": pid, "cmdline": "", "uid": None}
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            info["cmdline"] = f.read(300).replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    info["uid"] = int(line.split()[1])
    except OSError:
        pass
    return info


def kill_tree(root: int, timeout: float = 5.0) -> None:
    """SIGKILL every process below ``root`` (not ``root``), again until none is left: a
    process whose parent is killed is re-parented to ``root`` when ``root`` is a subreaper
    (PR_SET_CHILD_SUBREAPER), so a new session or a double fork does not hide it. Reaps what
    it can when ``root`` is this process."""
    deadline = time.monotonic() + timeout
    while True:
        below = {p for p in descendants(root) if p != root and alive(p)}
        for p in below:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if root == os.getpid():
            while True:
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
        if not below or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def kill_cgroup(path: str) -> None:
    """Kill every process in the cgroup-v2 directory ``path``: cgroup.kill, or on older kernels
    freeze, SIGKILL each member, thaw."""
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    try:
        with open(os.path.join(path, "cgroup.freeze"), "w") as f:
            f.write("1")
        for _ in range(10):
            with open(os.path.join(path, "cgroup.procs")) as f:
                procs = [int(x) for x in f.read().split()]
            if not procs:
                break
            for p in procs:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        with open(os.path.join(path, "cgroup.freeze"), "w") as f:
            f.write("0")
    except OSError:
        pass


def uid_of(pid: int) -> int | None:
    """The real uid of ``pid`` (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])
    except (OSError, IndexError, ValueError):
        pass
    return None


def pids_of_uid(uid: int) -> set[int]:
    """Every live process (not a zombie) whose real uid is ``uid``."""
    return {p for p in all_pids() if uid_of(p) == uid and alive(p)}


def kill_uid(uid: int, timeout: float = 5.0) -> set[int]:
    """SIGKILL every process of ``uid`` (a child's own uid: every process it started, whatever
    tree, session or group it left), again until none is left: a process that forked before
    the signal is found on the next pass, and one with SIGKILL pending cannot fork. Each is
    signalled through a pidfd after its uid was read, so a PID reused meanwhile is not hit.
    The PIDs still alive at ``timeout`` (none, when it worked)."""
    deadline = time.monotonic() + timeout
    while True:
        left = set()
        for p in all_pids():
            if uid_of(p) != uid:
                continue
            try:
                fd = os.pidfd_open(p)
            except OSError:
                continue
            try:
                if uid_of(p) == uid and alive(p):   # still that process (the pidfd pins it)
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    left.add(p)
            except OSError:
                pass
            finally:
                os.close(fd)
        if not left:
            return set()
        if time.monotonic() > deadline:
            return {p for p in left if alive(p)}
        time.sleep(0.02)


# --------------------------------------------------------------------------- what a uid left
# A child of its own uid whose /tmp, /dev/shm or System V IPC are not its own (no mount or IPC
# namespace: Docker's default limits; /tmp and /dev/shm under compute-sanitizer) may leave
# files and IPC objects there that outlive its processes: hidden cases written to /tmp and read
# back by the next child. The grader removes them by that uid when the child ends (and the
# launcher, when the grader died first; the next grader, for a launcher killed too).

#: the places every uid may write on a Linux system (sticky, world-writable), where a child
#: without a mount namespace of its own (or under a wrapper) leaves files; those that exist and
#: are open to every uid are swept (``shared_places``)
SHARED_PLACES = ("/tmp", "/var/tmp", "/dev/shm", "/run/lock", "/dev/mqueue")
#: System V IPC, as /proc/sysvipc lists it: (its file, the column of its id, libc's control call)
IPC_KINDS = (("shm", "shmid", "shmctl"), ("sem", "semid", "semctl"), ("msg", "msqid", "msgctl"))
IPC_RMID = 0
#: at most this many entries are looked at per place (a child that made millions of files in a
#: shared place still has them removed, the walk just takes longer; past this, said so)
SWEEP_MAX = 2_000_000


def shared_places(extra=()) -> list[str]:
    """The world-writable places of ``SHARED_PLACES`` (and ``extra``: the grader's temporary
    folder) that exist here, real paths, each once."""
    out = []
    for p in (*SHARED_PLACES, *extra):
        try:
            rp = os.path.realpath(p)
            st = os.stat(rp)
        except OSError:
            continue
        if st.st_mode & 0o002 and rp not in out:
            out.append(rp)
    return out


def _remove(path: str, is_dir: bool) -> bool:
    import shutil

    try:
        if is_dir:
            shutil.rmtree(path)   # fd-based: a link inside is removed, never followed
        else:
            os.unlink(path)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _owned_by(uids):
    """``uids`` as a test of an owner: a callable as it is, else membership."""
    if callable(uids):
        return uids
    uids = {int(u) for u in uids}
    return uids.__contains__


def remove_files_of(uids, places, skip=()) -> dict:
    """Remove every entry owned by one of ``uids`` (a collection, or a test of a uid) in
    ``places`` (and in the folders others may write below them): a folder of theirs whole, a
    file or a link itself (never followed). Folders in ``skip`` (a child's working folder) are
    left alone. Must run as root. {place: entries removed}, and 'failed': [paths that could not
    be removed]."""
    owned = _owned_by(uids)
    skip = {os.path.realpath(s) for s in skip}
    done: dict = {"failed": []}
    seen = [0]

    def walk(folder: str, place: str) -> None:
        try:
            it = os.scandir(folder)
        except OSError:
            return
        with it:
            entries = list(it)
        for e in entries:
            seen[0] += 1
            if seen[0] > SWEEP_MAX:
                return
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            is_dir = e.is_dir(follow_symlinks=False)
            if e.path in skip:
                continue
            if owned(st.st_uid):
                if _remove(e.path, is_dir):
                    done[place] = done.get(place, 0) + 1
                else:
                    done["failed"].append(e.path)
            elif is_dir and st.st_mode & 0o003 == 0o003:   # others may enter and write: theirs too
                walk(e.path, place)

    for place in places:
        walk(place, place)
    if seen[0] > SWEEP_MAX:
        done["failed"].append(f"more than {SWEEP_MAX:,} entries: the rest not looked at")
    return done


def ipc_objects(uids) -> list[tuple[str, int, int]]:
    """System V objects (kind, id, key) of this IPC namespace owned or created by ``uids`` (a
    collection, or a test of a uid)."""
    owned = _owned_by(uids)
    out = []
    for kind, id_col, _call in IPC_KINDS:
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                head, *rows = f.read().splitlines()
        except OSError:
            continue
        cols = head.split()
        for row in rows:
            v = dict(zip(cols, row.split()))
            try:
                if owned(int(v["uid"])) or owned(int(v["cuid"])):
                    out.append((kind, int(v[id_col]), int(v["key"])))
            except (KeyError, ValueError):
                continue
    return out


def _rmid(kind: str, ident: int) -> int:
    """IPC_RMID of one object: 0, or the errno."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    call = dict((k, c) for k, _i, c in IPC_KINDS)[kind]
    rc = libc.semctl(ident, 0, IPC_RMID) if kind == "sem" else getattr(libc, call)(ident, IPC_RMID, None)
    return 0 if rc == 0 else ctypes.get_errno()


# setresuid(2)'s number: called raw, it changes the calling thread's credentials only (glibc's
# wrapper changes every thread's)
_SETRESUID = {"x86_64": 117, "aarch64": 147}


def _as_owner(uid: int, work) -> None:
    """Run ``work()`` in a thread of its own whose effective uid is ``uid`` (root without
    CAP_SYS_ADMIN, Docker's default, may remove an IPC object only as its owner); the
    process's other threads keep theirs, and the thread ends with it."""
    import ctypes
    import platform
    import threading

    nr = _SETRESUID.get({"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(),
                                                                     platform.machine().lower()))

    def run():
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        if nr is not None and libc.syscall(nr, -1, uid, -1) == 0:
            work()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)


def remove_ipc_of(uids) -> dict:
    """Remove the System V shared memory segments, semaphore sets and message queues that
    ``uids`` own or created in this IPC namespace (as root: with CAP_SYS_ADMIN directly, else
    as their owner). {kind: removed}, and 'failed': [kind id] of those still there."""
    done: dict = {"failed": []}
    for kind, ident, _key in ipc_objects(uids):
        if _rmid(kind, ident) == 0:
            done[kind] = done.get(kind, 0) + 1
            continue
        owner = _owner(kind, ident)
        errs = []
        if owner is not None:
            _as_owner(owner, lambda: errs.append(_rmid(kind, ident)))
        if errs == [0]:
            done[kind] = done.get(kind, 0) + 1
        else:
            done["failed"].append(f"{kind} {ident}")
    return done


def _owner(kind: str, ident: int) -> int | None:
    id_col = dict((k, i) for k, i, _c in IPC_KINDS)[kind]
    try:
        with open(f"/proc/sysvipc/{kind}") as f:
            head, *rows = f.read().splitlines()
    except OSError:
        return None
    cols = head.split()
    for row in rows:
        v = dict(zip(cols, row.split()))
        if v.get(id_col) == str(ident):
            return int(v["uid"])
    return None


def remove_left_by(uids, places=None, skip=()) -> dict:
    """What ``uids`` left behind them in the places every uid shares: their files and folders
    (``shared_places()`` unless ``places``) and their System V IPC objects, removed. For the
    log: {'files': {place: n, 'failed': [...]}, 'ipc': {kind: n, 'failed': [...]}}."""
    return {"files": remove_files_of(uids, shared_places() if places is None else places, skip),
            "ipc": remove_ipc_of(uids)}
