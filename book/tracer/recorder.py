"""Recording: launch a kernel (or call a host function) in Numba's CUDA simulator with every
array wrapped in a recorder, and return the :class:`~book.tracer.model.Trace` of its accesses.

In a GPU session the same calls run in a simulator subprocess (:mod:`book.tracer.child`, whose
process, ``python -m book.tracer``, calls back into this module).
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from .. import gpu
from ..numba_compat import host_array, is_launch, patch_sim_call, sim_shared_class
from .child import importable_name, in_simulator_process, trace_in_subprocess
from .model import MAX_THREADS, Access, Trace, TracerError

__all__ = ["trace", "trace_call", "resolve"]

# The vector loads of book.kernels.instructions.wide are loops in the simulator: an access made inside that
# file is folded into the one 8- or 16-byte access of the kernel line that called it
_WIDE = Path(__file__).resolve().parents[1] / "kernels" / "instructions" / "wide.py"


@functools.lru_cache(maxsize=None)
def _is_wide(filename) -> bool:
    """Whether a code object's file is kernels/instructions/wide.py. Cached: resolving a path costs
    about 100 us, paid on every traced access (a lab-4 GEMM trace took 3x longer)."""
    return Path(filename).resolve() == _WIDE


_POSITIONS = {}


def _column(frame):
    """The source columns of the instruction running in ``frame``.

    Not ``f_lasti`` itself: Python 3.11+ specialises an instruction after a few runs and then
    reports an offset inside its inline cache, which would split one instruction in two.
    """
    code = frame.f_code
    pos = _POSITIONS.get(code)
    if pos is None and hasattr(code, "co_positions"):
        pos = _POSITIONS[code] = list(code.co_positions())
    if not pos:
        return frame.f_lasti
    line, _end, col, end_col = pos[min(frame.f_lasti // 2, len(pos) - 1)]
    return (col, end_col)


class _Recorder:
    def __init__(self, deadline: float, max_accesses: int):
        self.per_thread = defaultdict(list)     # (block, thread) -> [Access]
        self.counts = {}                         # thread key -> {where: n}
        self.last_wide = {}                      # thread key -> (wide frame, where, occ, idx)
        self.deadline = deadline
        self.max_accesses = max_accesses
        self.n = 0
        self.lock = threading.Lock()

    def record(self, arr, index, kind):
        t = threading.current_thread()
        if not hasattr(t, "blockIdx"):      # host code touching a traced array: not traffic
            return
        if time.monotonic() > self.deadline:
            raise TracerError("the traced launch ran past its time limit: trace fewer threads "
                              "or a smaller input (the simulator is slow)")
        block = (t.blockIdx.x, t.blockIdx.y, t.blockIdx.z)
        key = (block, t.thread_id)
        frame = sys._getframe(2)          # record <- _Traced.__getitem__ <- caller
        wide_frame = None
        if _is_wide(frame.f_code.co_filename):
            while frame is not None and _is_wide(frame.f_code.co_filename):
                wide_frame, frame = frame, frame.f_back
        where = (frame.f_code.co_filename, frame.f_lineno, _column(frame))
        flat_offset = arr._offset_of(index)
        counts = self.counts.setdefault(key, {})
        if wide_frame is not None:
            last = self.last_wide.get(key)
            if last is not None and last[0] is wide_frame and last[1] == (where, arr._name, kind):
                # another element of the same vector access: widen the recorded access
                acc = self.per_thread[key][-1]
                lo = min(acc.offset, flat_offset)
                hi = max(acc.offset + acc.nbytes, flat_offset + arr._itemsize)
                self.per_thread[key][-1] = Access(acc.block, acc.thread, acc.array, acc.space,
                                                  acc.kind, acc.index, lo, hi - lo, acc.where,
                                                  acc.occurrence)
                return
            self.last_wide[key] = (wide_frame, (where, arr._name, kind))
        occ = counts.get(where, 0)
        counts[where] = occ + 1
        self.per_thread[key].append(Access(block, t.thread_id, arr._name, arr._space, kind,
                                           index, flat_offset, arr._itemsize, where, occ))
        self.n += 1
        if self.n > self.max_accesses:
            raise TracerError(f"more than {self.max_accesses:,} accesses recorded: trace a "
                              "smaller input (a page shows a few warps, not a tensor)")


class _Traced:
    """An array stand-in that records each element access, then does it."""

    def __init__(self, ary, name, space, recorder, base_offset=0):
        self._ary, self._name, self._space = ary, name, space
        self._rec, self._base = recorder, base_offset
        self._itemsize = ary.dtype.itemsize

    # the attributes kernels read
    shape = property(lambda self: self._ary.shape)
    size = property(lambda self: self._ary.size)
    ndim = property(lambda self: self._ary.ndim)
    dtype = property(lambda self: self._ary.dtype)
    strides = property(lambda self: self._ary.strides)

    def __len__(self):
        return len(self._ary)

    @property
    def flat(self):
        """``a.flat[i]``: element ``i`` in C order (the GEMM's flat-offset loads use it)."""
        return _TracedFlat(self)

    def _norm(self, idx):
        return idx if isinstance(idx, tuple) else (idx,)

    def _offset_of(self, idx):
        idx = tuple(int(i) for i in self._norm(idx))
        idx = tuple(i + s if i < 0 else i for i, s in zip(idx, self._ary.shape))
        return self._base + sum(i * st for i, st in zip(idx, self._ary.strides))

    def _is_element(self, idx):
        idx = self._norm(idx)
        return len(idx) == self._ary.ndim and all(isinstance(i, (int, np.integer)) for i in idx)

    def __getitem__(self, idx):
        if self._is_element(idx):
            self._rec.record(self, self._norm(idx), "ld")
            return self._ary[idx]
        view = self._ary[idx]                  # a slice: keep recording against the same base
        off = view.__array_interface__["data"][0] - self._ary.__array_interface__["data"][0]
        return _Traced(view, self._name, self._space, self._rec, self._base + off)

    def __setitem__(self, idx, value):
        if not self._is_element(idx):
            raise TracerError(f"the tracer records element accesses; {self._name}[{idx!r}] = "
                              "... assigns a slice (write a loop, as a kernel does)")
        self._rec.record(self, self._norm(idx), "st")
        self._ary[idx] = value


class _TracedFlat:
    """``_Traced.flat``: a flat index becomes the element index it names, recorded as such.

    ``record`` is called from here directly (not through ``_Traced.__getitem__``) so that the
    frame it attributes the access to is still the kernel line that indexed ``.flat``.
    """

    def __init__(self, traced):
        self._t = traced

    def _index(self, i):
        if not isinstance(i, (int, np.integer)):
            raise TracerError(f"the tracer records element accesses; {self._t._name}.flat"
                              f"[{i!r}] is not one element (index .flat with an integer)")
        return tuple(int(k) for k in np.unravel_index(int(i), self._t._ary.shape))

    def __getitem__(self, i):
        idx = self._index(i)
        self._t._rec.record(self._t, idx, "ld")
        return self._t._ary[idx]

    def __setitem__(self, i, value):
        idx = self._index(i)
        self._t._rec.record(self._t, idx, "st")
        self._t._ary[idx] = value


def _source_lines(accesses) -> dict:
    import linecache

    return {(a.where[0], a.where[1]): linecache.getline(a.where[0], a.where[1])
            for a in accesses}


def _as_tuple(d):
    if isinstance(d, int):
        return (d,)
    return tuple(int(x) for x in d)


@contextmanager
def _explained(what="this kernel"):
    """Turn the simulator's own failures into a TracerError that says what the tracer needs."""
    try:
        yield
    except TracerError:
        raise
    except Exception as exc:  # the simulator's own failure, explained
        raise TracerError(f"the simulator could not run {what} ({type(exc).__name__}: "
                          f"{exc}); the tracer needs code the CUDA simulator supports "
                          "(no warp intrinsics, no libdevice-only functions)") from exc


@contextmanager
def _shared_recorded(rec, arrays):
    """While active, every ``cuda.shared.array`` a simulated kernel makes is recorded too."""
    shared = sim_shared_class()
    original = shared.array
    made = {}

    def shared_array(self, shape, dtype, alignment=None):
        # The simulator keys a shared array by the line that makes it (one per line): so do we.
        caller = sys._getframe(1)
        k = (id(self), caller.f_code.co_filename, caller.f_lineno)
        with rec.lock:
            got = made.get(k)
            if got is None:
                if shape == 0:            # dynamic shared memory: the simulator's one buffer
                    ary = original(self, shape, dtype, alignment)
                else:
                    from numba.core import types
                    from numba.np import numpy_support

                    dt = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) \
                        else np.dtype(dtype)
                    ary = np.zeros(shape, dt)
                name = f"shared@{caller.f_lineno}"
                arrays[name] = (ary.shape, ary.dtype, "shared")
                got = made[k] = _Traced(ary, name, "shared", rec)
        return got

    shared.array = shared_array
    try:
        yield
    finally:
        shared.array = original


def trace(kernel, grid, block, *args, names=None, shared_bytes: int = 0,
          max_threads: int = MAX_THREADS, timeout_s: float = 60.0,
          max_accesses: int = 400_000) -> Trace:
    """Launch ``kernel[grid, block](*args)`` in the simulator and record its memory accesses.

    ``args`` are NumPy arrays (and scalars); their results are written back as a launch would.
    ``names`` names the array arguments in the order given (default: the kernel's parameter
    names). Raises :class:`TracerError` with the reason and the limit when the launch is too
    large for a page (``max_threads``), runs past ``timeout_s``, or uses something the
    simulator cannot run.
    """
    grid, block = _as_tuple(grid), _as_tuple(block)
    nthreads = int(np.prod(grid)) * int(np.prod(block))
    if nthreads > max_threads:
        raise TracerError(f"this launch has {nthreads:,} threads ({grid} blocks of {block}); "
                          f"the tracer runs at most {max_threads:,} on a page: shrink the input "
                          "or the grid (a few warps show the pattern)")
    py = getattr(kernel, "py_func", None)
    if py is None:
        raise TracerError(f"{kernel!r} is not a Numba CUDA kernel (made with @cuda.jit)")
    if not gpu.SIMULATED:
        return trace_in_subprocess(kernel, grid, block, args, names, shared_bytes,
                                   max_threads, timeout_s, max_accesses)

    import inspect

    params = list(inspect.signature(py).parameters)
    rec = _Recorder(time.monotonic() + timeout_s, max_accesses)
    wrapped, arrays, j = [], {}, 0
    for pos, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.ndim > 0:
            name = (names[j] if names and j < len(names)
                    else params[pos] if pos < len(params) else f"arg{pos}")
            j += 1
            arrays[name] = (a.shape, a.dtype, "global")
            wrapped.append(_Traced(a, name, "global", rec))
        else:
            wrapped.append(a)

    with _shared_recorded(rec, arrays), _explained():
        launch = kernel[grid, block, 0, shared_bytes] if shared_bytes else kernel[grid, block]
        launch(*wrapped)
    accesses = [a for per in rec.per_thread.values() for a in per]
    return Trace(accesses, arrays, grid, block, _source_lines(accesses))


def trace_call(fn, *args, names=None, max_threads: int = MAX_THREADS,
               timeout_s: float = 60.0, max_accesses: int = 400_000, **kwargs) -> Trace:
    """Call a host function (a lab's ``swiglu_interleaved(x, out)``, say) and trace every
    kernel it launches, in the simulator.

    ``fn`` may be given as ``"package.module:function"``: then a GPU session traces it too,
    in a simulator process. Given so, its NumPy array arguments are handed to it as (simulated)
    device arrays and the results copied back into them, in either kind of session.

    Arrays are named by the argument of ``fn`` they are (``names``, default ``fn``'s
    parameter names), else by the kernel's parameter; a launch over ``max_threads`` threads
    in all is refused with the limit named. Returns ``fn``'s accesses as one :class:`Trace`
    (grid and block of its first launch).
    """
    if not gpu.SIMULATED:
        name = fn if isinstance(fn, str) else (
            ":".join(importable_name(fn)) if importable_name(fn) else None)
        if name is None:
            raise TracerError("tracing a host function runs its kernels in Numba's simulator, "
                              "and this session runs on a GPU: name an importable function "
                              "('package.module:function'), or run the notebook with "
                              "BOOK_SIMULATOR=1 (set before `import book`)")
        job = {"what": "call", "fn": name, "names": names, "max_threads": max_threads,
               "timeout_s": timeout_s, "max_accesses": max_accesses, "kwargs": kwargs}
        return in_simulator_process(job, tuple(args), timeout_s)
    if isinstance(fn, str):  # a named function takes device arrays: give it the simulator's
        from numba import cuda

        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) and a.ndim else a for a in args]
        t = trace_call(resolve(fn), *dev, names=names, max_threads=max_threads,
                       timeout_s=timeout_s, max_accesses=max_accesses, **kwargs)
        for a, d in zip(args, dev):
            if d is not a:
                a[...] = d.copy_to_host()
        return t
    import inspect

    params = list(inspect.signature(fn).parameters)
    by_memory = []                      # (ndarray, name) of fn's own array arguments
    for pos, a in enumerate(args):
        base = host_array(a)
        if isinstance(base, np.ndarray) and base.ndim > 0:
            nm = names[pos] if names and pos < len(names) else (
                params[pos] if pos < len(params) else f"arg{pos}")
            by_memory.append((base, nm))
    rec = _Recorder(time.monotonic() + timeout_s, max_accesses)
    arrays, launches, budget = {}, [], [max_threads]
    def traced(original_call):
        def call(self, *kargs):
            return traced_call(original_call, self, *kargs)
        return call

    def traced_call(original_call, self, *kargs):
        if not is_launch(self):
            return original_call(self, *kargs)
        grid, block = tuple(self.grid_dim), tuple(self.block_dim)
        threads = int(np.prod(grid)) * int(np.prod(block))
        budget[0] -= threads
        if budget[0] < 0:
            raise TracerError(f"the traced call launched more than {max_threads:,} threads "
                              f"(this launch: {grid} blocks of {block}): trace it on a smaller "
                              "input")
        launches.append((grid, block))
        kparams = list(inspect.signature(self.py_func).parameters)
        wrapped = []
        for pos, a in enumerate(kargs):
            base = host_array(a)
            if isinstance(base, np.ndarray) and base.ndim > 0:
                nm = next((n for b, n in by_memory if np.shares_memory(b, base)), None) or (
                    kparams[pos] if pos < len(kparams) else f"arg{pos}")
                root = next((b for b, n in by_memory if n == nm), base)
                off = base.__array_interface__["data"][0] - \
                    root.__array_interface__["data"][0] if root is not base else 0
                arrays.setdefault(nm, (root.shape, root.dtype, "global"))
                wrapped.append(_Traced(base, nm, "global", rec, off))
            else:
                wrapped.append(a)
        return original_call(self, *wrapped)

    undo = patch_sim_call(traced)
    try:
        with _shared_recorded(rec, arrays), _explained(f"{getattr(fn, '__name__', fn)}()"):
            fn(*args, **kwargs)
    finally:
        undo()
    if not launches:
        raise TracerError(f"{getattr(fn, '__name__', fn)!r} launched no kernel: there is no "
                          "memory traffic to show (is the work done on the host?)")
    accesses = [a for per in rec.per_thread.values() for a in per]
    return Trace(accesses, arrays, launches[0][0], launches[0][1], _source_lines(accesses))


def resolve(fn):
    """A host function, or "module:function" naming one."""
    if isinstance(fn, str):
        import importlib

        mod, _, attr = fn.partition(":")
        try:
            return getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise TracerError(f"cannot import {fn!r} ({exc}); name a function as "
                              "'package.module:function'") from exc
    return fn
