"""Where Numba's CUDA simulator would compute something a GPU does not, make it do what the GPU does.

The simulator is what CI, a laptop and Gradescope grade with, so a difference between it and a
GPU is a grade that changes with the machine. One is known and fixed here:

- ``DeviceNDArray.T`` / ``.transpose()``: on a GPU numba-cuda launches a transpose kernel and
  returns a *new* array (a copy); the simulator's ``FakeCUDAArray`` returns a NumPy view of the
  same memory. A kernel that writes through ``tmp.T`` therefore fills ``tmp`` in the simulator and
  a throwaway copy on a GPU: full marks in the simulator, a wrong answer on the H100 (seen in
  issue 18's hostile run). Here the simulator copies too, with the GPU's own errors for arrays
  that are not 2-D.

:func:`apply` is called by :mod:`book.gpu` when it picks the simulator. It does not import
``numba.cuda`` (``import book`` stays cheap): the patch is made when the simulator's array module
is first imported, by a one-shot import hook, or at once if it is already loaded.
"""

from __future__ import annotations

from .numba_compat import SIM_ARRAY_MODULE as TARGET, host_array, when_imported


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


def apply() -> None:
    """Patch the simulator now if its array module is loaded, else when it is first imported."""
    when_imported(TARGET, patch)
