"""The driver: the child's trusted process that runs one submission, started by the launcher
through the child's entry point (``__main__.py driver CONFIG``) in the child's working folder,
which holds a copy of this package, ``autograder.inputs``, the ``book`` library WITHOUT
``book.kernels`` (but for the instruction modules graded code may import,
``GRADED_KERNEL_MODULES`` of the sandbox) and the submission's cells. It never receives the
lab's references, solutions, rubric or hidden-case generator: only seeds, shapes and argument
order, one test at a time.

Order matters (everything before the session runs before any student code):
1. ``isolation.isolate``: namespaces, hidden paths, private storage, the privilege drop
   (student code never runs as root: the session checks again before it loads a line);
2. die with the grader; the working folder; the grader's own import path (its packages), the
   trusted copies first; ``import book`` (GPU, simulator, or the compile check's real target
   without a GPU: ``compile_cc``), numpy, numba.cuda;
3. ``session.serve``: the CUDA context, the launches counted, the import blocker, the
   submission's cells, then the grader's commands.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import sys
import threading

from .channel import Channel
from .isolation import isolate
from .linux import PR_SET_PDEATHSIG
from .settings import DriverSettings
from .threads import limit_malloc_arenas


def drive(cfg_path: str) -> None:
    """Run the child's driver to its end (the process exits in the session)."""
    cfg = DriverSettings.load(cfg_path)
    channel = Channel(cfg.cmd_fd, cfg.reply_fd)
    iso = isolate(cfg, lambda why: channel.fatal("sandbox", why))
    try:  # die with the grader (a killed grading run leaves no orphans); after the uid drop, which clears it
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, 9)  # SIGKILL
        if os.getppid() == 1:
            os._exit(5)
    except Exception:
        pass
    os.chdir(cfg.workdir)
    # the grader's own search path, in its order (e.g. a numpy wheel before the system's), minus the repo
    extra = list(cfg.extra_paths)
    sys.path[:] = [cfg.trusted_dir] + extra + [p for p in sys.path if p not in extra]
    if cfg.compile_cc:
        # the compile check (compile.py): Numba's real CUDA target, no GPU, kernels compiled
        # for the capability the grader names (book.gpu.COMPILE_ONLY, book.target)
        os.environ.pop("NUMBA_ENABLE_CUDASIM", None)
        os.environ.update(BOOK_COMPILE_ONLY="1", CUDA_VISIBLE_DEVICES="",
                          COURSE_TARGET_CC="%d.%d" % tuple(cfg.compile_cc[:2]),
                          NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING="1")
    elif cfg.simulated:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
        # The simulator runs a Python thread per simulated CUDA thread: a 256-thread block is
        # 256 threads, each taking address space under RLIMIT_AS (Limits.mem_bytes): its stack
        # (8 MiB by default; 1 MiB holds Python's default recursion depth, for the threads
        # started from here on) and, where malloc is busy, an arena of 64 MiB, up to 8 per
        # CPU (threads.py: on the 16-CPU H100 machine a block died at 105 threads, 6.29 GB).
        threading.stack_size(1 << 20)
        limit_malloc_arenas()
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its one-line announcement is not the student's output
            import book  # noqa: F401  (decides GPU or simulator before numba.cuda is imported)
    except Exception as e:  # the library is broken: say so, the grader reports it
        channel.fatal("import", f"the course library failed to import in the sandbox: {e!r}")
    from .session import serve   # numpy, numba.cuda and book's models: after the decision above

    serve(cfg, iso, channel)
