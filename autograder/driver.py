"""The trusted driver that runs inside each sandboxed child process.

Started by autograder/sandbox.py as ``python -I -B agdriver.py config.json`` in a fresh
temporary directory that holds: this file, ``aginputs.py`` (autograder/inputs.py), a copy of
the ``book`` library WITHOUT ``book.kernels`` and the student's code as ``submission.py``.
It never receives the lab's references, solutions, rubric or hidden-case generator: only
seeds, shapes and argument order, one test at a time.

Order matters (everything before ``load_submission`` runs before any student code):
1. isolate(): new network and mount namespaces where the OS allows, the repository, the
   grader's output folder and the other submissions hidden behind empty tmpfs mounts, then
   (as root) drop to an unprivileged uid with a process limit.
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

CFG = json.load(open(sys.argv[1]))
_REPLY = os.fdopen(CFG["reply_fd"], "w", buffering=1)
_CMDS = os.fdopen(CFG["cmd_fd"], "r")
WORK = CFG["workdir"]


def reply(**kw):
    _REPLY.write(json.dumps(kw, default=str) + "\n")
    _REPLY.flush()


# --------------------------------------------------------------------------- isolation
def isolate(cfg):
    """Namespaces, hidden paths, privilege drop. Returns what was achieved (for the log)."""
    import ctypes

    got = {"net": False, "mount": False, "uid_drop": False, "hidden": 0, "notes": []}
    if not cfg.get("isolate", True):
        got["notes"].append("isolation disabled by the grader's options")
        return got
    libc = ctypes.CDLL(None, use_errno=True)
    NEWNS, NEWNET, NEWUSER = 0x00020000, 0x40000000, 0x10000000
    uid, gid = os.getuid(), os.getgid()
    userns = False
    if libc.unshare(NEWNS | NEWNET) == 0:
        got["net"] = got["mount"] = True
    elif libc.unshare(NEWUSER | NEWNS | NEWNET) == 0:
        userns = True
        try:
            for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"0 {uid} 1"),
                               ("/proc/self/gid_map", f"0 {gid} 1")):
                with open(path, "w") as f:
                    f.write(text)
            got["net"] = got["mount"] = True
        except OSError as e:
            got["notes"].append(f"user namespace maps failed: {e}")
            got["net"] = True
    elif libc.unshare(NEWNET) == 0:
        got["net"] = True
    else:
        got["notes"].append("no network namespace: unshare(2) refused (needs root or user "
                            "namespaces); the submission could reach the network")
    if got["mount"]:
        MS_REC, MS_PRIVATE, MS_BIND, MS_RDONLY = 16384, 1 << 18, 4096, 1
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            got["notes"].append("could not make mounts private; paths not hidden")
        else:
            for p in cfg.get("hide", []):
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
    else:
        got["notes"].append("no mount namespace: the repository and other submissions are not "
                            "hidden from this submission (run the grader as root or enable user "
                            "namespaces)")
    if uid == 0 and not userns and cfg.get("drop_uid") is not None:
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (cfg.get("nproc", 512),) * 2)
            os.setgroups([])
            os.setgid(cfg["drop_uid"])
            os.setuid(cfg["drop_uid"])
            got["uid_drop"] = True
        except OSError as e:
            got["notes"].append(f"could not drop privileges: {e}")
    return got


ISO = isolate(CFG)
try:  # die with the grader (a killed grading run leaves no orphans); after the uid drop, which clears it
    import ctypes as _ct

    _ct.CDLL(None).prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL
    if os.getppid() == 1:
        os._exit(5)
except Exception:
    pass
os.chdir(WORK)
# the grader's own search path, in its order (e.g. a numpy wheel before the system's), minus the repo
_extra = [p for p in CFG.get("extra_paths", [])]
sys.path[:] = [CFG["trusted_dir"]] + _extra + [p for p in sys.path if p not in _extra]

if CFG.get("simulated"):
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

try:
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # its one-line announcement is not the student's output
        import book  # noqa: F401  (decides GPU or simulator before numba.cuda is imported)
    from book import gpu as _gpu
    SIMULATED = bool(_gpu.SIMULATED)
except Exception as e:  # the library is broken: say so, the grader reports it
    reply(event="fatal", error=f"the course library failed to import in the sandbox: {e!r}")
    sys.exit(3)

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

from aginputs import generate  # noqa: E402

LAUNCHES = [0]


def _count_launches():
    if SIMULATED:
        from numba.cuda.simulator import kernel as simk

        orig = simk.FakeCUDAKernel.__call__

        def counted(self, *args):
            if not self._device and simk._kernel_context is None:
                LAUNCHES[0] += 1
            return orig(self, *args)

        simk.FakeCUDAKernel.__call__ = counted
    else:
        from numba.cuda.dispatcher import CUDADispatcher

        orig = CUDADispatcher.call

        def counted(self, args, launch_config):
            LAUNCHES[0] += 1
            return orig(self, args, launch_config)

        CUDADispatcher.call = counted


BLOCKED = {
    "torch": "torch", "cupy": "cupy", "cupyx": "cupy", "jax": "jax", "jaxlib": "jax",
    "tensorflow": "tensorflow", "triton": "triton", "pycuda": "pycuda",
}


class _Blocker:
    """Refuses libraries that would compute the answer for the student."""

    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in BLOCKED:
            raise ImportError(
                f"`import {name}` is not allowed in graded code: this lab asks for a kernel "
                f"written with numba.cuda, not a call into {BLOCKED[top]}")
        if name == "book.kernels" or name.startswith("book.kernels."):
            raise ImportError("`book.kernels` (the chapters' kernels) is not available to graded "
                              "code: write this lab's kernel yourself")
        if top in ("autograder", "solutions"):
            raise ImportError(f"`{name}` is not available to graded code")
        return None

    def find_module(self, name, path=None):  # older import protocol
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
        except BaseException as e:  # noqa: BLE001  (SystemExit too: keep going)
            errors.append({"cell": cell["index"], "error": type(e).__name__, "message": _student_tb(e)})
        ns["check"] = lambda *a, **k: None
    return ns, errors


def signature_problems(ns):
    import inspect

    problems, found = {}, {}
    for fname, params in CFG["functions"].items():
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
    """Build device arrays: inputs from specs, outputs poisoned with NaN."""
    built, host_in, outs = [], {}, {}
    for a in args:
        if a["role"] == "in":
            h = generate(a["spec"])
            host_in[a["name"]] = h
            built.append(cuda.to_device(h))
        elif a["role"] == "out":
            h = np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"])
            d = cuda.to_device(h)
            outs[a["name"]] = d
            built.append(d)
        else:
            built.append(a["value"])
    return built, host_in, outs


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
    built, host_in, outs = _device_args(msg["args"])
    cuda.synchronize()
    before = LAUNCHES[0]
    t0 = time.perf_counter()
    ret = fn(*built)
    cuda.synchronize()
    dt = time.perf_counter() - t0
    launches = LAUNCHES[0] - before
    files = {}
    for name, d in outs.items():
        path = os.path.join(WORK, f"out_{msg['id']}_{name}.npy")
        np.save(path, d.copy_to_host())
        files[name] = os.path.basename(path)
    modified = []
    for a, d in zip(msg["args"], built):
        if a["role"] == "in" and not np.array_equal(d.copy_to_host(), host_in[a["name"]], equal_nan=True):
            modified.append(a["name"])
    returned = None
    if ret is not None:
        returned = "the output array" if any(ret is d for d in outs.values()) else type(ret).__name__
    return {"ok": True, "files": files, "launches": launches, "modified_inputs": modified,
            "returned": returned, "seconds": dt}


# --------------------------------------------------------------------------- timing
TIMING = {}


def time_prepare(fns, msg):
    """Two input sets (alternated so a kernel cannot skip work it did last call) and one
    output, generated and copied to the GPU. Outside the grader's GPU lock."""
    if CFG["mode"] == "reference":
        return _reference_setup(msg)
    fn = fns[msg["function"]]
    sets = []
    outs_shared = None
    for spec_args in msg["sets"]:
        built, _host, outs = _device_args(spec_args)
        if outs_shared is None:
            outs_shared = outs
        else:  # all sets write into the first set's output
            built = [outs_shared[a["name"]] if a["role"] == "out" else b for a, b in zip(spec_args, built)]
        sets.append(tuple(built))
    TIMING.update(fn=fn, sets=sets, outs=outs_shared)
    cuda.synchronize()
    return {"ok": True}


def time_warm(msg):
    """Warm-up (compiles), then the child-side CUDA-event timing: only a cross-check."""
    if CFG["mode"] == "reference":
        return {"ok": True}
    fn, sets = TIMING["fn"], TIMING["sets"]
    for s in sets:
        fn(*s)
    cuda.synchronize()
    event = None
    try:
        from book.bench import measure
        t = measure(fn, sets, bytes_moved=msg.get("bytes"), flops=msg.get("flops"), warmup=2,
                    reps=msg.get("event_reps", 10))
        event = {"median_s": t.median_s, "p10_s": t.p10_s, "p90_s": t.p90_s, "method": t.method}
    except Exception as e:  # simulator, or anything else: only a cross-check
        event = {"error": f"{type(e).__name__}: {e}"[:300]}
    return {"ok": True, "event_timing": event}


def _reference_setup(msg):
    import torch

    sys.path.insert(0, CFG["repo_root"])
    if msg["impl"] == "copy":
        n = int(msg["bytes_per_buffer"])
        sets = [(torch.empty(n, dtype=torch.uint8, device="cuda"),
                 torch.ones(n, dtype=torch.uint8, device="cuda"))]
        fn = lambda dst, src: dst.copy_(src)  # noqa: E731
    else:
        from autograder.labs import get

        fn, sets = get(msg["lab"]).make_reference_runner(msg["case"])
    TIMING.update(fn=fn, sets=sets, outs={}, sync=torch.cuda.synchronize)
    for s in sets:
        fn(*s)
    torch.cuda.synchronize()
    from book import gpu

    info = gpu.device_info()
    return {"ok": True, "device": {"name": info.name, "peak_bandwidth": info.peak_bandwidth,
                                   "sm_count": info.sm_count, "l2_bytes": info.l2_bytes,
                                   "compute_capability": info.compute_capability,
                                   "driver_version": info.driver_version}}


def time_go(msg):
    fn, sets = TIMING["fn"], TIMING["sets"]
    sync = TIMING.get("sync", cuda.synchronize)
    n, start = len(sets), int(msg.get("start", 0))
    for k in range(int(msg["reps"])):
        fn(*sets[(start + k) % n])
    sync()
    return {"ok": True}


def time_sample(msg):
    out = TIMING["outs"][msg["name"]].copy_to_host().reshape(-1)
    pos = np.asarray(msg["positions"], dtype=np.int64)
    path = os.path.join(WORK, "timing_sample.npy")
    np.save(path, out[pos])
    return {"ok": True, "file": os.path.basename(path)}


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
def main():
    fns = {}
    if CFG["mode"] == "student":
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
            elif cmd in ("time_setup", "time_prepare"):
                r = time_prepare(fns, msg)
            elif cmd == "time_warm":
                r = time_warm(msg)
            elif cmd == "go":
                r = time_go(msg)
            elif cmd == "sample":
                r = time_sample(msg)
            else:
                r = {"ok": False, "error": "ProtocolError", "message": f"unknown command {cmd}"}
        except BaseException as e:  # noqa: BLE001
            r = {"ok": False, "error": type(e).__name__, "message": _student_tb(e)[-3000:],
                 "cuda_error": "Cuda" in type(e).__name__ or "CUDA" in str(e)[:400]}
        reply(event="reply", cmd=cmd, **r)
    _REPLY.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
