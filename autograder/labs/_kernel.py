"""Helpers shared by the kernel labs (2-5)."""

from __future__ import annotations


def seeds(seed: int, names):
    """Distinct per-array seeds derived from one case seed."""
    return {n: int(seed) * 16 + i + 1 for i, n in enumerate(names)}
