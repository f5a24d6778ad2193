"""book/numba_compat.py reaches past numba-cuda's public API; these tests check every reach
against the installed numba-cuda, so an upgrade that moves one fails here, naming the function
to fix (and the version the course pins), not in the several modules that use it.

What needs a GPU (a compiled kernel's library, the driver's stream conversion) is checked on
the installed package's classes and signatures here, and used for real by the GPU lane
(`make test-gpu`: the prepared launch, fastcall, the Hopper plan, the grader's recording)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import numpy as np
import pytest

import book  # (GPU or simulator, decided before numba.cuda is imported)
from numba import cuda

from book import numba_compat as nc


def fixed(what: str) -> str:
    return (f"numba-cuda moved {what}: fix book/numba_compat.py (written against numba-cuda "
            f"{nc.PINNED}; requirements.txt pins the one the course runs)")


def test_the_pinned_numba_cuda_is_the_installed_one():
    from importlib.metadata import version

    assert version("numba-cuda") == nc.PINNED, (
        f"numba-cuda {version('numba-cuda')} is installed, book/numba_compat.py was written "
        f"against {nc.PINNED}: run this file's tests, fix what they name, then set PINNED")


# The GPU side is read from numba-cuda's source (in a simulator session numba.cuda's modules
# are the simulator's): the classes, methods and attributes numba_compat uses, by name.
CUDA = Path(__import__("numba_cuda").__file__).parent / "numba" / "cuda"


def _tree(rel: str) -> ast.Module:
    return ast.parse((CUDA / rel).read_text())


def _class(tree, name):
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _defs(node) -> dict:
    return {n.name: [a.arg for a in n.args.args] for n in node.body if isinstance(n, ast.FunctionDef)}


def _self_attrs(cls) -> set:
    return {t.attr for n in ast.walk(cls) for t in getattr(n, "targets", [getattr(n, "target", None)])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"}


def test_a_compiled_kernel_has_what_the_course_reads_and_calls():
    tree = _tree("dispatcher.py")
    k = _class(tree, "_Kernel")
    defs = _defs(k)
    assert "library" in defs, fixed("_Kernel.library (cufunc, cubin)")
    for attr in ("_codelibrary", "debug", "cooperative", "extensions"):
        assert attr in _self_attrs(k), fixed(f"_Kernel.{attr} (is_plain, cufunc)")
    assert defs.get("_prepare_args") == ["self", "ty", "val", "stream", "retr", "kernelargs"], fixed(
        f"_Kernel._prepare_args's parameters, now {defs.get('_prepare_args')} (the packing "
        "check of tests/library/test_fastcall.py calls it)")
    assert defs.get("launch") == ["self", "args", "griddim", "blockdim", "stream", "sharedmem"], fixed(
        f"_Kernel.launch's parameters, now {defs.get('launch')} (intercept_gpu_launches)")
    launch = _defs(tree).get("launch") or []
    imported = any(isinstance(n, ast.ImportFrom) and any(a.name == "launch" for a in n.names)
                   for n in tree.body)
    assert launch[:3] == ["stream", "config", "kernel"] or imported, fixed(
        "dispatcher.launch, the call a launch ends with (intercept_gpu_launches)")
    assert "get_cufunc" in (CUDA / "codegen.py").read_text() and "get_cubin" in (CUDA / "codegen.py").read_text(), \
        fixed("the code library's get_cufunc, get_cubin (cufunc, cubin)")


def test_a_dispatcher_types_and_caches_its_compiled_kernels():
    d = _class(_tree("dispatcher.py"), "CUDADispatcher")
    defs = _defs(d)
    for attr in ("typeof_pyval", "compile"):
        assert attr in defs, fixed(f"CUDADispatcher.{attr} (compiled_for, compile_for)")
    assert "overloads" in defs or "overloads" in _self_attrs(d) or "overloads" in (CUDA / "dispatcher.py").read_text(), \
        fixed("CUDADispatcher.overloads (compiled_for, compile_for)")


def test_the_driver_is_where_it_was():
    tree = _tree("cudadrv/driver.py")
    assert any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "driver" for t in n.targets)
               for n in tree.body), fixed("the driver object numba.cuda.cudadrv.driver.driver (driver)")


def test_the_simulators_kernel_array_and_shared_memory():
    from numba.cuda.simulator import kernel as simk

    cls = nc.sim_kernel_class()
    assert cls is simk.FakeCUDAKernel, fixed("the simulator's FakeCUDAKernel (sim_kernel_class)")
    params = list(inspect.signature(cls.__init__).parameters)
    assert params[:2] == ["self", "fn"], fixed(f"FakeCUDAKernel.__init__, now {params} (on_sim_kernel_made)")
    src = inspect.getsource(cls)
    for attr in ("grid_dim", "block_dim", "dynshared_size", "_device"):
        assert attr in src, fixed(f"FakeCUDAKernel.{attr} (what a patched call reads)")
    assert callable(getattr(simk, "_get_kernel_context", None)), fixed("_get_kernel_context (in_sim_kernel)")
    assert nc.in_sim_kernel() is False
    arr = nc.sim_array_class()(np.arange(3, dtype=np.float32))
    assert nc.host_array(arr) is arr._ary and nc.host_array(5) == 5, fixed("FakeCUDAArray._ary (host_array)")
    assert callable(getattr(nc.sim_shared_class(), "array", None)), fixed("FakeCUDAShared.array (sim_shared_class)")


@pytest.mark.skipif(not book.gpu.SIMULATED, reason="the simulator's threads (a GPU session has none)")
def test_a_simulated_thread_knows_its_block_and_a_patched_call_sees_every_launch():
    seen = []

    def watching(orig):
        def call(self, *args):
            if nc.is_launch(self):
                seen.append((tuple(self.grid_dim), tuple(self.block_dim)))
            return orig(self, *args)
        return call

    @cuda.jit
    def where(out):
        i = cuda.threadIdx.x
        out[i] = i

    undo = nc.patch_sim_call(watching)
    try:
        out = cuda.to_device(np.zeros(64, np.int64))
        where[2, 64](out)
    finally:
        undo()
    assert seen == [((2, 1, 1), (64, 1, 1))]
    assert nc.sim_kernel_class().__call__ is not watching

    # sim_thread: the thread's number, a manager every thread of its block shares, the block
    got = {}

    @cuda.jit
    def threads(out):   # in the simulator a kernel body is Python, run by each thread
        tid, mgr, block = nc.sim_thread()
        got[tid] = (id(mgr), block)
        out[cuda.threadIdx.x] = 1

    threads[1, 8](cuda.to_device(np.zeros(8, np.int64)))
    assert sorted(got) == list(range(8)), fixed("the simulator's BlockThread.thread_id (sim_thread)")
    assert len({m for m, _ in got.values()}) == 1 and {b for _, b in got.values()} == {(8, 1, 1)}, \
        fixed("the simulator's BlockThread._manager._block_dim (sim_thread)")


def test_bfloat16_rounds_once_the_same_everywhere():
    """The rounding the host reference, the simulator's stores and the checks share."""
    from book import dtypes
    from book.kernels import reference

    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.nan, 0.0, -0.0], np.float32)
    bits = dtypes.bf16_bits(x)
    # ties to even both ways (1 + 2**-8 down to 1, 1 + 3 * 2**-8 up), NaN a quiet NaN
    assert bits.tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, dtypes.BF16_NAN, 0x0000, 0x8000]
    one = dtypes.bf16_bits(np.float32(1.01171875))
    assert isinstance(one, np.uint16) and one == 0x3F82       # a number gives a number
    assert reference.float32_to_bf16_bits is dtypes.bf16_bits
    assert reference.bf16_bits_to_float32 is dtypes.bf16_value
    back = dtypes.bf16_value(bits[:4])
    assert back.tolist() == [1.0, 1.0, 1.015625, -2.5] and float(dtypes.bf16_value(0x3F80)) == 1.0
    y = np.random.default_rng(3).standard_normal(4096).astype(np.float32)[::3]   # not contiguous
    assert np.all(np.abs(dtypes.bf16_value(dtypes.bf16_bits(y)) - y) <= np.abs(y) * 2.0 ** -8)


def test_the_simulators_atomics_fences_barriers_and_shared_arrays_where_simhazards_reaches():
    """book.simulator.hazard_recorder watches the simulator's atomics, fences and shared arrays, and
    book.simulator.scheduler's loop reads the grid and releases the barriers."""
    atomic = nc.sim_atomic_class()
    for name in nc.SIM_ATOMICS:
        fn = getattr(atomic, name, None)
        assert callable(fn), fixed(f"FakeCUDAAtomic.{name} (SIM_ATOMICS)")
        params = list(inspect.signature(fn).parameters)
        assert params[:2] == ["self", "array"], fixed(f"FakeCUDAAtomic.{name}'s parameters, now {params}")
        assert "array[" in inspect.getsource(fn), fixed(f"FakeCUDAAtomic.{name} reading array[...]")
    module = nc.sim_cuda_module_class()
    for name in ("threadfence", "threadfence_system", "threadfence_block", "syncthreads"):
        assert callable(getattr(module, name, None)), fixed(f"FakeCUDAModule.{name}")
    # sim_shared_array gives what numba-cuda's FakeCUDAShared.array gives, keyed as it keys it
    # (book/simulator/fidelity.py keeps numba-cuda's as _numba_array when it replaces it)
    shared = nc.sim_shared_class()(16)
    a = getattr(type(shared), "_numba_array", type(shared).array)(shared, 4, np.float32)
    (key,) = shared._allocations
    assert nc.sim_shared_array(shared, 4, np.float32, key) is a, fixed(
        "FakeCUDAShared._allocations keyed by (file, line) (sim_shared_array)")
    dyn = nc.sim_shared_array(shared, 0, np.float32, ("any", 1))
    assert dyn.size == 4 and np.shares_memory(dyn, shared._dynshared), fixed(
        "FakeCUDAShared._dynshared, _dynshared_size (sim_shared_array)")
    init = inspect.getsource(nc.sim_block_manager_class().__init__)
    assert "self._grid_dim" in init, fixed("BlockManager._grid_dim (book/simulator/scheduler.py's run_block)")


def test_replace_method_keeps_numbas_own_and_patches_once():
    class Sim:
        def run(self):
            return "numba's"

    def ours(self):
        return "ours, then " + self._numba_run()

    nc.replace_method(Sim, "run", ours)
    nc.replace_method(Sim, "run", ours)   # a second import hook: nothing changes
    assert Sim().run() == "ours, then numba's"
