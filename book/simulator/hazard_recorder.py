"""Hazards in simulated launches: what a kernel does wrong that its values may not show.

Numba's CUDA simulator runs the blocks of a grid one at a time (:mod:`book.simulator.scheduler` runs
them in a seeded order) and the threads of a block as Python threads: a race between blocks
never shows in the values, a race between warps shows or not as Python schedules its threads,
and a read past the end of an input reads its guard zone (:mod:`book.simulator.addressing`) and
nothing says so. Values alone gave the same kernel full marks on one run and none on the next
(issue 41). This module watches every access instead and finds, deterministically whatever
the threads' schedule:

- ``race_global``: a global word accessed by two blocks, at least one access a plain
  (non-atomic) write, with no happens-before between them: as the course teaches it, a
  ``cuda.threadfence()`` then an atomic releases a block's writes, a later atomic of another
  block on the same word acquires them (:mod:`book.simulator.happens_before` says it in full).
- ``race_shared``: a shared word written by one warp and read or written by another in the same
  barrier interval (no ``cuda.syncthreads()`` between; atomics on both sides excepted).
- ``barrier``: the threads of a block released from one barrier while waiting at different
  ``cuda.syncthreads()`` calls (a barrier inside a branch some threads skip).
- ``read_past``: a read outside the array it was made for: an index that lands in a guard zone
  (the grader's and ``check()``'s arrays are the middle of larger allocations,
  ``autograder/inputs.py``) or outside the allocation (which then raises as well).

This module records (the hooks, the events of each launch); :mod:`book.simulator.happens_before`
analyses a launch's events when it ends and says each finding in words.

What is watched: every array a simulated launch gets, addressed as on a GPU
(``addressing``'s arrays call :meth:`Recorder.on_global`), the shared arrays its blocks make
(a view of this module's ``_Shared`` class), ``cuda.atomic.*``, ``cuda.threadfence()`` (and
``threadfence_system``) and the barriers the scheduler releases. The course's simulated 16-byte
loads (``book/kernels/instructions/wide.py``, lab 6's ``load8``) are element reads there, and are watched as
such; the simulated ``cp.async`` of a 16-byte piece is a slice, watched element by element.

A finding is a dict of ``autograder/hazards.py``'s ``Hazard`` (kind, array, index, detail,
where, found_by "tracer", count), one per kind and array, its index the lowest flat index
found, its words free of anything the threads' schedule decides. Nothing is reported that
was not seen: where a launch's trace would be too large (:data:`MAX_EVENTS` accesses,
:data:`MAX_CHECKS` steps of its analysis) the rest of it is not looked at, and
:attr:`Recorder.notes` says so.

Use::

    with hazard_recorder.recording(bodies=[(x, "x"), (out, "out")]) as rec, addressing.installed():
        fn(x, out)           # every simulated launch inside is recorded and analysed
    rec.hazards()            # [{"kind": "race_global", "array": "count", ...}, ...]

The launch hooks (the grader's child, ``addressing.installed``) wrap each launch in
:func:`launch`. Nothing here imports ``numba.cuda`` until a recording starts.
"""

from __future__ import annotations

import contextlib
import linecache
import os
import re
import sys
import threading
from operator import index as _index

import numpy as np

from .happens_before import AR, GLOBAL, SHARED, A, F, R, W, analyse

__all__ = ["recording", "launch", "Recorder", "ACTIVE", "MAX_EVENTS", "MAX_CHECKS"]

#: the recorder collecting now (None: nothing is recorded; the hooks cost one test)
ACTIVE = None

#: accesses recorded per launch before the rest of it goes unwatched (about 100 bytes each)
MAX_EVENTS = 2_000_000
#: steps of a launch's race analysis (pairs of accesses compared, and what blocks know of each
#: other merged at each atomic) before the rest of it goes unchecked
MAX_CHECKS = 3_000_000

_current_thread = threading.current_thread


# ------------------------------------------------------------------------------ shared arrays
class _Shared(np.ndarray):
    """A block's shared array whose element accesses are recorded while a recorder is on
    (a view of the simulator's own array: NumPy sees an ndarray)."""

    def __array_finalize__(self, obj):
        self._book_ptr = self.__array_interface__["data"][0]
        self._book_dims = (self.shape, self.strides)
        self._book_name = getattr(obj, "_book_name", "shared memory")

    def __getitem__(self, idx):
        rec = ACTIVE
        if rec is not None:
            rec.on_shared(self, idx, False)
        return np.ndarray.__getitem__(self, idx)

    def __setitem__(self, idx, value):
        rec = ACTIVE
        if rec is not None:
            rec.on_shared(self, idx, True)
        np.ndarray.__setitem__(self, idx, value)


_SHARED_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*=\s*cuda\.shared\.array\b")


# ------------------------------------------------------------------------------ the recorder
class Recorder:
    """The hazards of every simulated launch made while it records (:func:`recording`)."""

    def __init__(self, bodies=(), max_events: int = MAX_EVENTS, max_checks: int = MAX_CHECKS):
        # the arrays a function was handed, by the bytes of their bodies: (lo, hi, name, itemsize)
        self.bodies = []
        for arr, name in bodies:
            self.register(arr, name)
        self.max_events, self.max_checks = max_events, max_checks
        self.notes: list[str] = []
        self.launches = 0
        self._found: dict = {}      # (kind, array) -> finding (a dict, with private keys)
        self._lock = threading.Lock()
        self._launch = None         # the launch being recorded

    # -- what the caller tells it
    def register(self, arr, name: str) -> None:
        """``arr`` (a device array or NumPy array) is named ``name``: a read outside its body
        is a read past it, and hazards on it carry its name and flat indices from its start."""
        from ..numba_compat import host_array

        a = host_array(arr)
        lo, hi = _byte_bounds(a)
        self.bodies.append((lo, hi, str(name), a.dtype.itemsize))

    def hazards(self) -> list[dict]:
        """Every finding so far, one per kind and array, in a fixed order."""
        order = {"race_global": 0, "race_shared": 1, "barrier": 2, "read_past": 3}
        out = []
        for (kind, array), f in sorted(self._found.items(),
                                       key=lambda kv: (order.get(kv[0][0], 9), kv[0][1])):
            count = 1 if kind == "barrier" else len(f["words"])   # barriers: said in detail
            index = None if f["index"] is None else int(f["index"])
            out.append({"kind": kind, "array": array, "index": index, "detail": f["detail"],
                        "where": f["where"], "found_by": "tracer", "count": count})
        return out

    # -- one launch
    def _begin(self, kernel, args):
        from ..numba_compat import host_array

        self.launches += 1
        fn = getattr(kernel, "fn", None) or getattr(kernel, "py_func", None)
        code = getattr(fn, "__code__", None)
        try:
            import inspect

            params = list(inspect.signature(fn).parameters)
        except (TypeError, ValueError):
            params = []
        named = []   # (lo, hi, name, origin byte, itemsize) of each array the launch gets
        for pos, a in enumerate(args):
            base = host_array(a)
            if not isinstance(base, np.ndarray) or base.ndim == 0:
                continue
            pname = params[pos] if pos < len(params) else f"argument {pos}"
            try:
                a._book_param = pname
            except AttributeError:
                pass
            lo, hi = _byte_bounds(base)
            named.append((lo, hi, pname, _ptr(base), base.dtype.itemsize))
        self._launch = {"code": code, "kid": id(code), "events": [], "named": named, "shared": {},
                        "capped": False, "past": {}, "barriers": [], "sites": {}, "site_list": []}

    def _end(self):
        L, self._launch = self._launch, None
        if L is None:
            return
        try:
            analyse(self, L)
        except Exception as e:  # the analysis must never fail the student's call
            self.notes.append(f"the hazard analysis of launch {self.launches} failed "
                              f"({type(e).__name__}: {e}); nothing of it is reported")

    def _cap(self, what):
        L = self._launch
        if not L["capped"]:
            L["capped"] = True
            self.notes.append(f"launch {self.launches}: {what}; its later accesses were not "
                              "checked for hazards (nothing is reported that was not seen)")

    # -- the hooks (the hot path: keep them short)
    def on_global(self, arr, off: int, write: bool) -> None:
        """An element access of a global array (``addressing``'s ``Addressed``), ``off``
        elements into its allocation; called before the access is made."""
        t = _current_thread()
        try:
            blk, atomic = t._book_block, t._book_atomic
        except AttributeError:   # host code, or a thread our scheduler did not start
            return
        L = self._launch
        if L is None:
            return
        if atomic:
            if write:
                return           # the atomic's own write-back: recorded with its read
            kind = atomic
        else:
            kind = W if write else R
        body = arr._book_body
        if body is None:
            body = self._body_of(arr)
        if not body[0] <= off < body[1] and kind != W:
            self._read_past(arr, body, off, t)
        if not 0 <= off < arr._flat.size or L["capped"]:
            return
        ev = L["events"]
        if len(ev) >= self.max_events:
            self._cap(f"more than {self.max_events:,} accesses")
            return
        f = sys._getframe(3)   # the kernel's frame, when the access is made in its body
        site = L["sites"].get((L["kid"], f.f_lasti, -1)) if f is t._book_frame else None
        ev.append((kind, arr._book_addr + off * arr._book_isz, blk, t.thread_id,
                   t._book_epoch, self._site(t, sys._getframe(2)) if site is None else site,
                   GLOBAL))

    def on_shared(self, arr, idx, write: bool) -> None:
        """An access of a block's shared array (``_Shared``) at NumPy index ``idx``."""
        t = _current_thread()
        try:
            blk, atomic = t._book_block, t._book_atomic
        except AttributeError:
            return
        L = self._launch
        if L is None or L["capped"]:
            return
        if atomic:
            if write:
                return
            kind = atomic
        else:
            kind = W if write else R
        ev = L["events"]
        if len(ev) >= self.max_events:
            self._cap(f"more than {self.max_events:,} accesses")
            return
        addr = _element_address(arr, idx)
        if addr is not None:
            f = sys._getframe(2)   # the caller of _Shared.__getitem__
            site = L["sites"].get((L["kid"], f.f_lasti, -1)) if f is t._book_frame else None
            ev.append((kind, addr, blk, t.thread_id, t._book_epoch,
                       self._site(t, f) if site is None else site, SHARED))
            return
        if not write:
            return   # a view made (its elements are recorded when accessed), or not an index
        addrs = _element_addresses(arr, idx)   # a slice stored to (the simulated cp.async)
        if addrs:
            site = self._site(t, sys._getframe(2))
            for a in addrs:
                ev.append((kind, a, blk, t.thread_id, t._book_epoch, site, SHARED))

    def shared_made(self, raw, name: str) -> None:
        """A block's shared array ``raw`` (the simulator's, for a line of the kernel) is named
        ``name`` in this launch's findings."""
        L = self._launch
        if L is not None and id(raw) not in L["shared"]:
            L["shared"][id(raw)] = (_byte_bounds(raw), name, raw.dtype.itemsize, raw)

    def on_fence(self) -> None:
        t = _current_thread()
        L = self._launch
        try:
            blk = t._book_block
        except AttributeError:
            return
        if L is None or L["capped"]:
            return
        L["events"].append((F, 0, blk, t.thread_id, t._book_epoch,
                            self._site(t, sys._getframe(1)), GLOBAL))

    def on_barrier(self, threads) -> None:
        """The scheduler releases ``threads`` (every live thread of a block) from a barrier:
        are they all waiting at the same call?"""
        L = self._launch
        if L is None or len(L["barriers"]) > 64:
            return
        frames = sys._current_frames()
        lines = {}
        for t in threads:
            fr = t._book_frame or self._frame_of(t, frames.get(t.ident), cache=False)
            line = fr.f_lineno if fr else 0
            lines.setdefault(line, []).append(t.thread_id)
        if len(lines) > 1:
            t0 = next(iter(threads))
            L["barriers"].append((t0._book_block, t0._book_epoch, {k: min(v) for k, v in lines.items()},
                                  {k: len(v) for k, v in lines.items()}))

    # -- helpers of the hooks
    def _site(self, t, f) -> int:
        """Where an access is made, as a small number (``L["site_list"]`` holds what it
        stands for: the innermost frame of the student's code, its line, and the line of the
        launched kernel that is running, when the access is made in a function it called)."""
        lib = _LIBRARY
        while f is not None:
            c = f.f_code
            x = lib.get(id(c))
            if x is None:   # (keyed by id: hashing a code object hashes its contents)
                x = lib[id(c)] = (c, _is_library(c.co_filename))
            if not x[1]:
                break
            f = f.f_back
        if f is not None and f.f_code.co_name.startswith("<") and f.f_back is not None:
            f = f.f_back   # a generator expression: said as the function it is in
        kf = t._book_frame
        if kf is None:
            kf = self._frame_of(t, f)
        elif kf is False:   # looked for once, not found: not looked for again
            kf = None
        # instruction offsets, not lines: a frame's f_lineno walks its code's line table (most
        # of the recorder's cost on a long kernel); the lines are read when a finding is said
        if f is None:
            code, key = None, (0, -1, kf.f_lasti if kf is not None else -1)
        else:
            code = f.f_code
            key = (id(code), f.f_lasti, kf.f_lasti if kf is not None and kf is not f else -1)
        L = self._launch
        site = L["sites"].get(key)
        if site is None:
            with self._lock:   # (a new site: numbered once, whichever thread gets there first)
                site = L["sites"].get(key)
                if site is None:
                    L["site_list"].append((code, key[1], key[2]))
                    site = L["sites"][key] = len(L["site_list"]) - 1
        return site

    def _frame_of(self, t, start=None, cache=True):
        """The frame of the launched kernel's function in thread ``t``, looked for from
        ``start`` outwards (kept on the thread: it is the same frame until the thread ends)."""
        code = self._launch["code"] if self._launch is not None else None
        f = start if start is not None else sys._getframe(2)
        for _ in range(60):
            if f is None:
                break
            if f.f_code is code:
                if cache:
                    t._book_frame = f
                return f
            f = f.f_back
        if cache:
            t._book_frame = False
        return None

    def _body_of(self, arr):
        """(lo, hi, name, origin) of an addressed array, in elements of its allocation: its
        body is the registered array it lies in (else the whole allocation), its name that
        array's (else the kernel's parameter's), flat indices counted from ``origin``."""
        isz = arr._flat.dtype.itemsize
        base = _ptr(arr._flat)
        arr._book_addr, arr._book_isz = base, isz
        start = base + arr._start * isz
        for lo, hi, name, _ in self.bodies:
            if lo <= start < hi:
                body = ((lo - base) // isz, -(-(hi - base) // isz), name, (lo - base) // isz)
                break
        else:
            name = arr.__dict__.get("_book_param") or "an array"
            body = (0, arr._flat.size, name, arr._start)
        arr._book_body = body
        return body

    def _read_past(self, arr, body, off, t):
        L = self._launch
        name, index = body[2], off - body[3]
        past = L["past"].setdefault(name, {})
        seen = (t._book_block, t.thread_id, self._site(t, sys._getframe(2)), body[1] - body[0])
        if index in past:   # the same word read by several threads: the first by block, thread
            if seen < past[index]:
                past[index] = seen
        elif len(past) < 100_000:
            past[index] = seen


_LIBRARY: dict = {}   # id(code object) -> (the code object, whether it is library code)


def _is_library(filename: str) -> bool:
    return (filename.startswith(_BOOK_DIR) or "numba" in filename or filename == __file__
            or filename.startswith(("<frozen", sys.prefix)))


_BOOK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # book/: not the student's


def _ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _byte_bounds(a: np.ndarray) -> tuple[int, int]:
    lo, hi = (getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds)(a)  # NumPy 2
    return int(lo), int(hi)


def _element_address(arr, idx):
    """The byte address of the element ``arr[idx]`` names (an integer per dimension, negative
    ones wrapped once), or None for anything else (the hot path of every shared access: one
    and two dimensions written out; NumPy integers made Python's, whose sums cannot wrap)."""
    shape, strides = arr._book_dims
    try:
        if type(idx) is tuple:
            if len(idx) != len(shape):
                return None
            if len(idx) == 2:
                i, j = idx
                if type(i) is not int:
                    i = _index(i)
                if type(j) is not int:
                    j = _index(j)
                if i < 0:
                    i += shape[0]
                if j < 0:
                    j += shape[1]
                return arr._book_ptr + i * strides[0] + j * strides[1]
            off = arr._book_ptr
            for i, n, st in zip(idx, shape, strides):
                i = _index(i)
                off += (i + n if i < 0 else i) * st
            return off
        if len(shape) != 1:
            return None
        if type(idx) is not int:
            idx = _index(idx)
        return arr._book_ptr + (idx + shape[0] if idx < 0 else idx) * strides[0]
    except TypeError:   # a slice, an array, None: not one element
        return None


def _element_addresses(arr, idx):
    """The byte addresses ``arr[idx]`` touches: one for an element, every element of a basic
    slice (capped at 4096), None for a partial index (a view) or anything else."""
    shape, strides, ptr = arr.shape, arr.strides, arr._book_ptr
    if type(idx) is not tuple:
        idx = (idx,)
    if len(idx) == len(shape):
        off = ptr
        try:
            for i, n, s in zip(idx, shape, strides):
                i = int(i) if not isinstance(i, (slice, np.ndarray, list)) else None
                if i is None:
                    break
                if i < 0:
                    i += n
                off += i * s
            else:
                return [off]
        except TypeError:
            return None
    try:
        view = np.ndarray.__getitem__(arr, idx)
    except Exception:
        return None
    if not isinstance(view, np.ndarray) or view.size > 4096:
        return None
    p0 = _ptr(view)
    offs = np.zeros(1, dtype=np.int64)
    for n, s in zip(view.shape, view.strides):
        offs = (offs[:, None] + np.arange(n, dtype=np.int64)[None, :] * s).reshape(-1)
    return [p0 + int(o) for o in offs]


# ------------------------------------------------------------------------------ switching on
class _Hooks:
    """The simulator's shared arrays, atomics and fences, watched while any recorder records
    (installed by the first, removed by the last)."""

    depth = 0
    undo: list = []

    @classmethod
    def install(cls):
        cls.depth += 1
        if cls.depth > 1:
            return
        from .. import numba_compat as nc

        undo = []
        shared = nc.sim_shared_class()
        original_array = shared.array
        made_views = {}

        def shared_array(self, shape, dtype, alignment=None):
            if alignment is not None:
                raise RuntimeError("Array alignment is not supported in cudasim")
            caller = sys._getframe(1)
            where = (caller.f_code.co_filename, caller.f_lineno)
            raw = nc.sim_shared_array(self, shape, dtype, where)
            key = (id(self), id(raw), where)
            got = made_views.get(key)
            if got is None or got.base is not raw:
                got = raw.view(_Shared)
                m = _SHARED_NAME.match(linecache.getline(*where))
                got._book_name = (f"shared array `{m.group(1)}`" if m else "shared memory")
                if len(made_views) > 4096:
                    made_views.clear()
                made_views[key] = got
            rec = ACTIVE
            if rec is not None:
                rec.shared_made(raw, got._book_name)
            return got

        shared.array = shared_array
        undo.append(lambda: setattr(shared, "array", original_array))

        atomic = nc.sim_atomic_class()
        for name in nc.SIM_ATOMICS:
            orig = getattr(atomic, name)
            setattr(atomic, name, _watched_atomic(orig, name))
            undo.append(lambda name=name, orig=orig: setattr(atomic, name, orig))

        module = nc.sim_cuda_module_class()
        for name in ("threadfence", "threadfence_system"):
            orig = getattr(module, name)

            def fence(self, _orig=orig):
                rec = ACTIVE
                if rec is not None:
                    rec.on_fence()
                return _orig(self)
            setattr(module, name, fence)
            undo.append(lambda name=name, orig=orig: setattr(module, name, orig))
        cls.undo = undo

    @classmethod
    def remove(cls):
        cls.depth -= 1
        if cls.depth > 0:
            return
        for fn in reversed(cls.undo):
            fn()
        cls.undo = []


def _watched_atomic(orig, name):
    reads_only = name in ("add", "sub")

    def atomic(self, array, *args):
        t = _current_thread()
        before = getattr(t, "_book_atomic", None)
        if before is None:
            return orig(self, array, *args)
        # an atomic that adds zero is a coherent read (lab 6's read_l2): it conflicts with
        # plain writes only
        zero = reads_only and len(args) == 2 and _is_zero(args[1])
        t._book_atomic = AR if zero else A
        try:
            return orig(self, array, *args)
        finally:
            t._book_atomic = before
    atomic.__name__ = name
    return atomic


def _is_zero(v) -> bool:
    try:
        return bool(v == 0)
    except Exception:
        return False


@contextlib.contextmanager
def recording(bodies=(), **limits):
    """Record every simulated launch made within the block and find its hazards; yields the
    :class:`Recorder` (``.hazards()``, ``.notes``). ``bodies``: (array, name) of the arrays
    the function was handed (a read outside one is a read past it; hazards on it are named
    so). In a GPU session nothing is recorded (a recorder that finds nothing)."""
    global ACTIVE
    from numba import config   # (book.gpu set it up: GPU or simulator is decided by now)

    if not config.ENABLE_CUDASIM:
        yield Recorder(**limits)
        return
    rec = Recorder(bodies, **limits)
    outer = ACTIVE
    _Hooks.install()
    ACTIVE = rec
    try:
        yield rec
    finally:
        ACTIVE = outer
        _Hooks.remove()


@contextlib.contextmanager
def launch(kernel, args):
    """One simulated launch of ``kernel`` with ``args`` (as the simulator will get them, after
    ``addressing.gpu_addressed``), recorded and analysed by the active recorder; nothing
    when none records."""
    rec = ACTIVE
    if rec is None:
        yield
        return
    rec._begin(kernel, args)
    try:
        yield
    finally:
        rec._end()
