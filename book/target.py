"""The compute capability the course builds its tensor-core code for: the T4 switch.

``COURSE_TARGET_CC=7.5`` (any "major.minor") makes the course act as if the GPU had that
compute capability: on an H100, chapter 8, lab 5 and the tests then take the T4's paths
(``mma.m16n8k8``, tiles copied through registers, no bfloat16 ``mma``), and
:mod:`book.gpu` has Numba emit PTX for that target (``NUMBA_FORCE_CUDA_CC``), so ptxas
refuses any instruction the target lacks (``cp.async``, bf16 ``mma``: sm_80) instead of
letting it run on the newer GPU. In Numba's CUDA simulator the switch picks the same paths
(every instruction is simulated, so nothing is refused by the hardware). With no GPU and the
simulator off (PTX compiled on a CPU machine: ``tools/lab_ptx.py``) it names the capability
compiled for. It may not name a GPU newer than the one present: that code would not run.

This module imports nothing from Numba or the rest of ``book``: :mod:`book.gpu` reads it
before ``numba.cuda`` is imported, and the graded labs' copy of ``book.kernels.instructions.tensorcore``
(``autograder/sandbox/trusted.py``) and ``tools/lab_ptx.py``'s bare package import it too,
through :mod:`book.capability` (which GPU the course builds for, and what each instruction
family needs).
"""

from __future__ import annotations

import os
import re

__all__ = ["TARGET_CC_ENV", "NUMBA_ENV", "forced_cc", "describe", "name"]

#: The switch
TARGET_CC_ENV = "COURSE_TARGET_CC"
#: Numba's own setting for the capability it compiles PTX for (numba-cuda's config)
NUMBA_ENV = "NUMBA_FORCE_CUDA_CC"


def forced_cc() -> tuple[int, int] | None:
    """The capability ``COURSE_TARGET_CC`` names, as (major, minor); None when it is unset."""
    want = os.environ.get(TARGET_CC_ENV, "").strip()
    if not want:
        return None
    m = re.fullmatch(r"(\d+)\.(\d)", want)
    if not m:
        raise ValueError(f"{TARGET_CC_ENV}={want!r}: expected a compute capability as "
                         "major.minor, e.g. 7.5 (a T4) or 8.0 (an A100)")
    return int(m.group(1)), int(m.group(2))


def name(cc) -> str:
    """ "sm_75" for (7, 5)."""
    return f"sm_{cc[0]}{cc[1]}"


def describe(cc, real=None, simulated: bool = False) -> str:
    """What a notebook says it targets: "sm_75", plus, where the switch chose it, why and where
    ("sm_75 (COURSE_TARGET_CC=7.5, on an sm_90 GPU)", "... in Numba's CUDA simulator", or
    "... compiled with no GPU here" for PTX compiled on a CPU machine). ``cc`` None: the
    simulator."""
    if cc is None:
        return "Numba's CUDA simulator"
    text = name(cc)
    if forced_cc() == tuple(cc):
        where = ("in Numba's CUDA simulator" if simulated else
                 f"on an {name(real)} GPU" if real else "compiled with no GPU here")
        text += f" ({TARGET_CC_ENV}={cc[0]}.{cc[1]}, {where})"
    return text
