"""Numba's CUDA simulator runs a block's threads; here its scheduler waits instead of spinning.

The simulator runs each simulated CUDA thread as a Python thread, and the block's manager
(``BlockManager.run``) watches them in a loop: is any thread waiting at ``syncthreads``, has any
raised, are all of them at the barrier (then release them), which are still alive. That loop
never pauses, so it holds the GIL for whole switch intervals, competing with the very threads
it waits for (profiled, lab 6's three small public checks spent nearly all their time in its
``is_alive`` calls). The same loop with ``time.sleep(0)`` after each pass (which releases the
GIL and lets the block's threads run) does the same work in the same order, several times
faster where blocks are many and long (``benchmarks/simscheduler_probe.py`` times ``check()``
of every lab's master both ways: records/simulator/simscheduler_cpu.json). The simulator is
what CI, a laptop without a GPU and Gradescope run, so every simulated kernel gains.

The replacement keeps numba-cuda 0.30.4's loop line for line (what it checks, in that order;
its exceptions and aborts) and only adds the pause; ``tests/library/test_simscheduler.py``
holds the original's source to the one it was written against, so an upgrade that changes it
fails there, and checks barriers, exceptions and results against the unpatched loop.

:func:`apply` is called by :mod:`book.gpu` when it picks the simulator; like
:mod:`book.simfidelity` it imports nothing of ``numba.cuda`` itself.
"""

from __future__ import annotations

import time

from .numba_compat import SIM_KERNEL_MODULE, sim_block_thread_class, when_imported


def run_block(self, grid_point, *args):
    """``BlockManager.run`` of numba-cuda 0.30.4, pausing (``time.sleep(0)``) between passes."""
    import numpy as np

    block_thread = sim_block_thread_class()
    threads = set()
    livethreads = set()
    blockedthreads = set()
    for block_point in np.ndindex(*self._block_dim):

        def target():
            self._f(*args)

        t = block_thread(target, self, grid_point, block_point, self._debug)
        t.start()
        threads.add(t)
        livethreads.add(t)

    while livethreads:
        for t in livethreads:
            if t.syncthreads_blocked:
                blockedthreads.add(t)
            elif t.exception:
                # abort all other simulated threads on an exception (not joined, as in Numba)
                for t_other in threads:
                    t_other.abort = True
                    t_other.syncthreads_blocked = False
                    t_other.syncthreads_event.set()
                raise t.exception[0].with_traceback(t.exception[1])
        if livethreads == blockedthreads:
            for t in blockedthreads:
                t.syncthreads_blocked = False
                t.syncthreads_event.set()
            blockedthreads = set()
        livethreads = set([t for t in livethreads if t.is_alive()])
        if livethreads:
            time.sleep(0)  # the one change: let the block's threads have the GIL
    # a last check for exceptions set before their thread finished
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def patch(module) -> None:
    """Give the simulator's ``BlockManager`` the pausing loop (once)."""
    cls = module.BlockManager
    if getattr(cls, "_book_pauses", False):
        return
    cls._numba_run = cls.run
    cls.run = run_block
    cls._book_pauses = True


def apply() -> None:
    """Patch the simulator now if its kernel module is loaded, else when it is first imported."""
    when_imported(SIM_KERNEL_MODULE, patch)
