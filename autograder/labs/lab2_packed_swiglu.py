"""Lab 2: fused SwiGLU on the interleaved packed layout [M, 2F].

Chapter 6 handled the packed layout whose halves are [gate | up]. Some checkpoints (gpt-oss
among them) interleave instead: gate in the even columns, up in the odd ones. Same three
streams of traffic, different indexing; the chapter's kernel gives wrong answers here.
"""

from __future__ import annotations

import numpy as np

from .elementwise import Elementwise
from .edits import Derived, Edit, cache_by_shape
from .spec import LabPath, PlantedBug, blocks_along, odd_multiple


def reference(inputs):
    x = inputs["x"].astype(np.float64)
    g, u = x[:, 0::2], x[:, 1::2]
    return g / (1.0 + np.exp(-g)) * u


# The largest block the lab allows: 1024 threads (CUDA's most), EPT = 4 columns each (the
# notebook's given cell), one row per block of a 2D grid: 4096 columns by 1 row. A tile row
# stored past the end: up to 32 rows of a (32, 32) block, or 1024 threads x 8 columns.
LARGEST_BLOCK = (4096, 1)           # (columns, rows) one block covers


def sim_shape(rng):
    """Two blocks of the largest size along x and y: about a second each."""
    cols, rows = LARGEST_BLOCK
    return odd_multiple(rng, 2 * rows, 5), odd_multiple(rng, cols + 1, cols + 900)


def gpu_shapes(rng):
    # every size an odd number (spec.odd_multiple): no tile of a power of two fits a row
    return [(1, odd_multiple(rng, 18900, 19000)),
            (odd_multiple(rng, 100, 200), odd_multiple(rng, 12289, 12352)),
            (odd_multiple(rng, 2, 40), odd_multiple(rng, 1000, 20000))]


PROBLEM = Elementwise(dtype="float32", layout="interleaved", reference=reference, rtol=1e-4,
                      atol=1e-5, scale=3.0, block=LARGEST_BLOCK, guard_tile=(32, 8192),
                      sim_shape=sim_shape, gpu_shapes=gpu_shapes, timing_shape=(4096, 14336),
                      flops_per_element=6)

# The lab builds its kernel in three steps; the last is the graded swiglu_interleaved.
# Step 2 is given the number of blocks to launch: its check launches fewer threads than there
# are outputs, so only a kernel that loops (grid-stride) writes them all.
STEPS = (
    PROBLEM.step("one", "swiglu_one", "one output element per thread: the interleaved indexing",
                 ({"name": "step one M=3 F=40", "M": 3, "F": 40, "seed": 11},
                  {"name": "step one M=1 F=257", "M": 1, "F": 257, "seed": 12}),
                 PlantedBug("g = x[row, 2 * j]\n", "g = x[row, 2 * j + 1]\n",
                            r"first bad index \(\d+, \d+\): expected .*, got ")),
    PROBLEM.step("grid_stride", "swiglu_grid_stride",
                 "a fixed grid: each thread loops over several outputs (grid-stride)",
                 ({"name": "step grid_stride M=3 F=300, blocks=1", "M": 3, "F": 300,
                   "seed": 13, "blocks": 1},
                  {"name": "step grid_stride M=2 F=333, blocks=2", "M": 2, "F": 333,
                   "seed": 14, "blocks": 2}),
                 PlantedBug("range(cuda.grid(1), M * F, cuda.gridsize(1))",
                            "range(cuda.grid(1), min(M * F, cuda.grid(1) + 1))", r"never written"),
                 params=("x", "out", "blocks"),
                 describe=lambda c: f"{PROBLEM.describe(c)}, {c['blocks']} block(s) launched"),
)

# Submissions made from the master by edits (autograder/labs/edits.py), which the suite grades:
# `python -m tools.lab_fixtures --write` writes them under tests/fixtures/<kind>/.
DERIVED = (
    Derived("bounds", "lab2_writes_past_end", """\
writes past the end of `out` (issue 28): the master with its column test `j <= F` instead of
`j < F`. On every row but the last the extra store lands on the next row's first element with
that element's right value; on the last row it is one element past the end of `out` (a GPU
took it silently and gave full marks; the simulator raised IndexError). Every case fails with
"wrote 1 element past the end of `out`, the first at flat index M*F".""",
            [Edit("if j < F:", "if j <= F:", "lab2-03")]),
    Derived("bounds", "lab2_writes_past_input", """\
writes past the end of an input: the master, plus one store into the element after `x` (a
flag it took for free memory). `out` is right; every case fails with "wrote 1 element past
the end of `x`, the first at flat index 2*M*F".""",
            [Edit("                out[row, j] = g[e] / (float32(1.0) + math.exp(-g[e])) * u[e]\n",
                  "                out[row, j] = g[e] / (float32(1.0) + math.exp(-g[e])) * u[e]\n"
                  "    if cuda.blockIdx.x == 0 and cuda.blockIdx.y == 0 and cuda.threadIdx.x == 0:\n"
                  "        x[M - 1, 2 * F] = float32(1.0)  # the element after x, taken for a flag\n",
                  "lab2-03")]),
    Derived("bounds", "lab2_forgets_blockidx_x", """\
forgets blockIdx.x: every block of a row does the first block's columns. Passes the public
cases (F <= 257: one block covers them); fails every hidden case, which spans two blocks of the
largest block the lab allows (1024 threads x 4 columns) in the simulator too.""",
            [Edit("base = cuda.blockIdx.x * (cuda.blockDim.x * EPT) + cuda.threadIdx.x",
                  "base = cuda.threadIdx.x  # blockIdx.x forgotten",
                  "lab2-03")]),
    Derived("bounds", "lab2_forgets_blockidx_y", """\
forgets blockIdx.y: every row of blocks starts at row 0, so only rows that are multiples of
gridDim.y are written. Fails every case with more than one row.""",
            [Edit("for row in range(cuda.blockIdx.y, M, cuda.gridDim.y):",
                  "for row in range(0, M, cuda.gridDim.y):  # blockIdx.y forgotten",
                  "lab2-03")]),
    Derived("controls", "lab2_two_kernels", """\
lab 2's "lesson not learned" control: correct, the master's own loop split into two kernels
(silu(gate) into a float32 temporary, then the product with up), so the work moves 7 streams
of float32 where the fused kernel moves 3 (read gate and up, write out). Named by
autograder/rubrics/lab2_packed_swiglu.toml; timed against the master by
benchmarks/lesson_controls_probe.py.""",
            append='''
# the control: the same kernel, split in two passes through a temporary
@cuda.jit(fastmath=True)
def _silu_pass(x, tmp, M, F):
    g = cuda.local.array(EPT, float32)
    base = cuda.blockIdx.x * (cuda.blockDim.x * EPT) + cuda.threadIdx.x
    for row in range(cuda.blockIdx.y, M, cuda.gridDim.y):
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                g[e] = x[row, 2 * j]
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                tmp[row, j] = g[e] / (float32(1.0) + math.exp(-g[e]))


@cuda.jit(fastmath=True)
def _times_up_pass(x, tmp, out, M, F):
    s = cuda.local.array(EPT, float32)
    u = cuda.local.array(EPT, float32)
    base = cuda.blockIdx.x * (cuda.blockDim.x * EPT) + cuda.threadIdx.x
    for row in range(cuda.blockIdx.y, M, cuda.gridDim.y):
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                s[e] = tmp[row, j]
                u[e] = x[row, 2 * j + 1]
        for e in range(EPT):
            j = base + e * cuda.blockDim.x
            if j < F:
                out[row, j] = s[e] * u[e]


def swiglu_interleaved(x, out):
    M, F = out.shape
    tmp = cuda.device_array((M, F), dtype=np.float32)
    grid = ((F + THREADS * EPT - 1) // (THREADS * EPT), min(M, 1024))
    _silu_pass[grid, THREADS](x, tmp, M, F)
    _times_up_pass[grid, THREADS](x, tmp, out, M, F)
    return out
'''),
    cache_by_shape("lab2", "swiglu_interleaved"),
    Derived("hazards", "lab2_reads_past_x", """\
lab 2's master with its loads' column test `j <= F` instead of `j < F` (its stores keep
`j < F`): the threads at column F load x[row, 2F] and x[row, 2F + 1], past the row; on the last
row that is past the end of x. `out` is right; the simulator's tracer (and compute-sanitizer's
memcheck on a GPU) sees the read outside `x`, and every case with a ragged last block fails.""",
            [Edit("            if j < F:\n"
                  "                g[e] = x[row, 2 * j]\n",
                  "            if j <= F:  # (planted) one column past the row\n"
                  "                g[e] = x[row, 2 * j]\n",
                  "lab2-03")]),
)

LAB = PROBLEM.lab(
    name="lab2_packed_swiglu",
    title="Lab 2: SwiGLU on the interleaved gate/up layout",
    chapters="chapters 4-6",
    asks=("a fused SwiGLU kernel for the **interleaved** packed layout (gate in the even columns, "
          "up in the odd, as in gpt-oss; chapter 6 did `[gate | up]` halves), float32"),
    function="swiglu_interleaved",
    paths=(blocks_along(0, "a row"), blocks_along(1, "the rows"),
           LabPath("one row", "M = 1: a single row of outputs", lambda c, L: c["M"] == 1),
           LabPath("a ragged last block", "a row that is not a whole number of blocks' columns "
                   "(the notebook's EPT = 4 columns a thread)",
                   lambda c, L: c["F"] % (4 * int(L[-1]["block"][0])) != 0)),
    public_cases=({"name": "public M=3 F=40", "M": 3, "F": 40, "seed": 1},
                  {"name": "public M=1 F=257", "M": 1, "F": 257, "seed": 2}),
    steps=STEPS, derived=DERIVED)
