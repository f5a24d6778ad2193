"""Every place the course reaches past numba-cuda's public API, in one module.

The course launches compiled kernels itself (``book.kernels.host.plan``: every planned launch),
gives a kernel more dynamic shared memory, records what a submission launches
(the grader's child) and, in Numba's CUDA simulator, watches and re-addresses launches (the
grader, ``check()``, the access tracer, ``tools/lab_ptx.py``) and lets a simulated warp meet
(the tensor-core intrinsics), and compiles a kernel for a GPU that is not here (the masters'
check and the grader's compile check of a simulated submission). Each of these needs a name numba-cuda does not promise to keep;
here each is reached once, by a function named after what it gives, written against the
numba-cuda that requirements.txt pins (``PINNED``). ``tests/library/test_numba_compat.py``
checks every one of them against the installed numba-cuda, so an upgrade that moves one fails
there, naming the function to fix, instead of in several modules at once.

Nothing here decides GPU or simulator: callers import it after ``import book``.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading

#: the numba-cuda these reaches were written against (requirements.txt)
PINNED = "0.30.4"


# ------------------------------------------------------------------ compiled kernels (GPU)
def compiled_for(kernel, args):
    """The kernel of dispatcher ``kernel`` compiled for the types of ``args`` (Numba's own
    typing of launch arguments), or None when it has not been compiled for them."""
    return kernel.overloads.get(tuple(kernel.typeof_pyval(a) for a in args))


def compile_for(kernel, types):
    """The kernel compiled for ``types`` (compiling it now if it was not)."""
    return kernel.overloads.get(types) or kernel.compile(types)


def is_plain(compiled) -> bool:
    """A compiled kernel the course may launch itself: not built for debugging, not
    cooperative, no extensions (anything else keeps Numba's own launch)."""
    return not (compiled.debug or compiled.cooperative or compiled.extensions)


def cufunc(compiled):
    """numba-cuda's CUDA function object of a compiled kernel (``.handle``, ``.name``,
    ``.device``; ``.kernel``: cuda.core's kernel)."""
    return compiled.library.get_cufunc()


def cubin(compiled) -> bytes:
    """The compiled image (cubin) numba-cuda loaded for a compiled kernel."""
    image = compiled.library.get_cubin()
    return bytes(getattr(image, "code", image))


def driver():
    """numba-cuda's driver object (its ``cuKernelSetAttribute``, ``cuFuncGetAttribute``, ...)."""
    from numba.cuda.cudadrv.driver import driver as the_driver

    return the_driver


def intercept_gpu_launches(on_kernel, on_launch) -> None:
    """Watch every launch of a compiled kernel, for good (the grader's child):
    ``on_kernel(compiled, griddim, blockdim, sharedmem)`` before it and None after, and
    ``on_launch(args)`` with the launch's flattened parameters as numba-cuda passes them."""
    from numba.cuda import dispatcher as disp

    kernel_launch, launch = disp._Kernel.launch, disp.launch

    def watched_kernel_launch(self, args, griddim, blockdim, stream=0, sharedmem=0):
        on_kernel((self, griddim, blockdim, sharedmem))
        try:
            return kernel_launch(self, args, griddim, blockdim, stream, sharedmem)
        finally:
            on_kernel(None)

    def watched_launch(stream, config, kernel, *args):
        on_launch(args)
        return launch(stream, config, kernel, *args)

    disp._Kernel.launch = watched_kernel_launch
    disp.launch = watched_launch


# ------------------------------------------------------------------ compiling for a GPU that is not here
# Numba's real CUDA target needs no GPU to compile: NVVM ships as a wheel. A process that
# imported numba.cuda with the simulator off compiles a kernel for any compute capability; the
# lab masters' check (tools/lab_ptx.py) and the grader's compile check of a simulated
# submission (autograder/sandbox/inside/compile.py) both compile through these two.
def on_gpu_kernel_made(callback) -> None:
    """For good: ``callback(dispatcher, py_func)`` as each ``@cuda.jit`` dispatcher is made
    (before ``cuda.jit`` compiles an eager signature; a factory makes several from one function)."""
    from numba.cuda.dispatcher import CUDADispatcher

    init = CUDADispatcher.__init__

    def made(self, py_func, *a, **k):
        init(self, py_func, *a, **k)
        callback(self, py_func)

    CUDADispatcher.__init__ = made


class NotAKernel(TypeError):
    """What was launched is no ``@cuda.jit`` dispatcher once the simulator is off."""


def compile_for_cc(dispatcher, types, cc, ptx: bool = True) -> str:
    """The PTX of ``@cuda.jit`` dispatcher ``dispatcher`` for the Numba ``types`` of its
    arguments, compiled for compute capability ``cc`` with the kernel's own options (fastmath,
    lineinfo, ...): what a launch with those types would compile on such a GPU. Raises Numba's
    error where it does not compile (NotAKernel: no real-target dispatcher). ``ptx=False``:
    Numba's typing and lowering only (its LLVM IR, returned), no NVVM: what a body of host
    NumPy or Python objects fails at, in a fraction of the time and where no NVVM is installed
    (Gradescope's runtime: numba, numba-cuda, numpy)."""
    import inspect

    from numba.cuda.compiler import compile_ptx

    if not hasattr(dispatcher, "py_func") or not hasattr(dispatcher, "targetoptions"):
        raise NotAKernel(f"not a @cuda.jit kernel when the simulator is off "
                         f"({type(dispatcher).__name__!r})")
    accepted = set(inspect.signature(compile_ptx).parameters) - {"pyfunc", "sig", "cc", "device"}
    opts = {k: v for k, v in dispatcher.targetoptions.items() if k in accepted}
    # a device function the kernel calls (numba-cuda's own too: its np.empty) is compiled for
    # "the current device", which a process without a GPU has not: the target stands in for it
    from numba.cuda import dispatcher as disp

    class Target:
        compute_capability = tuple(cc)[:2]

    current = disp.get_current_device
    disp.get_current_device = lambda: Target
    try:
        if ptx:
            text, _ = compile_ptx(dispatcher.py_func, tuple(types), cc=tuple(cc)[:2], **opts)
        else:   # typing and lowering (compile_cuda: in numba-cuda and in numba's own
            # numba.cuda alike, which is what Gradescope's runtime imports), before any NVVM
            from numba.cuda import compiler

            cres = compiler.compile_cuda(dispatcher.py_func, None, tuple(types), debug=False,
                                         lineinfo=False, fastmath=bool(opts.get("fastmath")),
                                         cc=tuple(cc)[:2])
            text = cres.library.get_llvm_str()
    finally:
        disp.get_current_device = current
    return text


def compile_error_line(e, filename: str):
    """The line of ``filename`` (a cell's code name) a compile error ``e`` is at, or None.
    numba-cuda raises a TypingError outside its error contexts, so its message may name no
    line: the innermost compiler frame holding a ``Loc`` in that file has it."""
    line = None
    tb = e.__traceback__
    while tb is not None:
        for v in list(tb.tb_frame.f_locals.values()):
            for loc in (v, getattr(v, "loc", None)):
                if getattr(loc, "filename", None) == filename and isinstance(
                        getattr(loc, "line", None), int):
                    line = loc.line
        tb = tb.tb_next
    return line


# ------------------------------------------------------------------ the simulator
def sim_kernel_class():
    """The simulator's kernel class (``FakeCUDAKernel``): what its ``__call__`` launches;
    its ``fn``, ``grid_dim``, ``block_dim``, ``dynshared_size`` and ``_device`` (a device
    function, never launched itself)."""
    from numba.cuda.simulator import kernel as simk

    return simk.FakeCUDAKernel


def in_sim_kernel() -> bool:
    """Is a simulated kernel running now (a call from inside it is no launch)?"""
    from numba.cuda.simulator import kernel as simk

    return simk._get_kernel_context() is not None


def is_launch(kernel) -> bool:
    """Is this call of a simulator kernel a launch (not a device function, not from inside a
    running kernel)?"""
    return not kernel._device and not in_sim_kernel()


def patch_sim_call(wrap):
    """Replace the simulator's kernel call by ``wrap(original)`` (``original(self, *args)``);
    returns the function that undoes it."""
    cls = sim_kernel_class()
    original = cls.__call__
    cls.__call__ = wrap(original)

    def undo():
        cls.__call__ = original
    return undo


def on_sim_kernel_made(callback) -> None:
    """For good: ``callback(kernel, fn)`` after the simulator makes each kernel object from the
    Python function ``fn`` (a factory makes several from one function)."""
    cls = sim_kernel_class()
    init = cls.__init__

    def made(self, fn, *a, **k):
        init(self, fn, *a, **k)
        callback(self, fn)

    cls.__init__ = made


def sim_shared_class():
    """The simulator's ``cuda.shared`` (``FakeCUDAShared``): its ``array`` makes a block's
    shared array."""
    from numba.cuda.simulator import kernelapi

    return kernelapi.FakeCUDAShared


def sim_shared_array(shared, shape, dtype, caller):
    """What the simulator's ``cuda.shared.array(shape, dtype)`` returns to a call made at
    ``caller`` (its (file, line)): the block's one array for that line (``FakeCUDAShared``
    keys a static array by the line that asks for it, which it finds on the stack: a wrapper
    around ``array`` must say the line itself), or the launch's dynamic buffer for
    ``shape == 0``. ``shared`` is the running kernel's ``cuda.shared``. Safe when the block's
    threads ask at once (numba-cuda's own ``array`` is not: book/simulator/fidelity.py replaces it
    by this)."""
    import numpy as np

    from numba.cuda import types
    from numba.cuda.np import numpy_support

    dtype = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) else np.dtype(dtype)
    if shape == 0:
        count = shared._dynshared_size // dtype.itemsize
        return np.frombuffer(shared._dynshared.data, dtype=dtype, count=count)
    made = shared._allocations.get(caller)
    if made is None:
        # The block's threads all ask at once, each a Python thread. numba-cuda's
        # ``FakeCUDAShared.array`` looks up, then stores: a thread preempted between the two
        # lets another miss too, and each keeps an array of its own (garbage where the others
        # wrote: chapter 7's dual GEMM returned inf on a loaded CI machine). ``setdefault`` is
        # one step under the GIL (a (str, int) key hashes in C): the first array stored is
        # the one every thread gets.
        made = shared._allocations.setdefault(caller, np.empty(shape, dtype))
    return made


def sim_atomic_class():
    """The simulator's ``cuda.atomic`` (``FakeCUDAAtomic``): each operation a method
    ``(self, array, index, ...)`` that reads ``array[index]`` and writes it back under a lock
    (``compare_and_swap(self, array, old, val)`` on element 0)."""
    from numba.cuda.simulator import kernelapi

    return kernelapi.FakeCUDAAtomic


#: the simulator's atomic operations, each a method of ``sim_atomic_class()``
SIM_ATOMICS = ("add", "sub", "and_", "or_", "xor", "inc", "dec", "exch", "max", "min",
               "nanmax", "nanmin", "compare_and_swap", "cas")


def sim_cuda_module_class():
    """The ``cuda`` a simulated kernel sees (``FakeCUDAModule``): its ``threadfence``,
    ``threadfence_system`` and ``threadfence_block`` are methods (no-ops in numba-cuda)."""
    from numba.cuda.simulator import kernelapi

    return kernelapi.FakeCUDAModule


#: the simulator's device array module (book/simulator/fidelity.py patches it when it is imported)
SIM_ARRAY_MODULE = "numba.cuda.simulator.cudadrv.devicearray"


def sim_array_class():
    """The simulator's device array class (``FakeCUDAArray``), of ``SIM_ARRAY_MODULE``."""
    return importlib.import_module(SIM_ARRAY_MODULE).FakeCUDAArray


def host_array(a):
    """The NumPy array behind a simulator device array (``a`` itself for anything else)."""
    return a._ary if isinstance(a, sim_array_class()) else a


#: the simulator's kernel API module: its ``FakeCUDAShared`` makes a block's shared arrays
#: (book/simulator/fidelity.py replaces its ``array`` when the module is imported)
SIM_KERNELAPI_MODULE = "numba.cuda.simulator.kernelapi"


#: the simulator's kernel module: its ``BlockManager`` runs a block's threads
#: (book/simulator/scheduler.py replaces its ``run`` when the module is imported)
SIM_KERNEL_MODULE = "numba.cuda.simulator.kernel"


def sim_block_manager_class():
    """The simulator's ``BlockManager``: ``run(grid_point, *args)`` starts one ``BlockThread``
    per thread of the block (``BlockThread(target, manager, grid_point, block_point, debug)``,
    with ``syncthreads_blocked``, ``syncthreads_event``, ``exception`` and ``abort``) and
    releases them at each ``syncthreads``; its ``_f``, ``_grid_dim``, ``_block_dim`` and
    ``_debug``."""
    return importlib.import_module(SIM_KERNEL_MODULE).BlockManager


def sim_block_thread_class():
    """The simulator's ``BlockThread`` (a ``threading.Thread`` per simulated CUDA thread)."""
    return importlib.import_module(SIM_KERNEL_MODULE).BlockThread


class _PatchOnImport:
    """A meta-path finder that lets the real finder load ``name``, then calls ``fn(module)``,
    once."""

    def __init__(self, name, fn):
        self.name, self.fn = name, fn

    def find_spec(self, name, path, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            self.fn(module)

        spec.loader.exec_module = exec_module
        return spec


def replace_method(cls, name: str, new) -> None:
    """``cls.<name>`` becomes ``new``, numba-cuda's own kept as ``cls._numba_<name>`` (the
    tests compare against it); once: a second call, from a second import hook, changes nothing."""
    if cls.__dict__.get(name) is new:
        return
    setattr(cls, f"_numba_{name}", cls.__dict__.get(name, getattr(cls, name)))
    setattr(cls, name, new)


def when_imported(name: str, fn) -> None:
    """``fn(module)`` now if the module ``name`` is loaded, else right after it is first
    imported (a one-shot import hook: nothing of numba.cuda is imported here, so ``import book``
    stays cheap and Numba still decides GPU or simulator when numba.cuda is first imported)."""
    mod = sys.modules.get(name)
    if mod is not None:
        fn(mod)
    elif not any(isinstance(f, _PatchOnImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(name, fn))


def sim_thread():
    """(the calling simulated thread's number in its block, the block's manager (the one
    object its threads share), the block's dimensions): what lets a warp's lanes meet."""
    t = threading.current_thread()
    return t.thread_id, t._manager, tuple(t._manager._block_dim)
