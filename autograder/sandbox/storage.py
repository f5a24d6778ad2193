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

from .containment import remove_cgroup
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


def sweep_stale_storage() -> list[str]:
    """Unmount the file systems of children whose grader is gone (killed before it could close
    them: they hold memory while mounted), and remove their pids cgroups. A child's folder and
    cgroups are named ag-<grader pid>-...; a living grader's are left alone. The folders
    unmounted."""
    if os.getuid() != 0:
        return []
    try:
        mounts = [line.split() for line in open("/proc/self/mountinfo")]
    except OSError:
        return []
    gone = []
    base = pids_cgroup_base()[0]
    for name in os.listdir(base) if base else []:
        owner = name.split("-")[1] if name.startswith("ag-") and name.count("-") >= 2 else ""
        if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            remove_cgroup(os.path.join(base, name), timeout=0)
    tmp = os.path.realpath(tempfile.gettempdir())
    for m in mounts:
        d = m[4]
        name = os.path.basename(d)
        if os.path.dirname(d) != tmp or not name.startswith("ag-") or name.count("-") < 2:
            continue
        owner = name.split("-")[1]
        if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
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
