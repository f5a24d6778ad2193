"""The rows of a benchmark record (``book/data/<gpu>.json``'s ``results``): one found by variant,
dtype and shape, and the keys that name the rows a target was computed from (a reader of the
target finds each row, and so the run that measured it), and whether two rows' spreads
overlap. What every part's targets read (targets.py, tensorcore.py, hopper.py, decode.py) and
the chapters that compare two rows."""

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


def spreads_overlap(a, b) -> bool:
    """Whether two rows' p10-p90 spreads (``p10_s``, ``p90_s``) overlap: the course calls two
    timings of one run apart only when they do not (chapter 6's rule, chapter 9's tables)."""
    return a["p10_s"] <= b["p90_s"] and b["p10_s"] <= a["p90_s"]
