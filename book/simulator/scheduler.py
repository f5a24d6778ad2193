"""Numba's CUDA simulator runs a block's threads; here its scheduler waits instead of spinning.

The simulator runs each simulated CUDA thread as a Python thread, and the block's manager
(``BlockManager.run``) watches them in a loop: is any thread waiting at ``syncthreads``, has any
raised, are all of them at the barrier (then release them), which are still alive. That loop
never pauses, so it holds the GIL for whole switch intervals, competing with the very threads
it waits for (profiled, lab 6's three small public checks spent nearly all their time in its
``is_alive`` calls). The same loop with ``time.sleep(0)`` after each pass (which releases the
GIL and lets the block's threads run) does the same work in the same order, several times
faster where blocks are many and long (a retired probe timed ``check()`` of every lab's
master both ways: records/simulator/simscheduler_cpu.json and its README). The simulator is
what CI, a laptop without a GPU and Gradescope run, so every simulated kernel gains.

The replacement keeps numba-cuda 0.30.4's loop line for line (what it checks, in that order;
its exceptions and aborts) and only adds the pause; ``tests/library/test_simscheduler.py``
holds the original's source to the one it was written against, so an upgrade that changes it
fails there, and checks barriers, exceptions and results against the unpatched loop.

Two more things the loop does that numba-cuda's does not (issue 41):

- **The blocks of a grid run in a seeded order**, not in index order. numba-cuda runs them one
  after another, block (0, 0, 0) first: a kernel whose blocks race (an arrival counter
  incremented without an atomic, a partial sum read before its block wrote it) then computes
  what a lucky GPU would, every time. Here the k-th block run is the k-th of a permutation of
  the grid drawn from a seed (:func:`block_order`; ``BOOK_SIM_BLOCK_ORDER``: an integer seed,
  default 0, or ``index`` for numba-cuda's order), the same in every process for the same
  grid, so a race-free kernel computes the same values as before and the grader, ``check()``
  and the kernel proof's replay all run the blocks in the same order. The blocks still run one
  at a time: races between blocks are found by :mod:`book.simulator.hazard_recorder`, which needs no luck.
- **Each simulated thread knows its place**: ``_book_block`` (its block's linear index),
  ``_book_epoch`` (how many barriers it has passed: the loop counts them as it releases them)
  and what :mod:`book.simulator.hazard_recorder` keeps per thread; at each barrier the hazard recorder, when
  one is recording, is told which threads it releases (threads waiting at different
  ``syncthreads`` are a barrier not every thread reaches).
- **A block whose threads never meet runs them in turn** (:mod:`book.simulator.sequential`): where
  the kernel's code, and every function it reaches, has no barrier, warp exchange or while
  loop, the block's threads run one after another on this Python thread instead of a Python
  thread each (one schedule a GPU may choose), each still its ``BlockThread`` to
  ``threading.current_thread()``; ``BOOK_SIM_SEQUENTIAL=0`` keeps every block threaded.

:func:`apply` is called by :mod:`book.gpu` when it picks the simulator; like
:mod:`book.simulator.fidelity` it imports nothing of ``numba.cuda`` itself.
"""

from __future__ import annotations

import os
import time

from ..numba_compat import SIM_KERNEL_MODULE, replace_method, sim_block_thread_class, when_imported

#: the seed of the blocks' order (None: numba-cuda's index order); BOOK_SIM_BLOCK_ORDER sets it
_SEED = [None]
_ORDERS: dict = {}


def _seed_from_env():
    said = os.environ.get("BOOK_SIM_BLOCK_ORDER", "0").strip().lower()
    if said in ("index", "none", "off"):
        return None
    try:
        return int(said)
    except ValueError:
        raise ValueError(f"BOOK_SIM_BLOCK_ORDER={said!r}: an integer seed, or 'index' for "
                         "numba-cuda's order") from None


_SEED[0] = _seed_from_env()


def set_block_order(seed) -> None:
    """Run the simulator's blocks in the order drawn from ``seed`` (an int), or in numba-cuda's
    index order (None), from the next launch on."""
    _SEED[0] = None if seed is None else int(seed)


def block_order(grid_dim, seed=None):
    """The order the blocks of a grid run in: a list of linear block indices (C order, as
    ``np.ndindex`` counts them), drawn from ``seed`` (default: the current one) and the grid's
    shape, never the index order itself for a grid of two or more blocks; the index order
    where the seed is None."""
    import numpy as np

    seed = _SEED[0] if seed is None else seed
    dims = tuple(int(d) for d in grid_dim)
    n = int(np.prod(dims))
    if seed is None or n < 2:
        return list(range(n))
    key = (seed, dims)
    got = _ORDERS.get(key)
    if got is None:
        got = np.random.default_rng([int(seed) & 0xFFFFFFFF, *dims]).permutation(n)
        if (got == np.arange(n)).all():
            got = got[::-1]
        if len(_ORDERS) > 64:
            _ORDERS.clear()
        got = _ORDERS[key] = [int(k) for k in got]
    return got


def _run_as(grid_point, grid_dim):
    """The block to run when numba-cuda's loop asks for ``grid_point`` (its k-th, in index
    order): the k-th of :func:`block_order`, with its linear index."""
    import numpy as np

    dims = tuple(int(d) for d in grid_dim)
    k = int(np.ravel_multi_index(tuple(int(g) for g in grid_point), dims))
    if _SEED[0] is None:
        return tuple(int(g) for g in grid_point), k
    b = block_order(dims)[k]
    return tuple(int(g) for g in np.unravel_index(b, dims)), b


def run_block(self, grid_point, *args):
    """``BlockManager.run`` of numba-cuda 0.30.4, pausing (``time.sleep(0)``) between passes;
    the block run is the one the seeded order puts at ``grid_point``'s place, its threads
    know their block and count the barriers they pass (the module's docstring)."""
    import numpy as np

    from . import hazard_recorder, sequential

    grid_point, linear = _run_as(grid_point, self._grid_dim)
    block_thread = sim_block_thread_class()
    if sequential.qualifies(self, args):   # no barrier, no warp meeting: threads in turn
        sequential.run_block_in_turn(self, grid_point, linear, args, block_thread)
        return
    threads = set()
    livethreads = set()
    blockedthreads = set()
    for block_point in np.ndindex(*self._block_dim):

        def target():
            self._f(*args)

        t = block_thread(target, self, grid_point, block_point, self._debug)
        t._book_block, t._book_epoch, t._book_atomic, t._book_frame = linear, 0, 0, None
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
            if hazard_recorder.ACTIVE is not None:
                hazard_recorder.ACTIVE.on_barrier(blockedthreads)
            for t in blockedthreads:
                t._book_epoch += 1
                t.syncthreads_blocked = False
                t.syncthreads_event.set()
            blockedthreads = set()
        livethreads = set([t for t in livethreads if t.is_alive()])
        if livethreads:
            time.sleep(0)  # let the block's threads have the GIL
    # a last check for exceptions set before their thread finished
    for t in threads:
        if t.exception:
            raise t.exception[0].with_traceback(t.exception[1])


def patch(module) -> None:
    """Give the simulator's ``BlockManager`` the pausing loop (once)."""
    replace_method(module.BlockManager, "run", run_block)


def apply() -> None:
    """Patch the simulator now if its kernel module is loaded, else when it is first imported."""
    when_imported(SIM_KERNEL_MODULE, patch)
