"""The Hopper kernels' launch, worked out once: ``cuLaunchKernel``, or ``cuLaunchKernelEx`` with
a cluster or as a dependent launch.

:mod:`book.kernels.wgmma_gemm`, :mod:`book.kernels.fp8_gemm` and :mod:`book.kernels.fp8_gemv`
plan a launch the first time they see a key (:func:`torch_key`: the tensors' pointers,
shapes, strides, dtypes and devices, with what else the kernel depends on): the CUDA
function, grid, block, dynamic shared memory, packed parameters and, for a cluster, its
launch configuration (:func:`cluster_config`, :func:`cluster_grid`: as many clusters as can
be resident at once; :func:`dependent_config`: a kernel that may start while the one before
it on the stream ends; both :func:`launch_config`), kept in :data:`PLANS` (a bounded cache); a later call with the same
key is a lookup and :func:`launch` on the stream :func:`raw_stream` names. GPU only (the
simulator has no clusters, TMA or wgmma).
"""

from __future__ import annotations

from .fastcall import BoundedCache, current_raw_stream, driver as fastcall_driver
from .launch import is_torch, sm_count

__all__ = ["LaunchPlan", "PLANS", "OCCUPANCY", "driver", "cluster_grid", "cluster_config",
           "dependent_config", "launch_config", "launch", "launch_all", "raw_stream", "torch_key"]


class LaunchPlan:
    """One launch, worked out once per key: the CUDA function, grid, block, dynamic shared
    memory, packed parameters, the launch configuration (with its cluster size) and the
    device arrays the parameters point to (kept alive here)."""

    __slots__ = ("function", "grid", "block", "smem", "params", "config", "keep")

    def __init__(self, function, grid, block, smem, params, config, keep):
        self.function, self.grid, self.block, self.smem = function, grid, block, smem
        self.params, self.config, self.keep = params, config, keep


#: the plans, by key (:func:`torch_key`)
PLANS = BoundedCache(64)
#: tile -> what ``cuOccupancyMaxActiveClusters`` answered (for the record)
OCCUPANCY = {}


def driver():
    """cuda-bindings' driver module (:func:`book.kernels.fastcall.driver`), or an error that
    says why there is none."""
    cu = fastcall_driver()
    if cu is None:
        raise RuntimeError("the Hopper kernels launch through the CUDA driver (cuda-bindings' "
                           "cuda.bindings.driver): there is none here (Numba's simulator, or "
                           "cuda-bindings not installed)")
    return cu


def cluster_grid(cu, function, tile, units):
    """Blocks to launch: as many clusters as can be resident at once (the schedule is
    persistent), and no more than there are schedule entries."""
    cfg = cluster_config(cu, tile, tile.cluster)
    err, n = cu.cuOccupancyMaxActiveClusters(function, cfg)
    OCCUPANCY[tile] = (str(err), n)
    if err != cu.CUresult.CUDA_SUCCESS or n < 1:
        n = sm_count() // tile.cluster
    if tile.max_blocks:
        n = min(n, tile.max_blocks // tile.cluster)
    return tile.cluster * max(1, min(n, units))


def cluster_config(cu, tile, grid):
    """The ``CUlaunchConfig`` of ``grid`` blocks of ``tile`` (its threads, its shared memory)
    in clusters of ``tile.cluster``."""
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = tile.cluster, 1, 1
    return launch_config(cu, grid, tile.threads, tile.shared_bytes, [attr])


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


def launch(plan, stream):
    """Launch ``plan`` on the raw ``stream``: ``cuLaunchKernel``, or ``cuLaunchKernelEx`` with
    its configuration (a cluster's, a dependent launch's)."""
    cu = driver()
    if plan.config is None:
        err, = cu.cuLaunchKernel(plan.function, plan.grid, 1, 1, plan.block, 1, 1, plan.smem,
                                 stream, plan.params.address, 0)
    else:
        plan.config.hStream = stream
        err, = cu.cuLaunchKernelEx(plan.config, plan.function, plan.params.address, 0)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"launching the Hopper kernel ({plan.grid} blocks of {plan.block} "
                           f"threads, {plan.smem} bytes of shared memory) failed: {err}")


def raw_stream(stream, like):
    """The raw stream to launch on: ``stream`` if given (an int, or a Numba stream), else
    torch's current stream for torch tensors, else the legacy default stream."""
    cu = driver()
    if stream is None:
        if is_torch(like):
            return cu.CUstream(current_raw_stream()(like.get_device()))
        return cu.CUstream(0)
    h = getattr(stream, "handle", stream)
    return cu.CUstream(int(getattr(h, "value", h) or 0))


def torch_key(what, tile, tensors):
    """What a plan depends on, read cheaply from torch tensors (None: not all torch):
    ``what`` the kernel's other choices (an epilogue, an output kind and scale), the tile,
    each tensor's pointer, shape, strides, dtype and device."""
    key = [what, tile]
    for t in tensors:
        if t is None:
            key.append(None)
            continue
        if not is_torch(t):
            return None
        key.append((t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.get_device()))
    return tuple(key)

def launch_all(plans, stream):
    """Launch each plan in turn on one stream (a ColumnSplit's two launches)."""
    for plan in plans:
        launch(plan, stream)
