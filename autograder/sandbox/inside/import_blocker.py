"""What graded code may not import: libraries that would compute the answer for the student
(torch, cupy, jax, triton, ...), the course's own kernels, and the grader. Installed on
``sys.meta_path`` after the trusted imports, before the submission's first line."""

from __future__ import annotations

import os

BLOCKED = {
    "torch": "torch", "cupy": "cupy", "cupyx": "cupy", "jax": "jax", "jaxlib": "jax",
    "tensorflow": "tensorflow", "triton": "triton", "pycuda": "pycuda",
}


class Blocker:
    """Refuses libraries that would compute the answer for the student. Of ``book.kernels``
    only the instruction modules the sandbox copied (GRADED_KERNEL_MODULES of the sandbox) are
    let through, by their paths and their old flat names (``book.kernels.tensorcore`` is
    ``book.kernels.instructions.tensorcore``), with the packages above them: the list is taken
    once, before any student code runs, from the child's copy of ``book`` in ``trusted_dir``."""

    def __init__(self, trusted_dir: str):
        here = os.path.join(trusted_dir, "book", "kernels")
        self.allowed = set()
        for folder, _, files in os.walk(here):
            package = ".".join(["book", "kernels"] + os.path.relpath(folder, here).split(os.sep)[
                :None if folder != here else 0])
            for f in files:
                if f.endswith(".py"):
                    self.allowed.add(package if f == "__init__.py" else f"{package}.{f[:-3]}")
                    if f != "__init__.py":   # its old flat name (book.kernels.ALIASES)
                        self.allowed.add("book.kernels." + f[:-3])

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in BLOCKED:
            raise ImportError(
                f"`import {name}` is not allowed in graded code: this lab asks for a kernel "
                f"written with numba.cuda, not a call into {BLOCKED[top]}")
        if name in self.allowed:
            return None
        if name == "book.kernels" or name.startswith("book.kernels."):
            raise ImportError("`book.kernels` (the chapters' kernels) is not available to graded "
                              "code: write this lab's kernel yourself")
        if top in ("autograder", "solutions"):
            raise ImportError(f"`{name}` is not available to graded code")
        return None
