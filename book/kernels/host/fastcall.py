"""The cheap elementwise call: a decode-size call from torch tensors for about what torch's own
costs.

At decode size (one token, 1 x 18944) the kernel runs for about 2 us and the host decides
the time. The ordinary wrapper (``swiglu_vec4(g, u, o)``) pays, on every call, for work
whose answer cannot change between two calls with the same tensors: Numba views of the
tensors, the checks, the grid, Numba's dispatch (argument types, overload lookup,
argument marshalling) and cuda.core's launch. Chapter 6 measures each layer
(``launch_layer_*`` rows in book/data/h100.json).

:class:`FastCall` keeps only what must happen per call:

* a key read from the three tensors (data pointer, shape, dtype, contiguity, device: a few
  cheap attribute reads) and one dict lookup. Every check that protects the result is a
  function of that key, so it is answered once, when the key is first seen, by the
  ordinary wrapper's own validation (:func:`book.kernels.launch.prepare`: the same errors
  for a CPU tensor, a wrong dtype, a non-contiguous view, a shape mismatch);
* for a new key: the compiled kernel for the argument types (Numba compiles it on that
  first call, which goes through the ordinary wrapper) and its launch
  (:func:`book.kernels.vectorized.vector_config`'s grid and block, the three arrays),
  planned by :func:`book.kernels.plan.plans_for`: its CUDA function and its parameters
  packed once into a ctypes buffer as Numba packs them (:func:`book.kernels.plan.pack_array`);
* the launch itself: ``cuLaunchKernel`` through cuda-bindings (the driver API, as the
  grader's replay launches recorded kernels) on torch's current stream.

Where the fast path cannot apply it calls the ordinary wrapper, which gives the same
result: in Numba's CUDA simulator (no driver: every call is the ordinary launch), for
arguments that are not plain torch CUDA tensors (Numba arrays, ``out=None``), for a pointer
not aligned to the kernel's access width (the wrapper's scalar fallback) and for an empty tensor.

Streams: the ordinary wrapper launches on ``stream`` (default 0, the legacy default
stream); :class:`FastCall` launches on torch's *current* stream, as ``torch.add`` does, so
it is ordered with the torch work around it and is captured by ``torch.cuda.graph``.
(torch's current stream is the legacy default stream unless a ``torch.cuda.stream``
context says otherwise, so the two agree by default.)

:class:`FastCall` is a :class:`book.kernels.plan.PlannedCall` (the one plan-and-launch
mechanism, which every other entry point's plain call goes through: :func:`planned`) with a
per-call path of its own, the one chapter 6 shows: its key, read inline, and
``cuLaunchKernel`` called directly.
"""

from __future__ import annotations

import functools

from ..elementwise import halfprec, vectorized
from .launch import KernelLaunch, aligned, prepare
# the one mechanism's names, under the names FastCall's per-call path (chapter 6) reads
from .plan import (NEW as _NEW, PlannedCall, current_device as _current_device,
                   current_raw_stream, error_name as _error_name, numba_stream as _numba_stream,
                   planned, plans_for)

# (PlannedCall and planned: their import path from here, which the benchmarks use)
__all__ = ["VECTOR_VARIANTS", "FastCall", "fast", "PlannedCall", "planned"]

# The vector wrappers this path serves: name -> (kernel, elements per access, dtypes,
# the ordinary wrapper). Each computes what the wrapper computes: the same kernel, the
# same grid and block (vector_config), the same arrays.
VECTOR_VARIANTS = {
    "vec2": (vectorized.vec2_kernel, 2, ("float32",), vectorized.swiglu_vec2),
    "vec4": (vectorized.vec4_kernel, 4, ("float32",), vectorized.swiglu_vec4),
    "half4": (halfprec.half4_kernel, 4, halfprec.DTYPES, halfprec.swiglu_half4),
    "half8": (halfprec.half8_kernel, 8, halfprec.DTYPES, halfprec.swiglu_half8),
}


class FastCall(PlannedCall):
    """``FastCall("vec4")(gate, up, out)``: what ``swiglu_vec4(gate, up, out)`` computes, with
    the per-call host work cut to a key lookup and ``cuLaunchKernel`` (module docstring).

    ``gate``, ``up`` and ``out`` are torch CUDA tensors (anything else goes to the ordinary
    wrapper). ``fast`` says whether the driver path is available (False in the simulator).
    ``stats`` counts calls that launched through the driver ("fast"), found a new key
    ("planned") or went to the ordinary wrapper ("ordinary"). A key's plan is the one
    :class:`book.kernels.launch.KernelLaunch` of the wrapper, planned by
    :func:`book.kernels.plan.plans_for`."""

    def __init__(self, variant, block=256):
        if variant not in VECTOR_VARIANTS:
            raise ValueError(f"FastCall serves the vector variants {sorted(VECTOR_VARIANTS)}; "
                             f"got {variant!r} (call VARIANTS[{variant!r}].fn instead)")
        self.variant, self.block = variant, block
        self.kernel, self.width, self.dtypes, self.ordinary = VECTOR_VARIANTS[variant]
        super().__init__(variant, None)
        self.__name__ = f"fast_{variant}"

    def __repr__(self):
        return f"FastCall({self.variant!r}, fast={self.fast})"

    # ---------------------------------------------------------------- the per-call path
    def __call__(self, gate, up, out=None):
        T = self._tensor
        if T is None:
            T = self._tensor = _torch_tensor_type()
            if self.fast and T is not type(None):
                self._raw_stream = current_raw_stream()
        if not self.fast or out is None or not (type(gate) is T and type(up) is T and type(out) is T):
            self.stats["ordinary"] += 1
            return self.ordinary(gate, up, out, self.block)
        # Everything a check or the packed parameters depend on. A contiguous tensor's
        # strides follow from its shape, so contiguity + shape stand for the strides.
        key = (gate.data_ptr(), up.data_ptr(), out.data_ptr(),
               gate.shape, up.shape, out.shape,
               gate.dtype, up.dtype, out.dtype,
               gate.is_contiguous(), up.is_contiguous(), out.is_contiguous(),
               gate.get_device(), up.get_device(), out.get_device())
        plan = self._plans.get(key, _NEW)
        if plan is _NEW:  # first call with this key: checked, run the ordinary way, planned
            self._plan(key, gate, up, out)
            self.stats["planned"] += 1
            return out
        if plan is None or (self._multi_gpu and _current_device() != plan.device):
            # no plan for this key, or another device current than the tensors' (a launch in
            # the current context would not reach them): the wrapper decides
            self.stats["ordinary"] += 1
            return self.ordinary(gate, up, out, self.block, None, _numba_stream(gate.get_device()))
        stream = self._streams.get(raw := self._raw_stream(plan.device))
        if stream is None:
            stream = self._cu.CUstream(raw)
            self._streams.put(raw, stream)
        err, = self._launch(plan.function, plan.grid, 1, 1, plan.block, 1, 1, 0,
                            stream, plan.address, 0)
        if err:
            raise RuntimeError(f"cuLaunchKernel failed for {self.variant}: {_error_name(self._cu, err)}")
        self.stats["fast"] += 1
        return out

    # ---------------------------------------------------------------- once per key
    def _plan(self, key, gate, up, out):
        """Validate a new key with the ordinary wrapper's checks (they raise what it
        raises), launch this call through the ordinary wrapper (which compiles the kernel
        for these types) and work out what later calls with the same key launch."""
        p = prepare(gate, up, out, self.dtypes, self.variant)  # raises for bad input
        device = gate.get_device()
        # this call's result, on the stream later calls use; compiles the kernel if needed
        self.ordinary(gate, up, out, self.block, None, _numba_stream(device))
        plan = None
        # the wrapper's own test: each access is width elements wide (16 or 8 bytes)
        if p.n and aligned(p.gate, p.up, p.out, to=self.width * p.gate.dtype.itemsize):
            grid, block = vectorized.vector_config(p.n, self.width, self.block)
            plans = plans_for(KernelLaunch(self.kernel, grid, block, (p.gate, p.up, p.out),
                                           out), device)
            plan = plans[0] if plans else None  # one kernel: its plan, as __call__ reads it
        self._plans.put(key, plan)


def _torch_tensor_type():
    try:
        import torch
    except ImportError:
        return type(None)  # nothing is a torch tensor
    return torch.Tensor


@functools.lru_cache(maxsize=None)
def fast(variant):
    """The process's :class:`FastCall` for ``variant`` (one plan cache per variant)."""
    return FastCall(variant)
