"""The trusted code every child runs from, and how it is started: a copy of the child's side of
the sandbox (``inside/``, whole, as the package it is), of ``autograder.inputs`` (the inputs
the child builds from seeds) and of the ``book`` library without its kernels (but for
``GRADED_KERNEL_MODULES``), laid out as in the repository under the child's ``trusted``
folder, so that the child's code imports by the names it has here; the command line of its
entry point; the environment it starts with."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from .paths import REPO

# what the child's copy holds of the grader's package, each path as it lies under the repository
CHILD_PACKAGE = ("autograder/sandbox/inside", "autograder/inputs.py")
# in the command line of every process a child starts from its copy (launcher, driver, and what
# the driver forks): how a report finds a submission's processes
CHILD_MARK = "autograder/sandbox/inside/__main__.py"
# the child's autograder and autograder.sandbox: empty packages around the two copies (the
# grader's own __init__ modules import the grader, which the child never gets)
STUB = '"""The child\'s copy: {what} (autograder/sandbox/trusted.py)."""\n'

#: Modules of ``book.kernels`` that graded code may import, by the names it imports them by
#: (``book.kernels.ALIASES``' old flat names): instructions, not solutions (``tensorcore``: the
#: inline-PTX ``mma.sync``/``ldmatrix``/``cp.async`` intrinsics and their simulator versions,
#: which a tensor-core lab builds on). Only these are copied into the child's ``book/kernels/``,
#: each at its layer's path, with ``book.kernels.aliases`` and a table of them alone, so that
#: ``book.kernels.tensorcore`` is the module of ``book.kernels.instructions.tensorcore``; the
#: driver's import blocker lets through what it finds there.
GRADED_KERNEL_MODULES = ("tensorcore",)

# the child's book/kernels/__init__.py: the old names of the graded modules, nothing else
KERNELS_STUB = ('"""The instruction modules graded code may import (autograder/sandbox/trusted.py '
                'GRADED_KERNEL_MODULES), by their old names too; the course\'s kernels are not '
                'here."""\n\nfrom .aliases import install\n\nALIASES = {aliases!r}\n'
                '__getattr__ = install(__name__, ALIASES)\n')


def copy_trusted(dst: Path) -> None:
    """The child's trusted code in ``dst``: the child's side of the sandbox and
    ``autograder.inputs`` (CHILD_PACKAGE), and the book library minus its kernels (but for
    GRADED_KERNEL_MODULES), data and widgets."""
    dst.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for rel in CHILD_PACKAGE:
        src, to = REPO / rel, dst / rel
        to.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, to, ignore=skip)
        else:
            shutil.copy(src, to)
    (dst / "autograder" / "__init__.py").write_text(STUB.format(what="autograder.inputs and the sandbox's inside"))
    (dst / "autograder" / "sandbox" / "__init__.py").write_text(STUB.format(what="the sandbox's inside"))
    book = REPO / "book"
    shutil.copytree(book, dst / "book", ignore=shutil.ignore_patterns(
        "kernels", "widgets", "data", "__pycache__", "*.json", "*.js", "*.css"))
    from book.kernels import ALIASES   # (cheap: the table, none of the kernels)

    kernels = dst / "book" / "kernels"
    kernels.mkdir()
    graded = {name: ALIASES[name] for name in GRADED_KERNEL_MODULES}
    (kernels / "__init__.py").write_text(KERNELS_STUB.format(aliases=graded))
    shutil.copy(book / "kernels" / "aliases.py", kernels / "aliases.py")
    for path in graded.values():   # book.kernels.<layer>.<name>
        layer, name = path.split(".")[2:]
        (kernels / layer).mkdir(exist_ok=True)
        (kernels / layer / "__init__.py").write_text(
            f'"""The child\'s copy of book.kernels.{layer}: the graded modules alone."""\n')
        shutil.copy(book / "kernels" / layer / f"{name}.py", kernels / layer / f"{name}.py")


def entry_point(trusted: Path) -> Path:
    """The child's entry point in its copy (``inside/__main__.py``)."""
    return Path(trusted) / CHILD_MARK


def child_command(trusted: Path, role: str, config: Path) -> list[str]:
    """``python -I -B <entry> ROLE CONFIG``: the launcher (the grader starts it) or the driver
    (the launcher does, behind any wrapper)."""
    return [sys.executable, "-I", "-B", str(entry_point(trusted)), role, str(config)]


def scrubbed_env(workdir: Path, simulated: bool, gpu: int | None) -> dict:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "NUMBA_CACHE_DIR": str(workdir / ".numba"),
        "NUMBA_NUM_THREADS": "1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",   # CUDA's device i is NVML's device i (gpuwatch)
    }
    if simulated:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
        env["BOOK_SIMULATOR"] = "1"
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    for k in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "NUMBA_CUDA_DRIVER"):
        if k in os.environ and not simulated:
            env[k] = os.environ[k]
    # the T4 switch (book/target.py) is the grader's setting, never the student's: a class
    # graded with COURSE_TARGET_CC=7.5 runs every submission on the T4's instructions. (Imported
    # here: importing book decides GPU or simulator, which the grader does first.)
    from book.target import TARGET_CC_ENV

    if os.environ.get(TARGET_CC_ENV):
        env[TARGET_CC_ENV] = os.environ[TARGET_CC_ENV]
    return env
