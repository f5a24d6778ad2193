"""A simulated kernel's arrays, addressed as a GPU addresses them.

In Numba's CUDA simulator a kernel's array is a NumPy array and is indexed as NumPy indexes:
each index is checked against its own dimension, so ``out[i, F]`` raises IndexError. On a
GPU the same index is an address, ``base + i * stride0 + F * stride1``: the element after the
row (the next row's first), and after the last row whatever memory follows the array. A
kernel that is wrong by one element therefore fails differently in the two places: the
simulator raises, the GPU writes somewhere.

:func:`gpu_addressed` gives a simulated kernel arrays that index as a GPU does within the
allocation each belongs to (the root of its chain of views): an index past a dimension reads
or writes the element at that address, and only an address outside the allocation raises
IndexError (on a GPU: an illegal address, or another array's memory). The autograder hands
every array inside a larger allocation with guard zones (``autograder/inputs.py``), so a
store past the end of ``out`` lands in a guard zone in the simulator as on a GPU, and is
reported in the same words by both. :func:`installed` puts it in front of every launch for
the length of a ``with`` block (``check()`` in a student's notebook); the grader's sandboxed
driver applies :func:`gpu_addressed` itself, in its own launch hook.

Negative indices wrap once, as Numba's compiled indexing does (``a[-1]`` is the last
element). Slices and anything that is not one integer per dimension keep NumPy's meaning,
but for the one slice the simulated tensor-core instructions take (``a[i:i + 8]`` of a flat
array), which is addressed too.

While :mod:`book.simulator.hazard_recorder` records (the grader's calls, ``check()``), every element these
arrays give or take is told to it before it is made (``Recorder.on_global``: the race analysis
between blocks, and a read that lands outside the array it was made for, in a guard zone or
past the allocation, recorded with the array's name and flat index); :func:`installed` wraps
each launch in ``hazard_recorder.launch``.
"""

from __future__ import annotations

import contextlib
from operator import index as _index

import numpy as np

from . import hazard_recorder as _hz

__all__ = ["gpu_addressed", "installed"]


def _root(a: np.ndarray) -> np.ndarray:
    while isinstance(a.base, np.ndarray):
        a = a.base
    return a


def _ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def _flat_over_root(a: np.ndarray):
    """(the root allocation's memory as a flat array of ``a``'s dtype, the element of it where
    ``a`` starts, ``a``'s strides in elements), or None where ``a`` cannot be addressed so
    (its root is not one contiguous block, or it is not aligned to its own element size)."""
    if a.ndim == 0 or a.dtype.fields is not None or a.dtype.hasobject:
        return None
    root = _root(a)
    if not root.flags.c_contiguous and not root.flags.f_contiguous:
        return None
    size = a.dtype.itemsize
    if any(s % size for s in a.strides):
        return None
    raw = root.reshape(-1, order="A").view(np.uint8)
    offset = _ptr(a) - _ptr(root)
    shift = offset % size
    usable = (raw.size - shift) // size * size
    flat = raw[shift:shift + usable].view(a.dtype)
    return flat, (offset - shift) // size, tuple(s // size for s in a.strides)


def gpu_addressed(args):
    """``args`` of a launch, each device array (a simulator ``FakeCUDAArray``) replaced by one
    that indexes as the GPU would; everything else as it was."""
    from ..numba_compat import host_array, sim_array_class

    out = []
    for a in args:
        if type(a) is sim_array_class() and isinstance(host_array(a), np.ndarray):
            made = _Addressed.of(host_array(a), a.stream)
            out.append(a if made is None else made)
        else:
            out.append(a)
    return out


def _addressed_class():
    from ..numba_compat import host_array, sim_array_class

    FakeCUDAArray = sim_array_class()

    class Addressed(FakeCUDAArray):
        """A simulated device array whose integer indexing computes an address in its
        allocation, as compiled code on a GPU does."""

        @classmethod
        def of(cls, ary, stream=0):
            found = _flat_over_root(ary)
            if found is None:
                return None
            made = cls(ary, stream)
            made._flat, made._start, made._steps = found
            made._dims = ary.shape
            made._book_body = None   # hazard_recorder: the array's body, found at first record
            return made

        def _offset(self, idx):
            if type(idx) is not tuple:
                idx = (idx,)
            if len(idx) != len(self._dims):
                return None
            off = self._start
            try:
                for i, n, s in zip(idx, self._dims, self._steps):
                    i = _index(i)
                    if i < 0:
                        i += n
                    off += i * s
            except TypeError:   # a slice, an array, None: NumPy's meaning
                return None
            return off

        def _outside(self, idx, off):
            n = self._flat.size
            where = (f"{off - n + 1:,} element(s) past the end" if off >= n
                     else f"{-off:,} element(s) before the start")
            return IndexError(f"index {idx} is out of bounds of the memory this array belongs "
                              f"to: its address lies {where} of that allocation (on a GPU: "
                              "an illegal address, or another array's memory)")

        def _slice(self, idx):
            """``a[i:j]`` of a flat array (the simulated cp.async's 16-byte piece): addressed."""
            if (len(self._dims) != 1 or type(idx) is not slice or idx.step not in (None, 1)
                    or idx.start is None or idx.stop is None):
                return None
            try:
                lo, hi = _index(idx.start), _index(idx.stop)
            except TypeError:
                return None
            if lo < 0 or hi < lo:
                return None
            first = self._start + lo * self._steps[0]
            last = self._start + (hi - 1) * self._steps[0]
            return first, last, hi - lo

        def _slice_view(self, idx, write):
            found = self._slice(idx)
            if found is None:
                return None
            first, last, count = found
            rec = _hz.ACTIVE
            for k in range(count if rec is not None else 0):   # each element, as it is read
                rec.on_global(self, first + k * self._steps[0], write)
            if count > 0 and not (0 <= first < self._flat.size and 0 <= last < self._flat.size):
                raise self._outside(idx, first if not 0 <= first < self._flat.size else last)
            view = self._flat[first:first + count * self._steps[0]:self._steps[0]]
            return Addressed.of(view, self.stream) or FakeCUDAArray(view, self.stream)

        def __getitem__(self, idx):
            off = self._offset(idx)
            if off is None:
                part = self._slice_view(idx, False)
                return part if part is not None else super().__getitem__(idx)
            rec = _hz.ACTIVE
            if rec is not None:
                rec.on_global(self, off, False)
            if 0 <= off < self._flat.size:
                return self._flat[off]
            raise self._outside(idx, off)

        def __setitem__(self, idx, val):
            off = self._offset(idx)
            if off is None:
                part = self._slice_view(idx, True)
                if part is not None:
                    host_array(part)[...] = val
                    return None
                return super().__setitem__(idx, val)
            rec = _hz.ACTIVE
            if rec is not None:
                rec.on_global(self, off, True)
            if 0 <= off < self._flat.size:
                self._flat[off] = val
                return None
            raise self._outside(idx, off)

    return Addressed


class _Lazy:
    """The class is made on first use: importing this module must not import numba.cuda
    (``import book`` decides GPU or simulator first)."""

    cls = None

    def of(self, ary, stream=0):
        if _Lazy.cls is None:
            _Lazy.cls = _addressed_class()
        return _Lazy.cls.of(ary, stream)


_Addressed = _Lazy()


@contextlib.contextmanager
def installed():
    """Within the block, every kernel launched in the simulator gets its device arrays
    addressed as on a GPU (:func:`gpu_addressed`); nothing changes on a GPU."""
    from .. import gpu

    if not gpu.SIMULATED:
        yield
        return
    from ..numba_compat import is_launch, patch_sim_call

    def wrap(orig):
        def call(self, *args):
            if not is_launch(self):
                return orig(self, *args)
            args = gpu_addressed(args)
            with _hz.launch(self, args):
                return orig(self, *args)
        return call

    undo = patch_sim_call(wrap)
    try:
        yield
    finally:
        undo()
