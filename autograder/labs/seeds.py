"""The per-array seeds every kernel lab derives from one case seed."""

from __future__ import annotations


def seeds(seed: int, names):
    """Distinct per-array seeds derived from one case seed."""
    return {n: int(seed) * 16 + i + 1 for i, n in enumerate(names)}
