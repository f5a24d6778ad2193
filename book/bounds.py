"""What an out-of-bounds access does: the simulator names the thread, a GPU does not.

Chapter 4 removes a kernel's guard (``if i < n``) to show what happens to the spare threads of
the last block. Numba's CUDA simulator checks every index and raises ``IndexError`` with the
offending thread's ``threadIdx`` (``tid``) and ``blockIdx`` (``ctaid``); a GPU checks nothing:
the stores land in whatever memory follows the array and the launch reports success.

:func:`in_simulator` runs a launch in the simulator and returns what it says, wherever the
notebook runs: in this process when the course already uses the simulator, otherwise (on a GPU)
in a child process with ``BOOK_SIMULATOR=1``, the way :mod:`book.tracer` traces on a GPU. So a
page recorded on a GPU shows the simulator's message too, beside :data:`ON_A_GPU`.
"""

from __future__ import annotations

import os
import pickle
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numba import cuda

from . import gpu
from .tracer import importable_name

__all__ = ["in_simulator", "SimulatorSays", "ON_A_GPU", "where_am_i_unguarded"]

#: What the same launch does on a GPU (said beside the simulator's message).
ON_A_GPU = ("On a GPU the same launch raises nothing: the spare threads' stores land in whatever "
            "memory follows the arrays (another array, or nothing anyone reads yet), and the "
            "kernel reports success. Only a tool that watches every access, such as "
            "compute-sanitizer's memcheck, names the thread there.")


@cuda.jit
def where_am_i_unguarded(block_of, thread_of):
    i = cuda.grid(1)
    # no guard: the spare threads of the last block write out of bounds
    block_of[i] = cuda.blockIdx.x
    thread_of[i] = cuda.threadIdx.x


@dataclass(frozen=True)
class SimulatorSays:
    """The outcome of one launch in the simulator."""

    error: str | None  # "IndexError: ..." as the simulator raised it; None if the launch ran
    block: int | None  # blockIdx.x of the thread the message names
    thread: int | None  # its threadIdx.x
    block_dim: int  # threads per block of the launch
    where: str  # "this process" or "a simulator subprocess"

    @property
    def index(self) -> int | None:
        """The global index of the named thread (blockIdx.x * blockDim.x + threadIdx.x)."""
        return None if self.block is None else self.block * self.block_dim + self.thread

    def explain(self, size: int) -> str:
        """The message's arrow line: which thread, and why its index is out of bounds."""
        if self.error is None:
            return "-> the launch ran without an out-of-bounds access"
        if self.block is None:
            return "-> the simulator's message names no thread"
        return (f"-> thread {self.thread} of block {self.block}: global index {self.block} x "
                f"{self.block_dim} + {self.thread} = {self.index}, past the last element "
                f"({size - 1})")


def _parse(message: str) -> tuple[int | None, int | None]:
    m_t = re.search(r"tid=\[(\d+)", message)
    m_b = re.search(r"ctaid=\[(\d+)", message)
    return (int(m_b.group(1)) if m_b else None, int(m_t.group(1)) if m_t else None)


def _launch(kernel, grid: int, block: int, args) -> str | None:
    try:
        kernel[grid, block](*args)
    except IndexError as err:
        return f"IndexError: {err}"
    return None


def in_simulator(kernel, grid: int, block: int, *args, timeout_s: float = 120.0) -> SimulatorSays:
    """Launch ``kernel[grid, block](*args)`` (NumPy arrays) in Numba's CUDA simulator and
    return what it says. On a GPU the launch runs in a child process that uses the simulator,
    so ``kernel`` must be importable by name (defined at module level in a module)."""
    if gpu.SIMULATED:
        error, where = _launch(kernel, grid, block, args), "this process"
    else:
        error, where = _in_subprocess(kernel, grid, block, args, timeout_s), "a simulator subprocess"
    b, t = _parse(error) if error else (None, None)
    return SimulatorSays(error, b, t, int(block), where)


def _in_subprocess(kernel, grid, block, args, timeout_s) -> str | None:
    name = importable_name(kernel)
    if name is None:
        raise ValueError("on a GPU the launch is repeated in a simulator process, which imports "
                         f"the kernel by name; {kernel.py_func.__qualname__!r} is not a "
                         "module-level kernel of a module. Define it in one, or run with "
                         "BOOK_SIMULATOR=1")
    job = pickle.dumps({"module": name[0], "attr": name[1], "grid": grid, "block": block,
                        "args": [np.asarray(a) if hasattr(a, "shape") else a for a in args]})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "said.pickle"  # not stdout: `import book` prints its status line
        p = subprocess.run([sys.executable, "-m", "book.bounds", str(out)], input=job,
                           capture_output=True, timeout=timeout_s,
                           env=dict(os.environ, BOOK_SIMULATOR="1"))
        if p.returncode != 0 or not out.exists():
            err = p.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
            raise RuntimeError(f"the simulator process failed: {err[-1]}")
        return pickle.loads(out.read_bytes())


def _child_main() -> int:  # python -m book.bounds OUT (the subprocess above)
    import importlib

    job = pickle.loads(sys.stdin.buffer.read())
    kernel = getattr(importlib.import_module(job["module"]), job["attr"])
    Path(sys.argv[1]).write_bytes(pickle.dumps(_launch(kernel, job["grid"], job["block"],
                                                       job["args"])))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
