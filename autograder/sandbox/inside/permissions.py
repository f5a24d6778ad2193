"""What a process of another uid may read or change: the child's uid shares no group with the
grader, so "other" permissions are what it gets. Read by the grader before it gives a child a
uid of its own (uid.py) and by the driver where it shares paths read-only (privilege.py).

Standard library only: part of the child's side (this package), and read by the grader too.
"""

from __future__ import annotations

import os
import stat


def reachable(path: str) -> str:
    """'' when a process of another uid, in no group of the owner's, may enter every folder on
    the way to ``path`` and read it (and list it, for a folder); else the first place that
    stops it."""
    p = os.path.abspath(path)
    parts = p.split(os.sep)
    for i in range(1, len(parts)):
        d = os.sep.join(parts[:i]) or os.sep
        try:
            if not os.stat(d).st_mode & 0o001:
                return d
        except OSError:
            return d
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return p
    need = 0o005 if stat.S_ISDIR(mode) else 0o004
    return "" if mode & need == need else p


def _open_to_others(st) -> bool:
    """Write permission for others, but not a sticky folder's (/tmp: only an entry's owner may
    remove or rename it)."""
    return bool(not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o002
                and not (stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISVTX))


def writable_by_others(paths, limit: int = 20) -> list[str]:
    """Files and folders under ``paths`` (and the folders that hold them) that a process of
    another uid may change, links not followed; at most ``limit`` of them."""
    out: list[str] = []
    for top in paths:
        top = os.path.abspath(top)
        parts = top.split(os.sep)
        for d in [os.sep.join(parts[:i]) or os.sep for i in range(1, len(parts))]:
            try:
                if _open_to_others(os.lstat(d)) and d not in out:
                    out.append(d)
            except OSError:
                pass
        for dirpath, _dirs, files in os.walk(top):
            for name in [None, *files]:
                p = dirpath if name is None else os.path.join(dirpath, name)
                try:
                    if _open_to_others(os.lstat(p)) and p not in out:
                        out.append(p)
                except OSError:
                    continue
                if len(out) >= limit:
                    return out
    return out


#: the modes of what the child's trusted code writes for the grader (which runs as another uid
#: and reads them as "other"), whatever the umask the submission's code left (os.umask(0o777)
#: would otherwise make launches.json unreadable, and the student's grade a PermissionError of
#: the grader's own file)
FOR_GRADER_FILE, FOR_GRADER_DIR = 0o644, 0o755


def open_for_grader(path: str, mode: str = "wb"):
    """``open(path, mode)`` for a file the grader reads: created or truncated with
    :data:`FOR_GRADER_FILE` set by ``fchmod`` (which no umask masks)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FOR_GRADER_FILE)
    os.fchmod(fd, FOR_GRADER_FILE)
    return os.fdopen(fd, mode)


def folder_for_grader(path: str) -> None:
    """``os.makedirs(path, exist_ok=True)``, the folder then set to :data:`FOR_GRADER_DIR`."""
    os.makedirs(path, exist_ok=True)
    os.chmod(path, FOR_GRADER_DIR)
