"""The tracer's model of memory traffic: accesses, the warp requests they form, and a trace's
summaries and pictures (sectors per request, bank-conflict ways, which thread touched what).

What the numbers mean, and the model's limits, are in :mod:`book.tracer`'s docstring.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

__all__ = ["Access", "Request", "Trace", "TracerError", "MAX_THREADS", "SECTOR", "LINE", "WARP",
           "BANKS", "linear_block"]

SECTOR = 32      # bytes: the unit DRAM and L2 move
LINE = 128       # bytes: an L1/L2 cache line (four sectors)
WARP = 32        # threads that issue one instruction together
BANKS = 32       # shared-memory banks, each 4 bytes wide
MAX_THREADS = 8192   # a page's budget: about a second of the simulator (gpu.SIM_THREADS_PER_S)


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

    def touched_bytes(self) -> set:
        """The byte offsets the lanes asked for (a broadcast counts once)."""
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
        return len(self.touched_bytes())

    @property
    def sectors(self) -> int:
        return len({b // SECTOR for b in self.touched_bytes()})

    @property
    def lines(self) -> int:
        return len({b // LINE for b in self.touched_bytes()})

    @property
    def min_sectors(self) -> int:
        return math.ceil(self.bytes_requested / SECTOR)

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
                blk = linear_block(who[0], self.grid)
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


def linear_block(b, grid) -> int:
    g = tuple(grid) + (1, 1)
    return b[0] + g[0] * (b[1] + g[1] * b[2])
