"""Diagnose "GPU present but cannot run Numba kernels" (the driver is older than the PTX).

Numba compiles a kernel with NVVM to PTX, then the PTX is linked and loaded. A
CUDA driver only loads PTX up to the ISA version of the CUDA release it ships
with; NVVM from a newer toolkit writes newer PTX, and loading fails with
CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222). On Colab this appeared after runtime
updates shipped CUDA 12.5 with a 12.4 driver (googlecolab/colabtools#5081,
NVIDIA/numba-cuda#120). numba-cuda >= 0.14 links through nvJitLink by default
(NVIDIA/numba-cuda#286), which gives CUDA minor version compatibility within one
major version; the fix is the numba-cuda extra matching the driver's major CUDA
version (https://nvidia.github.io/numba-cuda/user/minor_version_compatibility.html).

This module imports nothing from numba or book: tests load it beside a real,
un-simulated ``numba.cuda``.
"""

from __future__ import annotations

import re

CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222  # CUresult, cuda.h


class DriverTooOldError(RuntimeError):
    """A GPU is present but its driver cannot load the PTX Numba generates."""


def _error_code(exc: BaseException):
    code = getattr(exc, "code", None)
    try:
        return int(code) if code is not None else None
    except (TypeError, ValueError):
        return None


_PTXAS_RE = re.compile(r"Unsupported \.version (\d+\.\d+); current version is '?(\d+\.\d+)")


def explain_cuda_error(
    exc: BaseException | int | str,
    driver_version: tuple[int, int] | None = None,
    toolkit_version: tuple[int, int] | None = None,
) -> DriverTooOldError | None:
    """Map a CUDA failure to :class:`DriverTooOldError` when the driver is too old for the PTX.

    ``exc`` may be the exception Numba raised (``CudaAPIError`` carries ``.code``;
    ``LinkerError`` carries the code and the ptxas log in its text), a CUresult
    code or an error text. Returns None when the error is something else.
    """
    if isinstance(exc, int):
        code, text = exc, ""
    elif isinstance(exc, str):
        code, text = None, exc
    else:
        code, text = _error_code(exc), str(exc)
    hit = (
        code == CUDA_ERROR_UNSUPPORTED_PTX_VERSION
        or "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in text
        or "[222]" in text
        or "unsupported toolchain" in text
        or _PTXAS_RE.search(text) is not None
    )
    if not hit:
        return None
    m = _PTXAS_RE.search(text)
    ptx_part = (
        f" The PTX is version {m.group(1)}; this driver accepts at most {m.group(2)}."
        if m else ""
    )
    drv = ".".join(map(str, driver_version)) if driver_version else "unknown"
    tk = ".".join(map(str, toolkit_version)) if toolkit_version else "unknown"
    major = driver_version[0] if driver_version else 12
    msg = (
        "The GPU is present but cannot run Numba kernels: CUDA_ERROR_UNSUPPORTED_PTX_VERSION "
        f"(error 222). Numba compiled the kernel with NVVM from CUDA {tk}, which writes PTX "
        f"newer than this driver (CUDA {drv}) can load.{ptx_part} This happens on Colab "
        "after a runtime update ships a newer CUDA toolkit than the GPU driver.\n"
        f"Fix: install the numba-cuda build that matches the driver's CUDA {major}: "
        f'`pip install -U "numba-cuda[cu{major}]"`, then restart the runtime/kernel '
        "(Runtime > Restart session on Colab). With numba-cuda >= 0.14 and its cu12/cu13 "
        "extra, kernels are linked by nvJitLink (CUDA minor version compatibility), so a "
        "CUDA 12.x driver runs PTX from any CUDA 12 toolkit. On an older numba-cuda, also set "
        "NUMBA_CUDA_ENABLE_PYNVJITLINK=1 with pynvjitlink-cu12 installed. Or update the "
        "NVIDIA driver."
    )
    return DriverTooOldError(msg)
