"""A GPU session cannot switch Numba to its simulator, so the tracer re-imports the kernel (or
host function) by name in a fresh ``BOOK_SIMULATOR=1`` process: ``python -m book.tracer``
(book/tracer/__main__.py, which traces it with the recorder). This is the GPU session's side:
the job, the process, the result brought back."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from .model import Trace, TracerError

__all__ = ["in_simulator_process", "trace_in_subprocess", "importable_name"]

def in_simulator_process(job: dict, args, timeout_s: float) -> Trace:
    """Run one tracing job in a child process that uses the simulator (BOOK_SIMULATOR=1).

    A GPU session cannot switch Numba to its simulator, so the tracer re-imports the kernel
    (or host function) by name in a fresh process; results written to ``args`` come back.
    """
    import os
    import pickle
    import tempfile

    payload = pickle.dumps(dict(job, args=args))
    env = dict(os.environ, BOOK_SIMULATOR="1")
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "trace.pickle"   # not stdout: `import book` prints its status
        try:
            p = subprocess.run([sys.executable, "-m", "book.tracer", str(result)],
                               input=payload, capture_output=True, env=env,
                               timeout=timeout_s + 60)
        except subprocess.TimeoutExpired as exc:
            raise TracerError(f"the simulator process did not finish within "
                              f"{timeout_s + 60:.0f} s: trace fewer threads") from exc
        if p.returncode != 0 or not result.exists():
            err = p.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
            raise TracerError(err[-1])
        res = pickle.loads(result.read_bytes())
    for a, back in zip(args, res["args"]):
        if isinstance(a, np.ndarray):
            a[...] = back
    return res["trace"]


def trace_in_subprocess(kernel, grid, block, args, names, shared_bytes, max_threads,
                         timeout_s, max_accesses):
    """On a GPU machine: trace an importable kernel in a child process that uses the simulator."""
    where = importable_name(kernel)
    if where is None:
        raise TracerError("on a GPU the tracer re-runs the kernel in a simulator process, so it "
                          f"must be importable by name; {kernel.py_func.__qualname__!r} is not a "
                          "module-level kernel. Define it in a module, or run this notebook "
                          "with BOOK_SIMULATOR=1")
    job = {"what": "kernel", "module": where[0], "attr": where[1], "grid": grid,
           "block": block, "names": names, "shared_bytes": shared_bytes,
           "max_threads": max_threads, "timeout_s": timeout_s, "max_accesses": max_accesses}
    return in_simulator_process(job, args, timeout_s)


def importable_name(obj) -> tuple[str, str] | None:
    """(module, attribute) that names ``obj`` (a kernel or function) at module level, or None:
    how a simulator subprocess finds it again (here, and in :mod:`book.bounds`)."""
    py = getattr(obj, "py_func", obj)
    mod = getattr(py, "__module__", None)
    attr = next((k for k, v in vars(sys.modules.get(mod, object())).items() if v is obj),
                None) if mod else None
    return (mod, attr) if attr else None
