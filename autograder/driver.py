"""The trusted driver that runs inside each sandboxed child process.

Started by the sandbox's launcher (autograder/sandbox/launcher.py) as
``python -I -B agdriver.py config.json`` in a fresh temporary directory that holds: this file,
``agsettings.py`` (autograder/sandbox/settings.py: what ``config.json`` holds, typed),
``aglinux.py`` (autograder/sandbox/linux.py: the kernel's constants),
``aginputs.py`` (autograder/inputs.py), a copy of the ``book`` library WITHOUT
``book.kernels`` (but for the instruction modules graded code may import,
``GRADED_KERNEL_MODULES`` of autograder/sandbox/child.py) and the student's code as
``submission.py``.
It never receives the lab's references, solutions, rubric or hidden-case generator: only
seeds, shapes and argument order, one test at a time.

Order matters (everything before ``load_submission`` runs before any student code):
1. isolate(): new network and mount namespaces where the OS allows (a seccomp filter cuts the
   network where no namespace can be made), the repository, the grader's output folder and
   the other submissions hidden behind empty tmpfs mounts, the grader's Python shared
   read-only, then (as root) drop to a uid of its own with a process limit; in a user
   namespace, drop every capability. Student code never runs as root: main() checks before
   it loads a line of the submission.
2. import book (GPU or simulator), numpy, numba.cuda; count kernel launches; block torch,
   cupy, jax, triton, tensorflow and book.kernels imports.
3. run the student's cells, find the function, check its signature, answer commands.

Everything the student's code could reach in this process (including this module, the
launch counter and book.bench) is untrusted from then on: the grader's parent process
checks outputs against its own float64 references and times with its own clock.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

# -I keeps this script's folder (the trusted copies) off sys.path until the path is set below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from aglinux import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER, MS_BIND, MS_NODEV,
                     MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, PR_SET_PDEATHSIG)
from agprivilege import drop_capabilities, drop_to, privileged, share_read_only
from agseccomp import deny_network
from agsettings import SIM_MAX_THREADS, DriverSettings

CFG = DriverSettings.load(sys.argv[1])
_REPLY = os.fdopen(CFG.reply_fd, "w", buffering=1)
_CMDS = os.fdopen(CFG.cmd_fd, "r")
WORK = CFG.workdir


def reply(**kw):
    _REPLY.write(json.dumps(kw, default=str) + "\n")
    _REPLY.flush()


# --------------------------------------------------------------------------- isolation
def isolate(cfg):
    """Namespaces, hidden paths, privilege drop. Returns what was achieved (for the log)."""
    import ctypes

    got = {"net": False, "mount": False, "uid_drop": False, "hidden": 0, "notes": []}
    libc = ctypes.CDLL(None, use_errno=True)
    if not cfg.isolate:
        got["notes"].append("isolation disabled by the grader's options")
        return privileges(cfg, got, libc, userns=False)
    uid, gid = os.getuid(), os.getgid()
    userns = False
    # under compute-sanitizer (grade --sanitize) the launcher made the network namespace around
    # the tool, which finds this process through a socket in it (the sandbox's launcher,
    # _net_around_wrapper; it stops the child if it cannot, so the flag says it was made)
    net_made = cfg.launch.net_around_wrap
    if net_made:
        got["net"] = True
        got["notes"].append("network namespace made by the launcher around compute-sanitizer")
    NET = 0 if net_made else CLONE_NEWNET
    # an IPC namespace of its own: System V shared memory, semaphores and message queues (and
    # their system-wide counts) are not shared with other submissions
    if libc.unshare(CLONE_NEWNS | NET | CLONE_NEWIPC) == 0:
        got["net"] = got["mount"] = got["ipc"] = True
    elif libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | NET | CLONE_NEWIPC) == 0:
        userns = got["ipc"] = True
        try:   # its own uid inside, not 0: it is no root there either (privileges())
            for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                               ("/proc/self/gid_map", f"{gid} {gid} 1")):
                with open(path, "w") as f:
                    f.write(text)
            got["net"] = got["mount"] = True
        except OSError as e:
            got["notes"].append(f"user namespace maps failed: {e}")
            got["net"] = True
    elif net_made:
        pass
    elif libc.unshare(CLONE_NEWNET) == 0:
        got["net"] = True
    if got["net"]:
        got["network"] = "a network namespace of its own (no interface but loopback)"
    else:   # no namespace (Docker's default seccomp profile refuses it): a filter cuts it
        why = deny_network()
        got["network"] = ("cut by a seccomp filter (no socket but a Unix one), no network "
                          "namespace: unshare(2) refused" if not why else
                          f"NOT CUT: unshare(2) refused and no seccomp filter ({why}): the "
                          "submission could reach the network")
        got["notes"].append(f"network: {got['network']}")
    if got["mount"]:
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            got["notes"].append("could not make mounts private; paths not hidden")
        else:
            for p in cfg.hide:
                pb = p.encode()
                if os.path.isdir(p) and not os.path.islink(p):
                    rc = libc.mount(b"tmpfs", pb, b"tmpfs", MS_RDONLY, b"size=16k,mode=0555")
                elif os.path.isfile(p):
                    rc = libc.mount(b"/dev/null", pb, None, MS_BIND, None)
                else:
                    continue
                if rc == 0:
                    got["hidden"] += 1
                else:
                    got["notes"].append(f"could not hide {p} (errno {ctypes.get_errno()})")
            private_storage(libc, cfg, got)
    else:
        got["notes"].append("no mount namespace: the repository and other submissions are not "
                            "hidden from this submission (run the grader as root or enable user "
                            "namespaces)")
    return privileges(cfg, got, libc, userns)


def privileges(cfg, got, libc, userns):
    """The last step before any student code: in a user namespace, give up every capability;
    as root, share the grader's Python read-only (in a mount namespace: made here if the
    isolation made none) and become the uid the grader chose, with its process limit. What
    was done goes into ``got``; main() refuses to run a submission that could still act as
    root."""
    if userns:   # the child is the grader's uid: its Python must be read-only to it here
        if got["mount"]:
            got["notes"] += share_read_only(libc, cfg.storage.keep, WORK, cover=False)
        why = drop_capabilities()
        if why:
            got["notes"].append(f"could not drop privileges in the user namespace: still {why}")
        return got
    if os.getuid() != 0 or cfg.drop_uid is None:
        return got
    if not got["mount"] and libc.unshare(CLONE_NEWNS) == 0 and \
            libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0:
        got["mount_for_sharing"] = True   # (isolate off: nothing hidden, the Python shared)
    if got["mount"] or got.get("mount_for_sharing"):
        got["notes"] += share_read_only(libc, cfg.storage.keep, WORK)
    why = drop_to(cfg.drop_uid, cfg.nproc)
    got["uid_drop"] = not why
    if why:
        got["notes"].append(f"could not drop privileges: {why}")
    return got


def private_storage(libc, cfg, got):
    """/tmp and /dev/shm of this child's own, size-limited. As root the grader made the working
    folder a tmpfs of its own (autograder/sandbox/storage.py, PLACES): its subfolders are bound
    over /tmp and /dev/shm (one limit for the three, readable by the grader). Otherwise (a user namespace) a fresh
    tmpfs of the same limits over each, private but unseen by the grader; the working folder
    then stays on the host's disk, limited per file only, and the notes say so."""
    import ctypes

    st = cfg.storage
    places = [place for place, _name in st.places]
    # what the child needs under /tmp or /dev/shm (its working folder; an interpreter installed
    # under /tmp), held open to be put back after the place is covered
    keep = {}
    for p in {os.path.realpath(WORK), *map(os.path.abspath, st.keep)}:
        if any(p.startswith(place + "/") for place in places) and os.path.exists(p):
            keep[p] = os.open(p, os.O_PATH)
    done = []
    for place, name in st.places:
        if not os.path.isdir(place):
            continue
        if st.private:
            rc = libc.mount(os.path.join(os.path.realpath(WORK), name).encode(), place.encode(), None, MS_BIND, None)
        else:
            opts = f"size={st.size_bytes},nr_inodes={st.files},mode=1777"
            rc = libc.mount(b"tmpfs", place.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode())
        if rc != 0:
            got["notes"].append(f"{place} is shared with the host: mount failed (errno {ctypes.get_errno()})")
            continue
        done.append(place)
        for p, fd in sorted(keep.items()):   # parents first
            if not p.startswith(place + "/"):
                continue
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(p, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(p), exist_ok=True)
                open(p, "a").close()
            if libc.mount(f"/proc/self/fd/{fd}".encode(), p.encode(), None, MS_BIND, None) != 0:
                reply(event="fatal", stage="sandbox",
                      error=f"the sandbox could not keep {p} under its own {place} (errno {ctypes.get_errno()})")
                os._exit(3)
    for fd in keep.values():
        os.close(fd)
    got["private_storage"] = done
    if not st.private:
        got["notes"].append("the working folder is on the host's disk, limited only per file "
                            "(the grader is not root)")


ISO = isolate(CFG)
try:  # die with the grader (a killed grading run leaves no orphans); after the uid drop, which clears it
    import ctypes as _ct

    _ct.CDLL(None).prctl(PR_SET_PDEATHSIG, 9)  # SIGKILL
    if os.getppid() == 1:
        os._exit(5)
except Exception:
    pass
os.chdir(WORK)
# the grader's own search path, in its order (e.g. a numpy wheel before the system's), minus the repo
_extra = list(CFG.extra_paths)
sys.path[:] = [CFG.trusted_dir] + _extra + [p for p in sys.path if p not in _extra]

if CFG.simulated:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    # The simulator runs a Python thread per simulated CUDA thread: a 256-thread block is 256
    # threads. At the default 8 MiB of stack each they reserve 2 GiB of the child's address
    # space (RLIMIT_AS, Limits.mem_bytes), which beside a process that has mapped CUDA's
    # libraries ran out on the H100 ("can't start new thread"). 1 MiB holds Python's default
    # recursion depth; it applies to the threads started from here on.
    import threading as _threading

    _threading.stack_size(1 << 20)

try:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # its one-line announcement is not the student's output
        import book  # noqa: F401  (decides GPU or simulator before numba.cuda is imported)
    from book import gpu as _gpu
    SIMULATED = bool(_gpu.SIMULATED)
except Exception as e:  # the library is broken: say so, the grader reports it
    reply(event="fatal", stage="import", error=f"the course library failed to import in the sandbox: {e!r}")
    sys.exit(3)

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from aginputs import generate, guard_damage, guarded  # noqa: E402

LAUNCHES = [0]


class LaunchTooLargeToSimulate(Exception):
    """A launch the simulator would take minutes to run: the grader says so plainly."""


# --------------------------------------------------------------------------- recording
# What the student's function launches, recorded during one traced call: the compiled image
# of each kernel for the argument types used, its entry name, grid, block, dynamic shared
# memory, order, and what every parameter is (an input, the output, a scratch buffer with its
# contents at first use, or a scalar). The grader replays the recording on its own inputs, in
# its own process (GPU) or in a fresh child that never calls the student's function
# (simulator). A forged recording gains nothing: it is replayed on inputs it never saw and the
# result is checked against the grader's float64 reference.
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
    with open(path, "wb") as f:
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

    lib = kernel._codelibrary
    image = lib.get_cubin()
    image = bytes(getattr(image, "code", image))
    key = hashlib.sha256(image).hexdigest()[:20]
    if key not in REC["images"]:
        fn = f"img_{key}.cubin"
        with open(os.path.join(REC["dir"], fn), "wb") as f:
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

    REC["launches"].append({"image": key, "entry": lib.get_cufunc().name, "grid": dims(griddim),
                            "block": dims(blockdim), "shmem": int(sharedmem or 0), "params": params})


def _array_of(a):
    return getattr(a, "_ary", a) if not isinstance(a, np.ndarray) else a


def _byte_bounds(a):
    fn = getattr(np, "byte_bounds", None) or np.lib.array_utils.byte_bounds  # moved in NumPy 2
    return fn(a)


def _data_ptr(a):
    return int(a.__array_interface__["data"][0])


def _where_sim(arr):
    """(buffer name, offset of the view's first element) of an array a simulated kernel gets:
    an input, the output, or a scratch buffer. A scratch buffer is the whole allocation the
    view belongs to (its root array), snapshotted at first use and found again by address at
    every later launch, as on the GPU (_where_gpu): a temporary written by one launch and read
    by the next is one buffer in the replay, whatever view of it each launch was given."""
    lo, hi = _byte_bounds(arr)
    ptr = _data_ptr(arr)
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
        arr = _array_of(a)
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


def _count_launches():
    """Count and record every kernel launch (the count is only for feedback: correctness
    and performance rest on the grader's replay of the recording)."""
    if SIMULATED:
        from numba.cuda.simulator import kernel as simk

        from book.sim_addressing import gpu_addressed

        orig = simk.FakeCUDAKernel.__call__
        orig_init = simk.FakeCUDAKernel.__init__

        def registered(self, fn, *a, **k):
            orig_init(self, fn, *a, **k)
            c = fn.__code__
            SIM_KERNELS.setdefault((c.co_filename, c.co_firstlineno, c.co_name), []).append(self)

        def counted(self, *args):
            if not self._device and simk._kernel_context is None:
                LAUNCHES[0] += 1
                threads = int(np.prod(self.grid_dim)) * int(np.prod(self.block_dim))
                if threads > SIM_MAX_THREADS:
                    raise LaunchTooLargeToSimulate(
                        f"a launch of {tuple(self.grid_dim)} blocks x {tuple(self.block_dim)} threads "
                        f"= {threads:,} threads")
                reply(event="launch", threads=threads)  # the grader scales its deadline with it
                _record(_record_sim, self, args)
                # arrays addressed as on a GPU: a store past the end of `out` lands in its guard
                # zone (aginputs.guarded) instead of raising, and is found there, as on a GPU
                args = gpu_addressed(args)
            return orig(self, *args)

        simk.FakeCUDAKernel.__init__ = registered
        simk.FakeCUDAKernel.__call__ = counted
    else:
        from numba.cuda import dispatcher as disp

        orig_kernel_launch = disp._Kernel.launch
        orig_launch = disp.launch

        def kernel_launch(self, args, griddim, blockdim, stream=0, sharedmem=0):
            LAUNCHES[0] += 1
            REC["kernel"] = (self, griddim, blockdim, sharedmem)
            try:
                return orig_kernel_launch(self, args, griddim, blockdim, stream, sharedmem)
            finally:
                REC["kernel"] = None

        def launch(stream, config, kernel, *args):
            if REC["kernel"] is not None:
                _record(_record_gpu, REC["kernel"], args)
            return orig_launch(stream, config, kernel, *args)

        disp._Kernel.launch = kernel_launch
        disp.launch = launch


BLOCKED = {
    "torch": "torch", "cupy": "cupy", "cupyx": "cupy", "jax": "jax", "jaxlib": "jax",
    "tensorflow": "tensorflow", "triton": "triton", "pycuda": "pycuda",
}


class _Blocker:
    """Refuses libraries that would compute the answer for the student. Of ``book.kernels``
    only the instruction modules the sandbox copied (GRADED_KERNEL_MODULES of sandbox/child.py) are
    let through: the list is taken once, before any student code runs."""

    def __init__(self):
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "book", "kernels")
        names = os.listdir(here) if os.path.isdir(here) else []
        self.allowed = {"book.kernels." + f[:-3] for f in names
                        if f.endswith(".py") and f != "__init__.py"}
        if self.allowed:
            self.allowed.add("book.kernels")

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in BLOCKED:
            raise ImportError(
                f"`import {name}` is not allowed in graded code: this lab asks for a kernel "
                f"written with numba.cuda, not a call into {BLOCKED[top]}")
        if name in self.allowed:
            return None
        if name == "book.kernels" or name.startswith("book.kernels."):
            raise ImportError("`book.kernels` (the chapters' kernels) is not available to graded "
                              "code: write this lab's kernel yourself")
        if top in ("autograder", "solutions"):
            raise ImportError(f"`{name}` is not available to graded code")
        return None


def _student_tb(exc):
    """Traceback lines from the student's own code only (no grader frames)."""
    tb = traceback.extract_tb(exc.__traceback__)
    own = [f for f in tb if f.filename.startswith("<cell") or f.filename.startswith("<submission")]
    lines = traceback.format_list(own[-6:]) if own else []
    return "".join(lines) + f"{type(exc).__name__}: {exc}"


# --------------------------------------------------------------------------- loading
def load_submission():
    import linecache

    with open(os.path.join(WORK, "cells.json")) as f:
        cells = json.load(f)
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    # the lab's own helpers are no-ops here: the grader runs the tests itself
    ns["check"] = lambda *a, **k: None
    errors = []
    for i, cell in enumerate(cells):
        name = f"<cell {cell['index']}>"
        linecache.cache[name] = (len(cell["source"]), None, cell["source"].splitlines(True), name)
        try:
            code = compile(cell["source"], name, "exec")
        except SyntaxError as e:
            errors.append({"cell": cell["index"], "error": "SyntaxError",
                           "message": f"line {e.lineno}: {e.msg}"})
            continue
        try:
            exec(code, ns)
        except BaseException as e:  # SystemExit too: keep going
            errors.append({"cell": cell["index"], "error": type(e).__name__, "message": _student_tb(e)})
        ns["check"] = lambda *a, **k: None
    return ns, errors


def signature_problems(ns):
    import inspect

    problems, found = {}, {}
    for fname, params in CFG.functions.items():
        fn = ns.get(fname)
        if fn is None:
            defined = sorted(k for k, v in ns.items() if callable(v) and not k.startswith("_") and k != "check"
                             and getattr(v, "__module__", None) in (None, "__main__"))
            problems[fname] = (f"no function named `{fname}` is defined (functions your code "
                               f"defines: {', '.join(defined) or 'none'}); the lab asks for "
                               f"`{fname}({', '.join(params)})`")
            continue
        if not callable(fn):
            problems[fname] = f"`{fname}` is a {type(fn).__name__}, not a function"
            continue
        try:
            sig = inspect.signature(fn)
            sig.bind(*params)
        except (TypeError, ValueError) as e:
            try:
                shown = str(inspect.signature(fn))
            except (TypeError, ValueError):
                shown = "(?)"
            problems[fname] = (f"`{fname}{shown}` cannot be called as `{fname}({', '.join(params)})`"
                               f": {e}")
            continue
        found[fname] = fn
    return found, problems


# --------------------------------------------------------------------------- tests
def _device_args(args):
    """Build device arrays: inputs from specs, outputs poisoned with NaN, each the middle of
    an allocation with a guard zone before and after it (aginputs.guarded: ``guard``
    elements, as the grader says). Returns the arrays the function gets, the inputs' host
    copies, the outputs, and {name: (whole allocation, guard)}."""
    built, host_in, outs, whole = [], {}, {}, {}
    for a in args:
        if a["role"] not in ("in", "out"):
            built.append(a["value"])
            continue
        if a["role"] == "in":
            h = host_in[a["name"]] = generate(a["spec"])
        else:
            h = np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"])
        g = int(a.get("guard", 0))
        flat = cuda.to_device(guarded(h, g, a["role"]))
        d = flat[g:g + h.size].reshape(h.shape)
        whole[a["name"]] = (flat, g)
        if a["role"] == "out":
            outs[a["name"]] = d
        built.append(d)
    return built, host_in, outs, whole


def _buffer_extent(d, flat, guard):
    """Where an input or the output lies, for the recording: in the simulator (the whole
    allocation, the array's first byte), on a GPU (the array's first byte, and the bytes of
    the allocation before and after it, relative to that)."""
    size = d.dtype.itemsize
    if SIMULATED:
        return _array_of(flat), _data_ptr(_array_of(d))
    return (int(d.device_ctypes_pointer.value or 0), -guard * size, (d.size + guard) * size)


def _recorded_call(fn, msg, built, whole):
    """Call the student's function once with recording on; write the recording to a folder
    the grader reads (rec_<id>/launches.json, the images, the scratch snapshots)."""
    rec_dir = os.path.join(WORK, f"rec_{msg['id']}")
    os.makedirs(rec_dir, exist_ok=True)
    REC.update(on=True, launches=[], scratch=[], images={}, dir=rec_dir, error=None,
               buffers={a["name"]: _buffer_extent(d, *whole[a["name"]]) for a, d in zip(msg["args"], built)
                        if a["role"] in ("in", "out")})
    try:
        ret = fn(*built)
        cuda.synchronize()
    finally:
        REC["on"] = False
    rec = {"launches": REC["launches"], "images": REC["images"], "error": REC["error"],
           "scratch": [{k: v for k, v in s.items() if k not in ("base", "keep")} for s in REC["scratch"]],
           "simulated": SIMULATED}
    with open(os.path.join(rec_dir, "launches.json"), "w") as f:
        json.dump(rec, f)
    return ret, os.path.basename(rec_dir)


def run_test(fns, msg):
    fn = fns[msg["function"]]
    if msg["kind"] == "numeric":
        t0 = time.perf_counter()
        value = fn(*[a["value"] for a in msg["args"]])
        if hasattr(value, "item") and getattr(value, "size", 2) == 1:
            value = value.item()
        if not isinstance(value, (int, float, str, bool, type(None))):
            value = repr(value)[:200]
        return {"ok": True, "value": value, "seconds": time.perf_counter() - t0}
    built, host_in, outs, whole = _device_args(msg["args"])
    cuda.synchronize()
    before = LAUNCHES[0]
    t0 = time.perf_counter()
    ret, rec = _recorded_call(fn, msg, built, whole)
    dt = time.perf_counter() - t0
    launches = LAUNCHES[0] - before
    files = {}
    for name in outs:   # the whole allocation: the grader checks the guard zones itself
        path = os.path.join(WORK, f"out_{msg['id']}_{name}.npy")
        np.save(path, whole[name][0].copy_to_host())
        files[name] = os.path.basename(path)
    modified, input_guards = [], {}
    for a, d in zip(msg["args"], built):
        if a["role"] != "in":
            continue
        flat, g = whole[a["name"]]
        host = flat.copy_to_host()
        if not np.array_equal(host[g:g + d.size].reshape(d.shape), host_in[a["name"]], equal_nan=True):
            modified.append(a["name"])
        damage = guard_damage(host, g, "in")
        if damage:
            input_guards[a["name"]] = [damage, int(d.size)]
    returned = None
    if ret is not None:
        returned = "the output array" if any(ret is d for d in outs.values()) else type(ret).__name__
    again = None
    if msg.get("again"):  # the same array objects, new contents: a fresh answer is due
        again = _call_again(fn, msg, built, outs)
    return {"ok": True, "files": files, "launches": launches, "modified_inputs": modified,
            "input_guards": input_guards, "returned": returned, "seconds": dt, "recording": rec,
            "again": again}


def _call_again(fn, msg, built, outs):
    for a, d in zip(msg["again"], built):
        if a["role"] == "in":
            d.copy_to_device(generate(a["spec"]))
        elif a["role"] == "out":
            d.copy_to_device(np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"]))
    cuda.synchronize()
    fn(*built)
    cuda.synchronize()
    name = next(a["name"] for a in msg["again"] if a["role"] == "out")
    pos = np.asarray(msg["again_positions"], dtype=np.int64)
    path = os.path.join(WORK, f"again_{msg['id']}.npy")
    np.save(path, outs[name].copy_to_host().reshape(-1)[pos])
    return os.path.basename(path)


def replay_sim(msg):
    """The simulator's replay: launch only the recorded kernels (found by their code, among
    the kernels the notebook's cells created) on fresh inputs the grader named; the student's
    function is never called. Writes the output for the grader to compare."""
    with open(os.path.join(msg["recording_dir"], "launches.json")) as f:
        rec = json.load(f)
    if rec.get("error"):   # nothing was replayed: no verdict either way
        return {"ok": False, "error": "ReplayError", "unverifiable": True,
                "message": f"the launches could not be recorded in the simulator: {rec['error']}"}
    if not rec["launches"]:
        return {"ok": False, "error": "ReplayError", "message": "your function launched no CUDA kernel"}
    bufs = {}   # name -> (the allocation, the byte where the recorded offsets count from)
    for a in msg["args"]:   # inputs and the output between guard zones, as in the test
        if a["role"] not in ("in", "out"):
            continue
        h = generate(a["spec"]) if a["role"] == "in" else \
            np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"])
        g = int(a.get("guard", 0))
        bufs[a["name"]] = (cuda.to_device(guarded(h, g, a["role"])), g * h.dtype.itemsize)
    for s in rec["scratch"]:   # each allocation as it was at its first use, as raw bytes
        raw = open(os.path.join(msg["recording_dir"], s["file"]), "rb").read()
        bufs[s["name"]] = (cuda.to_device(np.frombuffer(raw, dtype=np.uint8).copy()), 0)
    reps = int(msg.get("reps", 1))
    t0 = time.perf_counter()
    for _ in range(reps):
        for L in rec["launches"]:
            made = SIM_KERNELS.get(tuple(L["code"]), [])
            nth = int(L.get("nth", 0))
            if nth >= len(made):   # made inside the function: this child never calls it
                return {"ok": False, "error": "ReplayError", "unverifiable": True,
                        "message": f"the kernel `{L['code'][2]}` (defined at {L['code'][0]} line "
                                   f"{L['code'][1]}) is created inside your function, not when the "
                                   "notebook's cells run: the simulator can only replay kernels "
                                   "made at the top level"}
            k = made[nth]
            args = []
            for p in L["params"]:
                if p["t"] == "arr":
                    base, start = bufs[p["buf"]]
                    base = _array_of(base)
                    dt = np.dtype(p["dtype"])
                    view = np.ndarray(tuple(p["shape"]), dtype=dt, buffer=base.reshape(-1).view(np.uint8),
                                      offset=start + p["off"], strides=tuple(p["strides"]))
                    args.append(_wrap_sim(view))
                elif p["t"].startswith("np:"):
                    args.append(np.dtype(p["t"][3:]).type(p["v"]))
                else:
                    args.append(p["v"])
            k[tuple(L["grid"]), tuple(L["block"]), 0, L["shmem"]](*args)
    dt = time.perf_counter() - t0
    out = next(a["name"] for a in msg["args"] if a["role"] == "out")
    path = os.path.join(WORK, "replay_out.npy")
    np.save(path, _array_of(bufs[out][0]).copy())   # guard zones included: the grader checks them
    return {"ok": True, "file": "replay_out.npy", "launches": len(rec["launches"]), "seconds": dt}


def _wrap_sim(view):
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return FakeCUDAArray(view)


def _probe():
    @cuda.jit
    def inc(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1

    d = cuda.to_device(np.arange(64, dtype=np.float32))
    inc[1, 64](d)
    ok = bool((d.copy_to_host() == np.arange(64) + 1).all())
    return {"ok": ok, "uid": os.getuid()}


# --------------------------------------------------------------------------- main loop
INJECTED_CUDA_INIT = ("[CUDA_ERROR_OPERATING_SYSTEM] Call to cuDevicePrimaryCtxRetain results in "
                      "CUDA_ERROR_OPERATING_SYSTEM (get_primary_context; injected by the grader's test hook)")


def init_cuda():
    """Make the CUDA context here, in trusted code, before any of the submission's: a failure
    now (the driver, the OS, a neighbour that exhausted something shared) is not the
    submission's, and the grader grades it again alone instead of scoring it. The grader's
    test hook (config ``fault``, set from AUTOGRADER_INJECT_FAULT in the grader's environment)
    makes it fail as it failed on the H100."""
    if CFG.fault == "cuda_init":
        raise RuntimeError(INJECTED_CUDA_INIT)
    if not SIMULATED:
        cuda.current_context()   # cuInit and the primary context (get_primary_context)


def main():
    fns = {}
    try:
        init_cuda()
    except Exception as e:
        reply(event="fatal", stage="cuda_init",
              error=f"CUDA initialisation failed before any of your code ran: {type(e).__name__}: {e}"[:1500])
        _REPLY.flush()
        os._exit(3)
    if CFG.mode == "student":
        why = privileged()
        if why:   # never: the grader refuses to start such a child, and this makes sure
            reply(event="fatal", stage="sandbox",
                  error=f"the sandbox refused to run student code {why}: {ISO.get('notes')}")
            _REPLY.flush()
            os._exit(3)
        _count_launches()
        sys.meta_path.insert(0, _Blocker())
        # imports are done; the student's cells run when the grader says so (it holds the GPU
        # lock in shared mode then, so module-level GPU work never overlaps a timing window)
        reply(event="ready", isolation=ISO, simulated=SIMULATED)
        line = _CMDS.readline()
        if not line or json.loads(line).get("cmd") != "load":
            os._exit(0)
        ns, errors = load_submission()
        fns, problems = signature_problems(ns)
        cuda.synchronize()
        reply(event="loaded", isolation=ISO, simulated=SIMULATED, cell_errors=errors,
              problems=problems)
    else:
        reply(event="loaded", isolation=ISO, simulated=SIMULATED, cell_errors=[], problems={})
    for line in _CMDS:
        msg = json.loads(line)
        cmd = msg["cmd"]
        if cmd == "exit":
            break
        try:
            if cmd == "ping":
                r = {"ok": True}
            elif cmd == "probe":  # the grader's sandbox calibration: can this sandbox run a kernel?
                r = _probe()
            elif cmd == "test":
                r = run_test(fns, msg)
            elif cmd == "replay" and SIMULATED:
                r = replay_sim(msg)
            else:
                r = {"ok": False, "error": "ProtocolError", "message": f"unknown command {cmd}"}
        except BaseException as e:
            r = {"ok": False, "error": type(e).__name__, "message": _student_tb(e)[-3000:],
                 "cuda_error": "Cuda" in type(e).__name__ or "CUDA" in str(e)[:400]}
            if isinstance(e, LaunchTooLargeToSimulate):
                r["too_large"] = str(e)
        reply(event="reply", cmd=cmd, **r)
    _REPLY.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
