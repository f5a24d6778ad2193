"""Where Numba's CUDA simulator would compute something a GPU does not, make it do what the GPU does.

The simulator is what CI, a laptop and Gradescope grade with, so a difference between it and a
GPU is a grade that changes with the machine. Two are known and fixed here:

- ``DeviceNDArray.T`` / ``.transpose()``: on a GPU numba-cuda launches a transpose kernel and
  returns a *new* array (a copy); the simulator's ``FakeCUDAArray`` returns a NumPy view of the
  same memory. A kernel that writes through ``tmp.T`` therefore fills ``tmp`` in the simulator and
  a throwaway copy on a GPU: full marks in the simulator, a wrong answer on the H100 (seen in
  issue 18's hostile run). Here the simulator copies too, with the GPU's own errors for arrays
  that are not 2-D.
- ``cuda.shared.array``: on a GPU every thread of a block sees the one array. The simulator's
  ``FakeCUDAShared.array`` runs in each thread (a Python thread) and makes the array the first
  time a line asks: it looks the line up, and on a miss makes an ``np.empty`` array and stores
  it. A thread preempted between the lookup and the store (on a loaded machine the OS takes the
  CPU at any bytecode) lets a second thread miss as well; each then keeps an array of its own,
  sees none of the others' writes and reads ``np.empty``'s garbage where they wrote. Chapter 7's
  dual GEMM at 40x44x40 returned inf about once in five loaded CI builds that way; no barrier or
  bounds check of the kernel's could help. Here the block's array is stored in one step
  (:func:`book.numba_compat.sim_shared_array`), so every thread gets the first one stored.

:func:`apply` is called by :mod:`book.gpu` when it picks the simulator. It does not import
``numba.cuda`` (``import book`` stays cheap): each patch is made when its simulator module is
first imported, by a one-shot import hook, or at once if it is already loaded.
"""

from __future__ import annotations

import sys

from ..numba_compat import (
    SIM_ARRAY_MODULE as TARGET, SIM_KERNELAPI_MODULE, host_array, replace_method, sim_shared_array,
    when_imported,
)


def transpose_as_on_gpu(self, axes=None):
    """numba-cuda's ``DeviceNDArray.transpose``, for the simulator's arrays: a 2-D array's
    transpose is a new array (a copy), as the GPU's transpose kernel makes it."""
    import numpy as np

    if axes and tuple(axes) == tuple(range(self.ndim)):
        return self
    if self.ndim != 2:
        raise NotImplementedError("transposing a non-2D DeviceNDArray isn't supported")
    if axes is not None and set(axes) != set(range(self.ndim)):
        raise ValueError("invalid axes list %r" % (axes,))
    return type(self)(np.ascontiguousarray(np.transpose(host_array(self))))


def patch(module) -> None:
    """Make the simulator's device arrays behave as the GPU's where they differ (above)."""
    cls = module.FakeCUDAArray
    if getattr(cls, "_book_as_on_gpu", False):
        return
    cls.transpose = transpose_as_on_gpu
    cls.T = property(transpose_as_on_gpu)
    cls._book_as_on_gpu = True


def shared_array_of_the_block(self, shape, dtype, alignment=None):
    """numba-cuda's ``FakeCUDAShared.array`` (the block's array for the calling line, keyed by
    that line's (file, line number), as numba-cuda keys it), made once however many threads ask
    at once (the module's docstring)."""
    if alignment is not None:
        raise RuntimeError("Array alignment is not supported in cudasim")
    caller = sys._getframe(1)
    return sim_shared_array(self, shape, dtype, (caller.f_code.co_filename, caller.f_lineno))


def patch_shared(module) -> None:
    """Give the simulator's ``FakeCUDAShared`` an ``array`` every thread of a block agrees on;
    numba-cuda's stays as ``_numba_array``."""
    replace_method(module.FakeCUDAShared, "array", shared_array_of_the_block)


def apply() -> None:
    """Patch the simulator now where its modules are loaded, else when each is first imported."""
    when_imported(TARGET, patch)
    when_imported(SIM_KERNELAPI_MODULE, patch_shared)
