"""The course's SwiGLU kernels, one module per idea, and the registry of variants.

``VARIANTS[name]`` is a :class:`Variant`: ``fn(gate, up, out=None, ..., stream=0)`` (or
``fn(gate_up, out=None, ...)`` for the packed layout), the dtypes it takes, whether it runs
in Numba's CUDA simulator, and one line saying what it shows. The benchmark suite
(``python -m book.bench``) measures every variant; chapters show their source with
``book.show``.

The map, by layer: a subpackage a layer, its ``__init__.py`` docstring the map of its
modules (every module named; tests/tooling/test_contributing.py checks). A layer imports only
the layers before it, the host side's ``plan`` and ``launch`` aside, which every layer's
wrappers use (tests/tooling/test_structure.py: no circles, and ``instructions`` imports no
other layer).

``instructions/``
  the instructions as intrinsics, each with its NumPy model and simulator version: ``wide``
  (8- and 16-byte loads and stores), ``tensorcore`` (``mma.sync``, ``ldmatrix``, ``cp.async``,
  ``shfl_xor``; the target), ``hopper`` (``wgmma``, TMA, ``mbarrier``, clusters), ``fp8``
  (e4m3 and e5m2), ``fma``. The one layer where GPU or simulator decides what a name is.
``host/``
  the host side: ``plan`` (the one way to plan and launch a kernel), ``launch`` (the wrappers'
  checks, views and launches), ``fastcall`` (the cheap elementwise call), ``ptx`` (the kernels
  compiled to PTX, with or without a GPU).
``elementwise/``
  the SwiGLU kernels, one module per idea: ``naive``, ``fused``, ``vectorized``, ``halfprec``,
  ``packed``, ``coalescing``, ``glu_family``, ``norm_quant``, ``decode`` (the graphed SwiGLU).
``gemms/``
  the GEMMs and their tiles and schedules: ``tile`` (the tile protocol), ``gemm``,
  ``dual_gemm``, ``mma_gemm`` and ``mma_tile``, ``wgmma_gemm`` and ``wgmma_gemm_tile``,
  ``fp8_gemm``, ``splitk``, ``stream_k``, ``waves``. (Not ``gemm/``: that is the old name of
  ``gemms/gemm.py``, which the chapters still import.)
``gemv/``
  the MLP-up at decode: ``decode_mlp`` (the dispatcher by T), ``cuda_core_gemv``,
  ``mma_gemv``, ``staged_gemv``, ``wgmma_gemv`` and ``wgmma_gemv_tile``, ``block_trace`` (a
  traced GEMV's timeline), ``fp8_gemv``, ``fp8_gemv_tile`` and ``fp8_gemv_model``.
``probes/``
  kernels the GPU lane and the chapters run beside the models: ``fragments``,
  ``hopper_probes``, ``fp8_probes``, ``stream_probes``.

Beside the layers: ``reference``, the float64 truth, tolerances and checks; ``aliases``, the
old flat names. Before issue 44 every module sat in ``book/kernels/`` itself, and the chapters'
and labs' recorded code cells (and graded student code, the tracer's "module:function" strings)
import by those names: :data:`ALIASES` maps each old name to its module's new path, served by
this package's ``__getattr__`` (``from book.kernels import hopper``) and a finder on
``sys.meta_path`` (``import book.kernels.hopper``, ``from book.kernels.tensorcore import
shfl_xor``), both giving the one module object of the new path. Code in book/, autograder/,
tools/, benchmarks/ and tests/ imports by the new paths.
"""

from dataclasses import dataclass
from typing import Callable

from . import reference  # noqa: F401  (cheap, no numba)
from .aliases import install

#: {old flat name: the module's path now}: what the chapters' and labs' code cells and graded
#: code import (``book.kernels.aliases``); nothing else uses these names.
ALIASES = {
    "fma": "book.kernels.instructions.fma",
    "fp8": "book.kernels.instructions.fp8",
    "hopper": "book.kernels.instructions.hopper",
    "tensorcore": "book.kernels.instructions.tensorcore",
    "wide": "book.kernels.instructions.wide",
    "coalescing": "book.kernels.elementwise.coalescing",
    "decode": "book.kernels.elementwise.decode",
    "fused": "book.kernels.elementwise.fused",
    "glu_family": "book.kernels.elementwise.glu_family",
    "halfprec": "book.kernels.elementwise.halfprec",
    "naive": "book.kernels.elementwise.naive",
    "norm_quant": "book.kernels.elementwise.norm_quant",
    "packed": "book.kernels.elementwise.packed",
    "vectorized": "book.kernels.elementwise.vectorized",
    "dual_gemm": "book.kernels.gemms.dual_gemm",
    "fp8_gemm": "book.kernels.gemms.fp8_gemm",
    "gemm": "book.kernels.gemms.gemm",
    "mma_gemm": "book.kernels.gemms.mma_gemm",
    "mma_tile": "book.kernels.gemms.mma_tile",
    "splitk": "book.kernels.gemms.splitk",
    "stream_k": "book.kernels.gemms.stream_k",
    "tile": "book.kernels.gemms.tile",
    "waves": "book.kernels.gemms.waves",
    "wgmma_gemm": "book.kernels.gemms.wgmma_gemm",
    "wgmma_gemm_tile": "book.kernels.gemms.wgmma_gemm_tile",
    "block_trace": "book.kernels.gemv.block_trace",
    "cuda_core_gemv": "book.kernels.gemv.cuda_core_gemv",
    "decode_mlp": "book.kernels.gemv.decode_mlp",
    "fp8_gemv": "book.kernels.gemv.fp8_gemv",
    "fp8_gemv_model": "book.kernels.gemv.fp8_gemv_model",
    "fp8_gemv_tile": "book.kernels.gemv.fp8_gemv_tile",
    "mma_gemv": "book.kernels.gemv.mma_gemv",
    "staged_gemv": "book.kernels.gemv.staged_gemv",
    "wgmma_gemv": "book.kernels.gemv.wgmma_gemv",
    "wgmma_gemv_tile": "book.kernels.gemv.wgmma_gemv_tile",
    "fastcall": "book.kernels.host.fastcall",
    "launch": "book.kernels.host.launch",
    "plan": "book.kernels.host.plan",
    "ptx": "book.kernels.host.ptx",
    "fp8_probes": "book.kernels.probes.fp8_probes",
    "fragments": "book.kernels.probes.fragments",
    "hopper_probes": "book.kernels.probes.hopper_probes",
    "stream_probes": "book.kernels.probes.stream_probes",
}


@dataclass(frozen=True)
class Variant:
    name: str
    fn: Callable
    dtypes: tuple
    runs_in_simulator: bool
    description: str
    layout: str = "separate"  # "separate": fn(gate, up, out); "packed": fn(gate_up, out)
    transfers_per_element: int = 3  # element loads + stores per output element


def _variants():
    from ..dtypes import DTYPES as F3
    from .elementwise import coalescing, fused, halfprec, naive, packed, vectorized

    vs = [
        Variant("naive", naive.swiglu_naive, F3, True,
                "two kernels: silu(gate) -> tmp, then tmp * up (5 transfers per element)",
                transfers_per_element=5),
        Variant("naive_vec", naive.swiglu_naive_vec, F3, True,
                "the two-kernel algorithm with 16-byte accesses: naive vs fused on bytes alone",
                transfers_per_element=5),
        Variant("fused", fused.swiglu_fused, F3, True,
                "one kernel, one element per thread, IEEE float32 math"),
        Variant("fused_fastmath", fused.swiglu_fused_fastmath, F3, True,
                "fused, compiled with fastmath: ex2.approx and approximate division"),
        Variant("fused_f64_literal", fused.swiglu_fused_f64_literal, ("float32",), True,
                "fused with a bare 1.0 literal: the division runs in float64"),
        Variant("ilp4", vectorized.swiglu_ilp4, F3, True,
                "4 elements per thread, all loads issued before any math, element-size loads"),
        Variant("vec2", vectorized.swiglu_vec2, ("float32",), True,
                "8-byte loads/stores (ld.global.v2.f32), 4 elements per thread"),
        Variant("vec4", vectorized.swiglu_vec4, ("float32",), True,
                "16-byte loads/stores (ld.global.v4.f32), 8 elements per thread"),
        Variant("half4", halfprec.swiglu_half4, ("float16", "bfloat16"), True,
                "8-byte accesses of 4 halves, float32 math, 8 elements per thread"),
        Variant("half8", halfprec.swiglu_half8, ("float16", "bfloat16"), True,
                "16-byte accesses of 8 halves, float32 math, 16 elements per thread"),
        # the IEEE-math controls (chapter 6): each kernel above compiled without fastmath
        Variant("ilp4_ieee", vectorized.swiglu_ilp4_ieee, F3, True,
                "ilp4 without fastmath (libdevice expf, IEEE division): the arithmetic's cost"),
        Variant("vec2_ieee", vectorized.swiglu_vec2_ieee, ("float32",), True,
                "vec2 without fastmath (libdevice expf, IEEE division)"),
        Variant("vec4_ieee", vectorized.swiglu_vec4_ieee, ("float32",), True,
                "vec4 without fastmath (libdevice expf, IEEE division)"),
        Variant("half4_ieee", halfprec.swiglu_half4_ieee, ("float16", "bfloat16"), True,
                "half4 without fastmath (libdevice expf, IEEE division)"),
        Variant("half8_ieee", halfprec.swiglu_half8_ieee, ("float16", "bfloat16"), True,
                "half8 without fastmath (libdevice expf, IEEE division)"),
        # coalescing (chapter 6): the fused kernel with warps reading 1, 2 or 32 elements apart
        Variant("coalesced", coalescing.swiglu_coalesced, ("float32",), True,
                "fused (fastmath), neighbouring threads read neighbouring elements"),
        Variant("strided2", coalescing.swiglu_strided2, ("float32",), True,
                "fused (fastmath), warps read every other element (two passes)"),
        Variant("uncoalesced", coalescing.swiglu_uncoalesced, ("float32",), True,
                "fused (fastmath), each thread of a warp in its own 128-byte line"),
        Variant("packed", packed.swiglu_packed, F3, True,
                "packed [M, 2F] gate|up input (fused gate+up projection), 16-byte accesses",
                layout="packed"),
    ]
    return {v.name: v for v in vs}


def best_variant(dtype):
    """The widest-access elementwise variant for a dtype (16-byte loads and stores).

    On the H100 the benchmark finds ilp4/half4 within about 1% of it at large sizes: all
    sit at the same memory ceiling (book/data/h100.json)."""
    return "vec4" if str(dtype) == "float32" else "half8"


_alias = install(__name__, ALIASES)


def __getattr__(name):
    # VARIANTS imports numba.cuda: build it on first use, after `import book` decided
    # GPU or simulator. The old flat names: ALIASES.
    if name == "VARIANTS":
        v = _variants()
        globals()["VARIANTS"] = v
        return v
    return _alias(name)
