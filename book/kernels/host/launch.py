"""Host-side helpers shared by the kernels' wrappers: validate inputs, flatten, size grids.

Every ``swiglu_<variant>(gate, up, out=None, ...)`` wrapper calls :func:`prepare`, which
accepts Numba device arrays or anything with ``__cuda_array_interface__`` (a torch CUDA
tensor, a CuPy array) and raises a clear error for a host array, a shape or dtype
mismatch, or a non-contiguous array. bfloat16 torch tensors are viewed as int16 bits
(torch does not export bfloat16 through ``__cuda_array_interface__``).

Host time matters here (chapter 6): a torch tensor's Numba view is made once and reused
(:class:`_TorchViews`), and so is the flat 1-D view of an array (:func:`flat`), so a call
from torch tensors costs about what a call with Numba arrays does.
"""

import contextlib
import math
import warnings
import weakref

import numpy as np
from numba import cuda

from ...dtypes import STORAGE_NAMES, name as dtype_name
from ...numba_compat import compiled_for, host_array
# the lowest host helpers live with the launch mechanism (book.kernels.plan)
from .plan import (STATIC_SHARED, BoundedCache, allow_shared, driver, is_torch,
                   launch as plan_launch, launch_once, plans_for, pointer, raw_stream,
                   sm_count)

__all__ = ["Prepared", "prepare", "as_device", "array_dtype", "is_c_contiguous", "flat",
           "pointer", "address", "aligned", "is_torch", "ieee_control", "device_name",
           "sm_count", "STATIC_SHARED", "MAX_SHARED", "SM_SHARED", "RESERVED_SHARED",
           "allow_shared", "jit_bounds", "cdiv", "grid_for", "SMALL_GRID_WARNING",
           "deliberate_grid", "launch", "KernelLaunch", "launch_kernel", "PREPARED_LAUNCH"]


class Prepared:
    """Flat 1-D device views of gate, up and out, plus what the wrapper returns."""

    __slots__ = ("gate", "up", "out", "result", "shape", "dtype", "n")

    def __init__(self, gate, up, out, result, shape, dtype):
        self.gate, self.up, self.out, self.result = gate, up, out, result
        self.shape, self.dtype = shape, dtype
        self.n = math.prod(shape)


def _numba_array_types():
    try:
        from numba.cuda.cudadrv.devicearray import DeviceNDArray

        return (DeviceNDArray,)
    except ImportError:  # the simulator
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return (FakeCUDAArray,)


_NUMBA_ARRAYS = _numba_array_types()


class _TorchViews:
    """Numba views of torch CUDA tensors, made once per tensor and reused.

    Making one (torch's ``__cuda_array_interface__``, Numba's CUDA-context query, a
    ``DeviceNDArray``) costs more host time than the launch itself, and a reader calls a
    kernel with the same tensors again and again. The entry is checked on every use
    against what can change under the same tensor object (its data pointer, shape,
    strides and dtype: ``set_()``, ``resize_()``, ``.data =``) and goes when the tensor
    goes. The view is built from the tensor's data pointer with no owner: it never keeps
    the tensor alive (the entry dies with the tensor, and the wrapper holds the tensor
    for the whole call).
    """

    def __init__(self):
        self._views = {}  # id(tensor) -> (weakref, key, Numba view)

    @staticmethod
    def key(x):
        return x.data_ptr(), x.shape, x.stride(), x.dtype

    def get(self, x):
        hit = self._views.get(id(x))
        if hit is not None and hit[0]() is x and hit[1] == self.key(x):
            return hit[2]
        return None

    def put(self, x, view):
        i = id(x)
        views = self._views

        def forget(_ref, i=i):
            views.pop(i, None)

        try:
            ref = weakref.ref(x, forget)
        except TypeError:  # not weak-referenceable: not cached
            return view
        views[i] = (ref, self.key(x), view)
        return view

    def __len__(self):
        return len(self._views)

    def clear(self):
        self._views.clear()


_TORCH_VIEWS = _TorchViews()

# typestr of the torch dtypes the kernels take; bfloat16 travels as its raw bits (int16)
_TORCH_TYPESTR = {"torch.float32": "<f4", "torch.float16": "<f2", "torch.bfloat16": "<i2"}


def _torch_view(x, name):
    if not x.is_cuda:
        raise TypeError(
            f"{name} is a torch tensor on the CPU: move it to the GPU first "
            f"({name}.cuda()) or pass a Numba device array (numba.cuda.to_device)."
        )
    typestr = _TORCH_TYPESTR.get(str(x.dtype))
    if typestr is None:  # another dtype: Numba's own conversion, for the error that follows
        return cuda.as_cuda_array(x.detach())
    itemsize = x.element_size()
    desc = {"typestr": typestr, "shape": tuple(x.shape),
            "strides": tuple(s * itemsize for s in x.stride()),
            "data": (x.data_ptr() if x.numel() else 0, False), "version": 2}
    return _TORCH_VIEWS.put(x, cuda.from_cuda_array_interface(desc, owner=None, sync=False))


def as_device(x, name):
    """A Numba device array viewing ``x`` (no copy), or a clear error.

    Torch CUDA tensors are converted once and the view is reused (:class:`_TorchViews`)."""
    if isinstance(x, _NUMBA_ARRAYS):
        return x  # already a Numba device array (or the simulator's)
    if is_torch(x):
        view = _TORCH_VIEWS.get(x)
        return view if view is not None else _torch_view(x, name)
    if hasattr(x, "__cuda_array_interface__"):
        return cuda.as_cuda_array(x)
    if isinstance(x, np.ndarray):
        raise TypeError(
            f"{name} is a host (NumPy) array: copy it to the GPU first with "
            f"numba.cuda.to_device({name}) (bfloat16 data as uint16 bits)."
        )
    raise TypeError(
        f"{name} must be a GPU array (Numba device array, or an object with "
        f"__cuda_array_interface__ such as a torch CUDA tensor), got {type(x).__name__}."
    )


def array_dtype(a):
    """Our dtype name for a device array (uint16/int16 storage means bfloat16)."""
    name = STORAGE_NAMES.get(a.dtype)
    if name is not None:
        return name
    try:
        return dtype_name(np.dtype(a.dtype).name)
    except ValueError:
        raise TypeError(
            f"unsupported dtype {a.dtype}: SwiGLU kernels take float32, float16 or "
            "bfloat16 (stored as uint16 bits)"
        ) from None


def is_c_contiguous(a):
    """True when ``a``'s strides are those of a C-contiguous array of its shape."""
    if a.size == 0:
        return True  # nothing to walk
    expected = a.dtype.itemsize
    for dim, stride in zip(reversed(a.shape), reversed(a.strides)):
        if dim > 1 and stride != expected:
            return False
        expected *= dim
    return True


# 1-D views of arrays already seen: building one (DeviceNDArray.reshape) costs more host
# time than the rest of a launch. Weak keys: an entry goes when its array goes.
_FLAT = weakref.WeakKeyDictionary()


def flat(a, name):
    """A 1-D view of a C-contiguous device array (the kernels index one flat range)."""
    if a.ndim == 1 and (a.size <= 1 or a.strides[0] == a.dtype.itemsize):
        return a
    try:
        v = _FLAT.get(a)
    except TypeError:  # not weak-referenceable: no cache
        v = None
    if v is not None:
        return v
    if not is_c_contiguous(a):
        raise ValueError(
            f"{name} is not contiguous (shape {a.shape}, strides {a.strides}): the kernels "
            "walk memory in order; pass a contiguous array (torch: .contiguous(); "
            "NumPy: np.ascontiguousarray before copying)."
        )
    v = a.reshape(a.size)
    try:
        _FLAT[a] = v
    except TypeError:
        pass
    return v


def _empty_like(x, dev):
    """A new output like ``x``: a torch tensor for torch input, else a Numba array."""
    if is_torch(x):
        import torch

        return torch.empty_like(x)
    return cuda.device_array(dev.shape, dtype=dev.dtype)


def prepare(gate, up, out, dtypes, variant):
    """Validate (gate, up, out) for ``variant`` and return a :class:`Prepared`."""
    g = as_device(gate, "gate")
    u = as_device(up, "up")
    if g.shape != u.shape:
        raise ValueError(f"gate and up must have the same shape, got {g.shape} and {u.shape}")
    dt = array_dtype(g)
    if u.dtype != g.dtype:
        raise TypeError(f"gate and up must have the same dtype, got {g.dtype} and {u.dtype}")
    if dt not in dtypes:
        raise TypeError(f"swiglu_{variant} supports {', '.join(dtypes)}; got {dt}")
    if out is None:
        result = _empty_like(gate, g)
    else:
        result = out
    o = as_device(result, "out")
    if o.shape != g.shape:
        raise ValueError(f"out must have the shape of gate {g.shape}, got {o.shape}")
    if o.dtype != g.dtype:
        raise TypeError(f"out must have dtype {g.dtype} like gate, got {o.dtype}")
    return Prepared(flat(g, "gate"), flat(u, "up"), flat(o, "out"), result, tuple(g.shape), dt)


def address(a):
    """Start address of a device array; in the simulator, of the host memory behind it (so an
    alignment or overlap check refuses there what it refuses on a GPU)."""
    p = pointer(a)
    if p == 0:
        host = host_array(a)
        if host is not a:
            p = int(host.__array_interface__["data"][0])
    return p


def aligned(*arrays, to=16):
    return all(pointer(a) % to == 0 for a in arrays)


def ieee_control(fast):
    """The IEEE-math control of a wrapper that takes ``fastmath``: the same kernel compiled
    without fastmath (libdevice ``expf``, IEEE division), named ``<wrapper>_ieee``.

    Chapter 6 measures each multi-element kernel beside its control."""

    def control(gate, up, out=None, block=256, max_blocks=None, stream=0):
        return fast(gate, up, out, block, max_blocks, stream, fastmath=False)

    control.__name__ = control.__qualname__ = f"{fast.__name__}_ieee"
    control.__module__ = fast.__module__
    control.__doc__ = (f":func:`{fast.__name__}` without fastmath (libdevice expf, IEEE "
                       "division): the IEEE-math control.")
    return control


def device_name() -> str:
    """The current GPU's name ("" in the simulator): some tiles are chosen per GPU
    (:data:`book.kernels.wgmma_gemv_tile.PROMOTION`, ``LEAD``)."""
    from ... import gpu

    if gpu.SIMULATED:
        return ""
    name = cuda.get_current_device().name
    return name.decode() if isinstance(name, bytes) else str(name)


#: the most one block may opt in to on sm_90 (227 KiB; sm_80 163 KiB, sm_86 99 KiB)
MAX_SHARED = 227 * 1024
#: an sm_90 SM's shared memory, of which each resident block also takes RESERVED_SHARED
SM_SHARED, RESERVED_SHARED = 228 * 1024, 1024

def jit_bounds(threads, min_blocks):
    """``cuda.jit`` options for a kernel that must fit ``min_blocks`` blocks of ``threads`` on
    an SM: ``launch_bounds`` (ptxas caps the registers to fit, spilling beyond); none for
    ``min_blocks`` 0 and in the simulator."""
    from numba import config

    return ({"launch_bounds": (threads, min_blocks)}
            if min_blocks and not config.ENABLE_CUDASIM else {})


def cdiv(a, b):
    return -(-a // b)


def grid_for(work_items, block, items_per_thread, max_blocks=None):
    """Blocks to cover ``work_items`` with ``block`` threads doing ``items_per_thread`` each,
    capped at ``max_blocks`` (the kernels loop grid-stride over whatever is left)."""
    blocks = max(1, cdiv(work_items, block * items_per_thread))
    if max_blocks:
        blocks = min(blocks, max_blocks)
    return blocks


# ---------------------------------------------------------------- launching
# ``kernel[grid, block, stream](*arrays)`` asks Numba, on every call, for each argument's
# type, the compiled overload for those types, the kernel's argument list (pointer, size,
# shape, strides of each array) and a launch configuration: about 30 us of host time on an
# H100, fifteen times the 2 us a decode-size SwiGLU runs on the GPU. None of it changes
# between two calls with the same arrays, so launch_kernel plans it once through the one
# mechanism (book.kernels.plan: plans_for, launch), kept on the first array object with weak
# references to the others (a plan is used only while every one of its arrays is the same
# object), and makes it with cuLaunchKernel. The first call with a new array type goes
# through Numba (which compiles); anything unexpected (the simulator, a debug or cooperative
# kernel) keeps Numba's path.
_DRIVER = driver()
#: whether launch_kernel plans its launches (a GPU with cuda-bindings' driver)
PREPARED_LAUNCH = _DRIVER is not None
_STREAMS = BoundedCache(64)  # raw stream handle -> CUstream
_PLANS_PER_ARRAY = 16  # plans kept on one array (other grids, blocks, partner arrays)


def _planned_launch(kernel, grid, block, arrays):
    """The plan of ``kernel[grid, block](*arrays)``, made once (None: Numba's launch)."""
    first = arrays[0]
    try:
        plans = first._course_plans
    except AttributeError:
        try:
            plans = first._course_plans = BoundedCache(_PLANS_PER_ARRAY)
        except AttributeError:  # an array that takes no attribute: not planned
            return None
    key = (kernel, grid, block, *map(id, arrays[1:]))
    hit = plans.get(key)
    if hit is not None:
        refs, plan = hit
        if all(r() is a for r, a in zip(refs, arrays[1:])):
            return plan
    if compiled_for(kernel, arrays) is None:
        return None  # not compiled for these types yet: Numba's launch compiles it
    made = plans_for(KernelLaunch(kernel, grid, block, arrays, None), keep=False)
    if made is None:
        return None
    plans.put(key, (tuple(weakref.ref(a) for a in arrays[1:]), made[0]))
    return made[0]


#: numba-cuda's warning for a grid under 128 blocks (``_LaunchConfiguration``). The course
#: launches small grids on purpose (a decode-size call: one token, a few dozen blocks), so
#: its own launches silence it; a student's kernel launched by the student still warns.
#: Where Numba can colour its messages (a terminal colour scheme is installed, as on the
#: H100 machine) the text starts with an ANSI escape ("\x1b[1mGrid size 74 ..."), and a
#: warnings filter matches from the message's first character: the escape is allowed for.
SMALL_GRID_WARNING = r"(?:\x1b\[[0-9;]*m)*Grid size \d+ will likely result in GPU under-utilization"


@contextlib.contextmanager
def deliberate_grid():
    """Around one of the course's own launches whose grid size is chosen on purpose: no
    "Grid size N will likely result in GPU under-utilization" warning (any other warning is
    still shown). Only first calls and fallbacks come here: :func:`launch_kernel`'s planned
    launch and :mod:`book.kernels.plan` never build a Numba launch configuration."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=SMALL_GRID_WARNING)
        yield


def launch(kernel, grid, block, stream, *args, shared=0):
    """``kernel[grid, block, stream, shared](*args)``, Numba's own launch, for a grid the
    course chose: a grid under 128 blocks is launched inside :func:`deliberate_grid` (the
    only size numba-cuda warns about), a larger one as it is."""
    n = grid if type(grid) is int else math.prod(grid)
    if n < 128:
        with deliberate_grid():
            kernel[grid, block, stream, shared](*args)
    else:
        kernel[grid, block, stream, shared](*args)


class KernelLaunch:
    """One validated launch, worked out once: ``kernel[grid, block, stream, shared](*args)``
    (``args``: Numba device arrays, integers and float32 scalars) and what the wrapper
    returns (``result``); ``cluster``: blocks a cluster (1: none); ``dependent``: a
    programmatic dependent launch (the kernel may start while the one before it ends). A
    wrapper's ``prepare`` builds it; ``launch(stream)`` makes it through Numba (a kernel
    given more than 48 KiB of dynamic shared memory is allowed it first, :func:`allow_shared`),
    or, for a cluster or a dependent launch, which Numba cannot make, through the driver
    (:func:`book.kernels.plan.launch_once`); :class:`book.kernels.plan.PlannedCall` packs the
    same ``args`` once and replays them. ``grid`` 0: nothing to launch."""

    __slots__ = ("kernel", "grid", "block", "args", "result", "shared", "cluster", "dependent")

    def __init__(self, kernel, grid, block, args, result, shared=0, cluster=1, dependent=False):
        self.kernel, self.grid, self.block, self.args = kernel, grid, block, tuple(args)
        self.result, self.shared = result, shared
        self.cluster, self.dependent = cluster, dependent

    def launch(self, stream=0):
        if not self.grid:
            return self.result
        if self.cluster > 1 or self.dependent:
            return launch_once(self, stream)
        if self.shared > STATIC_SHARED:  # beyond 48 KiB a kernel is allowed its share first
            allow_shared(self.kernel, self.args, self.shared)
        launch(self.kernel, self.grid, self.block, stream, *self.args, shared=self.shared)
        return self.result


def launch_kernel(kernel, grid, block, stream, *arrays):
    """``kernel[grid, block, stream](*arrays)`` for device arrays, planned once per kernel,
    grid, block and arrays and made by :func:`book.kernels.plan.launch` on ``stream`` (see
    the comment above); Numba's own launch when that cannot be."""
    if PREPARED_LAUNCH and type(grid) is int and type(block) is int:
        try:
            plan = _planned_launch(kernel, grid, block, arrays)
        except (AttributeError, TypeError):
            plan = None  # not what this path expects: Numba's launch below says what is wrong
        if plan is not None:
            raw = raw_stream(stream)
            cu_stream = _STREAMS.get(raw)
            if cu_stream is None:
                cu_stream = _DRIVER.CUstream(raw)
                _STREAMS.put(raw, cu_stream)
            plan_launch(plan, cu_stream, _DRIVER)
            return
    with deliberate_grid():
        kernel[grid, block, stream](*arrays)
