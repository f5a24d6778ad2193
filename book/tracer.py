"""See the memory traffic: run a kernel in Numba's CUDA simulator and record every access.

Taught in chapter 4 (the first kernel), used again for coalescing, vector loads (chapter 6)
and shared-memory tiles (chapter 7).

A GPU does not move single elements: a warp's load or store instruction becomes one *request*,
and the memory system moves whole 32-byte *sectors* (and keeps 128-byte *lines* in cache) to
serve it. Whether a kernel wastes bandwidth is therefore a property of each warp instruction:
which addresses its 32 lanes touch together. The simulator runs every CUDA thread as a Python
thread, so it can tell us exactly that:

- :func:`trace` launches a kernel in the simulator on small inputs with every array argument
  (and every ``cuda.shared.array`` the kernel makes) wrapped in a recorder. Each access is
  stored with its block, warp, lane, array, element index, bytes and load/store kind, in each
  thread's program order, and with the *instruction* that made it (the source position of the
  Python bytecode that indexed the array).
- A warp-level request is the k-th execution of one instruction by the lanes of one warp (the
  simulator does not run warps in lock step, so the grouping is by instruction and occurrence,
  which is what a converged warp executes together).
- :class:`Trace` computes, per request: sectors and lines touched against the fewest that the
  requested bytes need, bytes requested against bytes moved, and for shared memory the bank
  conflict degree ("ways": the most distinct 4-byte words any one of the 32 banks must serve).
  Its :meth:`~Trace.table` summarises by instruction, :meth:`~Trace.show` draws which thread
  touched which element (a colour per warp) and :meth:`~Trace.heatmap` sectors per request.

Vector loads from :mod:`book.kernels.wide` (``load4``, ``load_half8``, ...) are plain loops in
the simulator; the tracer folds the elements of one such call back into the single 8- or
16-byte access the GPU makes.

Model and limits (said plainly, because they matter when you compare with ``ncu``): arrays are
taken to start on a 256-byte boundary (as ``cudaMalloc`` returns them); a request's sectors are
counted per request, not per cache hit, exactly like ncu's ``l1tex__t_sectors_*`` over
``l1tex__t_requests_*``; 8- and 16-byte shared accesses are split into half- and quarter-warp
phases the way the hardware serves them. Only what the kernel indexes is seen: a kernel whose
loads the compiler would merge or drop looks as written.
"""

from __future__ import annotations

import functools
import math
import subprocess
import sys
import threading
import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import gpu

__all__ = ["trace", "trace_call", "advice", "course_launch", "gemm_block", "agreement", "Trace", "Access", "Request", "TracerError", "MAX_THREADS", "SECTOR",
           "LINE", "WARP", "BANKS"]

SECTOR = 32      # bytes: the unit DRAM and L2 move
LINE = 128       # bytes: an L1/L2 cache line (four sectors)
WARP = 32        # threads that issue one instruction together
BANKS = 32       # shared-memory banks, each 4 bytes wide
MAX_THREADS = 8192   # a page's budget: about a second of the simulator (gpu.SIM_THREADS_PER_S)
_WIDE = Path(__file__).resolve().parent / "kernels" / "wide.py"
_HERE = Path(__file__).resolve()


@functools.lru_cache(maxsize=None)
def _is_wide(filename):
    """Whether a code object's file is kernels/wide.py. Cached: resolving a path costs
    about 100 us, paid on every traced access (a lab-4 GEMM trace took 3x longer)."""
    return Path(filename).resolve() == _WIDE


class TracerError(RuntimeError):
    """The tracer cannot run this kernel; the message says why and what to do."""


@dataclass(frozen=True)
class Access:
    """One thread's access: ``nbytes`` at ``offset`` bytes from the array's start."""

    block: tuple
    thread: int          # linear thread index within the block
    array: str
    space: str           # "global" or "shared"
    kind: str            # "ld" or "st"
    index: tuple         # element index as written (after folding a vector access: the first)
    offset: int          # byte offset from the array's (256-byte aligned) start
    nbytes: int
    where: tuple         # (file, line, columns): the instruction
    occurrence: int      # how many times this thread had already executed that instruction

    @property
    def warp(self) -> int:
        return self.thread // WARP

    @property
    def lane(self) -> int:
        return self.thread % WARP


@dataclass
class Request:
    """One warp-level memory instruction: the accesses of a warp's lanes that issue together."""

    block: tuple
    warp: int
    array: str
    space: str
    kind: str
    where: tuple
    occurrence: int
    accesses: list = field(default_factory=list)

    def _bytes(self) -> set:
        touched = set()
        for a in self.accesses:
            touched.update(range(a.offset, a.offset + a.nbytes))
        return touched

    @property
    def lanes(self) -> int:
        return len(self.accesses)

    @property
    def bytes_requested(self) -> int:
        """Distinct bytes the lanes asked for (a broadcast counts once)."""
        return len(self._bytes())

    @property
    def sectors(self) -> int:
        return len({b // SECTOR for b in self._bytes()})

    @property
    def lines(self) -> int:
        return len({b // LINE for b in self._bytes()})

    @property
    def min_sectors(self) -> int:
        return math.ceil(self.bytes_requested / SECTOR)

    @property
    def min_lines(self) -> int:
        return math.ceil(self.bytes_requested / LINE)

    @property
    def bytes_moved(self) -> int:
        return self.sectors * SECTOR

    @property
    def ways(self) -> int:
        """Shared memory: the bank-conflict degree (1 = conflict-free); 0 for global memory.

        A bank serves one 4-byte word per cycle; lanes reading the same word share it (a
        broadcast). 8-byte accesses are served a half warp at a time and 16-byte accesses a
        quarter warp at a time, so conflicts are counted within each such phase.
        """
        if self.space != "shared" or not self.accesses:
            return 0
        width = max(a.nbytes for a in self.accesses)
        per_phase = max(1, WARP * 4 // max(width, 4))   # lanes served per 128-byte phase
        worst = 1
        for start in range(0, WARP, per_phase):
            words = defaultdict(set)
            for a in self.accesses:
                if start <= a.lane < start + per_phase:
                    for w in range(a.offset // 4, (a.offset + a.nbytes + 3) // 4):
                        words[w % BANKS].add(w)
            if words:
                worst = max(worst, max(len(s) for s in words.values()))
        return worst


class Trace:
    """The accesses of one traced launch and the warp requests they form."""

    def __init__(self, accesses, arrays, grid, block, source_lines):
        self.accesses = accesses
        self.arrays = arrays            # name -> (shape, dtype, space)
        self.grid, self.block = grid, block
        self._source = source_lines     # (file, line) -> text
        groups = {}
        for a in accesses:
            key = (a.block, a.warp, a.array, a.space, a.kind, a.where, a.occurrence)
            r = groups.get(key)
            if r is None:
                r = groups[key] = Request(a.block, a.warp, a.array, a.space, a.kind, a.where,
                                          a.occurrence)
            r.accesses.append(a)
        self.requests = list(groups.values())

    # -- summaries ------------------------------------------------------------------------
    def requests_for(self, array=None, kind=None, space=None):
        return [r for r in self.requests if (array is None or r.array == array)
                and (kind is None or r.kind == kind) and (space is None or r.space == space)]

    def sectors_per_request(self, array=None, kind="ld", space="global") -> float:
        """Mean sectors per request: what ncu reports as l1tex sectors / requests."""
        rs = self.requests_for(array, kind, space)
        if not rs:
            raise TracerError(f"no {kind} requests of {array or 'any array'} in {space} memory "
                              "were recorded")
        return sum(r.sectors for r in rs) / len(rs)

    def instructions(self) -> list[dict]:
        """One row per instruction (source position, array, kind): the numbers a reader needs."""
        rows = {}
        for r in self.requests:
            key = (r.where, r.array, r.space, r.kind)
            row = rows.setdefault(key, {"line": r.where[1], "source": self.source(r.where),
                                        "array": r.array, "space": r.space, "kind": r.kind,
                                        "requests": 0, "sectors": 0, "min_sectors": 0,
                                        "bytes_requested": 0, "bytes_moved": 0, "ways": 0,
                                        "lanes": 0})
            row["requests"] += 1
            row["sectors"] += r.sectors
            row["min_sectors"] += r.min_sectors
            row["bytes_requested"] += r.bytes_requested
            row["bytes_moved"] += r.bytes_moved
            row["ways"] = max(row["ways"], r.ways)
            row["lanes"] += r.lanes
        out = []
        for row in rows.values():
            n = row["requests"]
            row["sectors_per_request"] = row["sectors"] / n
            row["min_sectors_per_request"] = row["min_sectors"] / n
            row["efficiency"] = row["bytes_requested"] / max(1, row["bytes_moved"])
            out.append(row)
        return sorted(out, key=lambda r: (r["line"], r["array"], r["kind"]))

    def source(self, where) -> str:
        return self._source.get((where[0], where[1]), "").strip()

    def table(self, width: int = 80) -> str:
        """A plain-text table by instruction (fits an 80-column page)."""
        head = f"{'line':>4} {'array':<8}{'op':<3}{'req':>5} {'sect/req':>8} {'min':>5} " \
               f"{'moved/asked':>11} {'ways':>4}  source"
        lines = [head, "-" * min(width, len(head) + 20)]
        for r in self.instructions():
            if r["space"] == "shared":   # banks, not sectors, are what shared memory costs
                sect, low, moved, ways = "-", "-", "-", str(r["ways"])
            else:
                sect = f"{r['sectors_per_request']:.1f}"
                low = f"{r['min_sectors_per_request']:.1f}"
                moved, ways = f"{1 / max(r['efficiency'], 1e-9):.2f}x", "-"
            text = f"{r['line']:>4} {r['array'][:7]:<8}{r['kind']:<3}{r['requests']:>5} " \
                   f"{sect:>8} {low:>5} {moved:>11} {ways:>4}  {r['source']}"
            lines.append(text[:width])
        return "\n".join(lines)

    def feedback(self, array: str, kind: str = "ld", warp: int = 0, block=None) -> str | None:
        """A sentence about waste in one warp's accesses of ``array``, or None if none."""
        rs = [r for r in self.requests_for(array, kind)
              if r.warp == warp and (block is None or r.block == block)]
        if not rs:
            return None
        r = max(rs, key=lambda q: q.sectors - q.min_sectors)
        verb = "loads" if kind == "ld" else "stores"
        if r.space == "shared":
            if r.ways > 1:
                return (f"warp {warp}'s {verb} of {array} (line {r.where[1]}) hit one shared-"
                        f"memory bank {r.ways} times: a {r.ways}-way bank conflict")
            return None
        if r.sectors > r.min_sectors:
            return (f"warp {warp}'s {verb} of {array} (line {r.where[1]}) touch {r.sectors} "
                    f"sectors where {r.min_sectors} would do")
        return None

    # -- pictures -------------------------------------------------------------------------
    def show(self, array: str, ax=None, kind=None, max_cols: int = 32, limit: int = 256,
             label_size: float = 5):
        """Draw ``array`` as cells coloured by the warp that touched them, labelled by thread.

        The GPU-Puzzles picture, for memory traffic: the first ``limit`` elements in rows of
        ``max_cols`` cells (32 float32 cells are one warp's coalesced load); each cell is
        labelled with the thread (within its block) that touched it first; unvisited cells
        stay white. ``label_size``: the thread labels' font size in points (larger for a
        figure that a narrow screen shrinks).
        """
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle

        shape, _dtype, _space = self.arrays[array]
        n = min(int(np.prod(shape)), limit)
        cols = shape[-1] if len(shape) == 2 and shape[-1] <= max_cols else min(max_cols, n)
        rows = math.ceil(n / cols)
        owner = {}
        for a in self.accesses:
            if a.array == array and (kind is None or a.kind == kind):
                itemsize = np.dtype(_dtype).itemsize
                flat = a.offset // itemsize
                for k in range(max(1, a.nbytes // itemsize)):
                    owner.setdefault(flat + k, (a.block, a.thread))
        if ax is None:
            _, ax = plt.subplots(figsize=(min(12, 0.22 * cols + 1), 0.22 * rows + 0.8))
        palette = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00",
                   "#CC79A7", "#999999"]
        nwarps_per_block = math.ceil(int(np.prod(self.block)) / WARP)
        for e in range(n):
            r, c = divmod(e, cols)
            who = owner.get(e)
            if who is None:
                color = "white"
            else:
                blk = _linear_block(who[0], self.grid)
                color = palette[(blk * nwarps_per_block + who[1] // WARP) % len(palette)]
            ax.add_patch(Rectangle((c, -r), 1, -1, facecolor=color, edgecolor="#444444",
                                   linewidth=0.3))
            if who is not None and cols <= 32:
                ax.text(c + 0.5, -r - 0.5, str(who[1]), ha="center", va="center",
                        fontsize=label_size)
        ax.set_xlim(0, cols)
        ax.set_ylim(-rows, 0)
        ax.set_aspect("equal")
        ax.axis("off")
        ax.set_title(f"{array}: which thread touched each element (colour = warp)",
                     fontsize=9)
        return ax

    def banks(self, request: Request, ax=None, label_size: float = 7):
        """Draw one shared-memory request by bank: which words each of the 32 banks serves.

        A column per bank; one cell per distinct 4-byte word the bank must deliver, stacked
        upwards, labelled with the lanes that asked for it (several lanes on one word are a
        broadcast, served once). The tallest column is the conflict's ways for 4-byte
        accesses; 8- and 16-byte accesses are served by half or quarter warps
        (:attr:`Request.ways` counts those phases; this picture shows the whole warp).
        """
        import matplotlib.pyplot as plt
        from matplotlib.patches import Rectangle

        if request.space != "shared":
            raise TracerError(f"banks() draws shared-memory requests; this one is "
                              f"{request.space} ({request.array})")
        lanes_of = defaultdict(list)             # word -> lanes
        for a in request.accesses:
            for w in range(a.offset // 4, (a.offset + a.nbytes + 3) // 4):
                lanes_of[w].append(a.lane)
        by_bank = defaultdict(list)
        for w in sorted(lanes_of):
            by_bank[w % BANKS].append(w)
        height = max(len(ws) for ws in by_bank.values())
        if ax is None:
            _, ax = plt.subplots(figsize=(7.5, 0.5 + 0.3 * height))
        palette = ["#56B4E9", "#E69F00", "#009E73", "#CC79A7", "#0072B2", "#D55E00"]
        for bank in range(BANKS):
            for level, w in enumerate(by_bank.get(bank, [])):
                ax.add_patch(Rectangle((bank, level), 1, 1, edgecolor="#444444", lw=0.4,
                                       facecolor=palette[level % len(palette)]))
                lanes = sorted(set(lanes_of[w]))
                text = str(lanes[0]) if len(lanes) == 1 else f"{lanes[0]}+"
                ax.text(bank + 0.5, level + 0.5, text, ha="center", va="center",
                        fontsize=label_size)
        ax.set_xlim(0, BANKS)
        ax.set_ylim(0, height)
        ax.set_xticks([b + 0.5 for b in range(0, BANKS, 4)], range(0, BANKS, 4), fontsize=7)
        ax.set_yticks([])
        ax.set_xlabel("bank (cells: the words each bank serves, labelled by lane)", fontsize=8)
        ax.set_aspect("equal")
        for side in ("top", "right", "left"):
            ax.spines[side].set_visible(False)
        ax.set_title(f"warp {request.warp}, {request.kind} of {request.array} (line "
                     f"{request.where[1]}): {height}-way", fontsize=9)
        return ax

    def heatmap(self, ax=None, space="global"):
        """Sectors per request for each warp (rows) and instruction (columns)."""
        import matplotlib.pyplot as plt

        rows = self.instructions()
        rows = [r for r in rows if r["space"] == space]
        keys = [(r["line"], r["array"], r["kind"]) for r in rows]
        warps = sorted({(r.block, r.warp) for r in self.requests if r.space == space})
        grid = np.full((len(warps), len(keys)), np.nan)
        sums = defaultdict(list)
        for q in self.requests:
            if q.space == space:
                sums[((q.block, q.warp), (q.where[1], q.array, q.kind))].append(q.sectors)
        for i, w in enumerate(warps):
            for j, k in enumerate(keys):
                if sums.get((w, k)):
                    grid[i, j] = np.mean(sums[(w, k)])
        if ax is None:
            _, ax = plt.subplots(figsize=(1.2 + 0.9 * len(keys), 0.6 + 0.25 * len(warps)))
        im = ax.imshow(grid, aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(keys)), [f"L{k[0]} {k[2]} {k[1]}" for k in keys],
                      rotation=30, ha="right", fontsize=8)
        ax.set_yticks(range(len(warps)), [f"b{w[0]} w{w[1]}" for w in warps], fontsize=7)
        ax.figure.colorbar(im, ax=ax, label="sectors per request")
        ax.set_title(f"{space} memory: sectors per warp request", fontsize=9)
        return ax


# ----------------------------------------------------------------------------------------
# Recording
# ----------------------------------------------------------------------------------------
_POSITIONS = {}


def _column(frame):
    """The source columns of the instruction running in ``frame``.

    Not ``f_lasti`` itself: Python 3.11+ specialises an instruction after a few runs and then
    reports an offset inside its inline cache, which would split one instruction in two.
    """
    code = frame.f_code
    pos = _POSITIONS.get(code)
    if pos is None and hasattr(code, "co_positions"):
        pos = _POSITIONS[code] = list(code.co_positions())
    if not pos:
        return frame.f_lasti
    line, _end, col, end_col = pos[min(frame.f_lasti // 2, len(pos) - 1)]
    return (col, end_col)


class _Recorder:
    def __init__(self, deadline: float, max_accesses: int):
        self.per_thread = defaultdict(list)     # (block, thread) -> [Access]
        self.counts = {}                         # thread key -> {where: n}
        self.last_wide = {}                      # thread key -> (wide frame, where, occ, idx)
        self.deadline = deadline
        self.max_accesses = max_accesses
        self.n = 0
        self.lock = threading.Lock()

    def record(self, arr, index, kind):
        t = threading.current_thread()
        if not hasattr(t, "blockIdx"):      # host code touching a traced array: not traffic
            return
        if time.monotonic() > self.deadline:
            raise TracerError("the traced launch ran past its time limit: trace fewer threads "
                              "or a smaller input (the simulator is slow)")
        block = (t.blockIdx.x, t.blockIdx.y, t.blockIdx.z)
        key = (block, t.thread_id)
        frame = sys._getframe(2)          # record <- _Traced.__getitem__ <- caller
        wide_frame = None
        if _is_wide(frame.f_code.co_filename):
            while frame is not None and _is_wide(frame.f_code.co_filename):
                wide_frame, frame = frame, frame.f_back
        where = (frame.f_code.co_filename, frame.f_lineno, _column(frame))
        flat_offset = arr._offset_of(index)
        counts = self.counts.setdefault(key, {})
        if wide_frame is not None:
            last = self.last_wide.get(key)
            if last is not None and last[0] is wide_frame and last[1] == (where, arr._name, kind):
                # another element of the same vector access: widen the recorded access
                acc = self.per_thread[key][-1]
                lo = min(acc.offset, flat_offset)
                hi = max(acc.offset + acc.nbytes, flat_offset + arr._itemsize)
                self.per_thread[key][-1] = Access(acc.block, acc.thread, acc.array, acc.space,
                                                  acc.kind, acc.index, lo, hi - lo, acc.where,
                                                  acc.occurrence)
                return
            self.last_wide[key] = (wide_frame, (where, arr._name, kind))
        occ = counts.get(where, 0)
        counts[where] = occ + 1
        self.per_thread[key].append(Access(block, t.thread_id, arr._name, arr._space, kind,
                                           index, flat_offset, arr._itemsize, where, occ))
        self.n += 1
        if self.n > self.max_accesses:
            raise TracerError(f"more than {self.max_accesses:,} accesses recorded: trace a "
                              "smaller input (a page shows a few warps, not a tensor)")


class _Traced:
    """An array stand-in that records each element access, then does it."""

    def __init__(self, ary, name, space, recorder, base_offset=0):
        self._ary, self._name, self._space = ary, name, space
        self._rec, self._base = recorder, base_offset
        self._itemsize = ary.dtype.itemsize

    # the attributes kernels read
    shape = property(lambda self: self._ary.shape)
    size = property(lambda self: self._ary.size)
    ndim = property(lambda self: self._ary.ndim)
    dtype = property(lambda self: self._ary.dtype)
    strides = property(lambda self: self._ary.strides)

    def __len__(self):
        return len(self._ary)

    @property
    def flat(self):
        """``a.flat[i]``: element ``i`` in C order (the GEMM's flat-offset loads use it)."""
        return _TracedFlat(self)

    def _norm(self, idx):
        return idx if isinstance(idx, tuple) else (idx,)

    def _offset_of(self, idx):
        idx = tuple(int(i) for i in self._norm(idx))
        idx = tuple(i + s if i < 0 else i for i, s in zip(idx, self._ary.shape))
        return self._base + sum(i * st for i, st in zip(idx, self._ary.strides))

    def _is_element(self, idx):
        idx = self._norm(idx)
        return len(idx) == self._ary.ndim and all(isinstance(i, (int, np.integer)) for i in idx)

    def __getitem__(self, idx):
        if self._is_element(idx):
            self._rec.record(self, self._norm(idx), "ld")
            return self._ary[idx]
        view = self._ary[idx]                  # a slice: keep recording against the same base
        off = view.__array_interface__["data"][0] - self._ary.__array_interface__["data"][0]
        return _Traced(view, self._name, self._space, self._rec, self._base + off)

    def __setitem__(self, idx, value):
        if not self._is_element(idx):
            raise TracerError(f"the tracer records element accesses; {self._name}[{idx!r}] = "
                              "... assigns a slice (write a loop, as a kernel does)")
        self._rec.record(self, self._norm(idx), "st")
        self._ary[idx] = value


class _TracedFlat:
    """``_Traced.flat``: a flat index becomes the element index it names, recorded as such.

    ``record`` is called from here directly (not through ``_Traced.__getitem__``) so that the
    frame it attributes the access to is still the kernel line that indexed ``.flat``.
    """

    def __init__(self, traced):
        self._t = traced

    def _index(self, i):
        if not isinstance(i, (int, np.integer)):
            raise TracerError(f"the tracer records element accesses; {self._t._name}.flat"
                              f"[{i!r}] is not one element (index .flat with an integer)")
        return tuple(int(k) for k in np.unravel_index(int(i), self._t._ary.shape))

    def __getitem__(self, i):
        idx = self._index(i)
        self._t._rec.record(self._t, idx, "ld")
        return self._t._ary[idx]

    def __setitem__(self, i, value):
        idx = self._index(i)
        self._t._rec.record(self._t, idx, "st")
        self._t._ary[idx] = value


def _linear_block(b, grid) -> int:
    g = tuple(grid) + (1, 1)
    return b[0] + g[0] * (b[1] + g[1] * b[2])


def _source_lines(accesses) -> dict:
    import linecache

    return {(a.where[0], a.where[1]): linecache.getline(a.where[0], a.where[1])
            for a in accesses}


def _as_tuple(d):
    if isinstance(d, int):
        return (d,)
    return tuple(int(x) for x in d)


@contextmanager
def _explained(what="this kernel"):
    """Turn the simulator's own failures into a TracerError that says what the tracer needs."""
    try:
        yield
    except TracerError:
        raise
    except Exception as exc:  # the simulator's own failure, explained
        raise TracerError(f"the simulator could not run {what} ({type(exc).__name__}: "
                          f"{exc}); the tracer needs code the CUDA simulator supports "
                          "(no warp intrinsics, no libdevice-only functions)") from exc


@contextmanager
def _shared_recorded(rec, arrays):
    """While active, every ``cuda.shared.array`` a simulated kernel makes is recorded too."""
    from numba.cuda.simulator import kernelapi

    original = kernelapi.FakeCUDAShared.array
    made = {}

    def shared_array(self, shape, dtype, alignment=None):
        # The simulator keys a shared array by the line that makes it (one per line): so do we.
        caller = sys._getframe(1)
        k = (id(self), caller.f_code.co_filename, caller.f_lineno)
        with rec.lock:
            got = made.get(k)
            if got is None:
                if shape == 0:            # dynamic shared memory: the simulator's one buffer
                    ary = original(self, shape, dtype, alignment)
                else:
                    from numba.core import types
                    from numba.np import numpy_support

                    dt = numpy_support.as_dtype(dtype) if isinstance(dtype, types.Type) \
                        else np.dtype(dtype)
                    ary = np.zeros(shape, dt)
                name = f"shared@{caller.f_lineno}"
                arrays[name] = (ary.shape, ary.dtype, "shared")
                got = made[k] = _Traced(ary, name, "shared", rec)
        return got

    kernelapi.FakeCUDAShared.array = shared_array
    try:
        yield
    finally:
        kernelapi.FakeCUDAShared.array = original


def trace(kernel, grid, block, *args, names=None, shared_bytes: int = 0,
          max_threads: int = MAX_THREADS, timeout_s: float = 60.0,
          max_accesses: int = 400_000) -> Trace:
    """Launch ``kernel[grid, block](*args)`` in the simulator and record its memory accesses.

    ``args`` are NumPy arrays (and scalars); their results are written back as a launch would.
    ``names`` names the array arguments in the order given (default: the kernel's parameter
    names). Raises :class:`TracerError` with the reason and the limit when the launch is too
    large for a page (``max_threads``), runs past ``timeout_s``, or uses something the
    simulator cannot run.
    """
    grid, block = _as_tuple(grid), _as_tuple(block)
    nthreads = int(np.prod(grid)) * int(np.prod(block))
    if nthreads > max_threads:
        raise TracerError(f"this launch has {nthreads:,} threads ({grid} blocks of {block}); "
                          f"the tracer runs at most {max_threads:,} on a page: shrink the input "
                          "or the grid (a few warps show the pattern)")
    py = getattr(kernel, "py_func", None)
    if py is None:
        raise TracerError(f"{kernel!r} is not a Numba CUDA kernel (made with @cuda.jit)")
    if not gpu.SIMULATED:
        return _trace_in_subprocess(kernel, grid, block, args, names, shared_bytes,
                                    max_threads, timeout_s, max_accesses)

    import inspect

    params = list(inspect.signature(py).parameters)
    rec = _Recorder(time.monotonic() + timeout_s, max_accesses)
    wrapped, arrays, j = [], {}, 0
    for pos, a in enumerate(args):
        if isinstance(a, np.ndarray) and a.ndim > 0:
            name = (names[j] if names and j < len(names)
                    else params[pos] if pos < len(params) else f"arg{pos}")
            j += 1
            arrays[name] = (a.shape, a.dtype, "global")
            wrapped.append(_Traced(a, name, "global", rec))
        else:
            wrapped.append(a)

    with _shared_recorded(rec, arrays), _explained():
        launch = kernel[grid, block, 0, shared_bytes] if shared_bytes else kernel[grid, block]
        launch(*wrapped)
    accesses = [a for per in rec.per_thread.values() for a in per]
    return Trace(accesses, arrays, grid, block, _source_lines(accesses))


def trace_call(fn, *args, names=None, max_threads: int = MAX_THREADS,
               timeout_s: float = 60.0, max_accesses: int = 400_000, **kwargs) -> Trace:
    """Call a host function (a lab's ``swiglu_interleaved(x, out)``, say) and trace every
    kernel it launches, in the simulator.

    ``fn`` may be given as ``"package.module:function"``: then a GPU session traces it too,
    in a simulator process. Given so, its NumPy array arguments are handed to it as (simulated)
    device arrays and the results copied back into them, in either kind of session.

    Arrays are named by the argument of ``fn`` they are (``names``, default ``fn``'s
    parameter names), else by the kernel's parameter; a launch over ``max_threads`` threads
    in all is refused with the limit named. Returns ``fn``'s accesses as one :class:`Trace`
    (grid and block of its first launch).
    """
    if not gpu.SIMULATED:
        name = fn if isinstance(fn, str) else (
            ":".join(importable_name(fn)) if importable_name(fn) else None)
        if name is None:
            raise TracerError("tracing a host function runs its kernels in Numba's simulator, "
                              "and this session runs on a GPU: name an importable function "
                              "('package.module:function'), or run the notebook with "
                              "BOOK_SIMULATOR=1 (set before `import book`)")
        job = {"what": "call", "fn": name, "names": names, "max_threads": max_threads,
               "timeout_s": timeout_s, "max_accesses": max_accesses, "kwargs": kwargs}
        return _in_simulator_process(job, tuple(args), timeout_s)
    if isinstance(fn, str):  # a named function takes device arrays: give it the simulator's
        from numba import cuda

        dev = [cuda.to_device(a) if isinstance(a, np.ndarray) and a.ndim else a for a in args]
        t = trace_call(_resolve(fn), *dev, names=names, max_threads=max_threads,
                       timeout_s=timeout_s, max_accesses=max_accesses, **kwargs)
        for a, d in zip(args, dev):
            if d is not a:
                a[...] = d.copy_to_host()
        return t
    import inspect

    from numba.cuda.simulator import kernel as simkernel
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    params = list(inspect.signature(fn).parameters)
    by_memory = []                      # (ndarray, name) of fn's own array arguments
    for pos, a in enumerate(args):
        base = a._ary if isinstance(a, FakeCUDAArray) else a
        if isinstance(base, np.ndarray) and base.ndim > 0:
            nm = names[pos] if names and pos < len(names) else (
                params[pos] if pos < len(params) else f"arg{pos}")
            by_memory.append((base, nm))
    rec = _Recorder(time.monotonic() + timeout_s, max_accesses)
    arrays, launches, budget = {}, [], [max_threads]
    original_call = simkernel.FakeCUDAKernel.__call__

    def traced_call(self, *kargs):
        if self._device or simkernel._get_kernel_context():
            return original_call(self, *kargs)
        grid, block = tuple(self.grid_dim), tuple(self.block_dim)
        threads = int(np.prod(grid)) * int(np.prod(block))
        budget[0] -= threads
        if budget[0] < 0:
            raise TracerError(f"the traced call launched more than {max_threads:,} threads "
                              f"(this launch: {grid} blocks of {block}): trace it on a smaller "
                              "input")
        launches.append((grid, block))
        kparams = list(inspect.signature(self.py_func).parameters)
        wrapped = []
        for pos, a in enumerate(kargs):
            base = a._ary if isinstance(a, FakeCUDAArray) else a
            if isinstance(base, np.ndarray) and base.ndim > 0:
                nm = next((n for b, n in by_memory if np.shares_memory(b, base)), None) or (
                    kparams[pos] if pos < len(kparams) else f"arg{pos}")
                root = next((b for b, n in by_memory if n == nm), base)
                off = base.__array_interface__["data"][0] - \
                    root.__array_interface__["data"][0] if root is not base else 0
                arrays.setdefault(nm, (root.shape, root.dtype, "global"))
                wrapped.append(_Traced(base, nm, "global", rec, off))
            else:
                wrapped.append(a)
        return original_call(self, *wrapped)

    simkernel.FakeCUDAKernel.__call__ = traced_call
    try:
        with _shared_recorded(rec, arrays), _explained(f"{getattr(fn, '__name__', fn)}()"):
            fn(*args, **kwargs)
    finally:
        simkernel.FakeCUDAKernel.__call__ = original_call
    if not launches:
        raise TracerError(f"{getattr(fn, '__name__', fn)!r} launched no kernel: there is no "
                          "memory traffic to show (is the work done on the host?)")
    accesses = [a for per in rec.per_thread.values() for a in per]
    return Trace(accesses, arrays, launches[0][0], launches[0][1], _source_lines(accesses))


def advice(t: Trace, arrays=None, warp: int = 0) -> list[str]:
    """Sentences about wasted bandwidth in a trace (empty when every request is tight):
    the feedback a lab's ``check()`` prints before any timing."""
    out = []
    for name in arrays or sorted(t.arrays):
        for kind in ("ld", "st"):
            msg = t.feedback(name, kind, warp=warp)
            if msg and msg not in out:
                out.append(msg)
    return out


# ----------------------------------------------------------------------------------------
# The course's kernels, traced the way their wrappers launch them
# ----------------------------------------------------------------------------------------
#: variants :func:`course_launch` knows, and the element count that keeps each one a page's
#: worth of simulated threads with no ragged tail (so every request has 32 lanes)
COURSE_VARIANTS = {"fused": 1024, "fused_fastmath": 1024, "ilp4": 2048, "vec4": 2048,
                   "coalesced": 1024, "strided2": 1024, "uncoalesced": 1024}


def course_launch(variant: str, n: int | None = None, block: int = 64, seed: int = 0):
    """``(kernel, grid, block, args)`` for a course kernel on ``n`` float32 elements.

    The grid is the one the variant's wrapper computes, so a trace shows the pattern the GPU
    sees at full size (the full-size launch only has more of the same warps).
    """
    from .kernels import coalescing, fused, vectorized
    from .kernels.launch import cdiv

    if variant not in COURSE_VARIANTS:
        raise TracerError(f"unknown variant {variant!r}; the tracer knows "
                          f"{', '.join(COURSE_VARIANTS)}")
    n = n or COURSE_VARIANTS[variant]
    rng = np.random.default_rng(seed)
    gate, up = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = np.full(n, np.nan, np.float32)
    if variant in ("fused", "fused_fastmath"):
        k = fused.KERNELS[variant]
        return k, (cdiv(n, block),), (block,), (gate, up, out)
    if variant == "ilp4":
        return vectorized.ilp4_kernel, (cdiv(n, 4 * block),), (block,), (gate, up, out)
    if variant == "vec4":
        return vectorized.vec4_kernel, (max(1, cdiv(n // 4, 2 * block)),), (block,), \
            (gate, up, out)
    stride = coalescing.STRIDES[variant]
    per_pass = n // stride
    return coalescing.strided_kernel, (max(1, cdiv(per_pass + stride, block)), stride), \
        (block,), (gate, up, out, stride)


def gemm_block(a, b0, b1, out, tile=None):
    """Launch one block of the course's tiled GEMM, ``out = a @ b0`` on its first tile.

    What chapter 7 traces: ``tile`` is a :class:`book.kernels.gemm.Tile` (default
    ``SIM_TILE``: 64 threads, seconds in the simulator); ``a`` is ``tile.bm x K`` and
    ``b0``, ``b1`` (the same values: the kernel reads the right half of the tile from
    ``b1``) are ``K x tile.bn``, with ``K`` a multiple of ``tile.bk``. The GEMM's kernels
    are made by a factory, so they cannot be imported by name; this function can, so a GPU
    session traces it with ``trace_call("book.tracer:gemm_block", ..., tile=...)`` in a
    simulator process.
    """
    from .kernels import gemm

    tile = tile or gemm.SIM_TILE
    shapes = (tuple(a.shape), tuple(b0.shape), tuple(b1.shape), tuple(out.shape))
    K = a.shape[1] if len(a.shape) == 2 else -1
    if (shapes != ((tile.bm, K), (K, tile.bn), (K, tile.bn), (tile.bm, tile.bn))
            or K <= 0 or K % tile.bk):
        raise TracerError(f"gemm_block needs a: ({tile.bm}, K), b0 and b1: (K, {tile.bn}), "
                          f"out: ({tile.bm}, {tile.bn}) with K a positive multiple of "
                          f"{tile.bk} (one block of this tile); got {shapes}")
    gemm.build_kernel(tile)[(1, 1), (tile.threads,)](a, b0, b1, out, 0, 0)


def agreement(record: dict, variants=("coalesced", "strided2", "uncoalesced", "vec4",
                                       "fused_fastmath")) -> list[dict]:
    """The tracer's global-load sectors per request beside ncu's, kernel by kernel.

    ``record`` is a coalescing record (``book.data.record("ncu/coalescing_h100")``) whose
    ``kernels[variant]["ld_sectors_per_request"]`` is ncu's
    ``l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum / l1tex__t_requests_..._ld.sum``
    at full size.
    """
    rows = []
    for v in variants:
        hw = record["kernels"].get(v, {}).get("ld_sectors_per_request")
        if hw is None:
            continue
        k, g, b, args = course_launch(v)
        ours = trace(k, g, b, *args).sectors_per_request(kind="ld")
        rows.append({"variant": v, "tracer": ours, "ncu": hw, "ratio": ours / hw,
                     "within_10pct": abs(ours / hw - 1) <= 0.10})
    return rows


def _in_simulator_process(job: dict, args, timeout_s: float) -> Trace:
    """Run one tracing job in a child process that uses the simulator (BOOK_SIMULATOR=1).

    A GPU session cannot switch Numba to its simulator, so the tracer re-imports the kernel
    (or host function) by name in a fresh process; results written to ``args`` come back.
    """
    import os
    import pickle
    import tempfile

    payload = pickle.dumps(dict(job, args=args))
    env = dict(os.environ, BOOK_SIMULATOR="1")
    with tempfile.TemporaryDirectory() as tmp:
        result = Path(tmp) / "trace.pickle"   # not stdout: `import book` prints its status
        try:
            p = subprocess.run([sys.executable, "-m", "book.tracer", str(result)],
                               input=payload, capture_output=True, env=env,
                               timeout=timeout_s + 60)
        except subprocess.TimeoutExpired as exc:
            raise TracerError(f"the simulator process did not finish within "
                              f"{timeout_s + 60:.0f} s: trace fewer threads") from exc
        if p.returncode != 0 or not result.exists():
            err = p.stderr.decode(errors="replace").strip().splitlines() or ["no message"]
            raise TracerError(err[-1])
        res = pickle.loads(result.read_bytes())
    for a, back in zip(args, res["args"]):
        if isinstance(a, np.ndarray):
            a[...] = back
    return res["trace"]


def importable_name(obj) -> tuple[str, str] | None:
    """(module, attribute) that names ``obj`` (a kernel or function) at module level, or None:
    how a simulator subprocess finds it again (here, and in :mod:`book.bounds`)."""
    py = getattr(obj, "py_func", obj)
    mod = getattr(py, "__module__", None)
    attr = next((k for k, v in vars(sys.modules.get(mod, object())).items() if v is obj),
                None) if mod else None
    return (mod, attr) if attr else None


def _trace_in_subprocess(kernel, grid, block, args, names, shared_bytes, max_threads,
                         timeout_s, max_accesses):
    """On a GPU machine: trace an importable kernel in a child process that uses the simulator."""
    where = importable_name(kernel)
    if where is None:
        raise TracerError("on a GPU the tracer re-runs the kernel in a simulator process, so it "
                          f"must be importable by name; {kernel.py_func.__qualname__!r} is not a "
                          "module-level kernel. Define it in a module, or run this notebook "
                          "with BOOK_SIMULATOR=1")
    job = {"what": "kernel", "module": where[0], "attr": where[1], "grid": grid,
           "block": block, "names": names, "shared_bytes": shared_bytes,
           "max_threads": max_threads, "timeout_s": timeout_s, "max_accesses": max_accesses}
    return _in_simulator_process(job, args, timeout_s)


def _resolve(fn):
    """A host function, or "module:function" naming one."""
    if isinstance(fn, str):
        import importlib

        mod, _, attr = fn.partition(":")
        try:
            return getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError) as exc:
            raise TracerError(f"cannot import {fn!r} ({exc}); name a function as "
                              "'package.module:function'") from exc
    return fn


def _child_main() -> int:  # python -m book.tracer (the subprocess above)
    import importlib
    import pickle

    from book import tracer as this  # not __main__: the pickled classes must be book.tracer's

    job = pickle.loads(sys.stdin.buffer.read())
    try:
        if job["what"] == "kernel":
            kernel = getattr(importlib.import_module(job["module"]), job["attr"])
            t = this.trace(kernel, job["grid"], job["block"], *job["args"],
                           names=job["names"], shared_bytes=job["shared_bytes"],
                           max_threads=job["max_threads"], timeout_s=job["timeout_s"],
                           max_accesses=job["max_accesses"])
        else:
            t = this.trace_call(job["fn"], *job["args"], names=job["names"],
                                max_threads=job["max_threads"], timeout_s=job["timeout_s"],
                                max_accesses=job["max_accesses"], **job["kwargs"])
    except this.TracerError as exc:
        print(exc, file=sys.stderr)
        return 1
    Path(sys.argv[1]).write_bytes(pickle.dumps({"trace": t, "args": job["args"]}))
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
