"""The Hopper kernels' planned launch (book/kernels/cluster_launch.py), on a CPU: what a plan
is launched with, the key a plan is kept under, the stream it goes to. A stand-in driver
records the calls (the launch itself needs an sm_90 GPU: tests/library/test_hopper_gpu.py and
test_fp8_gpu.py run it there, with the plan cache's reuse)."""

from __future__ import annotations

import types

import numpy as np
import pytest

from book.kernels import cluster_launch as cl


class _Driver:
    """cuda-bindings' driver as far as ``launch`` uses it, recording each call."""

    def __init__(self, result="ok"):
        self.calls = []
        self.CUresult = types.SimpleNamespace(CUDA_SUCCESS="ok")
        self.result = result

    def cuLaunchKernel(self, *args):
        self.calls.append(("cuLaunchKernel", args))
        return (self.result,)

    def cuLaunchKernelEx(self, *args):
        self.calls.append(("cuLaunchKernelEx", args))
        return (self.result,)


def _plan(config=None):
    params = types.SimpleNamespace(address=1234)
    return cl.LaunchPlan("fn", 132, 384, 230464, params, config, keep=())


def test_a_plan_without_a_cluster_is_one_cuLaunchKernel(monkeypatch):
    drv = _Driver()
    monkeypatch.setattr(cl, "driver", lambda: drv)
    cl.launch(_plan(), "stream")
    assert drv.calls == [("cuLaunchKernel", ("fn", 132, 1, 1, 384, 1, 1, 230464, "stream", 1234, 0))]


def test_a_cluster_plan_goes_through_its_config_on_the_stream_given(monkeypatch):
    drv = _Driver()
    monkeypatch.setattr(cl, "driver", lambda: drv)
    cfg = types.SimpleNamespace(hStream=None)
    cl.launch_all([_plan(cfg), _plan(cfg)], "s1")
    assert [c[0] for c in drv.calls] == ["cuLaunchKernelEx"] * 2 and cfg.hStream == "s1"


def test_a_failed_launch_says_what_it_launched(monkeypatch):
    drv = _Driver(result="CUDA_ERROR_INVALID_VALUE")
    monkeypatch.setattr(cl, "driver", lambda: drv)
    with pytest.raises(RuntimeError, match=r"132 blocks of 384 threads, 230464 bytes of shared "
                                           r"memory\) failed: CUDA_ERROR_INVALID_VALUE"):
        cl.launch(_plan(), 0)


def test_only_torch_tensors_make_a_key():
    # a plan is kept only for torch tensors, whose pointer, shape, strides, dtype and device
    # are cheap to read; anything else is checked and planned on every call
    assert cl.torch_key("swiglu", "tile", (np.zeros(4), None)) is None
    torch = pytest.importorskip("torch")
    a, b = torch.zeros(2, 8), torch.zeros(2, 8)
    k1 = cl.torch_key("swiglu", "tile", (a, None))
    assert k1 == cl.torch_key("swiglu", "tile", (a, None))
    assert k1 != cl.torch_key("swiglu", "tile", (b, None))            # another allocation
    assert k1 != cl.torch_key("identity", "tile", (a, None))          # another epilogue
    assert k1 != cl.torch_key("swiglu", "tile", (a.t(), None))        # another layout


def test_the_stream_given_wins_and_none_is_the_default_stream(monkeypatch):
    # cuda-bindings' real driver module (its CUstream needs no GPU); in the simulator the
    # course reports no driver, so it is handed over here
    cu = pytest.importorskip("cuda.bindings.driver")
    monkeypatch.setattr(cl, "fastcall_driver", lambda: cu)
    assert int(cl.raw_stream(7, None)) == 7
    assert int(cl.raw_stream(types.SimpleNamespace(handle=types.SimpleNamespace(value=9)), None)) == 9
    assert int(cl.raw_stream(None, np.zeros(2))) == 0


def test_the_plan_cache_is_bounded():
    from book.kernels.fastcall import BoundedCache

    assert isinstance(cl.PLANS, BoundedCache) and cl.PLANS.limit == 64


def test_without_a_driver_a_launch_says_why(monkeypatch):
    monkeypatch.setattr(cl, "fastcall_driver", lambda: None)
    with pytest.raises(RuntimeError, match="launch through the CUDA driver"):
        cl.launch(_plan(), 0)


def test_the_configurations_are_cuda_bindings_own_structures():
    """cuda-bindings' real CUlaunchConfig (no GPU needed to build one): a cluster's carries
    its cluster size, a dependent launch's the programmatic stream serialization attribute,
    each with the grid, threads and shared memory asked for."""
    cu = pytest.importorskip("cuda.bindings.driver")
    from book.kernels.cluster_launch import cluster_config, dependent_config
    from book.kernels.wgmma_gemm_tile import HopperTile

    dep = dependent_config(cu, 132, 256, 200_000)
    assert (dep.gridDimX, dep.blockDimX, dep.sharedMemBytes, dep.numAttrs) == (132, 256, 200_000, 1)
    a = dep.attrs[0]
    assert a.id == cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert a.value.programmaticStreamSerializationAllowed == 1
    tile = HopperTile(cluster=2)
    cl = cluster_config(cu, tile, 64)
    assert (cl.gridDimX, cl.blockDimX, cl.sharedMemBytes) == (64, tile.threads, tile.shared_bytes)
    assert cl.attrs[0].id == cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert cl.attrs[0].value.clusterDim.x == 2
