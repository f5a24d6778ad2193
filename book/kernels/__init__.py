"""The course's SwiGLU kernels, one module per idea, and the registry of variants.

``VARIANTS[name]`` is a :class:`Variant`: ``fn(gate, up, out=None, ..., stream=0)`` (or
``fn(gate_up, out=None, ...)`` for the packed layout), the dtypes it takes, whether it runs
in Numba's CUDA simulator, and one line saying what it shows. The benchmark suite
(``python -m book.bench``) measures every variant; chapters show their source with
``book.show``.

Modules: ``reference`` (float64 truth, tolerances, checks), ``naive`` (two kernels),
``fused`` (one kernel; fast math and the float64-literal pitfall), ``vectorized`` (more
bytes in flight: ILP and 8/16-byte accesses), ``halfprec`` (float16/bfloat16),
``packed`` (the [M, 2F] gate|up layout), ``coalescing`` (strided and uncoalesced
access, chapter 6), ``decode`` (CUDA graphs for one-token sizes),
``wide`` (the vector load/store intrinsics), ``ptx`` (compile to PTX, even with no GPU),
``gemm``/``dual_gemm`` (epilogue fusion), ``tensorcore`` (``mma.sync``, ``ldmatrix``,
``cp.async`` through inline PTX, with simulator versions), ``mma_gemm`` (the bf16/fp16
tensor-core GEMM and dual GEMM), ``fragments`` (one warp, one ``mma``: who holds what),
``decode_mlp`` (the MLP-up at decode: GEMVs on CUDA cores and on tensor cores, chosen by T),
``splitk`` (split-K met in the kernel), ``fastcall`` (the cheap launch from torch tensors),
``fp8`` (e4m3 and e5m2: formats, conversions and FP8 ``wgmma``, each with its NumPy model),
``fp8_probes`` (the conversions run on the GPU), ``fp8_gemm`` (the fused FP8 MLP-up on
Hopper: scaled e4m3 operands, bf16 or e4m3 out), ``norm_quant`` (RMSNorm fused with the
activations' per-token e4m3 quantization).
"""

from dataclasses import dataclass
from typing import Callable

from . import reference  # noqa: F401  (cheap, no numba)


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
    from . import coalescing, fused, halfprec, naive, packed, vectorized

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


def __getattr__(name):
    # VARIANTS imports numba.cuda: build it on first use, after `import book` decided
    # GPU or simulator.
    if name == "VARIANTS":
        v = _variants()
        globals()["VARIANTS"] = v
        return v
    raise AttributeError(f"module 'book.kernels' has no attribute {name!r}")
