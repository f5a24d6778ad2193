"""Lab 5: the tensor-core dual GEMM for nn.Linear weights with biases, in half precision.

Chapter 8 reached tensor cores from Numba (``mma.sync``, ``ldmatrix``, ``cp.async`` as
inline PTX, :mod:`book.kernels.tensorcore`, the one module of ``book.kernels`` that graded
code may import: instructions, not a solution). The student builds lab 4's fused
``silu(x @ wg.T + bg) * (x @ wu.T + bu)`` on them: one warp and one ``mma`` (the fragment
layouts), a block tile staged in shared memory and read by ``ldmatrix``, the k-loop with a
``cp.async`` double buffer, then both weights with the SwiGLU epilogue and one
half-precision store.

Precision: checked and graded in float16 on every GPU and in the simulator. float16 is the
half type every tensor-core GPU runs (``mma.m16n8k8`` on sm_75, the T4 of Colab;
``m16n8k16`` on sm_80+) and the one NumPy holds, so inputs, the NaN-poisoned output and the
comparison need nothing new. The master also takes bfloat16 (its bits) and uses
``mma.m16n8k16.bf16`` on sm_80+; its notebook says which instruction the GPU at hand gets.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from . import linear_layer as layer
from .seeds import seeds
from .linear_layer import INPUTS, OUTPUT
from .edits import Derived, Edit, cache_by_shape
from .spec import KernelLab, LabPath, PlantedBug, blocks_along, odd_multiple

DTYPE = "float16"
# Tolerances. The inputs are float16 values (the reference reads the same values, widened
# exactly to float64); a product of two float16 is exact in float32 and the tensor cores sum
# in float32, so before the store the error is the float32 accumulation's, at most about
# d * 2**-24 * sum|x_k w_k| (order-dependent; ~1e-5 of the result at these scales). The one
# store rounds to float16: up to 2**-11 = 4.9e-4 of |out|. rtol 4e-3 is 8 such roundings
# (bias add, SiLU with ex2.approx, the product and the store all fit); atol 1e-3 covers
# outputs near zero, where the relative term vanishes but the accumulation error does not.
# A wrong fragment index moves whole products: errors of order 1, far outside both.
RTOL, ATOL = 4e-3, 1e-3
# the steps store the float32 accumulators: no half rounding, only the accumulation's
STEP_RTOL, STEP_ATOL = 1e-3, 1e-3
BK = 32  # the k depth the lab asks the kernel to handle: d is a multiple of it, h is even


# Shapes: d a multiple of BK (16-byte copies of whole k-slabs), h even (pairs of halves are
# stored as one 4-byte word), T anything (1 at decode). Off the block tile in T and h.
# In the simulator the lab's notebook sets the block tile (its first code cell: 2 warps, BM = 16
# rows of T by BN = 32 of h, where a GPU's is 128 x 128): the mma is simulated lane by lane,
# about two seconds per block, so that is the largest block the lab allows there. A tile row
# stored past the end on a GPU (the last tile's rows past T): up to 256 rows.
SIM_TILE = (32, 16)                 # (columns of h, rows of T) one block covers, simulated
GUARD_TILE = (256, 256)


def sim_blocks(case):
    """Blocks along x (h) and y (T) of the master's grid in the simulator."""
    cols, rows = SIM_TILE
    return (-(-case["h"] // cols), -(-case["T"] // rows))


def hidden_cases(rng, simulated: bool, n: int = 3):
    if simulated:  # two block tiles along T and h, one or two k-slabs: 5-10 s each
        cols, rows = SIM_TILE
        shapes = [(odd_multiple(rng, rows + 1, rows + 9), BK * int(rng.integers(1, 3)),
                   odd_multiple(rng, cols + 2, cols + 18, 2)) for _ in range(n)]
    else:  # T odd, h twice an odd number (spec.odd_multiple): no tile of a power of two fits
        # them (on an H200 a hidden T of 128 or 256 needed no row test from the master's
        # 128-row tile: the fixture without one earned that case)
        shapes = [(1, 4096, odd_multiple(rng, 2050, 2112, 2)),
                  (odd_multiple(rng, 60, 200), BK * int(rng.integers(16, 48)),
                   odd_multiple(rng, 500, 3000, 2)),
                  (odd_multiple(rng, 200, 700), 1024, 1030)][:n]
        while len(shapes) < n:
            shapes.append((odd_multiple(rng, 1, 300), BK * int(rng.integers(1, 64)),
                           odd_multiple(rng, 2, 3000, 2)))
    return [{"name": f"hidden {i + 1}", "T": T, "d": d, "h": h, "seed": int(rng.integers(1 << 30))}
            for i, (T, d, h) in enumerate(shapes)]


def timing_case(simulated: bool, seed: int):
    # GPU: a prefill-sized MLP-up (Llama-3-8B's d; h 8192 keeps the weights at 128 MiB)
    T, d, h = (16, 32, 32) if simulated else (2048, 4096, 8192)
    return {"name": "timing", "T": T, "d": d, "h": h, "seed": seed}


def make_reference_runner(case):
    """cuBLAS float16 (one F.linear on [wg; wu] with the biases) plus torch.compile's SiLU * up.

    cuBLAS at its best: one GEMM of 2h outputs, the biases in its epilogue, then the
    activation compiled into one elementwise kernel."""
    import torch
    import torch.nn.functional as F

    T, d, h = case["T"], case["d"], case["h"]
    dev, dt = "cuda", torch.float16
    # each set: x, the concatenated [wg; wu] [2h, d] and [bg; bu] [2h], the output
    sets = [(torch.randn(T, d, device=dev, dtype=dt),
             torch.randn(2 * h, d, device=dev, dtype=dt) / d ** 0.5,
             torch.randn(2 * h, device=dev, dtype=dt), torch.empty(T, h, device=dev, dtype=dt))]
    act = torch.compile(lambda g, u: F.silu(g) * u)

    def run(x, w, b, out):
        y = F.linear(x, w, b)
        out.copy_(act(y[:, :h], y[:, h:]))
    return run, sets


# The lab builds its kernel in steps; the last is the graded linear_swiglu_tc. Steps 1-3
# compute one projection, out = x @ w.T (w [h, d], nn.Linear's layout), into float32
# (linear_layer's projection); step 1 one 16 x 8 tile of it.

def _tile_specs(case):
    s = seeds(case["seed"], ("a", "w"))
    return {"a": {"shape": [16, 16], "dtype": DTYPE, "seed": s["a"], "scale": 1.0},
            "w": {"shape": [8, 16], "dtype": DTYPE, "seed": s["w"], "scale": 1.0}}


def _tile_reference(inputs):
    return inputs["a"].astype(np.float64) @ inputs["w"].astype(np.float64).T


def _explain_fragments(fn):
    import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
    from book.kernels.probes.fragments import probe_tile

    return probe_tile(fn)


def _step(name, function, teaches, shapes, seed, bug, **kw):
    return layer.projection_step(name, function, teaches, shapes, seed, bug, dtype=DTYPE,
                                 rtol=STEP_RTOL, atol=STEP_ATOL, **kw)


# Step 2 and 3's shapes are off the block tile in T and h, and d spans several k-slabs, so the
# bounds tests, the k-loop and the stage swap all show when they are wrong. The planted bugs:
# step 1, A's registers 1 and 2 exchanged (the classic misreading of the table: the drawing
# shows it); step 2, the B fragment's two registers (k 0-7, k 8-15) exchanged; step 3, a
# piece of a slab copied to the wrong place in shared memory (chunk and row exchanged).
STEPS = (
    _step("fragments", "mma_tile", "one warp, one 16 x 8 tile, one mma.sync: the fragment layouts",
          [(16, 16, 8), (16, 16, 8)], 41,
          PlantedBug("return g + 8 * ((e >> 1) & 1), 2 * t + (e & 1) + 8 * (e >> 2)",
                     "return g + 8 * (e >> 2), 2 * t + (e & 1) + 8 * ((e >> 1) & 1)",
                     r"first bad index .*expected .*got "),  # then explain draws the lanes
          params=("a", "w", "out"), inputs=("a", "w"), input_specs=_tile_specs,
          reference=_tile_reference, describe=lambda case: "a [16, 16], w [8, 16] float16",
          explain=_explain_fragments),
    _step("block", "gemm_tile", "a block tile staged in shared memory, fragments by ldmatrix",
          [(5, 64, 40), (17, 32, 6)], 43,
          PlantedBug("(fb[2 * q], fb[2 * q + 1])", "(fb[2 * q + 1], fb[2 * q])",
                     r"first bad index .*expected .*got ")),
    _step("pipeline", "gemm_pipelined", "the k-loop with a cp.async double buffer",
          [(5, 96, 40), (1, 64, 18)], 45,
          PlantedBug("copy16(s, s0 + r * BKP + ch * 8,", "copy16(s, s0 + ch * BKP + r * 8,",
                     r"first bad index .*expected .*got ")),
)

# what the graded function uses of the master (step 1's single tile does not): the cells of
# the hostile submissions below
GRADED_CELLS = ("lab5-02", "lab5-s2-code", "lab5-s3-code", "lab5-03")
# Submissions made from the master by edits (autograder/labs/edits.py), which the suite grades:
# `python -m tools.lab_fixtures --write` writes them under tests/fixtures/<kind>/.
DERIVED = (
    Derived("bounds", "lab5_writes_past_end", """\
writes past the end of `out` (issue 28): the master's epilogue without its row test `if r < T`,
so the last tile's rows past T are stored beyond `out` (12/12 on the H100 and the H200 before
guard zones; 0/8 with IndexError in the simulator). Every case fails with "wrote N elements
past the end of `out`".""",
            [Edit("if r < T:", "if True:  # the row test `r < T` dropped", "lab5-03")]),
    Derived("bounds", "lab5_forgets_blockidx_x", """\
forgets blockIdx.x: every block computes the first tile of h (BN = 32 columns in the
simulator, 128 on a GPU). Fails the public case with h = 40 and every hidden case, which spans
two of the simulator's tiles in each dimension.""",
            [Edit("m0, n0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN",
                  "m0, n0 = cuda.blockIdx.y * BM, 0 * BN  # blockIdx.x forgotten",
                  "lab5-03")]),
    Derived("bounds", "lab5_forgets_blockidx_y", """\
forgets blockIdx.y: every block computes the first tile of T (BM = 16 rows in the simulator,
128 on a GPU). Passes the public cases (T <= 5); fails every hidden case, which spans two of
the simulator's tiles in each dimension.""",
            [Edit("m0, n0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN",
                  "m0, n0 = 0 * BM, cuda.blockIdx.x * BN  # blockIdx.y forgotten",
                  "lab5-03")]),
    Derived("controls", "lab5_two_pass", """\
lab 5's "lesson not learned" control: correct, the lab's own hint 1 of step 4 (issue 28: the
unfused two-pass solution got 11.65/12 at 0.75 of the master on the H100): the two projections
by step 3's pipelined tensor-core GEMM into float32 scratch arrays, then a small elementwise
kernel for the biases, SiLU, the product and the half-precision store. Named by
autograder/rubrics/lab5_tensor_core_dual_gemm.toml; timed against the master by
benchmarks/lesson_controls_probe.py.""",
            append='''
# the control: two GEMMs into float32, then the epilogue in a kernel of its own
@cuda.jit(fastmath=True)
def _epilogue(a, b, bg, bu, out, T, h):
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y
    if c < h:
        g = a[r, c] + float32(bg[c])
        u = b[r, c] + float32(bu[c])
        out[r, c] = g / (float32(1.0) + math.exp(-g)) * u


def linear_swiglu_tc(x, wg, bg, wu, bu, out):
    T, d = x.shape
    h = wg.shape[0]
    a = cuda.device_array((T, h), dtype=np.float32)
    b = cuda.device_array((T, h), dtype=np.float32)
    gemm_pipelined(x, wg, a)
    gemm_pipelined(x, wu, b)
    _epilogue[((h + 127) // 128, T), 128](a, b, bg, bu, out, T, h)
    return out
'''),
    cache_by_shape("lab5", "linear_swiglu_tc"),
    # hostile and unusual submissions (tests/grader/test_lab5_tensor_core.py grades them, with
    # the hand-written ones of tests/fixtures/lab5/): the master's cells the graded function uses
    Derived("hostile", "missing_cp_async_wait",
            "race: the master without cp_async_wait(1), so a slab may be read before its cp.async "
            "copies land; the simulator copies at once (correct there), a GPU races: wrong now and "
            "then, and compute-sanitizer's racecheck (grade --sanitize) is the place that can say so",
            [Edit("                cp_async_wait(1)\n", "", "lab5-03")], cells=GRADED_CELLS),
    Derived("hostile", "transposed_fragments",
            "wrong answer: the A fragment's registers 1 and 2 exchanged (its 8 x 8 quarters "
            "transposed: rows 8-15 of k 0-7 taken for rows 0-7 of k 8-15); every correctness test "
            "fails with the first bad index",
            [Edit("dd = MMA(fa, (fg[", "dd = MMA((fa[0], fa[2], fa[1], fa[3]), (fg[", "lab5-03"),
             Edit("dd = MMA(fa, (fu[", "dd = MMA((fa[0], fa[2], fa[1], fa[3]), (fu[", "lab5-03")],
            cells=GRADED_CELLS),
)

LAB = KernelLab(
    name="lab5_tensor_core_dual_gemm",
    title="Lab 5: a tensor-core dual GEMM with a SwiGLU epilogue",
    chapters="chapter 8",
    asks=("lab 4's layer on tensor cores: float16 `mma.sync` fed by `ldmatrix` and a "
          "`cp.async` double buffer, built in four checked steps (one tile, a block tile, the "
          "pipeline, the fused layer); graded code may import `book.kernels.tensorcore`, the "
          "instructions"),
    function="linear_swiglu_tc", params=INPUTS + (OUTPUT,), inputs=INPUTS, output=OUTPUT,
    dtype=DTYPE, rtol=RTOL, atol=ATOL, perf_metric="flops",
    paths=(blocks_along(0, "h"), blocks_along(1, "T"),
           LabPath("T = 1", "one token: a tile of one row", lambda c, L: c["T"] == 1),
           LabPath("several k-slabs", "d longer than one BK slab: the pipeline's loop over k",
                   lambda c, L: c["d"] > BK),),
    public_cases=({"name": "public T=5 d=64 h=40", "T": 5, "d": 64, "h": 40, "seed": 7},
                  {"name": "public T=1 d=32 h=18", "T": 1, "d": 32, "h": 18, "seed": 8}),
    hidden_cases=hidden_cases, input_specs=partial(layer.input_specs, dtype=DTYPE),
    out_spec=partial(layer.out_spec, dtype=DTYPE), reference=layer.reference,
    describe=partial(layer.describe, dtype=DTYPE), timing_case=timing_case,
    min_bytes=partial(layer.min_bytes, dtype=DTYPE), flops=layer.flops,
    make_reference_runner=make_reference_runner,
    reference_name="cuBLAS float16 + compiled SwiGLU", steps=STEPS, derived=DERIVED,
    guard_tile=GUARD_TILE, sim_blocks=sim_blocks, out_units=(1, 2),
    untraced=("the access tracer does not model cp.async's 16-byte copies, ldmatrix's "
              "warp-wide loads or the paired half stores; on a GPU, check(linear_swiglu_tc, "
              "sanitize=True) runs compute-sanitizer"))
