"""Diagnose "a GPU runtime, but Numba kernels cannot run": cause and exact fix.

Four failures a student meets on Colab (or a local machine), told apart by the error Numba
raises (its CUresult code, its text and the texts of the exceptions it was raised from):

- **driver older than the PTX** (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, 222): the driver loads PTX
  only up to the ISA of its own CUDA release; NVVM from a newer toolkit writes newer PTX. On Colab
  this appeared when a runtime update shipped CUDA 12.5 beside a 12.4 driver
  (googlecolab/colabtools#5081, NVIDIA/numba-cuda#120). Fix: the numba-cuda extra of the driver's
  CUDA major version (numba-cuda >= 0.14 links through nvJitLink, which gives minor version
  compatibility: https://nvidia.github.io/numba-cuda/user/minor_version_compatibility.html).
- **nvJitLink older than NVVM**: ptxas inside nvJitLink rejects PTX newer than itself with the same
  "Unsupported .version" line the driver's ptxas prints, but the driver is not at fault: a toolkit
  upgrade left an old nvjitlink wheel behind. Told apart by where the error comes from (nvJitLink
  says so) or, failing that, by the installed nvJitLink being older than NVVM.
- **no GPU selected** (CUDA_ERROR_NO_DEVICE, 100, or no driver at all): a CPU runtime.
- **out of memory** (CUDA_ERROR_OUT_OF_MEMORY, 2): the GPU's memory is held elsewhere.

The error texts the tests feed in were recorded from numba-cuda on an H100
(records/colab/numba_cuda_errors.json, written by tools/colab_rehearsal.py --record-errors).

This module imports nothing from numba or book: tests load it beside a real, un-simulated
``numba.cuda``, and the setup cell uses it before anything else is known to work.
"""

from __future__ import annotations

import re

CUDA_ERROR_OUT_OF_MEMORY = 2  # CUresult codes, cuda.h
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222

#: How a student restarts the Python process, on Colab and in Jupyter.
RESTART = "Runtime > Restart session on Colab (Kernel > Restart in Jupyter)"


class CudaSetupError(RuntimeError):
    """A diagnosed reason why kernels cannot run: ``cause`` and ``fix`` (one line each)."""

    kind = "unknown"

    def __init__(self, cause: str, fix: str):
        self.cause, self.fix = cause, fix
        super().__init__(f"{cause}\nFix: {fix}")


class DriverTooOldError(CudaSetupError):
    """A GPU is present but its driver cannot load the PTX Numba generates."""

    kind = "driver_older_than_ptx"


class NvJitLinkTooOldError(CudaSetupError):
    """nvJitLink (the linker) is older than NVVM (the compiler) and rejects its PTX."""

    kind = "nvjitlink_older_than_nvvm"


class NoGPUError(CudaSetupError):
    """No CUDA device is visible: a CPU runtime, or the GPU hidden."""

    kind = "no_gpu"


class GPUOutOfMemoryError(CudaSetupError):
    """The GPU has too little free memory for even a tiny allocation."""

    kind = "out_of_memory"


def _texts(exc: BaseException) -> tuple[int | None, str]:
    """(first CUresult code found, all texts) along the exception's cause/context chain."""
    code, parts, seen = None, [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        c = getattr(exc, "code", None)
        if code is None and c is not None:
            try:
                code = int(c)
            except (TypeError, ValueError):
                pass
        parts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return code, "\n".join(parts)


_PTXAS_RE = re.compile(r"Unsupported \.version (\d+\.\d+); current version is '?(\d+\.\d+)")
# The linker named in the error: cuda.core's Linker and cuda.bindings say "nvJitLink"
# (nvJitLinkError, NVJITLINK_ERROR_*); the driver's linker says cuLink*.
_NVJITLINK_RE = re.compile(r"nvjitlink", re.I)


def _v(version) -> str:
    return ".".join(map(str, version)) if version else "unknown"


def explain_cuda_error(
    exc: BaseException | int | str,
    driver_version: tuple[int, int] | None = None,
    toolkit_version: tuple[int, int] | None = None,
    nvjitlink_version: tuple[int, int] | None = None,
) -> CudaSetupError | None:
    """The diagnosis (a :class:`CudaSetupError` subclass) of a CUDA failure, or None.

    ``exc`` may be the exception Numba raised (``CudaAPIError`` carries ``.code``; linker errors
    carry the ptxas log in their text; causes are followed), a CUresult code or an error text.
    ``toolkit_version`` is the CUDA release of NVVM (what writes the PTX). None means the error
    is none of the known four: let it propagate unchanged.
    """
    if isinstance(exc, int):
        code, text = exc, ""
    elif isinstance(exc, str):
        code, text = None, exc
    else:
        code, text = _texts(exc)
    drv, tk, njl = _v(driver_version), _v(toolkit_version), _v(nvjitlink_version)
    major = (toolkit_version or driver_version or (12,))[0]
    ptxas = _PTXAS_RE.search(text)

    if code == CUDA_ERROR_OUT_OF_MEMORY or "CUDA_ERROR_OUT_OF_MEMORY" in text:
        return GPUOutOfMemoryError(
            "The GPU is out of memory (CUDA_ERROR_OUT_OF_MEMORY): something else in this "
            "runtime (an earlier cell, torch's cache, another notebook on a local GPU) holds it.",
            f"{RESTART} frees what this runtime holds; then run the notebook from the top. "
            "Locally, `nvidia-smi` lists the processes that hold GPU memory.")
    if (code == CUDA_ERROR_NO_DEVICE or "CUDA_ERROR_NO_DEVICE" in text
            or "no CUDA-capable device" in text or "CUDA driver library cannot be found" in text):
        return NoGPUError(
            "No GPU is selected: the CUDA driver sees no device (a CPU runtime, or "
            "CUDA_VISIBLE_DEVICES hides it); kernels run in Numba's CUDA simulator.",
            "on Colab, Runtime > Change runtime type > Hardware accelerator: a GPU (T4) > Save, "
            "then run the notebook from the top. Locally, check `nvidia-smi` and unset "
            "CUDA_VISIBLE_DEVICES.")
    from_nvjitlink = _NVJITLINK_RE.search(text) is not None
    nvjitlink_behind = (nvjitlink_version is not None and toolkit_version is not None
                        and tuple(nvjitlink_version) < tuple(toolkit_version))
    if ptxas and (from_nvjitlink or nvjitlink_behind) and code != CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        njl_pkg = "nvidia-nvjitlink-cu12" if major == 12 else "nvidia-nvjitlink"
        nvvm_pkg = "nvidia-cuda-nvcc-cu12" if major == 12 else "nvidia-nvvm"
        up = f'`pip install -U "{njl_pkg}>={tk}"`' if toolkit_version else f"`pip install -U {njl_pkg}`"
        down = (f'; or, if another package (torch) pins nvJitLink {njl}, an NVVM of that '
                f'release: `pip install "{nvvm_pkg}=={njl}.*"`' if nvjitlink_version else "")
        return NvJitLinkTooOldError(
            f"nvJitLink {njl} is older than the NVVM (CUDA {tk}) that compiled the kernel: its "
            f"ptxas rejects PTX {ptxas.group(1)} (it reads at most {ptxas.group(2)}). The driver "
            f"(CUDA {drv}) is not the problem: an upgrade left an old nvjitlink wheel behind.",
            f"{up}{down}; then {RESTART}.")
    if (code == CUDA_ERROR_UNSUPPORTED_PTX_VERSION or "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in text
            or "[222]" in text or "unsupported toolchain" in text or ptxas):
        dmajor = driver_version[0] if driver_version else 12
        ptx = (f" (PTX {ptxas.group(1)}; this driver reads at most {ptxas.group(2)})"
               if ptxas else "")
        return DriverTooOldError(
            "The GPU driver is older than the PTX (CUDA_ERROR_UNSUPPORTED_PTX_VERSION, error "
            f"222): NVVM from CUDA {tk} wrote PTX newer than this driver (CUDA {drv}) loads{ptx}. "
            "On Colab this follows a runtime update that ships a newer CUDA than the driver.",
            f'`pip install "numba-cuda[cu{dmajor}]"` (the build for the driver\'s CUDA {dmajor}, '
            f"linked by nvJitLink with minor version compatibility), then {RESTART}; "
            "or update the NVIDIA driver.")
    return None
