"""Lab 4: the epilogue-fused dual GEMM for nn.Linear weights with biases.

Chapter 7 fused x@Wg and x@Wu with SiLU*mul in the epilogue, weights stored [d, h]. Real
checkpoints store nn.Linear weights as [h, d] (out_features, in_features) and often carry
biases: out = silu(x @ Wg.T + bg) * (x @ Wu.T + bu). The tiles must be loaded the other way
round to stay coalesced, and the biases join the epilogue.
"""

from __future__ import annotations

from functools import partial

from . import linear_layer as layer
from .linear_layer import INPUTS, OUTPUT
from .edits import Derived, Edit, cache_by_shape
from .spec import KernelLab, LabPath, PlantedBug, blocks_along, odd_multiple

DTYPE = "float32"
RTOL, ATOL = 1e-3, 1e-4


# The largest block the lab allows: 1024 threads (CUDA's most) as 32 x 32, each an R x R = 4 x 4
# register block (the notebook's given R): a 128 x 128 tile of out. A tile row stored past the
# end (the last tile's rows past T): up to 256 rows.
LARGEST_TILE = (128, 128)           # (columns of h, rows of T) one block covers
GUARD_TILE = (256, 256)


def sim_blocks(case):
    """Blocks along x (h) and y (T) of the master's grid, at the largest tile."""
    cols, rows = LARGEST_TILE
    return (-(-case["h"] // cols), -(-case["T"] // rows))


def hidden_cases(rng, simulated: bool, n: int = 3):
    if simulated:  # two tiles of the largest size along T and h, d across a slab or two: ~6 s
        cols, rows = LARGEST_TILE
        shapes = [(odd_multiple(rng, rows + 1, rows + 12), odd_multiple(rng, 5, 34),
                   odd_multiple(rng, cols + 1, cols + 12)) for _ in range(n)]
    else:  # T and h odd (spec.odd_multiple): no tile of a power of two fits them; d too but once
        shapes = [(1, 4096, odd_multiple(rng, 1000, 1064)),
                  (odd_multiple(rng, 60, 200), odd_multiple(rng, 500, 1500), odd_multiple(rng, 500, 3000)),
                  (odd_multiple(rng, 200, 700), 1027, 515)][:n]
        while len(shapes) < n:
            shapes.append((odd_multiple(rng, 1, 300), odd_multiple(rng, 1, 2000),
                           odd_multiple(rng, 1, 3000)))
    return [{"name": f"hidden {i + 1}", "T": T, "d": d, "h": h, "seed": int(rng.integers(1 << 30))}
            for i, (T, d, h) in enumerate(shapes)]


def timing_case(simulated: bool, seed: int):
    T, d, h = (2, 16, 16) if simulated else (1024, 2048, 4096)
    return {"name": "timing", "T": T, "d": d, "h": h, "seed": seed}


def make_reference_runner(case):
    """Strict-f32 cuBLAS (TF32 off): two addmm calls plus torch's SiLU and multiply."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    T, d, h = case["T"], case["d"], case["h"]
    dev = "cuda"
    sets = [(torch.randn(T, d, device=dev), torch.randn(h, d, device=dev) / d ** 0.5,
             torch.randn(h, device=dev), torch.randn(h, d, device=dev) / d ** 0.5,
             torch.randn(h, device=dev), torch.empty(T, h, device=dev))]

    def run(x, wg, bg, wu, bu, out):
        a = torch.addmm(bg, x, wg.t())
        b = torch.addmm(bu, x, wu.t())
        torch.mul(torch.nn.functional.silu(a), b, out=out)
    return run, sets


# The lab builds its kernel in four steps; the last is the graded linear_swiglu. Steps 1-3
# compute one projection, out = x @ w.T with w [h, d], no bias.


def _step(name, function, teaches, shapes, seed, bug):
    return layer.projection_step(name, function, teaches, shapes, seed, bug, dtype=DTYPE,
                                 rtol=RTOL, atol=ATOL, out_dtype=DTYPE)


# The shapes are off every tile (16 for step 2, 64 for step 3) and d spans several slabs of
# 16, so the bounds tests and the slab loop both show when they are wrong.
STEPS = (
    _step("plain", "gemm_plain", "out = x @ w.T with [h, d] weights, one thread per output",
          [(3, 20, 18), (1, 33, 7)], 31,
          PlantedBug("for k in range(d):", "for k in range(d - 1):", r"first bad index .*expected .*got ")),
    _step("tiled", "gemm_tiled", "shared-memory tiles loaded along d",
          [(5, 40, 20), (17, 9, 3)], 33,
          PlantedBug("for k0 in range(0, d, S):", "for k0 in range(0, d - S, S):",
                     r"first bad index .*expected .*got ")),
    _step("blocked", "gemm_blocked", "an R x R register block per thread",
          [(3, 37, 70), (1, 33, 7)], 35,
          PlantedBug("        for j in range(R):\n            c = col0",
                     "        for j in range(1):\n            c = col0", r"never written")),
)

# Submissions made from the master by edits (autograder/labs/edits.py), which the suite grades:
# `python -m tools.lab_fixtures --write` writes them under tests/fixtures/<kind>/.

def _unfused(comment: str, gemm: str) -> str:
    """Lab 4's unfused controls: the two projections by the notebook's ``gemm`` into float32
    scratch arrays, then the biases, SiLU and the product in a kernel of their own."""
    return f'''
# {comment}
@cuda.jit(fastmath=True)
def _epilogue(a, b, bg, bu, out, T, h):
    c = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    r = cuda.blockIdx.y
    if c < h:
        g = a[r, c] + bg[c]
        u = b[r, c] + bu[c]
        out[r, c] = g / (float32(1.0) + math.exp(-g)) * u


def linear_swiglu(x, wg, bg, wu, bu, out):
    T, d = x.shape
    h = wg.shape[0]
    a = cuda.device_array((T, h), dtype=np.float32)
    b = cuda.device_array((T, h), dtype=np.float32)
    {gemm}(x, wg, a)
    {gemm}(x, wu, b)
    _epilogue[((h + 255) // 256, T), 256](a, b, bg, bu, out, T, h)
    return out
'''


DERIVED = (
    Derived("bounds", "lab4_writes_past_end", """\
writes past the end of `out`: the master's epilogue without its row test `if r < T` (the last
tile's rows past T are stored beyond `out`); every case fails with "wrote N elements past the
end of `out`".""",
            [Edit("        if r < T:\n",
                  "        if True:  # the row test `r < T` dropped\n",
                  "lab4-03")]),
    Derived("bounds", "lab4_forgets_blockidx_x", """\
forgets blockIdx.x: every block computes the first tile of h. Passes the public cases (h <= 18:
one tile); fails every hidden case, which spans two tiles of the largest block the lab allows
(32 x 32 threads x R = 4: 128 columns) in the simulator too.""",
            [Edit("col0 = cuda.blockIdx.x * TN",
                  "col0 = 0 * TN  # blockIdx.x forgotten",
                  "lab4-03")]),
    Derived("bounds", "lab4_forgets_blockidx_y", """\
forgets blockIdx.y: every block computes the first tile of T. Passes the public cases (T <= 3:
one tile); fails every hidden case, which spans two tiles of the largest block the lab allows
(128 rows) in the simulator too.""",
            [Edit("row0 = cuda.blockIdx.y * TM",
                  "row0 = 0 * TM  # blockIdx.y forgotten",
                  "lab4-03")]),
    Derived("controls", "lab4_unfused", """\
lab 4's "lesson not learned" control: correct, the lab's own hint 1 of step 4: the two
projections by step 3's register-blocked GEMM into float32 scratch arrays, then a small
elementwise kernel for the biases, SiLU and the product (x read twice, the two projections
written and read back). Named by autograder/rubrics/lab4_dual_gemm.toml; timed against the
master by benchmarks/lesson_controls_probe.py.""",
            append=_unfused("the control: two GEMMs, then the epilogue in a kernel of its own",
                            "gemm_blocked")),
    Derived("controls", "lab4_unfused_tiled", """\
an alternative control for lab 4 (measured beside the rubric's, for the record): hint 1 of
step 4 with step 2's shared-memory tiles instead of step 3's register blocks, so neither the
register block nor the fusion is learned.""",
            append=_unfused("the alternative control: two tiled GEMMs (one output per thread), then "
                            "the epilogue", "gemm_tiled")),
    cache_by_shape("lab4", "linear_swiglu"),
)

LAB = KernelLab(
    name="lab4_dual_gemm",
    title="Lab 4: an epilogue-fused dual GEMM for nn.Linear weights with biases",
    chapters="chapter 7",
    asks=("an epilogue-fused dual GEMM for **nn.Linear weights `[h, d]` with biases** "
          "(chapter 7's weights were `[d, h]`, without bias), float32"),
    function="linear_swiglu", params=INPUTS + (OUTPUT,), inputs=INPUTS, output=OUTPUT,
    dtype=DTYPE, rtol=RTOL, atol=ATOL, perf_metric="flops",
    paths=(blocks_along(0, "h"), blocks_along(1, "T"),
           LabPath("T = 1", "one token: a tile of one row", lambda c, L: c["T"] == 1),),
    public_cases=({"name": "public T=3 d=20 h=18", "T": 3, "d": 20, "h": 18, "seed": 5},
                  {"name": "public T=1 d=33 h=7", "T": 1, "d": 33, "h": 7, "seed": 6}),
    hidden_cases=hidden_cases, input_specs=partial(layer.input_specs, dtype=DTYPE),
    out_spec=partial(layer.out_spec, dtype=DTYPE), reference=layer.reference,
    describe=partial(layer.describe, dtype=DTYPE), timing_case=timing_case,
    min_bytes=partial(layer.min_bytes, dtype=DTYPE), flops=layer.flops,
    make_reference_runner=make_reference_runner, reference_name="strict-f32 cuBLAS", steps=STEPS, derived=DERIVED,
    guard_tile=GUARD_TILE, sim_blocks=sim_blocks)
