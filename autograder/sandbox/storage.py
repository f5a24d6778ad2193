"""Where a child may write: its working folder, /tmp and /dev/shm. As root the working folder
is a tmpfs of its own (size and inode limits), mounted here where the grader reads it, and the
driver binds its subfolders over /tmp and /dev/shm inside the child's mount namespace: the
three share one limit, a full one is that submission's alone, and the grader can say what was
written where, even after the child died."""

from __future__ import annotations

import ctypes
import fcntl
import os
import shutil
import stat
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from .containment import cgroup2_dir, remove_cgroup
from .inside.linux import MNT_DETACH, MS_NODEV, MS_NOSUID
from .inside.process import all_pids, remove_left_by, shared_places, uid_of
from .tasks import pids_cgroup_base

PLACES = (("/tmp", ".tmp"), ("/dev/shm", ".shm"))   # (place, the working folder's subfolder)


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def mount_storage(path: Path, size: int, inodes: int) -> str:
    """'' when a tmpfs of ``size`` bytes and ``inodes`` files now backs ``path``, else why not."""
    if os.getuid() != 0:
        return "the grader is not root: it cannot give a child a file system of its own"
    opts = f"size={size},nr_inodes={inodes},mode=0700".encode()
    if _libc().mount(b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        return f"mount(tmpfs) failed: {os.strerror(ctypes.get_errno())}"
    return ""


def unmount(path: Path) -> None:
    _libc().umount2(str(path).encode(), MNT_DETACH)


# --------------------------------------------------------------------------- folders held by a lock
# A grader's folders in the temporary directory (each child's working folder, a Gradescope
# run's) are named ag-<grader pid>-..., and the grader holds a lock on each (flock, shared) for
# as long as it lives: the kernel drops it when the grader dies, however. The next grader
# removes what no living grader holds. Not by its PID: two graders in different PID namespaces
# share one /tmp (a container's, a CI runner's) and each saw the other's PID as gone (a `grade`
# run died in Child.close, its own folder deleted by its neighbour). A folder is made under a
# name the sweep leaves alone (NEW), locked, then renamed: it is never seen unlocked. Where a
# tmpfs is mounted on it, the grader locks the folder under it and the tmpfs's root both: a
# grader in another mount namespace finds one, a grader in this one the other.
NEW = ".ag-new-"
NEW_STALE_S = 600            # a NEW folder older than this, unlocked, was left by a killed grader
_held: dict[str, list[int]] = {}
_held_lock = threading.Lock()


def _open_dir(path) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def _lock(path, how: int) -> int:
    fd = _open_dir(path)
    try:
        fcntl.flock(fd, how)
    except BaseException:
        os.close(fd)
        raise
    return fd


def new_folder(tag: str = "") -> Path:
    """A folder of this grader's in the temporary directory, ``ag-<pid>-<tag><random>``, mode
    0700, held (a shared flock) until ``let_go``: no other grader's sweep removes it while this
    process lives, whatever PID namespace either is in."""
    tmp = os.path.realpath(tempfile.gettempdir())
    pid = os.getpid()
    for _ in range(100):
        new = tempfile.mkdtemp(prefix=f"{NEW}{pid}-", dir=tmp)
        try:
            fd = _lock(new, fcntl.LOCK_SH)
        except FileNotFoundError:   # swept in between (it would have to be NEW_STALE_S old)
            continue
        final = os.path.join(tmp, f"ag-{pid}-{tag}{os.path.basename(new)[len(NEW) + len(str(pid)) + 1:]}")
        try:
            if os.path.lexists(final):
                raise FileExistsError(final)
            os.rename(new, final)
        except OSError:
            os.close(fd)
            shutil.rmtree(new, ignore_errors=True)
            continue
        with _held_lock:
            _held[final] = [fd]
        return Path(final)
    raise OSError(f"could not make a folder of the grader's in {tmp}")


def hold(path: Path) -> None:
    """Hold ``path`` again as it is now (a tmpfs mounted on it since new_folder): its root too."""
    fd = _lock(path, fcntl.LOCK_SH)
    with _held_lock:
        _held.setdefault(str(path), []).append(fd)


def let_go(path: Path) -> None:
    """Stop holding ``path`` (removed, or about to be: the next sweep may take what is left)."""
    with _held_lock:
        fds = _held.pop(str(path), [])
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def held(path) -> bool:
    """Whether a living grader (this one included) holds the folder ``path``."""
    try:
        fd = _open_dir(path)
    except PermissionError:   # not this grader's to look into (another user's): not its to take
        return True
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False
    except OSError:
        return True
    finally:
        os.close(fd)


def _grader_name(name: str) -> bool:
    parts = name.split("-")
    return name.startswith("ag-") and len(parts) >= 3 and parts[1].isdigit()


def _stale_folder(d: str, name: str) -> bool:
    if os.path.islink(d) or not os.path.isdir(d):
        return False
    if name.startswith(NEW):
        try:
            if time.time() - os.lstat(d).st_mtime < NEW_STALE_S:
                return False
        except OSError:
            return False
    elif not _grader_name(name):
        return False
    return not held(d)


def _stale_cgroup(path: str, tmp: str) -> bool:
    """A cgroup of a child (named after its working folder, ``<folder>-c`` or ``-p``) that no
    living grader holds: neither the cgroup (locked by its grader once made) nor its folder
    (locked before the cgroup was made). One named as before folders were held
    (ag-<pid>-<n>-<time>): its grader's PID gone from this PID namespace, as then."""
    name = os.path.basename(path)
    if not _grader_name(name) or held(path):
        return False
    if not name.endswith(("-c", "-p")):
        return not os.path.exists(f"/proc/{name.split('-')[1]}")
    return not held(os.path.join(tmp, name[:-2]))


# --------------------------------------------------------------------------- uids claimed and swept
# As root, one grader gives a new child a uid (children.Child: the uid chosen, the child's folder
# made, held and made the uid's) while another sweeps what children of uids no living grader
# holds left where every uid may write (sweep_stale_storage). The sweep reads the uids held and
# the graders' folders first and removes after: a child given its uid in between was taken for
# a dead grader's, its folder removed under its grader (CI: a control run's trusted copy went
# missing while it was copied) and, without a mount namespace, its files in /tmp with it. The
# two exclude each other: a claim holds UID_LOCK shared from the uid's choice until its folder
# is held and the uid's, a sweep holds it exclusive from its first read to its last removal.
UID_LOCK = ".ag-uids.lock"


def _open_uid_lock(tmp: str) -> int:
    """UID_LOCK in ``tmp``, a regular file of root's that no other uid may open (a child could
    flock one of its own and stop every grader): anything else under that name is removed and
    the file made again."""
    path = os.path.join(tmp, UID_LOCK)
    for _ in range(100):
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError:   # a link (ELOOP), or another uid's file (protected_regular: EACCES)
            fd = -1
        if fd >= 0:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o077:
                return fd
            os.close(fd)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except FileNotFoundError:
            pass
    raise OSError(f"could not make the graders' uid lock {path}: something keeps replacing it")


#: how long a sweep waits for the graders giving children uids (a claim lasts milliseconds; a
#: grader stopped mid-claim would hold it for ever): past it, that sweep leaves the uids' files
#: to the next one
SWEEP_WAIT_S = 30.0


def _flock_within(fd: int, wait_s: float) -> bool:
    """An exclusive flock on ``fd`` within ``wait_s`` seconds: whether it was had."""
    end = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= end:
                return False
            time.sleep(0.02)


@contextmanager
def uid_lock(exclusive: bool):
    """Held shared while a child is given its uid (waiting for a sweep to end), exclusive while
    a sweep removes what uids left (waiting at most SWEEP_WAIT_S). Yields whether it is held:
    True, but for an exclusive one that waited in vain. As root only: a grader that is not
    root gives no uids and sweeps none of theirs (it yields True)."""
    if os.getuid() != 0:
        yield True
        return
    fd = _open_uid_lock(os.path.realpath(tempfile.gettempdir()))
    try:
        if exclusive:
            had = _flock_within(fd, SWEEP_WAIT_S)
        else:
            fcntl.flock(fd, fcntl.LOCK_SH)
            had = True
        yield had
    finally:
        os.close(fd)


def held_uids() -> set[int]:
    """The uids of the children whose folders living graders hold (a child's folder belongs to
    its uid): a uid another grader's child may be using, even where its processes are out of
    sight (another PID namespace)."""
    tmp = os.path.realpath(tempfile.gettempdir())
    out = set()
    try:
        names = os.listdir(tmp)
    except OSError:
        return out
    for name in names:
        d = os.path.join(tmp, name)
        if _grader_name(name) and held(d):
            try:
                out.add(os.stat(d).st_uid)
            except OSError:
                pass
    out.discard(0)
    return out


def sweep_stale_storage() -> list[str]:
    """What graders killed before they could clean up left behind, for graders no longer alive
    (their folders' locks free): children's folders (with their file systems still mounted
    and holding memory), a Gradescope run's folder (the class's seed in it), children's
    cgroups, and what children of their own uid left in the places every uid shares (files in
    /tmp, /dev/shm, ...; System V IPC objects) where no living grader holds a folder of that
    uid. A killed grader's launchers remove their children's (inside/launcher.py); this is for
    what they could not. The folders removed."""
    gone = []
    tmp = os.path.realpath(tempfile.gettempdir())
    bases = {pids_cgroup_base()[0], cgroup2_dir()[0]} - {None}
    for base in bases:
        try:
            names = os.listdir(base)
        except OSError:
            continue
        for name in names:
            if _stale_cgroup(os.path.join(base, name), tmp):
                remove_cgroup(os.path.join(base, name), timeout=0)
    try:
        mounted = {m.split()[4] for m in open("/proc/self/mountinfo")}
    except OSError:
        mounted = set()
    for name in os.listdir(tmp):
        d = os.path.join(tmp, name)
        if not _stale_folder(d, name):
            continue
        if d in mounted:
            shutil.rmtree(d, ignore_errors=True)   # emptied first: its pages go with its files
            unmount(Path(d))
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
    if os.getuid() == 0:   # files and IPC objects of children no living grader holds
        gone += _remove_orphans(tmp)
    return gone


def _remove_orphans(tmp: str) -> list[str]:
    """What children of uids no living grader holds left where every uid may write, removed
    while no grader is giving a child its uid (uid_lock)."""
    from .uid import CHILD_UID_BASE, CHILD_UID_SPAN

    gone = []
    with uid_lock(exclusive=True) as held_lock:
        if not held_lock:
            return [f"nothing of children's uids: a grader held {UID_LOCK} past "
                    f"{SWEEP_WAIT_S:.0f} s (the next sweep will)"]
        live = held_uids() | {u for u in map(uid_of, all_pids()) if u is not None}
        orphaned = lambda u: CHILD_UID_BASE <= u < CHILD_UID_BASE + CHILD_UID_SPAN and u not in live  # noqa: E731
        # never a grader's folder (its own child's, whose uid may not run a process yet)
        keep = [os.path.join(tmp, n) for n in os.listdir(tmp) if _grader_name(n) or n.startswith(NEW)]
        left = remove_left_by(orphaned, shared_places([tmp]), skip=keep)
        n = sum(v for k, v in left["files"].items() if k != "failed")
        m = sum(v for k, v in left["ipc"].items() if k != "failed")
        if n or m:
            gone.append(f"{n} files and folders, {m} IPC objects of children of killed graders")
    return gone


def storage_use(workdir: Path) -> dict:
    """Bytes written to each place (allocated blocks, links not followed) and the files in all."""
    use = {"/tmp": 0, "/dev/shm": 0, "working folder": 0, "files": 0}
    sub = {name: place for place, name in PLACES}

    def walk(d: str, place: str) -> None:
        try:
            it = os.scandir(d)
        except OSError:
            return
        with it:
            for e in it:
                where = sub.get(e.name, place) if d == str(workdir) else place
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                use["files"] += 1
                if e.is_dir(follow_symlinks=False):
                    walk(e.path, where)
                else:
                    use[where] += st.st_blocks * 512

    walk(str(workdir), "working folder")
    return use


def storage_message(s: dict, counts: bool = True) -> str:
    """What a child that filled its storage is told: what it wrote where (unless ``counts`` is
    false: numbers its code chose), and the limits."""
    mib = lambda b: f"{b / 2**20:.0f} MiB"  # noqa: E731
    wrote = ", ".join(f"{mib(s[p])} to {p}" for p in ("/tmp", "/dev/shm", "working folder") if s[p] >= 2**20)
    said = (f"it wrote {wrote or 'less than 1 MiB'} ({s['files']:,} files and folders)" if counts
            else "it filled it")
    return (f"your code filled the space it may write to: {said}; the limit is {mib(s['limit_bytes'])} and "
            f"{s['limit_files']:,} files for the working folder, /tmp and /dev/shm together. A write "
            "past it fails with 'No space left on device' (errno 28). Write only the files you "
            "need and delete temporaries: nothing in this lab needs files. Other submissions have "
            "space of their own and were not affected.")
