"""Lab 2: fused SwiGLU on the interleaved packed layout [M, 2F].

Chapter 6 handled the packed layout whose halves are [gate | up]. Some checkpoints (gpt-oss
among them) interleave instead: gate in the even columns, up in the odd ones. Same three
streams of traffic, different indexing; the chapter's kernel gives wrong answers here.
"""

from __future__ import annotations

import numpy as np

from .elementwise import Elementwise
from .spec import LabPath, PlantedBug, blocks_along


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
    return int(rng.integers(2 * rows, 5)), cols + int(rng.integers(1, 900))


def gpu_shapes(rng):
    return [(1, 18944), (int(rng.integers(100, 200)), 12288 + int(rng.integers(1, 64))),
            (int(rng.integers(2, 40)), int(rng.integers(1000, 20000)))]


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
    steps=STEPS)
