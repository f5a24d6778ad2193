"""The course's SwiGLU kernels, one module per idea, and the registry of variants.

``VARIANTS[name]`` is a :class:`Variant`: ``fn(gate, up, out=None, ..., stream=0)`` (or
``fn(gate_up, out=None, ...)`` for the packed layout), the dtypes it takes, whether it runs
in Numba's CUDA simulator, and one line saying what it shows. The benchmark suite
(``python -m book.bench``) measures every variant; chapters show their source with
``book.show``.

The map, by layer (every module named; tests/tooling/test_contributing.py checks):

Truth and the host side
  ``reference``: the float64 truth, tolerances and checks. ``tile``: what every kernel's tile
  is (``TileShape``: ``problems``, ``validate``, ``shared_bytes``, ``describe``; every tile
  class below is one). ``plan``: the one way to plan and launch a kernel (issue 44): a
  wrapper's ``prepare`` returns a ``KernelLaunch`` (kernel, grid, block, shared memory,
  arguments, an optional cluster or dependent launch), ``plans_for`` packs it once into
  ``LaunchPlan`` s, ``launch`` makes one with ``cuLaunchKernel`` or ``cuLaunchKernelEx``,
  ``raw_stream`` is the one way to find the stream (the stream named, else torch's current
  stream for torch tensors, else the default stream), and ``PlannedCall`` / ``planned(name)``
  is an entry point's plan cache (one key: the stream and each tensor's pointer, shape,
  strides and dtype; ``BoundedCache``), which every public wrapper called plainly goes through
  (``swiglu_decode``, the GEMVs, ``swiglu_mma``, ``matmul_mma``, ``swiglu_wgmma``, the FP8
  GEMM and GEMV): capturable in a CUDA graph (tests/library/test_plan.py). ``launch``: the
  wrappers' host side: checks, torch views (``prepare``), ``KernelLaunch`` and Numba's
  launch of it, ``launch_kernel`` (the elementwise wrappers' launch, planned by ``plan`` once
  per kernel, grid, block and arrays); ``jit_bounds``: a
  tile's ``min_blocks`` as ``launch_bounds``;
  ``deliberate_grid`` keeps the course's own small launches from printing numba-cuda's "Grid
  size N" warning. An elementwise wrapper takes its host side from here as
  ``vectorized.swiglu_vec4`` does, through ``vectorized.launch_vector``. ``fastcall``: the cheap
  elementwise call from torch tensors (``FastCall``, chapter 6's decode section: a
  ``PlannedCall`` whose per-call path reads its key inline and calls ``cuLaunchKernel``
  itself; tests/library/test_fastcall.py; its per-call Python path, timed on a CPU with the
  launch stubbed, in records/launch/README.md).
  ``ptx``: compile the kernels to PTX, even with no GPU (``kernels()``: what
  tests/library/test_ptx.py reads).

Instructions, as intrinsics with their models and simulator versions
  ``wide``: loads and stores: 8- and 16-byte vectors, one element as float32, ``ld.global.cg``
  around L1 (``load_f32_cg``: the split-K meeting's) and float32 at a shared address (the FP8
  GEMM's scales). ``tensorcore``: inline-PTX ``mma.sync``,
  ``ldmatrix`` and ``cp.async`` (the predicated ``cp_async16_zfill_at`` of edge tiles too),
  ``shfl_xor``, their fragment tables and simulator versions; ``target_cc()``,
  ``cannot_run(dtype)``: the target, the T4 switch included; ``check_capability(cc, dtype)``
  (the check of :mod:`book.capability`, which ``hopper.check_capability(cc)`` is too: what each
  instruction family needs, said once). ``hopper``: Hopper's own
  instructions: ``wgmma`` with its shared-memory matrix descriptors, TMA loads, stores and
  multicast from host-made tensor maps, ``cp.async`` of a swizzled box completing on an
  ``mbarrier``, ``mbarrier``, fences, ``setmaxnreg``, clusters; each with a pure-Python model
  of what it computes and where it reads and writes (``swizzle``, ``descriptor``,
  ``operand_addresses``, ``d_coords``, ``wgmma_model``, ``tma_box``, ``MbarrierModel``).
  ``fp8`` (issue 42): e4m3 and e5m2 bit for bit (``encode_fast``: the same codes by a table of
  float32 classes), ``cvt.rn.satfinite`` pack and ``cvt.rn.f16x2`` widen with their NumPy
  models (simulator versions too), FP8 ``wgmma`` m64nNk32 built by ``hopper.make_wgmma``, no
  transpose arguments (tests/library/test_fp8.py).
  ``fma``: ``fma32``, float32 ``a * b + c`` rounded once (``fma.rn.f32``; the simulator's
  own ``cuda.fma`` rounds twice, so there it is the model), and ``fma32_model``, its NumPy
  model: ``norm_quant``'s sums bit for bit; ``max_nan32`` (``max.NaN.f32``, NumPy's
  maximum: a NaN wins), its amax.

Elementwise, one module per idea
  ``naive`` (two kernels), ``fused`` (one kernel; fast math and the float64-literal pitfall),
  ``vectorized`` (more bytes in flight: ILP and 8/16-byte accesses), ``halfprec``
  (float16/bfloat16), ``packed`` (the [M, 2F] gate|up layout), ``coalescing`` (strided and
  uncoalesced access, chapter 6), ``glu_family`` (the same fusion for GeGLU, RMSNorm and
  quantization), ``decode`` (CUDA graphs for one-token sizes), ``norm_quant`` (issue 42:
  RMSNorm, or the residual add and RMSNorm, fused with the activations' per-token e4m3
  quantization, one block a token, x read once into registers (``NormQuantTile``: 16-byte
  loads, warp-shuffle reductions, 8-byte code stores; the staged kernel it replaced kept as
  the control); bit for bit its NumPy model
  ``rmsnorm_quant_reference``, ``book.quantize``'s ``per_token`` of the kernels' float32 y
  (``rmsnorm_f32``); tests/library/test_norm_quant.py).

GEMM
  ``gemm`` and ``dual_gemm``: the tiled float32 GEMM and epilogue fusion. ``mma_gemm``: the
  bf16 tensor-core GEMM and dual GEMM (SwiGLU, identity and gate|up epilogues, main-loop
  ceiling; any T, d and h multiples of 8; ``prepare``: one launch worked out once); its tile in
  ``mma_tile``: ``MmaTile`` and ``MmaGeometry``, every size the kernel factory reads, named and
  printable. ``wgmma_gemm``: the warp-specialized Hopper dual GEMM (TMA into an mbarrier ring,
  a producer warpgroup and two consumer warpgroups, clusters of two, TMA-stored epilogue;
  chapter 9; ``prepare``: its launch with its cluster, planned by ``plan`` as every other
  entry point's; the FP8 GEMM and GEMV's too); its geometry in
  ``wgmma_gemm_tile``: ``HopperTile``, ``ColumnSplit`` and the tiles' ``schedule``.
  ``waves``: wave quantization of that persistent dual GEMM and the tile the dispatcher gives
  it for T tokens. ``fp8_gemm``: the fused FP8 MLP-up on Hopper: x per token and the weights
  per output channel in e4m3, bf16 or e4m3 out with a static scale; ``HopperTile``
  (``elem=1``: its shared memory counts the scales), ``wgmma_gemm``'s tensor maps and launch,
  the scales staged in shared memory; ``model``, the kernel in NumPy tile by tile
  (tests/library/test_fp8_gemm.py).

GEMV: the MLP-up at decode
  ``decode_mlp``: the MLP-up at decode in nn.Linear layout: the dispatcher by T over the GEMVs
  (``path_for``, ``prepare``, ``swiglu_decode``) with a large-T hook
  (tests/library/test_decode_mlp.py, cases shared with the next in
  tests/library/decode_cases.py). ``cuda_core_gemv``: the CUDA-core GEMV (``GemvTile``), 16
  bytes of a weight row a thread at a time, for the fewest tokens. ``mma_gemv``: the
  tensor-core GEMV (``MmaGemvTile``), ``mma.sync`` with the weights on the M side, straight
  to registers or through a ``cp.async`` ring. ``splitk``: split-K met in the kernel (the last block to
  arrive adds the partials; its workspace; ``fragment_meeting``, the tensor-core GEMVs' warps'
  sum and that meeting in one device function). ``staged_gemv``: a measured control of the
  decode path: the tensor-core GEMV with its weights staged through shared memory in
  whole-row chunks, gate and up rows in one m-tile, a register prefetch or a ``cp.async`` ring;
  ``prepare("staged", ...)``, never the dispatcher's pick (tests/library/test_staged_gemv.py;
  records/bench/README.md says what it measured). ``wgmma_gemv``: the decode MLP-up on Hopper:
  the weights as ``wgmma``'s A operand copied by TMA into an mbarrier ring, the row tiles that
  do not divide evenly cut into equal stream-K ranges over every SM, then whole tiles, the
  seams met by the last piece in a finisher warp of their own; ``prepare("hopper_gemv",
  ...)``, the dispatcher's pick on sm_90 from ``HOPPER_GEMV_MIN_T`` to ``HOPPER_GEMV_MAX_T``
  (tests/library/test_wgmma_gemv.py). Its geometry in ``wgmma_gemv_tile``: ``WgmmaGemvTile``
  (copies with L2 hints: the weights ``evict_first``, x ``evict_last``; ``cpasync``: the
  weights copied by a warp's 16-byte ``cp.async`` instead of TMA; with ``trace``: a per-block
  ``%globaltimer`` timeline; ``pdl`` and ``short_settle``, the fixes it shares with the FP8
  GEMV, ``FIXES``) and ``gemv_tile``, the default for T (with ``FIXES``; ``fixes=False``: the
  bare tile, their control). ``stream_k``: its stream-K
  worked out on the host: which block reads which (row tile, k-block) steps, the seams'
  pieces and slots (``stream_k``, ``split``, ``walk``); ``guided``: the table of a launch whose
  blocks take short ranges as they run out of work, the ``dynamic`` tile. ``block_trace``: that
  timeline: the events a traced block stamps, ``timeline`` reading them back, ``traced_runs``
  launching and reading (benchmarks/weight_stream.py). ``fp8_gemv``: the FP8 MLP-up at decode,
  T <= 32: ``wgmma_gemv``'s design with e4m3 weights and tokens, the TMA ring with L2 hints
  and ``lead``, stream-K with the finisher warp, the scales in the epilogue, bf16 or e4m3 out;
  a plan-cached ``cuLaunchKernel`` call, ``swiglu_fp8_gemv``. Its geometry in
  ``fp8_gemv_tile``: ``Fp8GemvTile`` (the bf16 tile's bytes, 128 values of k a box, its
  fixes, ``pdl`` and ``short_settle`` inherited, and diagnostic probes), ``gemv_tile``; its
  NumPy model, block by block, in
  ``fp8_gemv_model`` (tests/library/test_fp8_gemv.py).

Probes and demos (kernels the GPU lane and the chapters run beside the models)
  ``fragments``: one-warp mma demos of which lane holds what; ``probe_tile``: where a
  student's one-tile mma took each element from, drawn by lane. ``hopper_probes``:
  one-instruction kernels compared with ``hopper``'s models. ``fp8_probes``: the conversions
  run on the GPU beside their models, FP8 wgmma through ``hopper_probes.wgmma_once``
  (tests/library/test_fp8_gpu.py). ``stream_probes``: the decode weights read with no math, by
  16-byte loads, TMA boxes, the same boxes by ``cp.async`` and 1-D bulk copies: the ceilings
  the decode GEMVs work under (benchmarks/weight_stream.py).
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
