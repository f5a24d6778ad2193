"""A block whose threads never meet runs them one after another, in one Python thread.

Numba's CUDA simulator starts a Python thread for every simulated CUDA thread and lets them run
together, so that ``cuda.syncthreads()`` can hold each until all arrive. A kernel that never
calls a block- or warp-collective operation (no barrier, no shuffle, vote or warp exchange)
and never waits for another thread needs none of that: running each thread of the block to
completion in turn is one of the schedules a GPU may choose. That is what this module does
for such kernels, on the thread that launched the kernel; thread creation, the GIL passed
between a thousand threads and the block loop's polling, most of a small kernel's simulated
cost, are gone.

Which kernels qualify (:func:`qualifies`), read from the code, never from a run:

- the kernel's Python function, every function it reaches (device functions, the course's
  simulated intrinsics such as ``book.kernels.instructions.wide.load_f32``, closures of kernel factories,
  nested code) and every global or closure value they name is looked at;
- a name among :data:`MEETS` (``syncthreads*``, ``syncwarp``, ``shfl_*``, votes,
  ``activemask``, cooperative groups' ``cg``/``this_grid``/``sync``, the course's
  ``sim_thread`` through which simulated warps meet, ``threading``'s ``Barrier``/``wait``,
  ``current_thread``) anywhere in that code sends the kernel to the threaded path;
- so does a ``while`` loop (a backward jump that is not a ``for``'s): a thread spinning on a
  word another thread of its block writes would spin for ever in a sequential schedule (a
  GPU lets the other thread run); so do ``eval``/``exec``/``getattr``/``globals`` and the like
  (code that names what it calls at run time), a debug kernel (its threads change NumPy's
  error state), a launch argument that is a function, and any value whose kind is not
  known to be inert (:func:`_inert`): anything not understood keeps the threaded path.

The verdict is kept per function with every (namespace, name, value) it read, and re-read
when one of them changed (a notebook that redefines a device function). Turn the whole thing
off with ``BOOK_SIM_SEQUENTIAL=0`` (:func:`set_enabled`).

How a thread still knows who it is: each simulated thread is still numba-cuda's
``BlockThread`` object (``threadIdx``, ``blockIdx``, ``thread_id``, the course's
``_book_block``/``_book_epoch``/``_book_atomic``/``_book_frame``), never started; while it
runs, ``threading.current_thread()`` on the launching thread returns it (CPython's
``threading._active`` entry for this thread is pointed at it, then restored), so the
simulator's ``cuda.threadIdx``, :mod:`book.simulator.hazard_recorder`' recorder, :mod:`book.simulator.addressing`
and the access tracer see the simulated thread as before. Each runs in a fresh
``contextvars.Context``, as a new thread starts (NumPy's error state is a context variable).
An exception is numba-cuda's (``BlockThread.run`` words it: ``tid=[...] ctaid=[...]: ...``)
and ends the block: the threads after it never run (on the threaded path they run on,
unjoined, while the launch raises).

What it buys is measured in records/simulator/simsequential_cpu.json (each call in a fresh
process both ways, the same output bytes; records/simulator/README.md names the retired probe that
made it and reads the ratios): most for the elementwise kernels of chapters 4 and 5 and lab 2's
hidden cases. Under load the threaded path's wall time grows further, since each of its
simulated threads waits for the OS to run it. Kernels with barriers (labs 4-6, the GEMMs,
the norms' block sums) are unchanged. The grader's child reads ``BOOK_SIM_SEQUENTIAL`` from
the environment the sandbox gives it (the default).
"""

from __future__ import annotations

import contextvars
import dis
import os
import threading
import types

#: names whose use in a kernel's code means its threads meet (or may): the threaded path
MEETS = frozenset({
    "syncthreads", "syncthreads_count", "syncthreads_and", "syncthreads_or", "syncwarp",
    "shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync", "shfl_xor",
    "all_sync", "any_sync", "eq_sync", "ballot_sync", "match_any_sync", "match_all_sync",
    "activemask", "lanemask_lt", "cg", "this_grid", "this_thread_block", "sync",
    "sim_thread", "current_thread", "Barrier", "Condition", "Event", "Semaphore", "wait",
    "_exchange", "_warp",
})

#: names that reach code or values at run time (what a scan cannot follow)
DYNAMIC = frozenset({"eval", "exec", "getattr", "setattr", "globals", "locals", "vars",
                     "__import__", "compile", "__dict__", "__globals__", "__code__",
                     "__closure__", "import_module"})

#: modules whose attributes a kernel may use freely (no code of theirs makes threads meet)
_SAFE_MODULES = ("math", "cmath", "operator", "numpy", "numba", "_operator", "builtins")

_ENABLED = [os.environ.get("BOOK_SIM_SEQUENTIAL", "1").strip().lower() not in
            ("0", "off", "no", "false")]
_VERDICTS: dict = {}   # id(function) -> (function, verdict, reason, [(namespace, name, value)])


def set_enabled(on: bool) -> None:
    """Run qualifying blocks sequentially (True, the default) or always threaded (False)."""
    _ENABLED[0] = bool(on)


def enabled() -> bool:
    return _ENABLED[0]


# ------------------------------------------------------------------------------ the scan
def _inert(v) -> bool:
    """Values a kernel may name that run no code of their own that could make threads meet."""
    import numpy as np

    if v is None or isinstance(v, (bool, int, float, complex, str, bytes, np.generic,
                                   np.dtype, np.ndarray, np.ufunc, range, slice)):
        return True
    if isinstance(v, (tuple, frozenset)):
        return all(_inert(x) for x in v)
    if isinstance(v, types.BuiltinFunctionType):
        return getattr(v, "__name__", "") not in DYNAMIC
    if isinstance(v, type):
        return v.__module__ in ("builtins", "numpy") or issubclass(v, np.generic)
    mod = type(v).__module__ or ""
    if mod.startswith(("numba.core.types", "numba.cuda.types", "numba.core.typing")):
        return True   # a Numba type (float32, int32, ...): a cast in the simulator
    if mod.startswith("numba.np") or mod.startswith("numpy"):
        return True   # NumPy's own callables (np.float32 and the like)
    return False


class _Scan:
    def __init__(self):
        self.seen = set()
        self.reads = []        # (namespace dict or cell, name, value) the verdict rests on
        self.why = None

    def no(self, why):
        if self.why is None:
            self.why = why
        return False

    def function(self, fn) -> bool:
        if id(fn) in self.seen:
            return True
        self.seen.add(id(fn))
        code = getattr(fn, "__code__", None)
        if code is None:
            return self.no(f"{fn!r} has no Python code")
        g = getattr(fn, "__globals__", {})
        cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
        return self.code(code, g, cells)

    def code(self, code, g, cells) -> bool:
        names = set(code.co_names)
        bad = names & MEETS
        if bad:
            return self.no(f"{code.co_name} uses {sorted(bad)[0]}")
        bad = names & DYNAMIC
        if bad:
            return self.no(f"{code.co_name} uses {sorted(bad)[0]}")
        jumps = set(dis.hasjrel) | set(dis.hasjabs)
        instructions = list(dis.get_instructions(code))   # disassembled once a code object
        for ins in instructions:
            if ins.opname == "IMPORT_NAME":
                return self.no(f"{code.co_name} imports {ins.argval} as it runs")
            if ins.opcode in jumps and isinstance(ins.argval, int) and ins.argval < ins.offset:
                # a backward jump: a for loop's returns to its FOR_ITER; any other is a while
                if ins.opname != "JUMP_BACKWARD_NO_INTERRUPT":
                    target = _at(instructions, ins.argval)
                    if target is None or target.opname != "FOR_ITER":
                        return self.no(f"{code.co_name} has a while loop (a thread may wait "
                                       "for another)")
            elif ins.opname == "LOAD_GLOBAL":
                name = ins.argval
                if name in g:
                    if not self.value(g[name], g, name, names):
                        return False
                else:
                    b = g.get("__builtins__", __builtins__)
                    b = b if isinstance(b, dict) else vars(b)
                    if name not in b:
                        return self.no(f"{code.co_name} names {name}, which is not defined")
                    if not self.value(b[name], b, name, names):
                        return False
            elif ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in cells:
                try:
                    v = cells[ins.argval].cell_contents
                except ValueError:
                    continue   # not yet bound: a local of this code (a nested function's)
                if not self.value(v, cells[ins.argval], ins.argval, names):
                    return False
        for c in code.co_consts:
            if isinstance(c, types.CodeType) and not self.code(c, g, cells):
                return False
        return True

    def value(self, v, where, name, names) -> bool:
        from ..numba_compat import sim_cuda_module_class, sim_kernel_class

        if isinstance(v, sim_cuda_module_class()) or (
                isinstance(v, types.ModuleType) and v.__name__.startswith("numba.cuda")):
            # the simulated cuda module (a new one each launch): its collectives are MEETS names
            self.reads.append((where, name, _CUDA))
            return True
        self.reads.append((where, name, v))
        if id(v) in self.seen or _inert(v):
            return True

        if isinstance(v, sim_kernel_class()):
            return self.function(v.fn)
        if isinstance(v, (types.FunctionType, types.MethodType)):
            f = getattr(v, "__func__", v)
            if (getattr(f, "__module__", None) or "").split(".")[0] in ("numpy", "math"):
                return True   # NumPy's own Python functions (np.clip and the like)
            return self.function(f)
        if isinstance(v, types.ModuleType):
            top = v.__name__.split(".")[0]
            if top in _SAFE_MODULES:
                return True   # numba.cuda's collectives are MEETS names
            if top == "threading":
                return self.no(f"names the module {v.__name__}")
            # another module (the course's own): every attribute the code could read of it
            for attr in names:
                if attr in vars(v) and (id(v), attr) not in self.seen:
                    self.seen.add((id(v), attr))
                    if not self.value(vars(v)[attr], vars(v), attr, names):
                        return False
            return True
        return self.no(f"names {name} ({type(v).__name__}), which it cannot look into")


def _at(instructions, offset):
    """The instruction a jump to ``offset`` lands on (past an EXTENDED_ARG prefix), among a
    code object's ``instructions``."""
    for ins in instructions:
        if ins.offset >= offset and ins.opname != "EXTENDED_ARG":
            return ins
    return None


def _still(reads) -> bool:
    """Does every name the verdict read still hold the value it read?"""
    from ..numba_compat import sim_cuda_module_class

    fake = sim_cuda_module_class()
    for where, name, v in reads:
        try:
            now = where.get(name, _MISSING) if isinstance(where, dict) else where.cell_contents
        except ValueError:
            return False
        if now is not v and not (v is _CUDA and (isinstance(now, fake) or (
                isinstance(now, types.ModuleType) and now.__name__.startswith("numba.cuda")))):
            return False
    return True


_MISSING = object()
_CUDA = object()   # (read: a simulated cuda module, whichever launch's)


def verdict(fn) -> tuple[bool, str]:
    """(whether the kernel function ``fn``'s blocks may run their threads in turn, why not)."""
    got = _VERDICTS.get(id(fn))
    if got is not None and got[0] is fn and _still(got[3]):
        return got[1], got[2]
    scan = _Scan()
    try:
        ok = scan.function(fn)
    except Exception as e:   # anything the scan does not understand: the threaded path
        ok = scan.no(f"the scan failed ({type(e).__name__}: {e})")
    if len(_VERDICTS) > 512:
        _VERDICTS.clear()
    _VERDICTS[id(fn)] = (fn, ok, scan.why or "", scan.reads)
    return ok, scan.why or ""


def qualifies(manager, args) -> bool:
    """Run this block (numba-cuda's ``BlockManager``, launched with ``args``) in turn?"""
    if not _ENABLED[0] or not _SWAP_WORKS[0] or manager._debug:
        return False
    for a in args:
        if callable(a) and not hasattr(a, "__array_interface__") and not _is_array(a):
            return False   # a function handed to the kernel: not scanned
    return verdict(manager._f)[0]


def _is_array(a) -> bool:
    from ..numba_compat import sim_array_class

    return isinstance(a, sim_array_class())


# ------------------------------------------------------------------------------ the run
_active = threading._active          # CPython: ident -> Thread, what current_thread() reads
_SWAP_WORKS = [False]


def _restore(me, saved) -> None:
    """Put this thread's ``threading._active`` entry back as it was (``saved``: None, none)."""
    if saved is None:
        _active.pop(me, None)
    else:
        _active[me] = saved


def _check_swap() -> bool:
    """Does pointing this thread's ``threading._active`` entry at another Thread object make
    ``threading.current_thread()`` return it (CPython's threading, 3.8-3.13)?"""
    me = threading.get_ident()
    saved = _active.get(me)
    probe = threading.Thread(target=None)
    try:
        _active[me] = probe
        return threading.current_thread() is probe
    except Exception:
        return False
    finally:
        _restore(me, saved)


_SWAP_WORKS[0] = _check_swap()


def _no_barrier(*_a):
    raise RuntimeError("internal error: a block run sequentially (book/simulator/sequential.py) "
                       "reached a barrier; run it with BOOK_SIM_SEQUENTIAL=0 and report it")


def run_block_in_turn(manager, grid_point, linear, args, block_thread) -> None:
    """Run every thread of the block, one after another, on this Python thread, each as the
    ``BlockThread`` it would have been (see the module's docstring)."""
    import numpy as np

    me = threading.get_ident()
    saved = _active.get(me)
    try:
        for block_point in np.ndindex(*manager._block_dim):

            def target():
                manager._f(*args)

            t = block_thread(target, manager, grid_point, block_point, manager._debug)
            t._book_block, t._book_epoch, t._book_atomic, t._book_frame = linear, 0, 0, None
            t.syncthreads = t.syncthreads_count = t.syncthreads_and = t.syncthreads_or = _no_barrier
            _active[me] = t
            try:
                contextvars.Context().run(t.run)   # BlockThread.run: keeps its exception
            finally:
                _restore(me, saved)   # (the next BlockThread is made as this thread's own)
            if t.exception:
                raise t.exception[0].with_traceback(t.exception[1])
    finally:
        _restore(me, saved)
