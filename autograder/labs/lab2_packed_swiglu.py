"""Lab 2: fused SwiGLU on the interleaved packed layout [M, 2F].

Chapter 6 handled the packed layout whose halves are [gate | up]. Some checkpoints (gpt-oss
among them) interleave instead: gate in the even columns, up in the odd ones. Same three
streams of traffic, different indexing; the chapter's kernel gives wrong answers here.
"""

from __future__ import annotations

import numpy as np

from ._kernel import seeds
from .spec import KernelLab, PlantedBug, Step

INPUTS = ("x",)
OUTPUT = "out"
DTYPE = "float32"
RTOL, ATOL = 1e-4, 1e-5


def input_specs(case):
    s = seeds(case["seed"], INPUTS)
    return {"x": {"shape": [case["M"], 2 * case["F"]], "dtype": DTYPE, "seed": s["x"], "scale": 3.0}}


def out_spec(case):
    return {"shape": [case["M"], case["F"]], "dtype": DTYPE}


def reference(inputs):
    x = inputs["x"].astype(np.float64)
    g, u = x[:, 0::2], x[:, 1::2]
    return g / (1.0 + np.exp(-g)) * u


def describe(case):
    return f"x [{case['M']}, {2 * case['F']}] float32 (M={case['M']}, F={case['F']})"


# The largest block the lab allows: 1024 threads (CUDA's most), EPT = 4 columns each (the
# notebook's given cell), one row per block of a 2D grid: 4096 columns by 1 row. A tile row
# stored past the end: up to 32 rows of a (32, 32) block, or 1024 threads x 8 columns.
LARGEST_BLOCK = (4096, 1)           # (columns, rows) one block covers
GUARD_TILE = (32, 8192)


def sim_blocks(case):
    """Blocks along x (columns) and y (rows) of the master's grid at the largest block."""
    cols, rows = LARGEST_BLOCK
    return (-(-case["F"] // cols), -(-case["M"] // rows))


def hidden_cases(rng, simulated: bool, n: int = 3):
    if simulated:  # two blocks of the largest size along x and y: about a second each
        cols, rows = LARGEST_BLOCK
        shapes = [(int(rng.integers(2 * rows, 5)), cols + int(rng.integers(1, 900)))
                  for _ in range(n)]
    else:
        shapes = [(1, 18944), (int(rng.integers(100, 200)), 12288 + int(rng.integers(1, 64))),
                  (int(rng.integers(2, 40)), int(rng.integers(1000, 20000)))][:n]
        while len(shapes) < n:
            shapes.append((int(rng.integers(1, 300)), int(rng.integers(1, 20000))))
    return [{"name": f"hidden {i + 1}", "M": M, "F": F, "seed": int(rng.integers(1 << 30))}
            for i, (M, F) in enumerate(shapes)]


def timing_case(simulated: bool, seed: int):
    M, F = (2, 64) if simulated else (4096, 14336)
    return {"name": "timing", "M": M, "F": F, "seed": seed}


def min_bytes(case):
    return 3 * case["M"] * case["F"] * 4       # read gate and up once, write out once


def flops(case):
    return 6 * case["M"] * case["F"]


def make_reference_runner(case):
    """The performance reference: torch.add(a, b, out=c) on three [M, F] float32 tensors:
    a three-stream elementwise kernel with this lab's minimum traffic (the practical ceiling)."""
    import torch
    M, F = case["M"], case["F"]
    sets = [tuple(torch.randn(M, F, device="cuda") for _ in range(2)) + (torch.empty(M, F, device="cuda"),)
            for _ in range(2)]
    return (lambda a, b, c: torch.add(a, b, out=c)), sets


# The lab builds its kernel in three steps; the last is the graded swiglu_interleaved.
# Step 2 is given the number of blocks to launch: its check launches fewer threads than there
# are outputs, so only a kernel that loops (grid-stride) writes them all.
STEPS = (
    Step(name="one", function="swiglu_one", params=("x", "out"), inputs=("x",),
         output=OUTPUT, dtype=DTYPE, rtol=RTOL, atol=ATOL,
         cases=({"name": "step one M=3 F=40", "M": 3, "F": 40, "seed": 11},
                {"name": "step one M=1 F=257", "M": 1, "F": 257, "seed": 12}),
         input_specs=input_specs, out_spec=out_spec, reference=reference, describe=describe,
         teaches="one output element per thread: the interleaved indexing",
         bug=PlantedBug("g = x[row, 2 * j]\n", "g = x[row, 2 * j + 1]\n",
                        r"first bad index \(\d+, \d+\): expected .*, got ")),
    Step(name="grid_stride", function="swiglu_grid_stride", params=("x", "out", "blocks"),
         inputs=("x",), output=OUTPUT, dtype=DTYPE, rtol=RTOL, atol=ATOL,
         cases=({"name": "step grid_stride M=3 F=300, blocks=1", "M": 3, "F": 300,
                 "seed": 13, "blocks": 1},
                {"name": "step grid_stride M=2 F=333, blocks=2", "M": 2, "F": 333,
                 "seed": 14, "blocks": 2}),
         input_specs=input_specs, out_spec=out_spec, reference=reference,
         describe=lambda c: f"{describe(c)}, {c['blocks']} block(s) launched",
         teaches="a fixed grid: each thread loops over several outputs (grid-stride)",
         bug=PlantedBug("range(cuda.grid(1), M * F, cuda.gridsize(1))",
                        "range(cuda.grid(1), min(M * F, cuda.grid(1) + 1))", r"never written")),
)

LAB = KernelLab(
    name="lab2_packed_swiglu",
    title="Lab 2: SwiGLU on the interleaved gate/up layout",
    chapters="chapters 4-6",
    function="swiglu_interleaved", params=("x", "out"), inputs=INPUTS, output=OUTPUT,
    dtype=DTYPE, rtol=RTOL, atol=ATOL, perf_metric="bandwidth",
    public_cases=({"name": "public M=3 F=40", "M": 3, "F": 40, "seed": 1},
                  {"name": "public M=1 F=257", "M": 1, "F": 257, "seed": 2}),
    hidden_cases=hidden_cases, input_specs=input_specs, out_spec=out_spec, reference=reference,
    describe=describe, timing_case=timing_case, min_bytes=min_bytes, flops=flops,
    make_reference_runner=make_reference_runner, reference_name="torch's reference", steps=STEPS,
    guard_tile=GUARD_TILE, sim_blocks=sim_blocks)
