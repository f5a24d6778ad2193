"""Lab 3: the clamped SwiGLU of gpt-oss in float16, at a bandwidth target.

Chapter 6 wrote fp16/bf16 SwiGLU. gpt-oss clamps first and uses sigmoid(1.702 g) with an
(u + 1) factor: out = (clamp(u, -7, 7) + 1) * g' * sigmoid(1.702 * g'), g' = min(g, 7).
Half-precision storage, float32 arithmetic inside, and enough bytes in flight per thread.
"""

from __future__ import annotations

import numpy as np

from ._kernel import seeds
from .spec import KernelLab, PlantedBug, Step

PARAMS = ("gate", "up", "out")
INPUTS = ("gate", "up")
OUTPUT = "out"
DTYPE = "float16"
LIMIT, ALPHA = 7.0, 1.702
RTOL, ATOL = 4e-3, 2e-3      # an fp16 store rounds to ~1e-3 relative


def input_specs(case):
    s = seeds(case["seed"], INPUTS)
    return {n: {"shape": [case["M"], case["F"]], "dtype": DTYPE, "seed": s[n], "scale": 6.0}
            for n in INPUTS}


def out_spec(case):
    return {"shape": [case["M"], case["F"]], "dtype": DTYPE}


def reference(inputs):
    g = np.minimum(inputs["gate"].astype(np.float64), LIMIT)
    u = np.clip(inputs["up"].astype(np.float64), -LIMIT, LIMIT)
    return (u + 1.0) * g / (1.0 + np.exp(-ALPHA * g))


def describe(case):
    return f"gate/up [{case['M']}, {case['F']}] float16"


# The largest block the lab allows: 1024 threads (CUDA's most) of 16 elements each (the
# master's two packed 16-byte accesses per input): 16384 consecutive elements of the flat
# arrays. A tile row stored past the end: up to 32 rows of a (32, 32) block, or one such block.
LARGEST_BLOCK = 16384               # elements of the flat arrays one block covers
GUARD_TILE = (32, 16384)


def sim_blocks(case):
    """Blocks of the master's 1D grid over the flat arrays, at the largest block."""
    return (-(-case["M"] * case["F"] // LARGEST_BLOCK),)


def hidden_cases(rng, simulated: bool, n: int = 3):
    if simulated:  # two blocks of the largest size, and M >= 2 rows; about a second each
        shapes = []
        for _ in range(n):
            M = int(rng.integers(2, 4))
            shapes.append((M, -(-(LARGEST_BLOCK + 1) // M) + int(rng.integers(0, 1500 // M))))
    else:
        shapes = [(1, 12288 + 2 * int(rng.integers(0, 8)) + 1), (int(rng.integers(60, 130)), 18944),
                  (int(rng.integers(3, 50)), int(rng.integers(1000, 11008)))][:n]
        while len(shapes) < n:
            shapes.append((int(rng.integers(1, 300)), int(rng.integers(1, 20000))))
    return [{"name": f"hidden {i + 1}", "M": M, "F": F, "seed": int(rng.integers(1 << 30))}
            for i, (M, F) in enumerate(shapes)]


def timing_case(simulated: bool, seed: int):
    M, F = (2, 64) if simulated else (8192, 14336)
    return {"name": "timing", "M": M, "F": F, "seed": seed}


def min_bytes(case):
    return 3 * case["M"] * case["F"] * 2


def flops(case):
    return 8 * case["M"] * case["F"]


def make_reference_runner(case):
    """torch.add on three [M, F] float16 tensors: the three-stream ceiling in this dtype."""
    import torch
    M, F = case["M"], case["F"]
    sets = [tuple(torch.randn(M, F, device="cuda", dtype=torch.float16) for _ in range(2))
            + (torch.empty(M, F, device="cuda", dtype=torch.float16),) for _ in range(2)]
    return (lambda a, b, c: torch.add(a, b, out=c)), sets


def _step(name, function, teaches, cases, bug):
    return Step(name=name, function=function, params=PARAMS, inputs=INPUTS,
                output=OUTPUT, dtype=DTYPE, rtol=RTOL, atol=ATOL, cases=cases,
                input_specs=input_specs, out_spec=out_spec, reference=reference,
                describe=describe, teaches=teaches, bug=bug)


# The lab builds its kernel in three steps; the last is the graded swiglu_clamped_fp16. The
# inputs' scale (values up to about 10) puts many of them beyond the clamp at 7. Step 2's
# sizes are not multiples of 256 threads x 8 elements, and one spans two blocks.
STEPS = (
    _step("one", "clamped_one", "the clamped activation, one element per thread",
          ({"name": "step one M=2 F=70", "M": 2, "F": 70, "seed": 21},
           {"name": "step one M=1 F=129", "M": 1, "F": 129, "seed": 22}),
          PlantedBug("gg = min(g, float32(LIMIT))", "gg = g", r"first bad index .*expected .*got ")),
    _step("ilp", "clamped_ilp", "EPT elements per thread, every load before the math",
          ({"name": "step ilp M=1 F=129", "M": 1, "F": 129, "seed": 23},
           {"name": "step ilp M=3 F=700", "M": 3, "F": 700, "seed": 24}),
          PlantedBug("(n + per_block - 1) // per_block", "max(1, n // per_block)", r"never written")),
)

LAB = KernelLab(
    name="lab3_half_precision",
    title="Lab 3: half precision at the bandwidth ceiling (clamped SwiGLU, fp16)",
    chapters="chapters 5-6",
    function="swiglu_clamped_fp16", params=PARAMS, inputs=INPUTS, output=OUTPUT, dtype=DTYPE,
    rtol=RTOL, atol=ATOL, perf_metric="bandwidth",
    public_cases=({"name": "public M=2 F=70", "M": 2, "F": 70, "seed": 3},
                  {"name": "public M=1 F=129", "M": 1, "F": 129, "seed": 4}),
    hidden_cases=hidden_cases, input_specs=input_specs, out_spec=out_spec, reference=reference,
    describe=describe, timing_case=timing_case, min_bytes=min_bytes, flops=flops,
    make_reference_runner=make_reference_runner, reference_name="torch's reference", steps=STEPS,
    guard_tile=GUARD_TILE, sim_blocks=sim_blocks)
