"""What the student's function launches: every kernel launch counted and, during one traced
call, recorded (the child's side of the recording; the grader copies it out with
autograder/recording.py).

In the simulator every launch is also watched for hazards (book.simulator.hazard_recorder: races between
blocks and between warps, barriers, reads outside an array), and :func:`watching_hazards`
gives a call's findings for the grader's reply.

The recording: the compiled image of each kernel for the argument types used, its entry name,
grid, block, dynamic shared memory, order, and what every parameter is (an input, the output,
a scratch buffer with its contents at first use, or a scalar). The grader replays it on its
own inputs, in its own process (GPU) or in a fresh child that never calls the student's
function (simulator: sim_replay.py). A forged recording gains nothing: it is replayed on
inputs it never saw and the result is checked against the grader's float64 reference.

Imported after the child's path is set (numpy, numba.cuda, book).
"""

from __future__ import annotations

import contextlib
import json
import os

import numpy as np
from numba import cuda

from book import gpu
from book.simulator import hazard_recorder
from book.numba_compat import (cubin, cufunc, host_array, intercept_gpu_launches, is_launch,
                               on_sim_kernel_made, patch_sim_call)
from book.simulator.addressing import gpu_addressed

from .permissions import folder_for_grader, open_for_grader
from .settings import SIM_MAX_THREADS

LAUNCHES = [0]


class LaunchTooLargeToSimulate(Exception):
    """A launch the simulator would take minutes to run: the grader says so plainly."""


REC = {"on": False, "launches": [], "buffers": {}, "scratch": [], "images": {}, "dir": None,
       "error": None, "kernel": None}


def _flat_kinds(ty):
    """'p' (device pointer) or 's' (scalar) for each parameter numba passes for ``ty``."""
    from numba.cuda import types as nt

    if isinstance(ty, nt.Array):
        return ["s", "s", "s", "s", "p"] + ["s"] * (2 * ty.ndim)
    if isinstance(ty, (nt.CPointer, nt.Record)):
        return ["p"]
    if isinstance(ty, nt.BaseTuple):
        return [k for t in ty for k in _flat_kinds(t)]
    if ty in (nt.complex64, nt.complex128):
        return ["s", "s"]
    return ["s"]


def _scalar(v):
    import ctypes

    if isinstance(v, bool):
        return {"t": "bool", "v": bool(v)}
    if isinstance(v, int):
        return {"t": "c_int64", "v": int(v)}
    if isinstance(v, float):
        return {"t": "c_double", "v": float(v)}
    if isinstance(v, ctypes._SimpleCData):
        return {"t": type(v).__name__, "v": v.value}
    if isinstance(v, np.generic):
        return {"t": "np:" + v.dtype.str, "v": v.item()}
    raise TypeError(f"a kernel parameter of type {type(v).__name__} cannot be replayed")


def _scratch_snapshot(base, size, data_bytes):
    k = len(REC["scratch"])
    name = f"s{k}"
    path = os.path.join(REC["dir"], f"{name}.bin")
    with open_for_grader(path) as f:
        f.write(data_bytes)
    REC["scratch"].append({"name": name, "base": base, "size": size, "file": os.path.basename(path)})
    return name


def _where_gpu(ptr):
    """(buffer name, byte offset) of a device pointer: an input or the output (the offset
    from the array's first element, negative in the guard zone before it), or a scratch
    allocation (snapshotted at first use, so a replay starts from the same contents)."""
    for name, (start, lo, hi) in REC["buffers"].items():
        if start + lo <= ptr < start + max(hi, 1):
            return name, ptr - start
    for s in REC["scratch"]:
        if s["base"] <= ptr < s["base"] + s["size"]:
            return s["name"], ptr - s["base"]
    from cuda.bindings import driver as cu

    err, base, size = cu.cuMemGetAddressRange(ptr)
    if int(err) != 0:
        raise ValueError(f"a kernel parameter points at {ptr:#x}, which is not device memory")
    base, size = int(base), int(size)
    if size > (1 << 30):
        raise ValueError(f"a scratch buffer of {size >> 20} MiB is larger than the grader replays (1 GiB)")
    cuda.synchronize()
    host = np.empty(size, dtype=np.uint8)
    cu.cuMemcpyDtoH(host.ctypes.data, base, size)
    return _scratch_snapshot(base, size, host.tobytes()), ptr - base


def _record_gpu(launch, args):
    import hashlib

    kernel, griddim, blockdim, sharedmem = launch

    image = cubin(kernel)
    key = hashlib.sha256(image).hexdigest()[:20]
    if key not in REC["images"]:
        fn = f"img_{key}.cubin"
        with open_for_grader(os.path.join(REC["dir"], fn)) as f:
            f.write(image)
        REC["images"][key] = fn
    kinds = [k for t in kernel.argument_types for k in _flat_kinds(t)]
    if len(kinds) != len(args):
        kinds = ["?"] * len(args)
    params = []
    for kind, v in zip(kinds, args):
        if kind == "p" or (kind == "?" and isinstance(v, int) and not isinstance(v, bool) and v > 1 << 32):
            buf, off = _where_gpu(int(v))
            params.append({"t": "ptr", "buf": buf, "off": int(off)})
        else:
            params.append(_scalar(v))

    def dims(d):
        d = tuple(d) if isinstance(d, (tuple, list)) else (d,)
        return [int(x) for x in d] + [1] * (3 - len(d))

    REC["launches"].append({"image": key, "entry": cufunc(kernel).name, "grid": dims(griddim),
                            "block": dims(blockdim), "shmem": int(sharedmem or 0), "params": params})


def array_of(a):
    """The NumPy array behind a simulated device array (a NumPy array as it is)."""
    return host_array(a)


def _byte_bounds(a):
    fn = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds  # moved in NumPy 2
    return fn(a)


def data_ptr(a):
    return int(a.__array_interface__["data"][0])


def _where_sim(arr):
    """(buffer name, offset of the view's first element) of an array a simulated kernel gets:
    an input, the output, or a scratch buffer. A scratch buffer is the whole allocation the
    view belongs to (its root array), snapshotted at first use and found again by address at
    every later launch, as on the GPU (_where_gpu): a temporary written by one launch and read
    by the next is one buffer in the replay, whatever view of it each launch was given."""
    lo, hi = _byte_bounds(arr)
    ptr = data_ptr(arr)
    for name, (root, start) in REC["buffers"].items():   # an input or the output, guards included
        blo, bhi = _byte_bounds(root)
        if blo <= lo and hi <= bhi:
            return name, ptr - start
    for s in REC["scratch"]:
        if s["base"] <= lo and hi <= s["base"] + s["size"]:
            return s["name"], ptr - s["base"]
    root = arr
    while isinstance(root.base, np.ndarray):
        root = root.base
    rlo, rhi = _byte_bounds(root)
    if not (rlo <= lo and hi <= rhi):   # not a plain view chain: the view's own extent
        rlo, rhi, root = lo, hi, arr
    if rhi - rlo > (1 << 30):
        raise ValueError(f"a scratch buffer of {(rhi - rlo) >> 20} MiB is larger than the grader replays (1 GiB)")
    import ctypes

    name = _scratch_snapshot(rlo, rhi - rlo, ctypes.string_at(rlo, rhi - rlo))
    # kept alive until the call ends, so its memory is never handed to another temporary that
    # the recording would then take for this one
    REC["scratch"][-1]["keep"] = root
    return name, ptr - rlo


def _record_sim(kernel, args):
    params = []
    for a in args:
        arr = array_of(a)
        if isinstance(arr, np.ndarray):
            buf, off = _where_sim(arr)
            params.append({"t": "arr", "buf": buf, "off": int(off), "shape": list(arr.shape),
                           "strides": list(arr.strides), "dtype": arr.dtype.str})
        else:
            params.append(_scalar(a))
    code = kernel.fn.__code__
    key = (code.co_filename, code.co_firstlineno, code.co_name)
    made = SIM_KERNELS.get(key, [])
    nth = next((i for i, k in enumerate(made) if k is kernel), len(made))
    REC["launches"].append({"code": list(key), "nth": nth,
                            "grid": [int(x) for x in kernel.grid_dim],
                            "block": [int(x) for x in kernel.block_dim],
                            "shmem": int(kernel.dynshared_size or 0), "params": params})


def _record(fn_record, *a):
    if REC["on"] and REC["error"] is None:
        try:
            fn_record(*a)
        except Exception as e:  # the replay then fails with this message
            REC["error"] = f"{type(e).__name__}: {e}"[:500]


# code identity -> the kernel objects made from that code, in the order they were made (a
# factory makes several from one function): the replay child, which runs the same cells, makes
# the same ones in the same order, so (code, n) names one kernel in both
SIM_KERNELS = {}


def install(channel) -> None:
    """Count and record every kernel launch (the count is only for feedback: correctness
    and performance rest on the grader's replay of the recording); in the simulator, say each
    launch's threads on ``channel`` (the grader's deadline grows with them) and refuse one too
    large to simulate."""
    if gpu.SIMULATED:
        def registered(kernel, fn):
            c = fn.__code__
            SIM_KERNELS.setdefault((c.co_filename, c.co_firstlineno, c.co_name), []).append(kernel)

        def counting(orig):
            def counted(self, *args):
                if is_launch(self):
                    LAUNCHES[0] += 1
                    threads = int(np.prod(self.grid_dim)) * int(np.prod(self.block_dim))
                    if threads > SIM_MAX_THREADS:
                        raise LaunchTooLargeToSimulate(
                            f"a launch of {tuple(self.grid_dim)} blocks x {tuple(self.block_dim)} "
                            f"threads = {threads:,} threads")
                    channel.reply(event="launch", threads=threads)  # the grader's deadline grows
                    _record(_record_sim, self, args)
                    # arrays addressed as on a GPU: a store past the end of `out` lands in its
                    # guard zone (autograder.inputs.guarded) instead of raising, and is found
                    # there, as on a GPU
                    args = gpu_addressed(args)
                    with hazard_recorder.launch(self, args):   # watched while a call's hazards are
                        return orig(self, *args)
                return orig(self, *args)
            return counted

        on_sim_kernel_made(registered)
        patch_sim_call(counting)
    else:
        def on_kernel(launch):
            if launch is not None:
                LAUNCHES[0] += 1
            REC["kernel"] = launch

        def on_launch(args):
            if REC["kernel"] is not None:
                _record(_record_gpu, REC["kernel"], args)

        intercept_gpu_launches(on_kernel, on_launch)


class HazardWatch:
    """A call's hazards (``hazards``: dicts of autograder/hazards.py's ``Hazard``) and what
    the recorder could not look at (``notes``), filled when the ``with`` block ends."""

    def __init__(self):
        self.hazards: list[dict] = []
        self.notes: list[str] = []


@contextlib.contextmanager
def watching_hazards(args, built):
    """Every simulated launch inside the block watched for hazards (book.simulator.hazard_recorder), the
    function's arrays (``args``: the test's argument list, ``built``: what the function got)
    named by their parameters; yields a :class:`HazardWatch`. Nothing on a GPU."""
    watch = HazardWatch()
    if not gpu.SIMULATED:
        yield watch
        return
    bodies = [(d, a["name"]) for a, d in zip(args, built) if a.get("role") in ("in", "out")]
    with hazard_recorder.recording(bodies) as rec:
        try:
            yield watch
        finally:
            watch.hazards[:] = rec.hazards()
            watch.notes[:] = rec.notes


def buffer_extent(d, flat, guard):
    """Where an input or the output lies, for the recording: in the simulator (the whole
    allocation, the array's first byte), on a GPU (the array's first byte, and the bytes of
    the allocation before and after it, relative to that)."""
    size = d.dtype.itemsize
    if gpu.SIMULATED:
        return array_of(flat), data_ptr(array_of(d))
    return (int(d.device_ctypes_pointer.value or 0), -guard * size, (d.size + guard) * size)


def recorded_call(fn, msg, built, whole, workdir):
    """Call the student's function once with recording on; write the recording to a folder
    the grader reads (``workdir``/rec_<id>/launches.json, the images, the scratch snapshots)."""
    rec_dir = os.path.join(workdir, f"rec_{msg['id']}")
    folder_for_grader(rec_dir)
    REC.update(on=True, launches=[], scratch=[], images={}, dir=rec_dir, error=None,
               buffers={a["name"]: buffer_extent(d, *whole[a["name"]]) for a, d in zip(msg["args"], built)
                        if a["role"] in ("in", "out")})
    try:
        ret = fn(*built)
        cuda.synchronize()
    finally:
        REC["on"] = False
    rec = {"launches": REC["launches"], "images": REC["images"], "error": REC["error"],
           "scratch": [{k: v for k, v in s.items() if k not in ("base", "keep")} for s in REC["scratch"]],
           "simulated": gpu.SIMULATED}
    with open_for_grader(os.path.join(rec_dir, "launches.json"), "w") as f:
        json.dump(rec, f)
    return ret, os.path.basename(rec_dir)


def launch_shapes() -> list:
    """The launches of the last recorded call as a lab's paths read them (spec.LabPath):
    grid, block and the scalar arguments in order, nothing of the arrays."""
    return [{"grid": L["grid"], "block": L["block"],
             "scalars": [p["v"] for p in L["params"] if "v" in p]} for L in REC["launches"]]
