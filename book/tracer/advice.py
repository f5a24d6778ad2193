"""Access advice: the sentences about wasted bandwidth and bank conflicts in a trace.

The one implementation: a lab's ``check()`` prints it before any timing
(``autograder.feedback.access_advice``), and a chapter or a test can call it on any
:class:`~book.tracer.model.Trace`. What counts as worth a sentence is set by the
thresholds, each a parameter (defaults: what ``check()`` uses).

Two kinds of global-memory waste, each judged the way the memory system pays for it:

- *Bytes moved and never used*: per block and kernel, every sector warp ``warp`` touches in
  an array against the sectors the bytes it uses would fill. Sectors that several
  instructions share are moved once (the later ones hit in L1), so lab 2's interleaved gate
  and up loads (each 8 sectors for 4 sectors' worth of floats, together every byte) or
  lab 3's per-thread runs of halves are not waste; a strided load, or two kernels that each
  read half of every sector, are.
- *Scattered requests*: one request whose lanes each touch a sector of their own (lanes 32
  bytes or more apart: a thread walking its own row or run of columns), many times the
  sectors its bytes need, whatever L1 saves later.

And shared memory: a request whose lanes hit one bank several times (a ``ways``-way bank
conflict).
"""

from __future__ import annotations

import ast
import math
from collections import defaultdict

from .model import SECTOR, Trace

__all__ = ["advice", "WASTE_RATIO", "MIN_EXTRA_SECTORS", "SCATTER_RATIO", "SCATTER_LANES",
           "MIN_WAYS"]

WASTE_RATIO = 1.5       # sectors moved over sectors needed, from which a pattern is named
# a sector or so over is where a row of an odd-sized case starts mid-sector (the labs' public
# shapes are deliberately odd): not the pattern's fault, so not named
MIN_EXTRA_SECTORS = 2
SCATTER_RATIO = 3       # a request's sectors over its minimum, from which scattering is named
SCATTER_LANES = 8       # lanes a request needs before its scattering is named
MIN_WAYS = 4            # bank-conflict degree from which it is named (lab 4's padded transposed
                        # tile stores are 2-way, once per tile: not worth a student's time)


def advice(t: Trace, arrays=None, warp: int = 0, *, waste_ratio: float = WASTE_RATIO,
           min_extra_sectors: int = MIN_EXTRA_SECTORS, scatter_ratio: float = SCATTER_RATIO,
           scatter_lanes: int = SCATTER_LANES, min_ways: int = MIN_WAYS) -> list[str]:
    """Sentences about warp ``warp``'s wasted bandwidth in ``t`` ([] when nothing is worth
    naming): one per array and direction whose global accesses waste sectors (the worst
    case, with the lines that issued it), then one per shared-memory instruction with a
    bank conflict of ``min_ways`` or more. ``arrays``: only these arrays (default: all).

    The thresholds (module docstring): a pool of accesses is named when it moves at least
    ``waste_ratio`` times the sectors its bytes need and ``min_extra_sectors`` more; a
    request of ``scatter_lanes`` lanes or more when each lane has a sector of its own and
    the request touches ``scatter_ratio`` times its minimum. ``waste_ratio=1,
    min_extra_sectors=1, min_ways=2`` name any waste at all.
    """
    keep = None if arrays is None else set(arrays)
    out = []
    pools = defaultdict(list)
    for r in t.requests:
        if r.warp == warp and r.space == "global" and (keep is None or r.array in keep):
            pools[(r.array, r.kind, r.block, _function_of(r.where))].append(r)
    worst = {}
    for (array, kind, _block, _fn), rs in pools.items():
        touched = set()
        for r in rs:
            touched |= r.touched_bytes()
        sectors = len({b // SECTOR for b in touched})
        need = math.ceil(len(touched) / SECTOR)
        wasteful = sectors >= waste_ratio * need and sectors - need >= min_extra_sectors
        if wasteful and sectors - need > worst.get((array, kind), (0,))[0]:
            worst[(array, kind)] = (sectors - need, sectors, need, rs, "unused")
        for r in rs:
            scattered = (r.lanes >= scatter_lanes and r.sectors >= r.lanes
                         and r.sectors >= scatter_ratio * r.min_sectors)
            if scattered and r.sectors - r.min_sectors > worst.get((array, kind), (0,))[0]:
                worst[(array, kind)] = (r.sectors - r.min_sectors, r.sectors, r.min_sectors,
                                        [r], "scattered")
    for (array, kind), (_d, sectors, need, rs, why) in sorted(
            worst.items(), key=lambda kv: (kv[0][1] != "ld", kv[0][0])):
        verb = "loads" if kind == "ld" else "stores"
        where = sorted({r.where for r in rs}, key=lambda w: w[1])
        what = ("one request: each lane touches a sector of its own" if why == "scattered"
                else "the rest of each sector is moved and never used")
        out.append(f"warp {warp}'s {verb} of {array} touch {sectors} sectors where {need} "
                   f"would do ({_lines(t, where)}; {what}): neighbouring lanes should access "
                   "neighbouring elements")
    for kind in ("ld", "st"):
        rs = [r for r in t.requests if r.warp == warp and r.space == "shared" and r.kind == kind
              and (keep is None or r.array in keep)]
        by_where = {}
        for r in rs:
            if r.ways >= min_ways and r.ways > by_where.get(r.where, 0):
                by_where[r.where] = r.ways
        for w, ways in sorted(by_where.items(), key=lambda x: x[0][1]):
            verb = "loads" if kind == "ld" else "stores"
            out.append(f"warp {warp}'s shared-memory {verb} ({_lines(t, [w])}) hit one bank "
                       f"{ways} times: a {ways}-way bank conflict (pad the tile's rows or "
                       "change which index the lanes walk)")
    return out


def _lines(t, where) -> str:
    return "; ".join(f"line {w[1]}: `{t.source(w)}`" if t.source(w) else f"line {w[1]}"
                     for w in list(where)[:2])


def _function_of(where) -> tuple:
    """(file, first line) of the function holding the instruction at ``where``: accesses are
    pooled per kernel (two kernels that each read half of every sector are waste)."""
    return _functions(where[0]).get(where[1], (where[0], 0))


_FUNCTIONS: dict = {}


def _functions(filename) -> dict:
    """line -> (file, def line) for every line inside a function of ``filename``."""
    got = _FUNCTIONS.get(filename)
    if got is None:
        import linecache

        got = {}
        try:
            tree = ast.parse("".join(linecache.getlines(filename)))
        except SyntaxError:
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    if ln not in got or got[ln][1] < node.lineno:   # the innermost def
                        got[ln] = (filename, node.lineno)
        _FUNCTIONS[filename] = got
    return got
