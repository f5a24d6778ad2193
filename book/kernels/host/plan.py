"""One way to plan and launch a kernel (issue 44): a launch prepared once, cached by one key,
made by one call, on the stream one function finds.

A wrapper's host side is a ``prepare`` function that validates its arguments and returns a
:class:`book.kernels.launch.KernelLaunch` (kernel, grid, block, dynamic shared memory,
arguments, what it returns, and an optional cluster or programmatic dependent launch), or a
:class:`Launches` of several (a column split). From it:

* :func:`plans_for` works out, once, what the driver launches: a :class:`LaunchPlan` per
  kernel (the CUDA function, :func:`cufunction`; the parameters packed as Numba packs them,
  :func:`pack_args` into :class:`PackedParams`; for a cluster or a dependent launch its
  ``CUlaunchConfig``, :func:`cluster_config` / :func:`dependent_config`);
* :func:`launch` makes one plan: ``cuLaunchKernel``, or ``cuLaunchKernelEx`` with its
  configuration;
* :func:`raw_stream` is the one way to find the stream: the stream named, else torch's
  current stream for a torch tensor (:func:`current_raw_stream`, a C call), else the legacy
  default stream; :func:`numba_stream` is the same stream as a Numba launch takes it;
* :class:`PlannedCall` is an entry point's cache: ``PlannedCall(name, prepare)(*args)`` keys
  the call by the stream and :func:`arg_key` of each argument (one dict lookup), plans a new
  key once (validated by ``prepare``, which raises what the wrapper raises; launched the
  ordinary way the first time) and replays the plans after. A planned call allocates
  nothing, so it is captured by ``torch.cuda.graph`` (make the first call before capture,
  as one warms up cuBLAS). :func:`planned` gives the process's one per entry point
  (:data:`PLANNED`); every public wrapper called plainly goes through it
  (``swiglu_decode``, the GEMVs, ``swiglu_mma``, ``matmul_mma``, ``swiglu_wgmma``,
  ``swiglu_fp8``, ``swiglu_fp8_gemv``), and :class:`book.kernels.fastcall.FastCall`, chapter
  6's cheap elementwise call, is a :class:`PlannedCall` with its own per-call path.

In Numba's simulator there is no driver (:func:`driver` is None): every call is the
ordinary launch. The lowest host helpers every launch needs (:func:`pointer`,
:func:`is_torch`, :func:`sm_count`, :func:`allow_shared`) live here and
:mod:`book.kernels.launch` takes them from here.
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import struct
import sys

import numpy as np
from numba import config as _numba_config

from ...numba_compat import compile_for, compiled_for, cufunc, is_plain

__all__ = ["driver", "need_driver", "pointer", "is_torch", "sm_count", "allow_shared",
           "STATIC_SHARED", "ARRAY_FIELDS", "pack_array", "pack_args", "PackedParams",
           "cufunction", "BoundedCache", "LaunchPlan", "Launches", "plans_for", "launch",
           "launch_all", "launch_once", "cluster_grid", "cluster_config", "dependent_config",
           "launch_config", "OCCUPANCY", "current_raw_stream", "raw_stream", "numba_stream",
           "arg_key", "NEW", "current_device", "error_name", "PlannedCall", "PLANNED", "planned"]


# ---------------------------------------------------------------- the driver and the device
def driver():
    """cuda-bindings' driver module, or None where there is none (the simulator)."""
    if _numba_config.ENABLE_CUDASIM:
        return None
    try:
        from cuda.bindings import driver as cu
    except ImportError:
        return None
    return cu


def need_driver():
    """:func:`driver`, or an error that says why there is none."""
    cu = driver()
    if cu is None:
        raise RuntimeError("this launch goes through the CUDA driver (cuda-bindings' "
                           "cuda.bindings.driver): there is none here (Numba's simulator, or "
                           "cuda-bindings not installed)")
    return cu


def is_torch(x) -> bool:
    """Whether ``x`` is a torch tensor (told by its type's module: torch is never imported
    here to ask)."""
    return type(x).__module__.startswith("torch")


def pointer(a):
    """Device address of a Numba device array (0 in the simulator)."""
    try:
        return a.device_ctypes_pointer.value or 0
    except AttributeError:
        pass
    try:
        return int(a.__cuda_array_interface__["data"][0] or 0)
    except Exception:
        return 0


# Cached: every vector wrapper asks on every call (choose_block), and the driver query
# behind it costs about 500 us of host time on the H100, measured when this cache was lost.
@functools.lru_cache(maxsize=None)
def sm_count():
    """Multiprocessors on the current device (132 on an H100 SXM; 1 in the simulator)."""
    from ... import gpu

    info = gpu.device_info()
    return info.sm_count or 1


#: the most shared memory a kernel may declare statically, and use dynamically without opting in
STATIC_SHARED = 48 * 1024

_ALLOWED = {}  # compiled kernel -> dynamic shared bytes it may use


def allow_shared(kern, args, nbytes):
    """Let ``kern``, as compiled for the launch arguments ``args``, use ``nbytes`` of dynamic
    shared memory: beyond 48 KiB a kernel must opt in (cuFuncSetAttribute
    MAX_DYNAMIC_SHARED_SIZE_BYTES). Nothing to do in the simulator."""
    if _numba_config.ENABLE_CUDASIM:
        return
    from cuda.bindings import driver as binding
    from numba.cuda.typing.typeof import Purpose, typeof

    from ...numba_compat import driver as numba_driver

    compiled = compile_for(kern, tuple(typeof(a, Purpose.argument) for a in args))
    if _ALLOWED.get(compiled, 0) >= nbytes:
        return
    fn = cufunc(compiled)
    attr = binding.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    numba_driver().cuKernelSetAttribute(attr, nbytes, fn.handle, fn.device.id)
    _ALLOWED[compiled] = nbytes


# ---------------------------------------------------------------- parameters, as Numba packs them
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


def pack_args(args):
    """The kernel parameters Numba passes for ``args`` (device arrays, Python ints and
    float32 scalars, in order): :func:`pack_array` for an array, one int64 for an integer, a
    float32's bits in one 8-byte slot (the driver reads its low 4 bytes)."""
    values = []
    for a in args:
        if isinstance(a, (int, np.integer)):
            values.append(int(a))
        elif isinstance(a, np.float32):
            values.append(struct.unpack("<I", struct.pack("<f", a))[0])
        else:
            values.extend(pack_array(pointer(a), a.shape, a.strides, a.dtype.itemsize))
    return values


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


def error_name(cu, err):
    """The driver's name of a CUresult."""
    _e, name = cu.cuGetErrorName(err)
    return name.decode() if isinstance(name, bytes) else str(name)


class BoundedCache(dict):
    """A dict that keeps at most ``limit`` entries: adding one more drops the oldest
    (insertion order). Lookups are a plain dict's; only :meth:`put` adds.

    A planned call keeps a plan per key and a stream handle per raw stream; a loop over fresh
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


# ---------------------------------------------------------------- a plan and its launch
class LaunchPlan:
    """One kernel launch as the driver makes it, worked out once: the CUDA function, grid,
    block, dynamic shared memory, packed parameters (``address``: their pointer array, as
    cuLaunchKernel takes it), the ``CUlaunchConfig`` of a cluster or a dependent launch
    (None: plain ``cuLaunchKernel``), the device it was planned on, and ``keep``: the device
    arrays whose addresses the parameters hold (a workspace the plan alone still uses must
    stay allocated)."""

    __slots__ = ("function", "grid", "block", "shared", "params", "address", "config",
                 "device", "keep")

    def __init__(self, function, grid, block, params, shared=0, config=None, device=None,
                 keep=()):
        self.function, self.grid, self.block, self.shared = function, grid, block, shared
        self.params, self.address, self.config = params, params.address, config
        self.device, self.keep = device, keep


class Launches:
    """Several launches made one after the other on one stream as one call (a column
    split's two), with the result of the call."""

    __slots__ = ("launches", "result", "grid")

    def __init__(self, launches, result):
        self.launches, self.result = tuple(launches), result
        self.grid = sum(bool(k.grid) for k in self.launches)  # 0: nothing to launch

    def launch(self, stream=0):
        for k in self.launches:
            k.launch(stream)
        return self.result


def plans_for(kl, device=None, keep=True):
    """The :class:`LaunchPlan` s of a prepared launch (a ``KernelLaunch`` or a
    :class:`Launches`), or None where the driver cannot make it (nothing to launch, a launch
    that calls a function, a kernel that is not plain). Compiles the kernel and lets it have
    its shared memory if that was not done yet. ``keep``: the plans hold the launch's arrays
    (False: the caller makes sure they are alive when a plan is launched)."""
    if isinstance(kl, Launches):
        plans = [plans_for(k, device, keep) for k in kl.launches if k.grid]
        return None if not plans or None in plans else tuple(p for ps in plans for p in ps)
    kernel = getattr(kl, "kernel", None)
    if not kl.grid or kernel is None:
        return None
    cu = need_driver()
    if kl.shared > STATIC_SHARED:
        allow_shared(kernel, kl.args, kl.shared)
    kern = compiled_for(kernel, kl.args) or compile_for(
        kernel, tuple(kernel.typeof_pyval(a) for a in kl.args))
    if not is_plain(kern):
        return None
    function = cufunction(cu, kern)
    config = None
    if kl.cluster > 1:
        config = cluster_config(cu, kl.cluster, kl.grid, kl.block, kl.shared)
    elif kl.dependent:
        config = dependent_config(cu, kl.grid, kl.block, kl.shared)
    return (LaunchPlan(function, kl.grid, kl.block, PackedParams(pack_args(kl.args)),
                       kl.shared, config, device, keep=kl.args if keep else ()),)


def launch(plan, stream, cu=None):
    """Make ``plan`` on ``stream`` (a ``CUstream``): ``cuLaunchKernel``, or
    ``cuLaunchKernelEx`` with its configuration (a cluster's, a dependent launch's).
    ``cu``: the driver module, when the caller has it at hand."""
    cu = cu or need_driver()
    if plan.config is None:
        err, = cu.cuLaunchKernel(plan.function, plan.grid, 1, 1, plan.block, 1, 1, plan.shared,
                                 stream, plan.address, 0)
    else:
        plan.config.hStream = stream
        err, = cu.cuLaunchKernelEx(plan.config, plan.function, plan.address, 0)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"launching the kernel ({plan.grid} blocks of {plan.block} "
                           f"threads, {plan.shared} bytes of shared memory) failed: {err}")


def launch_all(plans, stream):
    """Launch each plan in turn on one stream (a column split's two launches)."""
    for plan in plans:
        launch(plan, stream)


def launch_once(kl, stream=0):
    """Plan and make ``kl`` now through the driver, on ``stream`` (an int, or a Numba
    stream): a launch Numba cannot make (a cluster, a dependent launch), or a Hopper
    wrapper's call on a named stream; nothing is kept."""
    cu = need_driver()
    plans = plans_for(kl)
    if plans is None:
        if not kl.grid:
            return kl.result  # nothing to launch
        raise RuntimeError(f"{kl!r} cannot be launched through the driver (not a plain "
                           "compiled kernel)")
    launch_all(plans, cu.CUstream(raw_stream(stream)))
    return kl.result


#: tile -> what ``cuOccupancyMaxActiveClusters`` answered (for the record)
OCCUPANCY = {}


def cluster_grid(cu, function, tile, units):
    """Blocks to launch for a persistent ``tile`` (its cluster, threads, shared memory and
    ``max_blocks``): as many clusters as can be resident at once, and no more than there are
    schedule entries (``units``)."""
    cfg = cluster_config(cu, tile.cluster, tile.cluster, tile.threads, tile.shared_bytes)
    err, n = cu.cuOccupancyMaxActiveClusters(function, cfg)
    OCCUPANCY[tile] = (str(err), n)
    if err != cu.CUresult.CUDA_SUCCESS or n < 1:
        n = sm_count() // tile.cluster
    if tile.max_blocks:
        n = min(n, tile.max_blocks // tile.cluster)
    return tile.cluster * max(1, min(n, units))


def cluster_config(cu, cluster, grid, threads, smem):
    """The ``CUlaunchConfig`` of ``grid`` blocks of ``threads`` threads and ``smem`` bytes of
    dynamic shared memory, in clusters of ``cluster`` blocks."""
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster, 1, 1
    return launch_config(cu, grid, threads, smem, [attr])


def dependent_config(cu, grid, threads, smem):
    """The ``CUlaunchConfig`` of a kernel that may start while the one before it on the stream
    ends (programmatic dependent launch: the kernel waits with ``griddep_wait`` before it
    touches what that one wrote, book.kernels.hopper)."""
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    return launch_config(cu, grid, threads, smem, [attr])


def launch_config(cu, grid, threads, smem, attrs):
    """A ``CUlaunchConfig`` of ``grid`` blocks of ``threads`` threads and ``smem`` bytes of
    dynamic shared memory, with the launch attributes ``attrs`` (its stream set at launch)."""
    cfg = cu.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid, 1, 1
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
    cfg.sharedMemBytes = smem
    cfg.attrs = list(attrs)
    cfg.numAttrs = len(attrs)
    return cfg


# ---------------------------------------------------------------- the stream
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


def raw_stream(stream=None, like=None) -> int:
    """The stream to launch on, as an int: ``stream`` if given (an int, or a Numba or
    cuda.core stream: its handle), else torch's current stream on ``like``'s device when
    ``like`` is a torch tensor, else 0 (the legacy default stream). An object with no
    integer handle (the simulator's streams) is told apart by its identity."""
    if stream is None:
        if like is not None and is_torch(like):
            return current_raw_stream()(like.get_device())
        return 0
    h = getattr(stream, "handle", stream)
    try:
        return int(getattr(h, "value", h) or 0)
    except (TypeError, ValueError):
        return id(stream)


def numba_stream(device):
    """torch's current stream on ``device`` as the stream argument of a Numba launch (0: the
    legacy default stream)."""
    raw = current_raw_stream()(device)
    if not raw:
        return 0
    from numba import cuda

    return cuda.external_stream(raw)


# ---------------------------------------------------------------- the cache: one key, one call
def arg_key(a):
    """What a check or a packed parameter depends on, for one argument of a planned call
    (None: absent): a torch tensor's data pointer, shape, strides and dtype. The device is
    the pointer's: CUDA's unified addressing gives every allocation of the process, on any
    device, its own addresses."""
    if a is None:
        return None
    return a.data_ptr(), a.shape, a.stride(), a.dtype


NEW = object()  # marks a key not seen yet


class PlannedCall:
    """``PlannedCall(name, prepare)(*args)``: the launch ``prepare(*args, stream_key=...)``
    builds (a :class:`book.kernels.launch.KernelLaunch` or :class:`Launches`), validated and
    packed once per tensors and stream, then made with :func:`launch` on torch's current
    stream.

    ``args`` are the wrapper's positional tensors, the ``outs`` outputs last (None entries
    are optional arguments left out: they are part of the key). With torch CUDA tensors and
    the outputs given the call is planned; anything else (Numba arrays, ``out=None``) takes
    the ordinary launch on the default stream, as the wrapper would. A key whose launch the
    driver cannot make (:func:`plans_for` None: nothing to launch, a launch that calls a
    function) takes the ordinary launch every time. ``stats`` counts "fast", "planned" and
    "ordinary" calls."""

    MAX_PLANS = 1024  # keys kept (BoundedCache: the oldest goes first)
    MAX_STREAMS = 64  # raw stream handles kept

    def __init__(self, name, prepare, outs=1):
        self.name, self.prepare, self.outs = name, prepare, outs
        self._cu = driver()
        self.fast = self._cu is not None
        self._plans = BoundedCache(self.MAX_PLANS)  # key -> plans, or None: the ordinary launch
        self._streams = BoundedCache(self.MAX_STREAMS)  # raw handle -> CUstream
        self._tensor = None
        self._multi_gpu = self.fast and _device_count() > 1
        # looked up once, not on every call (the stream function with torch, on first use)
        self._launch = self._cu.cuLaunchKernel if self.fast else None
        self._raw_stream = None
        self.stats = {"fast": 0, "planned": 0, "ordinary": 0}
        self.__name__ = f"planned_{name}"

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, fast={self.fast})"

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
        if not self.fast or out is None or args[-self.outs] is None or not all(
                a is None or type(a) is T or isinstance(a, T) for a in args):  # nn.Parameter too
            self.stats["ordinary"] += 1
            return self.prepare(*args).launch(0)
        device = out.get_device()
        raw = self._raw_stream(device)
        key = (raw, *map(arg_key, args))
        plans = self._plans.get(key, NEW)
        if plans is NEW:  # first call with these tensors on this stream: checked, launched, planned
            self._plan(key, args, device, raw)
            self.stats["planned"] += 1
            return out if self.outs == 1 else args[-self.outs:]
        if plans is None or (self._multi_gpu and current_device() != plans[0].device):
            self.stats["ordinary"] += 1
            return self.prepare(*args, stream_key=raw).launch(numba_stream(device))
        stream = self._streams.get(raw)
        if stream is None:
            stream = self._cu.CUstream(raw)
            self._streams.put(raw, stream)
        for plan in plans:
            launch(plan, stream, self._cu)
        self.stats["fast"] += 1
        return out if self.outs == 1 else args[-self.outs:]

    # ---------------------------------------------------------------- once per key
    def _plan(self, key, args, device, raw):
        """Validate with the wrapper's own checks (they raise what it raises), launch this
        call the ordinary way on torch's stream (compiling the kernel if needed) and keep
        what later calls with the same key launch."""
        kl = self.prepare(*args, stream_key=raw)
        kl.launch(numba_stream(device))
        self._plans.put(key, plans_for(kl, device))

    def clear(self):
        self._plans.clear()


#: the entry points :func:`planned` serves: name -> (module, prepare function's name, the
#: leading argument it takes, if any, the outputs among its tensors)
PLANNED = {
    "swiglu_mma": ("gemms.mma_gemm", "prepare", "swiglu"),
    "swiglu_mma_identity": ("gemms.mma_gemm", "prepare", "identity"),
    "matmul_mma": ("gemms.mma_gemm", "prepare_matmul", "gemm"),
    "decode": ("gemv.decode_mlp", "prepare_decode", None),
    "gemv": ("gemv.decode_mlp", "prepare", "cuda_cores"),
    "gemv_tc": ("gemv.decode_mlp", "prepare", "tensor_cores"),
    "gemv_hopper": ("gemv.decode_mlp", "prepare", "hopper_gemv"),
    "swiglu_wgmma": ("gemms.wgmma_gemm", "prepare", "swiglu"),
    "swiglu_wgmma_identity": ("gemms.wgmma_gemm", "prepare", "identity"),
    "gate_up_wgmma": ("gemms.wgmma_gemm", "prepare", "store2"),
    "matmul_wgmma": ("gemms.wgmma_gemm", "prepare_matmul", "gemm"),
    "ceiling_wgmma": ("gemms.wgmma_gemm", "prepare_matmul", "ceiling"),
    "swiglu_fp8": ("gemms.fp8_gemm", "prepare", None),
    "swiglu_fp8_gemv": ("gemv.fp8_gemv", "prepare", None),
}


@functools.lru_cache(maxsize=256)
def planned(name, *options):
    """The process's :class:`PlannedCall` for ``name`` (:data:`PLANNED`) and the keyword
    ``options`` its prepare takes (pairs ``(keyword, value)``, hashable: a tile, an output
    kind): ``planned("decode")(x, wg, wu, bg, bu, out)`` is
    :func:`book.kernels.decode_mlp.swiglu_decode`, ``planned("swiglu_mma")(x, wg, wu, out)``
    :func:`book.kernels.mma_gemm.swiglu_mma`, ``planned("swiglu_wgmma", ("tile", t))(x, wg,
    wu, out)`` :func:`book.kernels.wgmma_gemm.swiglu_wgmma` at tile t."""
    if name not in PLANNED:
        raise ValueError(f"planned() serves {sorted(PLANNED)}; got {name!r}")
    module, fn, first = PLANNED[name]
    prep = getattr(importlib.import_module(f"{__package__.rpartition('.')[0]}.{module}"), fn)
    head = (first,) if first else ()
    return PlannedCall(name, functools.partial(prep, *head, **dict(options)),
                       outs=2 if name == "gate_up_wgmma" else 1)


def _device_count():
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count()


def current_device():
    import torch

    return torch.cuda.current_device()
