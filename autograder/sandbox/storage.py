"""Where a child may write: its working folder, /tmp and /dev/shm. As root the working folder
is a tmpfs of its own (size and inode limits), mounted here where the grader reads it, and the
driver binds its subfolders over /tmp and /dev/shm inside the child's mount namespace: the
three share one limit, a full one is that submission's alone, and the grader can say what was
written where, even after the child died."""

from __future__ import annotations

import ctypes
import os
import shutil
import tempfile
from pathlib import Path

from .containment import cgroup2_dir, remove_cgroup
from .linux import MNT_DETACH, MS_NODEV, MS_NOSUID
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


def _stale(name: str) -> bool:
    """A name of the form ag-<pid>-... whose grader (pid) is gone and is not this one."""
    parts = name.split("-")
    return (name.startswith("ag-") and len(parts) >= 3 and parts[1].isdigit()
            and int(parts[1]) != os.getpid() and not os.path.exists(f"/proc/{parts[1]}"))


def sweep_stale_storage() -> list[str]:
    """What graders killed before they could clean up left behind (children's folders, with
    their file systems still mounted and holding memory; a Gradescope run's folder with the
    class's seed; cgroups): a child's folder and cgroups are named ag-<grader pid>-..., and
    those of graders that are gone are removed, a living grader's left alone. A killed
    grader's launchers remove their children's (launcher.py); this is for what they could
    not. The folders removed."""
    gone = []
    bases = {pids_cgroup_base()[0], cgroup2_dir()[0]} - {None}
    for base in bases:
        for name in os.listdir(base):
            if _stale(name):
                remove_cgroup(os.path.join(base, name), timeout=0)
    tmp = os.path.realpath(tempfile.gettempdir())
    try:
        mounted = {m.split()[4] for m in open("/proc/self/mountinfo")}
    except OSError:
        mounted = set()
    for name in os.listdir(tmp):
        d = os.path.join(tmp, name)
        if not _stale(name) or not os.path.isdir(d) or os.path.islink(d):
            continue
        if d in mounted:
            shutil.rmtree(d, ignore_errors=True)   # emptied first: its pages go with its files
            unmount(Path(d))
        shutil.rmtree(d, ignore_errors=True)
        gone.append(d)
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


def storage_message(s: dict) -> str:
    """What a child that filled its storage is told: what it wrote where, and the limits."""
    mib = lambda b: f"{b / 2**20:.0f} MiB"  # noqa: E731
    wrote = ", ".join(f"{mib(s[p])} to {p}" for p in ("/tmp", "/dev/shm", "working folder") if s[p] >= 2**20)
    return (f"your code filled the space it may write to: it wrote {wrote or 'less than 1 MiB'} "
            f"({s['files']:,} files and folders); the limit is {mib(s['limit_bytes'])} and "
            f"{s['limit_files']:,} files for the working folder, /tmp and /dev/shm together. A write "
            "past it fails with 'No space left on device' (errno 28). Write only the files you "
            "need and delete temporaries: nothing in this lab needs files. Other submissions have "
            "space of their own and were not affected.")
