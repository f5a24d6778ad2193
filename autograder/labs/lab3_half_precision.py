"""Lab 3: the clamped SwiGLU of gpt-oss in float16, at a bandwidth target.

Chapter 6 wrote fp16/bf16 SwiGLU. gpt-oss clamps first and uses sigmoid(1.702 g) with an
(u + 1) factor: out = (clamp(u, -7, 7) + 1) * g' * sigmoid(1.702 * g'), g' = min(g, 7).
Half-precision storage, float32 arithmetic inside, and enough bytes in flight per thread.
"""

from __future__ import annotations

import numpy as np

from .elementwise import Elementwise
from .edits import Derived, Edit, cache_by_shape
from .spec import LabPath, PlantedBug, blocks_along, odd_multiple

LIMIT, ALPHA = 7.0, 1.702


def reference(inputs):
    g = np.minimum(inputs["gate"].astype(np.float64), LIMIT)
    u = np.clip(inputs["up"].astype(np.float64), -LIMIT, LIMIT)
    return (u + 1.0) * g / (1.0 + np.exp(-ALPHA * g))


# The largest block the lab allows: 1024 threads (CUDA's most) of 16 elements each (the
# master's two packed 16-byte accesses per input): 16384 consecutive elements of the flat
# arrays. A tile row stored past the end: up to 32 rows of a (32, 32) block, or one such block.
LARGEST_BLOCK = 16384               # elements of the flat arrays one block covers


def sim_shape(rng):
    """Two blocks of the largest size, and M >= 2 rows; about a second each."""
    M = odd_multiple(rng, 2, 4)
    lo = -(-(LARGEST_BLOCK + 1) // M)
    return M, odd_multiple(rng, lo, lo + 1500 // M)


def gpu_shapes(rng):
    # every size an odd number (spec.odd_multiple): no tile of a power of two fits the array
    return [(1, odd_multiple(rng, 12288, 12304)),
            (odd_multiple(rng, 60, 130), odd_multiple(rng, 18900, 19000)),
            (odd_multiple(rng, 3, 50), odd_multiple(rng, 1000, 11008))]


# rtol, atol: an fp16 store rounds to ~1e-3 relative. The inputs' scale (values up to about 10)
# puts many of them beyond the clamp at 7.
PROBLEM = Elementwise(dtype="float16", layout="separate", reference=reference, rtol=4e-3,
                      atol=2e-3, scale=6.0, block=LARGEST_BLOCK, guard_tile=(32, 16384),
                      sim_shape=sim_shape, gpu_shapes=gpu_shapes, timing_shape=(8192, 14336),
                      flops_per_element=8)

# The lab builds its kernel in three steps; the last is the graded swiglu_clamped_fp16.
# Step 2's sizes are not multiples of 256 threads x 8 elements, and one spans two blocks.
STEPS = (
    PROBLEM.step("one", "clamped_one", "the clamped activation, one element per thread",
                 ({"name": "step one M=2 F=70", "M": 2, "F": 70, "seed": 21},
                  {"name": "step one M=1 F=129", "M": 1, "F": 129, "seed": 22}),
                 PlantedBug("gg = min(g, float32(LIMIT))", "gg = g",
                            r"first bad index .*expected .*got ")),
    PROBLEM.step("ilp", "clamped_ilp", "EPT elements per thread, every load before the math",
                 ({"name": "step ilp M=1 F=129", "M": 1, "F": 129, "seed": 23},
                  {"name": "step ilp M=3 F=700", "M": 3, "F": 700, "seed": 24}),
                 PlantedBug("(n + per_block - 1) // per_block", "max(1, n // per_block)",
                            r"never written")),
)

# Submissions made from the master by edits (autograder/labs/edits.py), which the suite grades:
# `python -m tools.lab_fixtures --write` writes them under tests/fixtures/<kind>/.
DERIVED = (
    Derived("bounds", "lab3_writes_past_end", """\
writes past the end of `out`: the master without the bounds test of its scalar tail (the last
n % 8 elements): every thread of the last block stores one element, most of them past the end
of `out`; every case fails with "wrote N elements past the end of `out`".""",
            [Edit("        if i < n:\n"
                  "            out[i] = _act(float32(gate[i]), float32(up[i]))\n",
                  "        out[i] = _act(float32(gate[i]), float32(up[i]))  # no `if i < n`\n",
                  "lab3-03")]),
    Derived("bounds", "lab3_forgets_blockidx_x", """\
forgets blockIdx.x (the master's grid is 1D): every block starts at the first vectors. Passes
the public cases (one block covers them); fails every hidden case, which spans two blocks of
the largest block the lab allows (1024 threads x 16 halves) in the simulator too.""",
            [Edit("for base in range(cuda.blockIdx.x * tile, nvec, cuda.gridDim.x * tile):",
                  "for base in range(0, nvec, cuda.gridDim.x * tile):  # blockIdx.x forgotten",
                  "lab3-03")]),
    Derived("controls", "lab3_two_byte_loads", """\
lab 3's "lesson not learned" control: correct, the lab's own hint 1 of step 3 (the graded
function calls step 2's kernel): EPT = 8 two-byte loads per thread, all before the math, and no
packed 16-byte access. Named by autograder/rubrics/lab3_half_precision.toml; timed against the
master by benchmarks/lesson_controls_probe.py.""",
            append='''
def swiglu_clamped_fp16(gate, up, out):  # the control: step 2's two-byte loads
    return clamped_ilp(gate, up, out)
'''),
    cache_by_shape("lab3", "swiglu_clamped_fp16"),
)

LAB = PROBLEM.lab(
    name="lab3_half_precision",
    title="Lab 3: half precision at the bandwidth ceiling (clamped SwiGLU, fp16)",
    chapters="chapters 5-6",
    asks=("gpt-oss's **clamped** SwiGLU at the bandwidth ceiling: float16 storage, float32 "
          "math, enough bytes in flight per thread"),
    function="swiglu_clamped_fp16",
    paths=(blocks_along(0, "the elements"),
           LabPath("a ragged tail", "M * F not a multiple of 8: a tail of fewer than 8 halves "
                   "after the 16-byte loads", lambda c, L: (c["M"] * c["F"]) % 8 != 0),
           LabPath("16-byte loads", "at least one whole run of 8 halves",
                   lambda c, L: c["M"] * c["F"] >= 8)),
    public_cases=({"name": "public M=2 F=70", "M": 2, "F": 70, "seed": 3},
                  {"name": "public M=1 F=129", "M": 1, "F": 129, "seed": 4}),
    steps=STEPS, derived=DERIVED)
