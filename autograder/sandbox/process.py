"""The process table as /proc shows it, and killing a tree, a cgroup or a uid whole.

Shared by the grader (``Child``) and the launcher inside every child, so it depends on the
standard library alone: it is copied beside the launcher as ``agprocess.py`` (child.py,
TRUSTED_FILES).
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
