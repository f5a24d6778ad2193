"""Find a usable CUDA GPU, or switch Numba to its CUDA simulator.

This module runs on ``import book`` and must run before anything imports
``numba.cuda``: Numba decides between the real CUDA target and its CPU simulator
once, when ``numba.cuda`` is first imported, from ``NUMBA_ENABLE_CUDASIM``.

Decision order (first match wins):

0. ``BOOK_COMPILE_ONLY=1``: Numba's real CUDA target with no GPU asked for (``COMPILE_ONLY``):
   kernels are compiled (NVVM is a wheel) for ``COURSE_TARGET_CC``, never launched (the
   grader's compile check of a simulated submission, autograder/sandbox/inside/compile.py).
1. ``BOOK_SIMULATOR=1`` in the environment forces the simulator.
2. ``NUMBA_ENABLE_CUDASIM=1`` already set means the simulator.
3. Probe the CUDA driver with ctypes (``cuInit``, ``cuDeviceGetCount``), without
   importing Numba. No driver library, a failing ``cuInit`` or zero devices means
   the simulator.

Choosing the simulator prints one plain line (set ``BOOK_QUIET=1`` to silence it).
Device facts (:func:`device_info`) come from the driver's device attributes, also
through ctypes, so they are available before Numba creates a context.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass

from . import target
from .simulator import fidelity, scheduler

# The error mapping lives in a module with no imports from book or numba, so it
# can be loaded (and tested) next to a real, un-simulated numba.cuda.
from .driver_errors import (  # noqa: F401  (re-exported)
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
    CudaSetupError,
    DriverTooOldError,
    GPUOutOfMemoryError,
    NoGPUError,
    NvJitLinkTooOldError,
    explain_cuda_error,
)

__all__ = [
    "SIMULATED",
    "COMPILE_ONLY",
    "STATE_QUERY",
    "state",
    "parse_state",
    "REASON",
    "DeviceInfo",
    "CudaSetupError",
    "DriverTooOldError",
    "NvJitLinkTooOldError",
    "NoGPUError",
    "GPUOutOfMemoryError",
    "ImportOrderError",
    "pick",
    "device_info",
    "check_runnable",
    "check_setup",
    "diagnose",
    "install_ipython_diagnosis",
    "setup_line",
    "describe",
    "explain_cuda_error",
    "driver_cuda_version",
    "SIMULATOR_LINE",
    "SIM_THREADS_PER_S",
]

#: The line printed when no usable GPU is found (kept in one place so tests and
#: notebooks can refer to it).
SIMULATOR_LINE = (
    "No CUDA GPU found: kernels run in Numba's CUDA simulator on the CPU "
    "(correct, but slow and untimed; timings shown come from recorded runs)."
)

#: How fast Numba's CUDA simulator runs kernels: simulated threads a second, on one core of
#: the course's CI machine (each thread is a Python thread). What sizes a launch for a page
#: (book.tracer.MAX_THREADS), the grader's deadlines in the simulator (autograder.judge) and
#: the largest launch it simulates (autograder/sandbox/inside/launches.py) are reckoned from.
SIM_THREADS_PER_S = 7_000

# CUresult codes and device attribute numbers from the CUDA driver API
# (cuda.h); tests compare them with the enums in cuda.bindings.driver.
CUDA_SUCCESS = 0
CUDA_ERROR_NO_DEVICE = 100  # (cuInit's answer when CUDA_VISIBLE_DEVICES hides every GPU)
_ATTR = {
    "sm_count": 16,  # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    "memory_clock_khz": 36,  # CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE (kHz)
    "bus_width_bits": 37,  # CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH
    "l2_bytes": 38,  # CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE
    "cc_major": 75,  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
    "cc_minor": 76,  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
}


class ImportOrderError(RuntimeError):
    """``numba.cuda`` was imported (un-simulated) before ``book`` decided."""


# --------------------------------------------------------------------------
# ctypes access to the driver (no Numba)


def _load_libcuda():
    """Return the CUDA driver library, or None when there is none."""
    candidates = ["libcuda.so.1", "libcuda.so", "nvcuda.dll"]
    found = ctypes.util.find_library("cuda")
    if found:
        candidates.append(found)
    for name in candidates:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


_LIB = None  # the driver, once probed (read-only afterwards)


def _driver():
    global _LIB
    if _LIB is None:
        _LIB = _load_libcuda() or False
    return _LIB or None


def _probe() -> tuple[bool, str]:
    """(usable GPU present, reason) from the driver alone."""
    lib = _driver()
    if lib is None:
        return False, "no CUDA driver library (libcuda) found"
    try:
        rc = lib.cuInit(0)
    except AttributeError:
        return False, "libcuda has no cuInit"
    if rc != CUDA_SUCCESS:
        return False, f"cuInit failed with CUDA error {rc}"
    count = ctypes.c_int(0)
    rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != CUDA_SUCCESS:
        return False, f"cuDeviceGetCount failed with CUDA error {rc}"
    if count.value == 0:
        return False, "the CUDA driver reports no device"
    return True, f"{count.value} CUDA device(s) found"


def driver_cuda_version() -> tuple[int, int] | None:
    """The CUDA version the installed driver supports, e.g. (12, 4); None without a driver."""
    lib = _driver()
    if lib is None:
        return None
    v = ctypes.c_int(0)
    try:
        if lib.cuDriverGetVersion(ctypes.byref(v)) != CUDA_SUCCESS or v.value <= 0:
            return None
    except AttributeError:
        return None
    return (v.value // 1000, (v.value % 1000) // 10)


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _numba_cuda_state() -> str:
    """'none' (numba.cuda not imported), 'simulator' or 'gpu'."""
    mod = sys.modules.get("numba.cuda")
    if mod is None:
        return "none"
    jit = getattr(mod, "jit", None)
    if jit is None:  # numba.cuda is still importing; trust its config
        cfg = sys.modules.get("numba.cuda.core.config") or sys.modules.get("numba.core.config")
        return "simulator" if getattr(cfg, "ENABLE_CUDASIM", 0) else "gpu"
    return "simulator" if "simulator" in getattr(jit, "__module__", "") else "gpu"


def _enable_simulator() -> None:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    # numba reads its configuration when it is imported; if numba (but not
    # numba.cuda) is already loaded, the env var alone comes too late.
    for name in ("numba.core.config", "numba.cuda.core.config"):
        cfg = sys.modules.get(name)
        if cfg is not None:
            cfg.ENABLE_CUDASIM = 1


#: the real CUDA target with no GPU: compile only (``BOOK_COMPILE_ONLY=1``)
COMPILE_ONLY = _truthy("BOOK_COMPILE_ONLY")


def _decide() -> tuple[bool, str]:
    if COMPILE_ONLY:
        return False, "BOOK_COMPILE_ONLY=1 is set: kernels are compiled, never launched"
    if _truthy("BOOK_SIMULATOR"):
        return True, "BOOK_SIMULATOR=1 is set"
    if _truthy("NUMBA_ENABLE_CUDASIM"):
        return True, "NUMBA_ENABLE_CUDASIM=1 is set"
    ok, why = _probe()
    return (not ok), why


def _init() -> tuple[bool, str]:
    simulated, reason = _decide()
    state = _numba_cuda_state()
    if simulated:
        if state == "gpu":
            raise ImportOrderError(
                "numba.cuda was imported before `import book`, so Numba chose its real "
                f"CUDA target, but there is no usable GPU here ({reason}). Put `import book` "
                "first (before `from numba import cuda`), then restart the kernel/process "
                "(Numba cannot switch to its simulator once numba.cuda is loaded)."
            )
        _enable_simulator()
        fidelity.apply()   # where the simulator would differ from a GPU, it does as the GPU does
        scheduler.apply()  # its block scheduler waits instead of spinning (several times faster)
        if not _truthy("BOOK_QUIET"):
            line = SIMULATOR_LINE
            if reason.startswith(("BOOK_SIMULATOR", "NUMBA_ENABLE_CUDASIM")):
                line = (
                    f"{reason}: kernels run in Numba's CUDA simulator on the CPU "
                    "(correct, but slow and untimed; timings shown come from recorded runs)."
                )
            print(line, flush=True)
        return True, reason
    if state == "simulator":
        # Someone imported numba.cuda in simulator mode first: respect it.
        fidelity.apply()
        scheduler.apply()
        return True, "numba.cuda was already imported in simulator mode"
    _compile_for_the_target()
    return False, reason


def _first_device_cc() -> tuple[int, int] | None:
    """Device 0's compute capability, from the driver (no Numba); None if it cannot say."""
    lib = _driver()
    dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
    try:
        if (lib is None or lib.cuDeviceGet(ctypes.byref(dev), 0) != CUDA_SUCCESS
                or lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTR["cc_major"], dev)
                or lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR["cc_minor"], dev)):
            return None
    except AttributeError:
        return None
    return major.value, minor.value


def _compile_for_the_target() -> None:
    """With the T4 switch on a GPU (``COURSE_TARGET_CC``, :mod:`book.target`), Numba emits PTX
    for that capability: ptxas then refuses what the target lacks (sm_80's ``cp.async`` and
    bf16 ``mma`` for 7.5), and the driver compiles the rest for the GPU that is here. Numba
    reads its setting when ``numba.cuda`` loads, which is why this runs now."""
    want = target.forced_cc()
    if want is None or want > (_first_device_cc() or want):
        return  # (newer than the GPU: book.capability.target_cc() says so)
    value = f"{want[0]}.{want[1]}"
    os.environ[target.NUMBA_ENV] = value
    for name in ("numba.cuda.core.config", "numba.core.config"):
        cfg = sys.modules.get(name)
        if cfg is not None and hasattr(cfg, "FORCE_CUDA_CC"):
            cfg.FORCE_CUDA_CC = want


SIMULATED, REASON = _init()


def pick(gpu_value, sim_value):
    """``gpu_value`` on a GPU, ``sim_value`` in the simulator (e.g. problem sizes)."""
    return sim_value if SIMULATED else gpu_value


# --------------------------------------------------------------------------
# Device facts


@dataclass(frozen=True)
class DeviceInfo:
    name: str
    sm_count: int | None
    compute_capability: tuple[int, int] | None
    memory_clock_hz: float | None
    bus_width_bits: int | None
    peak_bandwidth: float | None  # bytes/s = 2 * memory_clock_hz * bus_width_bits / 8
    l2_bytes: int | None
    driver_version: tuple[int, int] | None
    simulated: bool


def peak_bandwidth(memory_clock_hz: float, bus_width_bits: int) -> float:
    """Theoretical DRAM bandwidth in bytes/s: double data rate x clock x bus width."""
    if memory_clock_hz <= 0 or bus_width_bits <= 0:
        raise ValueError(
            f"memory clock ({memory_clock_hz} Hz) and bus width ({bus_width_bits} bits) "
            "must be positive"
        )
    return 2.0 * memory_clock_hz * bus_width_bits / 8.0


def device_info(ordinal: int = 0) -> DeviceInfo:
    """Facts about CUDA device ``ordinal`` read from driver attributes.

    In the simulator: name "CUDA simulator", simulated True, numeric fields None.
    """
    if SIMULATED:
        return DeviceInfo("CUDA simulator", None, None, None, None, None, None,
                          driver_cuda_version(), True)
    lib = _driver()
    dev = ctypes.c_int(0)
    _check(lib.cuDeviceGet(ctypes.byref(dev), int(ordinal)), "cuDeviceGet")
    buf = ctypes.create_string_buffer(256)
    _check(lib.cuDeviceGetName(buf, 256, dev), "cuDeviceGetName")
    vals = {}
    for key, attr in _ATTR.items():
        v = ctypes.c_int(0)
        rc = lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev)
        vals[key] = v.value if rc == CUDA_SUCCESS and v.value > 0 else None
    clock_hz = vals["memory_clock_khz"] * 1e3 if vals["memory_clock_khz"] else None
    bw = peak_bandwidth(clock_hz, vals["bus_width_bits"]) if clock_hz and vals["bus_width_bits"] else None
    cc = (vals["cc_major"], vals["cc_minor"] or 0) if vals["cc_major"] else None
    return DeviceInfo(
        name=buf.value.decode(errors="replace"),
        sm_count=vals["sm_count"],
        compute_capability=cc,
        memory_clock_hz=clock_hz,
        bus_width_bits=vals["bus_width_bits"],
        peak_bandwidth=bw,
        l2_bytes=vals["l2_bytes"],
        driver_version=driver_cuda_version(),
        simulated=False,
    )


def _check(rc: int, what: str) -> None:
    if rc != CUDA_SUCCESS:
        raise RuntimeError(f"{what} failed with CUDA error {rc}")


#: what :func:`state` asks nvidia-smi for, in this order
STATE_QUERY = "clocks.sm,power.draw,temperature.gpu,clocks_event_reasons.active"


def parse_state(line: str) -> dict:
    """One line of ``nvidia-smi --query-gpu=STATE_QUERY --format=csv,noheader,nounits``
    as a dict: ``sm_mhz``, ``power_w``, ``temp_c`` and ``reasons`` (the clock-event
    reasons' bit mask, as nvidia-smi prints it; 0x0 is none: no power or thermal cap)."""
    sm, pw, temp, why = [v.strip() for v in line.split(",")]
    return {"sm_mhz": float(sm), "power_w": float(pw), "temp_c": float(temp), "reasons": why}


def state(ordinal: int = 0) -> dict:
    """The GPU's state now (:func:`parse_state`'s fields), read with nvidia-smi: a timing
    carries the SM clock and power it ran at, since a card's clocks drift with power and
    heat. ``{}`` in the simulator; ``{"error": ...}`` when nvidia-smi cannot be read (a
    reading not taken is recorded as such, never guessed)."""
    if SIMULATED:
        return {}
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", f"--id={ordinal}", f"--query-gpu={STATE_QUERY}",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=10).stdout.strip()
        return parse_state(out.splitlines()[0])
    except Exception as e:
        return {"error": repr(e)[:200]}


def describe() -> str:
    """A few lines about the device for the top of a notebook."""
    info = device_info()
    if info.simulated:
        return "Device: Numba CUDA simulator (CPU). Kernels are checked for correctness; nothing is timed."
    cc = ".".join(map(str, info.compute_capability)) if info.compute_capability else "?"
    bw = f"{info.peak_bandwidth / 1e12:.2f} TB/s" if info.peak_bandwidth else "unknown"
    drv = ".".join(map(str, info.driver_version)) if info.driver_version else "?"
    return (
        f"Device: {info.name}\n"
        f"SMs: {info.sm_count}, compute capability {cc}\n"
        f"Theoretical memory bandwidth: {bw} (2 x memory clock x bus width)\n"
        f"Driver supports CUDA {drv}"
    )


# --------------------------------------------------------------------------
# "GPU present but cannot run Numba kernels"

def _toolkit_version() -> tuple[int, int] | None:
    """CUDA release of the NVVM that Numba compiles with (the PTX producer).

    From the NVVM wheel's version where there is one (numba-cuda's cu12/cu13 extras install
    it), else the CUDA runtime numba-cuda reports.
    """
    from importlib import metadata

    for dist in ("nvidia-nvvm", "nvidia-cuda-nvcc-cu12", "nvidia-cuda-nvcc"):
        try:
            major, minor = metadata.version(dist).split(".")[:2]
            return int(major), int(minor)
        except (metadata.PackageNotFoundError, ValueError):
            continue
    try:
        from numba.cuda.cudadrv import runtime  # noqa: WPS433 (only after the GPU decision)

        return tuple(runtime.get_version())
    except Exception:
        return None


def _nvjitlink_version() -> tuple[int, int] | None:
    """Version of the nvJitLink library numba-cuda links with (cuda.bindings loads it)."""
    try:
        from cuda.bindings import nvjitlink

        return tuple(nvjitlink.version())
    except Exception:
        return None


def _numba_cuda_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("numba-cuda")
    except metadata.PackageNotFoundError:
        return "unknown"


cuda = None  # numba.cuda, bound by check_runnable (never imported before the decision)


def _add_one_py(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def diagnose(exc: BaseException) -> CudaSetupError | None:
    """The cause and fix of a CUDA failure on this machine (None: not one of the known four)."""
    return explain_cuda_error(exc, driver_cuda_version(), _toolkit_version(), _nvjitlink_version())


def check_runnable() -> bool:
    """Compile and launch a tiny kernel; True when it ran and computed the right values.

    Raises the diagnosed :class:`CudaSetupError` (driver older than the PTX, nvJitLink older
    than NVVM, no GPU, out of memory: cause and fix) from the original error; other failures
    propagate unchanged. In the simulator the same kernel runs on the CPU.
    """
    import numpy as np

    global cuda  # the simulator swaps the kernel's *global* `cuda` for its fake module
    from numba import cuda

    host = np.arange(128, dtype=np.float32)
    try:
        _add_one = cuda.jit(_add_one_py)
        dev = cuda.to_device(host)
        _add_one[128, 1](dev)  # 128 blocks: below that Numba warns about occupancy
        got = dev.copy_to_host()
    except Exception as exc:  # map only the known cases; re-raise the rest
        err = diagnose(exc)
        if err is not None:
            raise err from exc
        raise
    if not np.array_equal(got, host + 1):
        raise RuntimeError("check_runnable: the test kernel ran but computed wrong values")
    return True


def setup_line() -> str:
    """One line: the GPU and the CUDA versions in play (driver, NVVM, nvJitLink, numba-cuda)."""
    info = device_info()
    cc = ".".join(map(str, info.compute_capability)) if info.compute_capability else "?"
    v = lambda t: ".".join(map(str, t)) if t else "?"  # noqa: E731
    return (f"GPU ready: {info.name} (compute {cc}); driver CUDA {v(info.driver_version)}, "
            f"NVVM CUDA {v(_toolkit_version())}, nvJitLink {v(_nvjitlink_version())}, "
            f"numba-cuda {_numba_cuda_version()}; a test kernel ran.")


def check_setup() -> bool:
    """The setup cell's last step: run a tiny kernel and say in plain words what happened.

    On a GPU it prints :func:`setup_line`. In the simulator because no GPU is visible it prints
    how to select one (kernels still run, in the simulator). When the kernel cannot run it prints
    the diagnosed cause and the exact fix and stops the notebook (SystemExit, which Jupyter shows
    without a traceback); an undiagnosed error propagates with its traceback.
    """
    if SIMULATED:
        if not REASON.startswith(("BOOK_SIMULATOR", "NUMBA_ENABLE_CUDASIM", "numba.cuda")):
            err = explain_cuda_error(CUDA_ERROR_NO_DEVICE)
            print(f"{err.cause.split(';')[0]} ({REASON}). To use one: {err.fix}", flush=True)
        return check_runnable()
    try:
        check_runnable()
    except CudaSetupError as err:
        print(f"GPU check FAILED: {err.cause}\nFix: {err.fix}", flush=True)
        raise SystemExit(f"The GPU cannot run the course's kernels ({err.kind}): "
                         "see the cause and the fix above.") from None
    print(setup_line(), flush=True)
    return True


def _show_with_diagnosis(shell, etype, value, tb, tb_offset=None):
    shell.showtraceback((etype, value, tb), tb_offset=tb_offset)
    # a first look needs no versions; only a known cause pays for reading them
    err = diagnose(value) if explain_cuda_error(value) is not None else None
    if err is not None:  # one of the four known causes: say it under the traceback
        print(f"Diagnosis ({err.kind}): {err.cause}\nFix: {err.fix}", flush=True)


def install_ipython_diagnosis(shell=None) -> bool:
    """Under every error a notebook cell raises, print the cause and fix when it is one of the
    known four (driver older than the PTX, nvJitLink older than NVVM, no GPU, out of memory).

    ``import book`` calls this on a GPU inside IPython/Jupyter (so a kernel that fails in a
    later cell is explained too, not only the setup cell's check). Other errors show as usual.
    """
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or getattr(shell, "custom_exceptions", None) != ():
        return False  # not in IPython, or something else already handles errors there
    shell.set_custom_exc((Exception,), _show_with_diagnosis)
    return True


if not SIMULATED:
    install_ipython_diagnosis()
