"""Who holds the GPU, and how much of its memory: NVML, read from the grader's process.

The grader needs two answers no submission can fake, because they come from the NVIDIA
driver and not from the submission's interpreter: which processes hold a GPU (so that after
a submission ends none of its processes still does, and no foreign process overlaps a timing
window), and how much device memory each holds (the per-submission GPU memory budget that
autograder/sandbox/budgets.py enforces).

NVML is reached through nvidia-ml-py (``pynvml``) when it is importable, else through ctypes
on ``libnvidia-ml.so.1``, which every NVIDIA driver installs. Where neither loads (a machine
with no NVIDIA driver: CI, the simulator) ``available()`` is False and ``unavailable_reason()``
says why; callers must then say that the check was not made, never that it passed.

GPU indices are NVML's, which follow the PCI bus order; the sandbox starts every child with
``CUDA_DEVICE_ORDER=PCI_BUS_ID`` so that ``CUDA_VISIBLE_DEVICES=i`` is NVML's device ``i``.
PIDs are as the NVIDIA driver reports them; ``unresolved()`` lists those this machine's /proc
cannot see (a grader inside a container whose PID namespace the driver does not translate),
in which case matching NVML's list to a submission's PIDs is impossible and callers must say so.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from dataclasses import dataclass

NOT_AVAILABLE = 0xFFFFFFFFFFFFFFFF   # NVML_VALUE_NOT_AVAILABLE for a process's used memory
_ERROR_INSUFFICIENT_SIZE = 7
_CACHE_S = 0.1                        # several watchdogs polling at once share one query


@dataclass(frozen=True)
class GpuProcess:
    """One compute process on one GPU. ``used_bytes`` is None where the driver does not
    report per-process memory (some virtualised or MIG setups)."""
    gpu: int
    pid: int
    used_bytes: int | None

    def describe(self) -> str:
        mem = "memory not reported" if self.used_bytes is None else f"{self.used_bytes / 2**20:.0f} MiB"
        return f"pid {self.pid} on GPU {self.gpu} ({mem}; {_cmdline(self.pid) or 'not visible here'})"


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(300).replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


# --------------------------------------------------------------------------- backends
class _PyNvml:
    name = "nvidia-ml-py"

    def __init__(self):
        import pynvml

        pynvml.nvmlInit()
        self.n = pynvml

    def count(self) -> int:
        return self.n.nvmlDeviceGetCount()

    def processes(self, index: int) -> list[tuple[int, int | None]]:
        h = self.n.nvmlDeviceGetHandleByIndex(index)
        out = []
        for p in self.n.nvmlDeviceGetComputeRunningProcesses(h):
            used = p.usedGpuMemory
            out.append((int(p.pid), None if used is None or used == NOT_AVAILABLE else int(used)))
        return out

    def memory(self, index: int) -> tuple[int, int]:
        m = self.n.nvmlDeviceGetMemoryInfo(self.n.nvmlDeviceGetHandleByIndex(index))
        return int(m.free), int(m.total)

    def driver(self) -> str:
        v = self.n.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)


class _Info(ctypes.Structure):      # nvmlProcessInfo_t (v2 and later)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong),
                ("gpuInstanceId", ctypes.c_uint), ("computeInstanceId", ctypes.c_uint)]


class _InfoV1(ctypes.Structure):    # nvmlProcessInfo_v1_t (drivers before 510)
    _fields_ = [("pid", ctypes.c_uint), ("usedGpuMemory", ctypes.c_ulonglong)]


class _Memory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Ctypes:
    name = "ctypes libnvidia-ml.so.1"

    def __init__(self):
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        init = getattr(self.lib, "nvmlInit_v2", None) or self.lib.nvmlInit
        self._check(init(), "nvmlInit")
        self._procs = None
        for fname, struct in (("nvmlDeviceGetComputeRunningProcesses_v3", _Info),
                              ("nvmlDeviceGetComputeRunningProcesses_v2", _Info),
                              ("nvmlDeviceGetComputeRunningProcesses", _InfoV1)):
            fn = getattr(self.lib, fname, None)
            if fn is not None:
                self._procs, self._struct = fn, struct
                break

    def _check(self, rc: int, what: str) -> None:
        if rc != 0:
            err = self.lib.nvmlErrorString
            err.restype = ctypes.c_char_p
            raise OSError(f"{what} failed: NVML error {rc} ({err(rc).decode(errors='replace')})")

    def _handle(self, index: int):
        h = ctypes.c_void_p()
        fn = getattr(self.lib, "nvmlDeviceGetHandleByIndex_v2", None) or self.lib.nvmlDeviceGetHandleByIndex
        self._check(fn(ctypes.c_uint(index), ctypes.byref(h)), "nvmlDeviceGetHandleByIndex")
        return h

    def count(self) -> int:
        n = ctypes.c_uint()
        fn = getattr(self.lib, "nvmlDeviceGetCount_v2", None) or self.lib.nvmlDeviceGetCount
        self._check(fn(ctypes.byref(n)), "nvmlDeviceGetCount")
        return n.value

    def processes(self, index: int) -> list[tuple[int, int | None]]:
        h = self._handle(index)
        n = ctypes.c_uint(0)
        rc = self._procs(h, ctypes.byref(n), None)
        if rc == 0:
            return []
        if rc != _ERROR_INSUFFICIENT_SIZE:
            self._check(rc, "nvmlDeviceGetComputeRunningProcesses")
        for _ in range(4):   # the list can grow between the two calls
            size = n.value + 8
            buf = (self._struct * size)()
            n = ctypes.c_uint(size)
            rc = self._procs(h, ctypes.byref(n), buf)
            if rc == 0:
                return [(int(buf[i].pid), None if buf[i].usedGpuMemory == NOT_AVAILABLE
                         else int(buf[i].usedGpuMemory)) for i in range(n.value)]
            if rc != _ERROR_INSUFFICIENT_SIZE:
                self._check(rc, "nvmlDeviceGetComputeRunningProcesses")
        raise OSError("nvmlDeviceGetComputeRunningProcesses: the process list kept growing")

    def memory(self, index: int) -> tuple[int, int]:
        m = _Memory()
        self._check(self.lib.nvmlDeviceGetMemoryInfo(self._handle(index), ctypes.byref(m)),
                     "nvmlDeviceGetMemoryInfo")
        return int(m.free), int(m.total)

    def driver(self) -> str:
        buf = ctypes.create_string_buffer(96)
        self._check(self.lib.nvmlSystemGetDriverVersion(buf, ctypes.c_uint(96)), "nvmlSystemGetDriverVersion")
        return buf.value.decode()


_lock = threading.Lock()
_backend = None
_reason = None
_cache: dict = {}


def _nvml():
    global _backend, _reason
    with _lock:
        if _backend is None and _reason is None:
            errors = []
            for cls in (_PyNvml, _Ctypes):
                try:
                    _backend = cls()
                    break
                except Exception as e:  # ImportError, OSError (no library), an NVML error
                    errors.append(f"{cls.name}: {type(e).__name__}: {e}")
            if _backend is None:
                _reason = ("NVML is not available on this machine (no NVIDIA driver, or its "
                           "libnvidia-ml.so.1 cannot be loaded): " + "; ".join(errors))
        return _backend


# --------------------------------------------------------------------------- the API
def available() -> bool:
    """True when NVML answers on this machine."""
    return _nvml() is not None


def unavailable_reason() -> str:
    """Why NVML is not available ('' when it is)."""
    _nvml()
    return _reason or ""


def backend() -> str:
    b = _nvml()
    return f"{b.name}, driver {b.driver()}" if b else "none"


def memory(gpu: int) -> tuple[int, int]:
    """(free, total) bytes of device memory on GPU ``gpu``."""
    b = _require()
    return b.memory(gpu)


def _require():
    b = _nvml()
    if b is None:
        raise RuntimeError(_reason)
    return b


def processes(gpu: int | None = None, max_age: float = _CACHE_S) -> list[GpuProcess]:
    """The compute processes on GPU ``gpu`` (all GPUs when None), with their used memory.
    Answers at most ``max_age`` seconds old are shared between callers."""
    b = _require()
    gpus = range(b.count()) if gpu is None else [gpu]
    out = []
    now = time.monotonic()
    for g in gpus:
        with _lock:
            hit = _cache.get(g)
            if hit is None or now - hit[0] > max_age:
                hit = (now, [GpuProcess(g, pid, used) for pid, used in b.processes(g)])
                _cache[g] = hit
        out += hit[1]
    return out


def foreign(gpu: int, allowed_pids) -> list[GpuProcess]:
    """Processes holding GPU ``gpu`` that are not in ``allowed_pids`` (host PIDs). Before a
    timing window ``allowed_pids`` is the timed process's; after a submission, pass its PIDs
    to ``held_by`` instead."""
    allowed = {int(p) for p in allowed_pids}
    return [p for p in processes(gpu, max_age=0) if p.pid not in allowed]


def others_on(gpu: int, allowed_pids) -> list[str]:
    """Before and after a timing window: the processes other than ``allowed_pids`` holding GPU
    ``gpu``, each described (``GpuProcess.describe``: pid, memory, command line). [] where NVML
    is not available (the simulator, no driver library): nothing could be checked, and a
    window is never discarded for that. An NVML error is one entry that says so: a hiccup is
    recorded, never allowed to stop grading."""
    if not available():
        return []
    try:
        return [p.describe() for p in foreign(gpu, allowed_pids)]
    except Exception as e:  # NVML hiccup: recorded, not fatal
        return [f"NVML check failed: {type(e).__name__}: {e}"[:200]]


def held_by(pids, gpu: int | None = None, max_age: float = _CACHE_S) -> list[GpuProcess]:
    """The entries of ``processes(gpu)`` whose PID is one of ``pids``."""
    want = {int(p) for p in pids}
    return [p for p in processes(gpu, max_age=max_age) if p.pid in want]


def used_by(pids, gpu: int | None = None) -> int:
    """Device memory held by these PIDs, summed over the GPUs (bytes; a process whose memory
    the driver does not report counts 0; ``held_by`` shows which those are)."""
    return sum(p.used_bytes or 0 for p in held_by(pids, gpu))


def unresolved(procs) -> list[GpuProcess]:
    """Entries whose PID this machine's /proc does not show: NVML's PIDs then belong to
    another PID namespace (a container the driver does not translate), so they cannot be
    matched to a submission's processes."""
    return [p for p in procs if not os.path.exists(f"/proc/{p.pid}")]


def describe(procs) -> str:
    return "; ".join(p.describe() for p in procs) or "none"
