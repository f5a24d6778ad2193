"""The cheap launch path: a decode-size call from torch tensors for about what torch's own costs.

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
  first call, which goes through the ordinary wrapper), its CUDA function, the launch
  configuration (:func:`book.kernels.vectorized.vector_config`) and the kernel's
  parameters packed once into a ctypes buffer (:func:`pack_array`: Numba passes each
  array as meminfo, parent, nitems, itemsize, data, shape..., strides...);
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

:class:`PlannedCall` is the same idea for any wrapper whose host side is a ``prepare``
function returning a :class:`book.kernels.launch.KernelLaunch` (the tensor-core GEMM,
:func:`book.kernels.mma_gemm.prepare`; the decode GEMVs, :func:`book.kernels.decode_mlp.prepare`):
the launch is validated and its arguments packed once per tensors and stream, then replayed
with ``cuLaunchKernel``. :func:`planned` gives the process's one per entry point
(``planned("decode")(x, wg, wu, bg, bu, out)``, ``planned("swiglu_mma")(x, wg, wu, out)``).
A first call with new tensors runs the ordinary launch (it may compile and allocate a
split-K workspace): make it before ``torch.cuda.graph`` captures, as one warms up cuBLAS.
"""

from __future__ import annotations

import ctypes
import functools
import sys

from numba import config as _numba_config

from ..numba_compat import compiled_for, cufunc, is_plain
from . import halfprec, vectorized
from .launch import aligned, pointer, prepare

# The vector wrappers this path serves: name -> (kernel, elements per access, dtypes,
# the ordinary wrapper). Each computes what the wrapper computes: the same kernel, the
# same grid and block (vector_config), the same arrays.
VECTOR_VARIANTS = {
    "vec2": (vectorized.vec2_kernel, 2, ("float32",), vectorized.swiglu_vec2),
    "vec4": (vectorized.vec4_kernel, 4, ("float32",), vectorized.swiglu_vec4),
    "half4": (halfprec.half4_kernel, 4, halfprec.DTYPES, halfprec.swiglu_half4),
    "half8": (halfprec.half8_kernel, 8, halfprec.DTYPES, halfprec.swiglu_half8),
}

# Numba's argument layout of an array (its data model, numba.core.datamodel's ArrayModel):
# every field is 8 bytes on a 64-bit host; shape and strides have one entry per dimension.
ARRAY_FIELDS = ("meminfo", "parent", "nitems", "itemsize", "data", "shape", "strides")


def pack_array(ptr, shape, strides, itemsize):
    """The kernel parameters Numba passes for one device array, in Numba's order.

    ``strides`` in bytes. meminfo and parent are null on the device; nitems is the element
    count. Compared with numba-cuda's own marshalling (``_Kernel._prepare_args``) in
    tests/library/test_fastcall.py."""
    nitems = 1
    for d in shape:
        nitems *= d
    return (0, 0, nitems, itemsize, ptr, *shape, *strides)


class PackedParams:
    """Kernel parameters as the driver takes them: one ctypes int64 buffer holding every
    value and an array of pointers into it (``kernelParams``). Made once per key, so a
    call packs nothing."""

    __slots__ = ("values", "pointers", "address", "n")

    def __init__(self, values):
        n = self.n = len(values)
        self.values = (ctypes.c_int64 * n)(*values)
        base = ctypes.addressof(self.values)
        self.pointers = (ctypes.c_void_p * n)(*(base + 8 * i for i in range(n)))
        self.address = ctypes.addressof(self.pointers)

    def tolist(self):
        return list(self.values)

    def tobytes(self):
        return bytes(self.values)


def driver():
    """cuda-bindings' driver module, or None where there is no driver (the simulator)."""
    if _numba_config.ENABLE_CUDASIM:
        return None
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    return cu


@functools.lru_cache(maxsize=None)
def current_raw_stream():
    """A function (device index -> torch's current stream as an int) that costs a C call.

    ``torch.cuda.current_stream().cuda_stream`` builds a Stream object on every call;
    torch's compiled code (Inductor) reads the raw handle through this same function."""
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda dev: torch.cuda.current_stream(dev).cuda_stream


class Plan:
    """What one key launches: the CUDA function, grid, block and packed parameters
    (``address``: their pointer array, as cuLaunchKernel takes it), dynamic shared memory,
    and ``keep``: the device arrays whose addresses the parameters hold (a workspace the
    plan alone still uses must stay allocated)."""

    __slots__ = ("function", "grid", "block", "params", "device", "address", "shared", "keep")

    def __init__(self, function, grid, block, params, device, shared=0, keep=()):
        self.function, self.grid, self.block = function, grid, block
        self.params, self.device = params, device
        self.address = params.address
        self.shared, self.keep = shared, keep


class BoundedCache(dict):
    """A dict that keeps at most ``limit`` entries: adding one more drops the oldest
    (insertion order). Lookups are a plain dict's; only :meth:`put` adds.

    FastCall keeps a plan per key and a stream handle per raw stream; a loop over fresh
    allocations (a new data pointer each call) or fresh streams must not grow them without
    bound, and dropping only the oldest keeps the plans a steady loop reuses."""

    __slots__ = ("limit",)

    def __init__(self, limit):
        if limit < 1:
            raise ValueError(f"a BoundedCache keeps at least one entry, got limit={limit}")
        super().__init__()
        self.limit = limit

    def put(self, key, value):
        if key not in self and len(self) >= self.limit:
            del self[next(iter(self))]
        self[key] = value


class FastCall:
    """``FastCall("vec4")(gate, up, out)``: what ``swiglu_vec4(gate, up, out)`` computes, with
    the per-call host work cut to a key lookup and ``cuLaunchKernel`` (module docstring).

    ``gate``, ``up`` and ``out`` are torch CUDA tensors (anything else goes to the ordinary
    wrapper). ``fast`` says whether the driver path is available (False in the simulator).
    ``stats`` counts calls that launched through the driver ("fast"), found a new key
    ("planned") or went to the ordinary wrapper ("ordinary")."""

    MAX_PLANS = 1024  # keys kept (BoundedCache: the oldest goes first)
    MAX_STREAMS = 64  # raw stream handles kept

    def __init__(self, variant, block=256):
        if variant not in VECTOR_VARIANTS:
            raise ValueError(f"FastCall serves the vector variants {sorted(VECTOR_VARIANTS)}; "
                             f"got {variant!r} (call VARIANTS[{variant!r}].fn instead)")
        self.variant, self.block = variant, block
        self.kernel, self.width, self.dtypes, self.ordinary = VECTOR_VARIANTS[variant]
        self._cu = driver()
        self.fast = self._cu is not None
        self._plans = BoundedCache(self.MAX_PLANS)  # key -> Plan, or None: the wrapper's
        self._streams = BoundedCache(self.MAX_STREAMS)  # raw handle -> CUstream
        self._tensor = None
        self._multi_gpu = self.fast and _device_count() > 1
        # looked up once, not on every call (the stream function with torch, on first use)
        self._launch = self._cu.cuLaunchKernel if self.fast else None
        self._raw_stream = None
        self.stats = {"fast": 0, "planned": 0, "ordinary": 0}
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
            plan = self._launch_plan(p, device)
        self._plans.put(key, plan)

    def _launch_plan(self, p, device):
        kernel = self.kernel
        arrays = (p.gate, p.up, p.out)
        kern = compiled_for(kernel, arrays)
        if kern is None or not is_plain(kern):
            return None  # not a plain compiled kernel: the ordinary wrapper every time
        function = cufunction(self._cu, kern)
        grid, block = vectorized.vector_config(p.n, self.width, self.block)
        values = []
        for a in arrays:
            values.extend(pack_array(pointer(a), a.shape, a.strides, a.dtype.itemsize))
        return Plan(function, grid, block, PackedParams(values), device)

    def clear(self):
        self._plans.clear()


_NEW = object()  # marks a key not seen yet


def pack_args(args):
    """The kernel parameters Numba passes for ``args`` (device arrays and Python ints, in
    order): :func:`pack_array` for an array, one int64 for an integer."""
    values = []
    for a in args:
        if isinstance(a, int):
            values.append(int(a))
        else:
            values.extend(pack_array(pointer(a), a.shape, a.strides, a.dtype.itemsize))
    return values


def _tensor_key(a):
    """What a check or a packed parameter depends on, for one argument (None: absent). The
    device is the data pointer's: CUDA's unified addressing gives every allocation of the
    process, on any device, its own addresses."""
    if a is None:
        return None
    return a.data_ptr(), a.shape, a.dtype, a.is_contiguous()


class PlannedCall:
    """``PlannedCall(name, prepare)(*args)``: the launch ``prepare(*args, stream_key=...)``
    builds (a :class:`book.kernels.launch.KernelLaunch`), validated and packed once per
    tensors and stream, then made with ``cuLaunchKernel`` on torch's current stream.

    ``args`` are the wrapper's positional arguments, the output last (None entries are
    optional arguments left out: they are part of the key). With torch CUDA tensors and an
    output the call is planned; anything else (Numba arrays, ``out=None``) takes the
    ordinary launch on the default stream, as the wrapper would. A key whose launch is not
    one plain kernel (``grid`` 0: nothing to launch, or a launch that calls a function)
    takes the ordinary launch every time. ``stats`` counts "fast", "planned" and "ordinary"
    calls, as :class:`FastCall`'s."""

    MAX_PLANS = 1024
    MAX_STREAMS = 64

    def __init__(self, name, prepare):
        self.name, self.prepare = name, prepare
        self._cu = driver()
        self.fast = self._cu is not None
        self._plans = BoundedCache(self.MAX_PLANS)  # (raw stream, keys...) -> Plan or None
        self._streams = BoundedCache(self.MAX_STREAMS)
        self._tensor = None
        self._multi_gpu = self.fast and _device_count() > 1
        self._launch = self._cu.cuLaunchKernel if self.fast else None
        self._raw_stream = None
        self.stats = {"fast": 0, "planned": 0, "ordinary": 0}
        self.__name__ = f"planned_{name}"

    def __repr__(self):
        return f"PlannedCall({self.name!r}, fast={self.fast})"

    # ---------------------------------------------------------------- the per-call path
    def __call__(self, *args):
        T = self._tensor
        if T is None:
            torch = sys.modules.get("torch")
            if torch is None or not self.fast:  # no torch tensor among the arguments, or no
                self.stats["ordinary"] += 1     # driver: never imports torch for a plain call
                return self.prepare(*args).launch(0)
            T = self._tensor = torch.Tensor
            self._raw_stream = current_raw_stream()
        out = args[-1]
        if not self.fast or out is None or not all(
                a is None or type(a) is T or isinstance(a, T) for a in args):  # nn.Parameter too
            self.stats["ordinary"] += 1
            return self.prepare(*args).launch(0)
        device = out.get_device()
        raw = self._raw_stream(device)
        key = (raw, *map(_tensor_key, args))
        plan = self._plans.get(key, _NEW)
        if plan is _NEW:  # first call with these tensors on this stream: checked, launched, planned
            self._plan(key, args, device, raw)
            self.stats["planned"] += 1
            return out
        if plan is None or (self._multi_gpu and _current_device() != plan.device):
            self.stats["ordinary"] += 1
            return self.prepare(*args, stream_key=raw).launch(_numba_stream(device))
        stream = self._streams.get(raw)
        if stream is None:
            stream = self._cu.CUstream(raw)
            self._streams.put(raw, stream)
        err, = self._launch(plan.function, plan.grid, 1, 1, plan.block, 1, 1, plan.shared,
                            stream, plan.address, 0)
        if err:
            raise RuntimeError(f"cuLaunchKernel failed for {self.name}: {_error_name(self._cu, err)}")
        self.stats["fast"] += 1
        return out

    # ---------------------------------------------------------------- once per key
    def _plan(self, key, args, device, raw):
        """Validate with the wrapper's own checks (they raise what it raises), launch this
        call the ordinary way on torch's stream (compiling the kernel if needed) and keep
        what later calls with the same key launch."""
        launch = self.prepare(*args, stream_key=raw)
        launch.launch(_numba_stream(device))
        plan = None
        if launch.grid and getattr(launch, "kernel", None) is not None:
            plan = self._launch_plan(launch, device)
        self._plans.put(key, plan)

    def _launch_plan(self, launch, device):
        kernel = launch.kernel
        kern = compiled_for(kernel, launch.args)
        if kern is None or not is_plain(kern):
            return None  # not a plain compiled kernel: the ordinary launch every time
        return Plan(cufunction(self._cu, kern), launch.grid, launch.block,
                    PackedParams(pack_args(launch.args)), device, launch.shared,
                    keep=launch.args)

    def clear(self):
        self._plans.clear()


#: the entry points :func:`planned` serves: name -> (module, prepare function's name, the
#: leading argument it takes, if any)
PLANNED = {
    "swiglu_mma": ("mma_gemm", "prepare", "swiglu"),
    "swiglu_mma_identity": ("mma_gemm", "prepare", "identity"),
    "matmul_mma": ("mma_gemm", "prepare", "gemm"),
    "decode": ("decode_mlp", "prepare_decode", None),
    "gemv": ("decode_mlp", "prepare", "cuda_cores"),
    "gemv_tc": ("decode_mlp", "prepare", "tensor_cores"),
    "gemv_hopper": ("decode_mlp", "prepare", "hopper_gemv"),
}


@functools.lru_cache(maxsize=None)
def planned(name):
    """The process's :class:`PlannedCall` for ``name`` (:data:`PLANNED`): ``planned("decode")(x,
    wg, wu, bg, bu, out)`` is :func:`book.kernels.decode_mlp.swiglu_decode`,
    ``planned("swiglu_mma")(x, wg, wu, out)`` is :func:`book.kernels.mma_gemm.swiglu_mma`
    (``matmul_mma``: ``(x, w, out)``; ``gemv``/``gemv_tc``: one decode path, forced)."""
    if name not in PLANNED:
        raise ValueError(f"planned() serves {sorted(PLANNED)}; got {name!r}")
    import importlib

    module, fn, first = PLANNED[name]
    prep = getattr(importlib.import_module(f"{__package__}.{module}"), fn)
    if name == "matmul_mma":
        def prep_gemm(x, w, out, stream_key=0):
            return prep("gemm", x, w, None, out, stream_key=stream_key)
        return PlannedCall(name, prep_gemm)
    return PlannedCall(name, functools.partial(prep, first) if first else prep)


def _device_count():
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def _current_device():
    import torch

    return torch.cuda.current_device()


def _numba_stream(device):
    """torch's current stream as a stream argument of the ordinary wrappers."""
    raw = current_raw_stream()(device)
    if not raw:
        return 0
    from numba import cuda

    return cuda.external_stream(raw)


def _torch_tensor_type():
    try:
        import torch
    except ImportError:
        return type(None)  # nothing is a torch tensor
    return torch.Tensor


def cufunction(cu, kern):
    """The handle cuLaunchKernel takes for a Numba-compiled kernel.

    numba-cuda loads its cubin through cuda.core, whose handle is a CUkernel (a library
    kernel, which cuLaunchKernel accepts in place of a CUfunction: the driver API documents
    the cast) or a CUfunction. Either is returned as a CUfunction of the same address, made
    once: the type cuda-bindings' cuLaunchKernel declares, so no call needs to convert it."""
    handle = cufunc(kern).handle
    if isinstance(handle, cu.CUfunction):
        return handle
    return cu.CUfunction(int(handle))


def _error_name(cu, err):
    _e, name = cu.cuGetErrorName(err)
    return name.decode() if isinstance(name, bytes) else str(name)


@functools.lru_cache(maxsize=None)
def fast(variant):
    """The process's :class:`FastCall` for ``variant`` (one plan cache per variant)."""
    return FastCall(variant)
