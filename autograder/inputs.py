"""Deterministic lab inputs from a small spec: the grader and the sandboxed child both call
:func:`generate`, so the child needs the seed, never the grader's arrays or references."""

from __future__ import annotations

import numpy as np


def generate(spec: dict) -> np.ndarray:
    """``spec``: {"shape": [...], "dtype": "float32"|"float16", "seed": int, "scale": float,
    "shift": float}. Uniform values with standard deviation ``scale`` (uniform, not normal:
    several times faster to draw, which matters for the GPU timing shapes of ~10^8 elements),
    never all zeros (zeros hide unwritten outputs)."""
    shape = tuple(int(s) for s in spec["shape"])
    rng = np.random.default_rng(int(spec["seed"]))
    a = rng.random(size=shape, dtype=np.float32)
    a -= np.float32(0.5)
    a *= np.float32(2.0 * 3.0 ** 0.5 * spec.get("scale", 1.0))
    if spec.get("shift"):
        a += np.float32(spec["shift"])
    return a.astype(spec.get("dtype", "float32"), copy=False)
