"""The rows of a benchmark record (``book/data/<gpu>.json``'s ``results``): one found by variant,
dtype and shape, and the keys that name the rows a target was computed from (a reader of the
target finds each row, and so the run that measured it). What every part's targets read
(targets.py, tensorcore.py, hopper.py, decode.py)."""

from __future__ import annotations


def find(rows, variant, dtype, shape):
    """The row of ``variant`` at ``dtype`` and ``shape``, or None."""
    for r in rows:
        if r["variant"] == variant and r["dtype"] == dtype and tuple(r["shape"]) == tuple(shape):
            return r
    return None


def keys(*rows):
    """[[kind, variant, dtype, shape], ...] of the rows a target was computed from (None
    skipped): a reader of the target finds each row, and so the run that measured it."""
    return [[r.get("kind"), r["variant"], r["dtype"], list(r["shape"])] for r in rows if r]
