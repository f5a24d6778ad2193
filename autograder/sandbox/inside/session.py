"""The child's session, once it is isolated and its path set: the CUDA context made in trusted
code, the launches counted and recorded, the import blocker installed, then ``ready``; the
submission's cells run when the grader says ``load``; then one command after another (a test,
the simulator's replay, the compile check's compile, the sandbox's probe) until ``exit``. The
compile check's child (``book.gpu.COMPILE_ONLY``: the real CUDA target, no GPU) makes no CUDA
context. Everything the student's code
could reach in this process is untrusted from then on: the grader checks outputs against its
own float64 references and times with its own clock."""

from __future__ import annotations

import os
import sys

from numba import cuda

from book import gpu

from . import compile as compile_check
from . import launches
from .calls import probe, run_test
from .cells import cell_sources, load_submission, signature_problems, student_tb
from .channel import cuda_init_failure
from .import_blocker import Blocker
from .privilege import privileged
from .sim_replay import replay_sim
from .threads import is_thread_failure, set_baseline, thread_failure


def init_cuda() -> None:
    """Make the CUDA context here, in trusted code, before any of the submission's: a failure
    now (the driver, the OS, a neighbour that exhausted something shared) is not the
    submission's, and the grader grades it again alone instead of scoring it."""
    if not gpu.SIMULATED and not gpu.COMPILE_ONLY:
        cuda.current_context()   # cuInit and the primary context (get_primary_context)


def serve(cfg, iso: dict, channel) -> None:
    """The session, to its end (the process exits here)."""
    simulated = bool(gpu.SIMULATED)
    fns = {}
    try:
        init_cuda()
    except Exception as e:
        channel.reply(**cuda_init_failure(e))
        os._exit(3)
    if cfg.mode == "student":
        why = privileged()
        if why:   # never: the grader refuses to start such a child, and this makes sure
            channel.fatal("sandbox", f"the sandbox refused to run student code {why}: "
                                     f"{iso.get('notes')}")
        if gpu.COMPILE_ONLY:   # the compile check's child: its kernels named as they are made,
            compile_check.install()   # none launched (no launch hooks: Gradescope's numba-cuda
        else:                         # has no cuda.core, so no real-target launch to hook)
            launches.install(channel)
        # the child's own modules leave the import table (they keep running: nothing imports
        # them again), so graded code that imports the grader is told it may not, by the
        # blocker, as for any other module of the grader
        for name in [m for m in sys.modules if m == "autograder" or m.startswith("autograder.")]:
            del sys.modules[name]
        sys.meta_path.insert(0, Blocker(cfg.trusted_dir))
        # imports are done; the student's cells run when the grader says so (it holds the GPU
        # lock in shared mode then, so module-level GPU work never overlaps a timing window)
        channel.reply(event="ready", isolation=iso, simulated=simulated)
        msg = channel.command()
        if not msg or msg.get("cmd") != "load":
            os._exit(0)
        # the tasks counted against its limit from here on are the submission's (threads.py)
        set_baseline(own_uid=cfg.drop_uid is not None)
        ns, errors = load_submission(cfg.workdir)
        fns, problems = signature_problems(ns, cfg.functions)
        if not gpu.COMPILE_ONLY:
            cuda.synchronize()
        channel.reply(event="loaded", isolation=iso, simulated=simulated, cell_errors=errors,
                      problems=problems)
    else:
        channel.reply(event="loaded", isolation=iso, simulated=simulated, cell_errors=[],
                      problems={})
    for msg in channel.commands():
        cmd = msg["cmd"]
        if cmd == "exit":
            break
        try:
            if cmd == "ping":
                r = {"ok": True}
            elif cmd == "probe":  # the grader's sandbox calibration: can this sandbox run a kernel?
                r = probe()
            elif cmd == "test":
                r = run_test(fns, msg, cfg.workdir)
            elif cmd == "replay" and simulated:
                r = replay_sim(msg, cfg.workdir)
            elif cmd == "compile" and gpu.COMPILE_ONLY:
                r = compile_check.compile_launch(msg, cell_sources(cfg.workdir))
            else:
                r = {"ok": False, "error": "ProtocolError", "message": f"unknown command {cmd}"}
        except BaseException as e:
            r = {"ok": False, "error": type(e).__name__, "message": student_tb(e)[-3000:],
                 "cuda_error": "Cuda" in type(e).__name__ or "CUDA" in str(e)[:400]}
            if isinstance(e, launches.LaunchTooLargeToSimulate):
                r["too_large"] = str(e)
            if simulated and is_thread_failure(e):   # the sandbox's limit, not the student's code
                r["thread_failure"] = thread_failure()
        channel.reply(event="reply", cmd=cmd, **r)
    os._exit(0)
