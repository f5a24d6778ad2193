"""Helpers shared by the kernel labs (2-4)."""

from __future__ import annotations


def seeds(seed: int, names):
    """Distinct per-array seeds derived from one case seed."""
    return {n: int(seed) * 16 + i + 1 for i, n in enumerate(names)}


def odd_sizes(rng, lo, hi, n):
    """Sizes that are not multiples of a block or of elements-per-thread."""
    out = []
    while len(out) < n:
        v = int(rng.integers(lo, hi))
        if v % 2 == 1 or v % 32 not in (0,):
            out.append(v)
    return out
