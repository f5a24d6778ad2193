"""What a child may see of the file system: its own folder, the interpreter and its packages,
the system directories; every other path is hidden behind an empty read-only mount by the
driver (a whitelist, not a list of known secrets)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

AUTOGRADER = Path(__file__).resolve().parent.parent
REPO = AUTOGRADER.parent

# Top-level directories the child may see whole: the OS, its libraries and the GPU driver
# (/usr/local/nvidia, /usr/local/cuda live under /usr). Everything else (/root, /home, /work,
# /tmp, /opt, /srv, /content on Colab, ...) is hidden except the paths the child needs.
SYSTEM_DIRS = {"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "dev", "proc",
               "sys", "run", "var"}
MAX_HIDDEN = 4000


# How the grader starts a trusted process of its own (the replay process; Gradescope's
# run_autograder and the `grade` it runs): `python -I`, so nothing on PYTHONPATH, in the user's
# site-packages or in the current folder is imported (a module planted there by a submission
# would run as the grader); the folders it needs come first on its path, given explicitly.
TRUSTED_BOOT = ("import runpy, sys; n = int(sys.argv.pop(1)); sys.path[:0] = sys.argv[1:1 + n]; "
                "del sys.argv[1:1 + n]; runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")


def trusted_command(module: str, *args: str, path=(str(REPO),)) -> list[str]:
    """argv of ``python -I -m module args`` with the folders of ``path`` first on its path."""
    path = [str(p) for p in path if p]
    return [sys.executable, "-I", "-c", TRUSTED_BOOT, str(len(path)), *path, module, *args]


def grader_paths() -> list[str]:
    """sys.path of the grader minus the repository (so numpy/numba resolve as in the grader)."""
    repo = os.path.realpath(REPO)
    return [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) != repo
            and not os.path.realpath(p).startswith(repo + os.sep + "autograder")]


def shared_paths() -> list[str]:
    """What every child runs from the grader's installation: the interpreter and its packages
    (read-only to the child: privilege.share_read_only, uid.uid_drop_support)."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.__file__),
             os.path.dirname(sys.executable), *grader_paths()}
    return sorted(p for p in paths if os.path.exists(p))


def needed_paths(workdir: Path, keep=()) -> list[Path]:
    """What the child must read: its working directory, the interpreter and its packages
    (and ``keep``: a wrapper's installation, e.g. compute-sanitizer's)."""
    paths = {workdir, *map(Path, shared_paths()), *map(Path, keep)}
    # both spellings: the path as the child will use it (through any symlink) and its target
    return sorted({q for p in paths if p.exists() for q in (Path(os.path.abspath(p)), p.resolve())})


def hide_list(extra_hide, workdir: Path, keep=()) -> list[str]:
    """Every path outside SYSTEM_DIRS that is neither needed by the child nor a folder holding
    something needed, plus the caller's extra paths. A whitelist, not a list of known secrets:
    another checkout of the course, other submissions, the grader's output folder and the
    instructor's home directory are hidden wherever they lie."""
    keep = needed_paths(workdir.resolve(), keep)
    out: list[str] = []

    def walk(folder: Path) -> None:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if len(out) >= MAX_HIDDEN:
                return
            if entry.is_symlink():
                continue  # its target is hidden (or kept) where it lives
            if folder == Path("/") and entry.name in SYSTEM_DIRS:
                continue
            if any(entry == k or entry in k.parents for k in keep):
                if not any(entry == k for k in keep):
                    walk(entry)  # holds something needed: hide its other entries
                continue
            out.append(str(entry))

    walk(Path("/"))
    for p in extra_hide:
        rp = Path(p).resolve()
        w = workdir.resolve()
        if rp.exists() and rp != w and rp not in w.parents and str(rp) not in out:
            out.append(str(rp))
    return out
