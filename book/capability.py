"""The GPU capability the course's instruction families need, and the one check that refuses a
GPU without them, saying what runs there instead (issue 44: once, for the tensor-core and the
Hopper kernels alike).

The families (:data:`FAMILIES`), each with the compute capability it needs:

- ``mma_m16n8k8``: fp16 ``mma.sync`` m16n8k8 and ``ldmatrix``, from sm_75 (Turing: a T4).
- ``mma_m16n8k16``: bf16 (and fp16) ``mma.sync`` m16n8k16 and ``cp.async``, from sm_80
  (Ampere). Every later GPU keeps both ``mma.sync`` families, Hopper and Blackwell included.
- ``wgmma``: ``wgmma`` and ``setmaxnreg``, on sm_90 exactly, compiled for the "a" target
  (sm_90a: H100, H200). Blackwell keeps TMA and mbarriers but not ``wgmma``: sm_100 multiplies
  with ``tcgen05``, sm_120 with an extended ``mma.sync``; so a Hopper kernel runs on no other
  GPU, and its refusal says why for the GPU at hand (:attr:`Family.why`).

:func:`check` refuses ``cc`` at the first family it lacks (:func:`refusal`: what it would say). ``cc`` None is Numba's CUDA
simulator: it simulates the ``mma.sync`` families and has no ``wgmma`` (nor TMA), which it
says. ``book.kernels.instructions.tensorcore.check_capability(cc, dtype)`` (:func:`tensor_core`: fp16 needs
the first family, any other dtype both) and ``book.kernels.instructions.hopper.check_capability(cc)`` are
this check; chapters 8 and 9 print its refusals in recorded cells, so their words stay
(tests/library/test_capability.py pins them byte for byte).

Which GPU a refusal speaks of (:func:`whose`): the target the switch ``COURSE_TARGET_CC``
(:mod:`book.target`) chose ("the target is sm_75 ..., chosen by COURSE_TARGET_CC"), the GPU this
process builds for (:func:`runs_here`: "this GPU is sm_75"), or one asked about ("on sm_75 the
course would refuse ..."): chapter 8 shows what the course does on a T4 from a page recorded on
an H100, and must not call the H100 one. A family's :class:`Voice` says how: the tensor-core
families name the capability in numbers and the switch; the Hopper refusal names the ``sm_``
alone and calls a target the switch chose "this GPU".

:func:`target_cc` answers which capability this process builds for: the GPU's, None in the
simulator, or the one the switch names. The GPU-or-simulator decision is not made here:
:mod:`book.gpu` makes it on ``import book``, before ``numba.cuda`` is imported; this module
reads its outcome (``numba.config``) and imports ``numba.cuda`` only when a GPU is asked about.
"""

from __future__ import annotations

from dataclasses import dataclass

from numba import config

from .target import TARGET_CC_ENV, describe, forced_cc, name

SIMULATED = bool(config.ENABLE_CUDASIM)

__all__ = ["SIMULATED", "Voice", "Family", "FAMILIES", "tensor_core", "check", "refusal", "whose",
           "runs_here", "target_cc", "target_description"]


@dataclass(frozen=True)
class Voice:
    """How a refusal names the GPU it refuses. ``numbers``: "sm_75 (compute capability 7.5)"
    and, for a target the switch chose, "the target is ..." (else "sm_75", and such a target is
    "this GPU"). ``here`` / ``asked``: how it leads into what runs instead on the GPU this
    process builds for (or the switch's) / on one asked about."""

    numbers: bool
    here: str
    asked: str


#: the tensor-core refusals' voice, and the Hopper refusal's
CAN_RUN = Voice(numbers=True, here="It can run", asked="Such a GPU can run")
USE = Voice(numbers=False, here="Use", asked="On such a GPU, use")


@dataclass(frozen=True)
class Family:
    """Instructions the course's kernels are built on, and the GPUs that have them: from
    ``since`` on, or (``exact``) on ``since`` only, compiled for ``since`` + ``suffix`` (the
    "a" target). A refusal says ``"{GPU named} {needs} {lead} {instead}"``, ``needs`` and
    ``refused`` (what the course would refuse on a GPU asked about) with ``{dtype}`` filled in.
    ``simulator``: what the refusal of Numba's simulator says, None where it simulates them."""

    instructions: tuple[str, ...]
    since: tuple[int, int]
    needs: str
    refused: str
    instead: str
    voice: Voice = CAN_RUN
    exact: bool = False
    suffix: str = ""
    simulator: str | None = None
    #: why a GPU without the family lacks it, by generation: (the first capability an entry
    #: speaks for, the words after ``needs``); the last entry at or below the GPU's applies
    why: tuple[tuple[tuple[int, int], str], ...] = ()

    def why_not(self, cc) -> str:
        """The words after ``needs`` for ``cc``, a GPU without the family (none where
        :attr:`why` has nothing for it: ``needs`` is then the whole sentence)."""
        said = [words for since, words in self.why if tuple(cc)[:2] >= since]
        return said[-1] if said else ""

    @property
    def arch(self) -> tuple:
        """The target compiled for: (9, 0, "a") for wgmma, (7, 5) for m16n8k8."""
        return (*self.since, self.suffix) if self.suffix else self.since

    def has(self, cc) -> bool:
        """Whether a GPU of capability ``cc`` (a tuple) has these instructions."""
        return tuple(cc)[:2] == self.since if self.exact else tuple(cc) >= self.since


FAMILIES = {
    "mma_m16n8k8": Family(
        instructions=("mma_f16_1688", "ldmatrix"), since=(7, 5),
        needs="mma.sync m16n8k8/m16n8k16 and ldmatrix need compute capability 7.5 (Turing, "
              "e.g. a T4) or newer.",
        refused="every tensor-core kernel",
        instead="the course's CUDA-core kernels (book.kernels.gemms.gemm, book.kernels.gemms.dual_gemm) but "
                "no tensor-core kernel."),
    "mma_m16n8k16": Family(
        instructions=("mma_bf16_16816", "mma_f16_16816", "cp_async"), since=(8, 0),
        needs="{dtype} mma.sync m16n8k16 and cp.async need compute capability 8.0 (Ampere) or "
              "newer.",
        refused="{dtype} tensor-core kernels",
        instead="the fp16 m16n8k8 instruction (mma_f16_1688, what a T4 has) and the course's "
                "CUDA-core kernels."),
    "wgmma": Family(
        instructions=("wgmma", "setmaxnreg"), since=(9, 0), exact=True, suffix="a", voice=USE,
        needs="these kernels are built on wgmma, which exists on sm_90a (H100, H200) only",
        # said to the GPU at hand: an A100's user needs no word of Blackwell, and the two
        # Blackwell families differ (tcgen05 on sm_100; mma.sync, extended, on sm_120)
        why=(((0, 0), ": GPUs before Hopper have neither wgmma nor TMA."),
             ((10, 0), ": the sm_100 Blackwell GPUs (B200, GB200) keep TMA, mbarriers and "
                       "setmaxnreg but multiply with tcgen05 instead."),
             ((12, 0), ": the sm_120 Blackwell GPUs (RTX 50 series) keep TMA and mbarriers but "
                       "have no tcgen05: their tensor cores take mma.sync, extended to FP8 and "
                       "FP4.")),
        refused="this kernel",
        instead="the mma.sync kernels of book.kernels.gemms.mma_gemm (sm_80+, fp16 from sm_75).",
        simulator="these kernels are built on wgmma, which only Hopper GPUs have (H100, H200: "
                  "sm_90a); Numba's CUDA simulator has neither wgmma nor TMA. Here the chapter "
                  "runs the models of book.kernels.instructions.hopper (descriptors, swizzle, TMA boxes, the "
                  "accumulator layout) and the mma.sync kernels of book.kernels.gemms.mma_gemm "
                  "instead."),
}


def tensor_core(dtype: str = "bfloat16") -> tuple[str, ...]:
    """The families a tensor-core kernel of ``dtype`` needs: fp16 runs on m16n8k8 (sm_75, no
    ``cp.async``), any other dtype needs m16n8k16 too (sm_80)."""
    return ("mma_m16n8k8",) if dtype == "float16" else ("mma_m16n8k8", "mma_m16n8k16")


def check(cc, *families: str, dtype: str = "bfloat16") -> None:
    """Refuse ``cc`` (a compute capability, None for the simulator) at the first of
    ``families`` (keys of :data:`FAMILIES`) it lacks, with a RuntimeError that names it as
    :func:`whose` says and tells what runs there instead."""
    for family in map(FAMILIES.__getitem__, families):
        if cc is None:
            if family.simulator is not None:
                raise RuntimeError(family.simulator)
            continue
        cc = tuple(cc)
        if not family.has(cc):
            gpu, lead = _terms(cc, family.voice, family.refused.format(dtype=dtype))
            needs = family.needs.format(dtype=dtype) + family.why_not(cc)
            raise RuntimeError(f"{gpu} {needs} {lead} {family.instead}")


def refusal(cc="target", *families: str, dtype: str = "bfloat16") -> str | None:
    """What :func:`check` would say (None where it passes), for a cell that skips rather than
    raises. ``cc`` "target": :func:`target_cc` (a switch it refuses is said too)."""
    try:
        check(target_cc() if cc == "target" else cc, *families, dtype=dtype)
    except RuntimeError as e:
        return str(e)
    return None


def whose(cc) -> str:
    """Which GPU ``cc`` is to a refusal: "switch" (the one ``COURSE_TARGET_CC`` names), "here"
    (:func:`runs_here`) or "asked" (one asked about)."""
    if forced_cc() == tuple(cc):
        return "switch"
    return "here" if runs_here(cc) else "asked"


def _terms(cc, voice: Voice, refused: str) -> tuple[str, str]:
    """How a refusal in ``voice`` names ``cc`` (and, for one asked about, what the course
    ``refused`` there), and how it leads into what runs there instead."""
    if not voice.numbers:
        if runs_here(cc):
            return f"this GPU is {name(cc)}:", voice.here
        return f"on {name(cc)} the course would refuse {refused}:", voice.asked
    where = f"{name(cc)} (compute capability {cc[0]}.{cc[1]})"
    said = whose(cc)
    if said == "switch":
        return (f"the target is {name(cc)} (compute capability {cc[0]}.{cc[1]}, "
                f"chosen by {TARGET_CC_ENV}):", voice.here)
    if said == "here":
        return f"this GPU is {where}:", voice.here
    return f"on {where} the course would refuse {refused}:", voice.asked


def runs_here(cc) -> bool:
    """Whether ``cc`` is the capability this process builds for (:func:`target_cc`: the GPU's,
    or the one ``COURSE_TARGET_CC`` names), rather than one asked about."""
    try:
        here = target_cc()
    except Exception:  # no GPU and no switch (PTX compiled on a CPU), or a switch refused
        return False
    return here is not None and tuple(here)[:2] == tuple(cc)[:2]


def target_cc():
    """The compute capability a kernel is built for: the current GPU's, or None in the
    simulator, unless the switch ``COURSE_TARGET_CC`` (:mod:`book.target`) names one: then
    that one (on a GPU it must not be newer than the GPU). With no GPU and the simulator off
    (PTX compiled for a GPU that is not there), the one the switch names."""
    want = forced_cc()
    if SIMULATED:
        return want
    from numba import cuda

    if want and not cuda.is_available():
        return want
    real = tuple(cuda.get_current_device().compute_capability)
    if want is None:
        return real
    if want > real:
        raise RuntimeError(
            f"{TARGET_CC_ENV}={want[0]}.{want[1]} names a newer GPU than this one "
            f"(sm_{real[0]}{real[1]}): its instructions would not run here. Unset it, or "
            f"name {real[0]}.{real[1]} or older (7.5: the T4's paths).")
    return want


def target_description() -> str:
    """The target in words, for a notebook to print: "sm_90", "Numba's CUDA simulator", or
    "sm_75 (COURSE_TARGET_CC=7.5, on an sm_90 GPU)"."""
    cc = target_cc()
    real = None
    if not SIMULATED and cc is not None:
        from numba import cuda

        if cuda.is_available():
            real = tuple(cuda.get_current_device().compute_capability)
    return describe(cc, real, SIMULATED)
