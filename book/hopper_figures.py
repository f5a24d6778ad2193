"""Chapter 9's pictures and tables, drawn from the models of :mod:`book.kernels.instructions.hopper`, the
tile of :mod:`book.kernels.gemms.wgmma_gemm` and the records in ``book/data``.

- :func:`operand_bytes`, :func:`chunk_owners`, :func:`conflict_ways`,
  :func:`descriptor_figure`: which bytes of shared memory the wgmma of one k16 step reads,
  for one 8-row swizzle atom (1024 bytes: 8 lines of 128 bytes, one line per pass of the
  32 banks) in three layouts of the same 8 x 64 tile: the kernel's 128-byte swizzle, the
  unswizzled core-matrix layout, and plain 128-byte rows (what a copy without swizzle
  leaves, which no descriptor describes). Addresses come from
  :func:`~book.kernels.instructions.hopper.operand_addresses` through the descriptors the kernel uses.
- :func:`ring_model`, :func:`ring_figure`: the producer/consumer pipeline of the dual GEMM
  as a timeline, from a small event model of its mbarrier ring built on
  :class:`~book.kernels.instructions.hopper.MbarrierModel` and :class:`~book.kernels.gemms.wgmma_gemm_tile.HopperTile`
  (stages, the three TMA boxes of a stage and their byte count, the consumer warpgroups,
  the epilogue). Durations are parameters in arbitrary units: a model, not a measurement.
- :func:`measurement_rows`, :func:`clustered`: the rows of the chapter's comparison table
  as the record names them (the multicast variant was ``wgmma_dual_gemm_cluster2`` before
  clusters of two became the kernel's default, and a record of the default has
  ``wgmma_dual_gemm_single`` beside it).
- :func:`cluster_repeats`: the cluster default measured again, runs of only the default, the
  unclustered variant and cuBLAS (``book/data/hopper/cluster_repeats_h100.json``), per run
  and T: both kernels' times, spreads, and which is ahead.
- :func:`rule_rows`: the epilogue rule of :func:`book.bench.hopper.predicted_share`,
  predicted beside measured at each recorded width d, and what fusing bought there.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .bench.rows import spreads_overlap
from .kernels.instructions.hopper import MbarrierModel, descriptor, operand_addresses
from .roofline import OKABE_ITO as OI

__all__ = ["LAYOUTS", "operand_bytes", "chunk_owners", "conflict_ways", "descriptor_figure",
           "RingEvent", "ring_model", "ring_summary", "ring_figure", "MULTICAST_ROWS",
           "clustered", "measurement_rows", "rule_rows"]

#: the three layouts of an 8 x 64 K-major tile of 16-bit elements that the figure compares
LAYOUTS = {
    "128B": "128-byte swizzle (the kernel's)",
    "none": "no swizzle: core matrices",
    "rows": "no swizzle: plain 128-byte rows",
}
#: one colour per k16 step (a wgmma reads k = 16 of the tile's 64)
STEP_COLOURS = (OI["sky_blue"], OI["orange"], OI["bluish_green"], OI["reddish_purple"])
STAGE_COLOURS = (OI["blue"], OI["orange"], OI["bluish_green"], OI["reddish_purple"],
                 OI["yellow"], OI["sky_blue"], OI["vermillion"])
LINE = 128  # bytes of one line of shared memory's 32 banks (4 bytes each)
CHUNK = 16  # bytes of one "bank group" (4 banks): what one row of a core matrix spans


def step_descriptor(layout: str, step: int, rows: int = 8, k: int = 64,
                    base: int = 0) -> int | None:
    """The descriptor a kernel would give the wgmma of k16 step ``step`` of a K-major
    ``rows x k`` tile at ``base`` (None for plain rows, which no descriptor describes).

    128B swizzle: each row is one 128-byte line, 8-row groups 1024 bytes apart (SBO), and
    the next k16 is 32 bytes further along the line (the start address moves). No swizzle:
    core matrices of 8 rows x 16 bytes, the next one along K 128 bytes on (LBO), the next
    8 rows ``k / 8`` core matrices on (SBO); a k16 step covers two core matrices."""
    if layout == "128B":
        return descriptor(base + 32 * step, 16, 8 * LINE, "128B")
    if layout == "none":
        return descriptor(base + 2 * 128 * step, 128, 128 * (k // 8), "none")
    if layout == "rows":
        return None
    raise ValueError(f"layout must be one of {sorted(LAYOUTS)}, got {layout!r}")


def operand_bytes(layout: str, rows: int = 8, k: int = 64) -> np.ndarray:
    """[rows, k] shared byte address of each element of a K-major tile of 16-bit elements:
    for "128B" and "none" what the wgmma of each k16 step reads through its descriptor
    (:func:`~book.kernels.instructions.hopper.operand_addresses`), for "rows" where a plain copy of
    128-byte rows leaves it."""
    if k % 16 or not 16 <= k <= 64:
        raise ValueError(f"k must be 16, 32, 48 or 64 (k16 steps of one 128-byte row), got {k}")
    if layout == "rows":
        return (np.arange(rows)[:, None] * LINE + 2 * np.arange(k)[None, :]).astype(np.int64)
    steps = [operand_addresses(step_descriptor(layout, s, rows, k), rows)
             for s in range(k // 16)]
    return np.concatenate(steps, axis=1)


def chunk_owners(layout: str, rows: int = 8, k: int = 64) -> dict:
    """For each 16-byte chunk of the tile's bytes, drawn as [line, bank group] (8 chunks of
    16 bytes per 128-byte line): ``row`` (the operand row whose 8 elements it holds),
    ``step`` (the k16 step whose wgmma reads it) and ``piece`` (which 8 k of the row: 0 for
    k 0-7, ...). Every chunk holds 8 consecutive k of one row: checked."""
    addr = operand_bytes(layout, rows, k)
    nchunks = rows * k * 2 // CHUNK
    out = {name: np.full(nchunks, -1, dtype=np.int64) for name in ("row", "step", "piece")}
    for r in range(rows):
        for piece in range(k // 8):
            chunk = addr[r, 8 * piece:8 * piece + 8] // CHUNK
            if len(set(chunk.tolist())) != 1 or addr[r, 8 * piece] % CHUNK:
                raise AssertionError(f"row {r}, k {8 * piece}-{8 * piece + 7} is not one "
                                     f"16-byte chunk in layout {layout!r}")
            c = int(chunk[0])
            if out["row"][c] != -1:
                raise AssertionError(f"chunk {c} holds two pieces of the tile")
            out["row"][c], out["step"][c], out["piece"][c] = r, piece // 2, piece
    lines = nchunks // (LINE // CHUNK)
    return {name: v.reshape(lines, LINE // CHUNK) for name, v in out.items()}


def conflict_ways(layout: str, rows: int = 8, k: int = 64) -> list[int]:
    """For each 8-element piece of k (0-7, 8-15, ...): how many passes 8 rows' 16 bytes
    of it take when read together, the most distinct chunks that fall in one bank group
    (16 bytes = 4 banks; a line of 32 banks holds 8 groups). 1 is conflict-free, 8 is one
    group for all 8 rows."""
    addr = operand_bytes(layout, rows, k)
    ways = []
    for piece in range(k // 8):
        chunks = addr[:8, 8 * piece] // CHUNK
        groups = chunks % (LINE // CHUNK)
        ways.append(max(len(set(chunks[groups == g].tolist())) for g in set(groups.tolist())))
    return ways


def descriptor_figure(axes=None, layouts=("128B", "none", "rows"), fontsize: float = 9):
    """The 1024 bytes of an 8 x 64 bf16 tile in each layout, one cell per 16-byte chunk
    (a line of 128 bytes per row of cells, one bank group per column): the colour says
    which k16 step's wgmma reads the chunk, the text which operand row it belongs to; the
    chunks holding k 0-7 of the 8 rows are outlined, and the title says how many passes
    they take read together. ``fontsize``: of every label, in points (chapter 9 draws it 10
    inches wide, shown at three quarters of that in a 1280-pixel window: 9 points are read
    there at about 9 pixels, book.figures.MIN_TEXT_PX)."""
    import matplotlib.patches as mp

    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, len(layouts), figsize=(10 / 3 * len(layouts), 4.2))
    axes = np.atleast_1d(axes)
    for ax, layout in zip(axes, layouts):
        own = chunk_owners(layout)
        ways = conflict_ways(layout)
        lines, cols = own["row"].shape
        for ln in range(lines):
            for c in range(cols):
                step, row, piece = (int(own[n][ln, c]) for n in ("step", "row", "piece"))
                y = lines - 1 - ln
                ax.add_patch(mp.Rectangle((c, y), 1, 1, facecolor=STEP_COLOURS[step],
                                          edgecolor="white", lw=0.8))
                ax.text(c + 0.5, y + 0.5, f"r{row}", ha="center", va="center",
                        fontsize=fontsize)
                if piece == 0:
                    ax.add_patch(mp.Rectangle((c + 0.06, y + 0.06), 0.88, 0.88,
                                              facecolor="none", edgecolor=OI["black"],
                                              lw=1.6))
        w = ways[0]
        said = "1 pass, conflict-free" if w == 1 else f"{w} passes ({w}-way conflict)"
        ax.set_title(f"{LAYOUTS[layout]}\nk 0-7 of rows 0-7: {said}", fontsize=fontsize)
        ax.set_xlim(0, cols)
        ax.set_ylim(0, lines)
        ax.set_aspect("equal")
        ax.set_xticks([c + 0.5 for c in range(cols)], [str(c) for c in range(cols)],
                      fontsize=fontsize)
        ax.set_yticks([lines - 0.5 - ln for ln in range(lines)],
                      [f"{LINE * ln}" for ln in range(lines)], fontsize=fontsize)
        ax.set_xlabel("bank group (16 bytes = 4 banks)", fontsize=fontsize)
        ax.tick_params(length=0)
        for side in ax.spines.values():
            side.set_visible(False)
    axes[0].set_ylabel("byte offset of the 128-byte line", fontsize=fontsize)
    handles = [mp.Patch(color=STEP_COLOURS[s], label=f"k16 step {s} (k {16 * s}-{16 * s + 15})")
               for s in range(len(STEP_COLOURS))]
    axes[-1].figure.legend(handles=handles, loc="lower center", ncol=4, fontsize=fontsize,
                           frameon=False)
    return axes


# ---------------------------------------------------------------------------------------
# the mbarrier ring, as a model


@dataclass(frozen=True)
class RingEvent:
    """One bar of the timeline: ``lane`` ("producer", "TMA", "consumer 0", ...), ``what``
    ("wait", "issue", a TMA box's name "x" / "wg" / "wu", "wgmma", "epilogue"), its time,
    the ring ``stage`` it concerns, and the tile and k-block."""

    lane: str
    what: str
    start: float
    end: float
    stage: int
    tile: int
    kb: int


def ring_model(tile=None, k_blocks: int = 6, tiles: int = 2, copy: float = 2.0,
               mma: float = 3.0, epilogue: float = 5.0,
               first_parity: int = 1) -> list[RingEvent]:
    """The ring of :mod:`book.kernels.gemms.wgmma_gemm` played out with ``MbarrierModel`` barriers.

    Each stage s has a *full* barrier (count 1) and an *empty* one (count: the consumer
    warpgroups). The producer takes k-blocks j = 0, 1, ... in order, into stage j % stages
    with phase bit (j // stages) & 1: it waits on empty[s] for parity ``phase ^
    first_parity`` (the kernel's ``ph ^ 1``), arrives on full[s] expecting the stage's
    bytes, and issues the stage's three TMA boxes (x, wg, wu), which the copy engine moves
    one after another, ``copy`` time units per stage split by bytes; each box completes
    its bytes on full[s]. Each consumer waits on full[s] for the phase bit, spends ``mma``
    on the k-block's wgmma and arrives on empty[s]; after ``k_blocks`` k-blocks it runs the
    epilogue (``epilogue`` units) while the producer goes on loading the next tile.

    Returns the events in the order they happened. A ring that can never move on (say the
    producer's first wait asks for parity 0: ``first_parity=0``) raises RuntimeError
    saying who waits on what."""
    from .kernels.gemms.wgmma_gemm import TILE

    tile = (tile or TILE).validate()
    if getattr(tile, "multicast", False):
        raise ValueError("the model plays out one CTA's ring: with multicast each stage is "
                         "filled and freed by both CTAs of a cluster, which it does not model")
    if min(k_blocks, tiles) < 1 or min(copy, mma) <= 0 or epilogue < 0:
        raise ValueError("k_blocks and tiles must be at least 1, copy and mma positive, "
                         "epilogue not negative")
    S, NC = tile.stages, tile.consumers
    full = [MbarrierModel(1) for _ in range(S)]
    empty = [MbarrierModel(NC) for _ in range(S)]
    boxes = [("x", tile.a_bytes), ("wg", tile.b_half_bytes), ("wu", tile.b_half_bytes)]
    total = k_blocks * tiles
    events: list[RingEvent] = []
    pending: list[tuple[float, int, int]] = []  # (time, stage, bytes): copies landing
    engine = 0.0  # when the copy engine is free
    t = 0.0
    prod = {"j": 0, "since": 0.0}
    cons = [{"j": 0, "until": None, "doing": None, "since": 0.0} for _ in range(NC)]

    def where(j):
        return j % S, (j // S) & 1, j // k_blocks, j % k_blocks

    while True:
        moved = True
        while moved:
            moved = False
            for item in sorted(p for p in pending if p[0] <= t):
                pending.remove(item)
                full[item[1]].complete_tx(item[2])
                moved = True
            for c, st in enumerate(cons):
                if st["until"] is not None and st["until"] <= t:
                    s, _, _, _ = where(st["j"])
                    if st["doing"] == "wgmma":
                        empty[s].arrive()
                        st["j"] += 1
                        if st["j"] % k_blocks == 0 and epilogue > 0:
                            _, _, tl, _ = where(st["j"] - 1)
                            st["until"], st["doing"] = t + epilogue, "epilogue"
                            events.append(RingEvent(f"consumer {c}", "epilogue", t,
                                                    t + epilogue, -1, tl, k_blocks))
                            moved = True
                            continue
                    st["until"], st["doing"], st["since"] = None, None, t
                    moved = True
                if st["until"] is None and st["j"] < total:
                    s, ph, tl, kb = where(st["j"])
                    if full[s].try_wait(ph):
                        if t > st["since"]:
                            events.append(RingEvent(f"consumer {c}", "wait", st["since"], t,
                                                    s, tl, kb))
                        st["until"], st["doing"] = t + mma, "wgmma"
                        events.append(RingEvent(f"consumer {c}", "wgmma", t, t + mma, s, tl,
                                                kb))
                        moved = True
            if prod["j"] < total:
                s, ph, tl, kb = where(prod["j"])
                if empty[s].try_wait(ph ^ first_parity):
                    if t > prod["since"]:
                        events.append(RingEvent("producer", "wait", prod["since"], t, s, tl,
                                                kb))
                    full[s].arrive(expect_tx=tile.stage_bytes)
                    events.append(RingEvent("producer", "issue", t, t, s, tl, kb))
                    for name, nbytes in boxes:
                        start = max(t, engine)
                        engine = start + copy * nbytes / tile.stage_bytes
                        pending.append((engine, s, nbytes))
                        events.append(RingEvent("TMA", name, start, engine, s, tl, kb))
                    prod["j"] += 1
                    prod["since"] = t
                    moved = True
        done = (prod["j"] == total and not pending
                and all(st["j"] == total and st["until"] is None for st in cons))
        if done:
            return events
        later = [p[0] for p in pending] + [st["until"] for st in cons if st["until"] is not None]
        if not later:
            waits = []
            if prod["j"] < total:
                s, ph, _, _ = where(prod["j"])
                waits.append(f"the producer waits on empty[{s}] for parity "
                             f"{ph ^ first_parity} (its phase is {empty[s].phase})")
            for c, st in enumerate(cons):
                if st["j"] < total:
                    s, ph, _, _ = where(st["j"])
                    waits.append(f"consumer {c} waits on full[{s}] for parity {ph} "
                                 f"(its phase is {full[s].phase})")
            raise RuntimeError(f"the ring is stuck at t = {t:g}: " + "; ".join(waits)
                               + ". Nothing else can arrive on those barriers.")
        t = min(later)


def ring_summary(events: list[RingEvent]) -> dict:
    """``end`` (time of the last event), ``consumer_busy`` (fraction of that time each
    consumer spent in wgmma or the epilogue), ``waiting`` (the time consumer 0 spent
    waiting on full barriers) and ``ready`` (the most k-blocks whose bytes had all landed
    and that consumer 0 had not yet started, counted when it starts one, that one
    included: how far the ring ran ahead, at most the number of stages)."""
    end = max(e.end for e in events)
    lanes = sorted({e.lane for e in events if e.lane.startswith("consumer")})
    busy = {ln: sum(e.end - e.start for e in events if e.lane == ln
                    and e.what in ("wgmma", "epilogue")) / end for ln in lanes}
    waiting = sum(e.end - e.start for e in events if e.lane == "consumer 0"
                  and e.what == "wait")
    landed = {}  # (tile, k-block) -> when its last box landed
    for e in events:
        if e.lane == "TMA":
            landed[e.tile, e.kb] = max(landed.get((e.tile, e.kb), 0.0), e.end)
    starts = sorted((e.start, e.tile, e.kb) for e in events
                    if e.lane == "consumer 0" and e.what == "wgmma")
    ready = max(sum(1 for (tl, kb), at in landed.items() if at <= s
                    and (tl, kb) >= (tile, kb0))
                for s, tile, kb0 in starts)
    return {"end": end, "consumer_busy": busy, "waiting": waiting, "ready": ready}


def ring_figure(events: list[RingEvent], ax=None, title: str | None = None,
                fontsize: float = 9):
    """The timeline of :func:`ring_model`: one lane per agent, bars coloured by ring stage,
    the consumers' labelled tile.k-block; the producer's issues as markers (stacked when
    several fall at one instant), the TMA boxes (x, wg, wu) of each stage as the copy
    engine moves them, the epilogue hatched, waits as thin grey lines. ``fontsize``: of
    every label, in points (chapter 9 draws it 9 inches wide, shown at about four fifths of
    that in a 1280-pixel window: 9 points are read there at about 10 pixels,
    book.figures.MIN_TEXT_PX)."""
    import matplotlib.patches as mp

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(9, 3.2))
    lanes = ["producer"] + ["TMA"] + sorted({e.lane for e in events
                                             if e.lane.startswith("consumer")})
    names = {"producer": "producer\n(one thread)", "TMA": "TMA copies"}
    y = {ln: len(lanes) - 1 - i for i, ln in enumerate(lanes)}
    stages = max(e.stage for e in events) + 1
    same_time = {}  # issues at one instant are stacked, not drawn over each other
    for e in events:
        y0 = y[e.lane]
        if e.what == "wait":
            ax.plot([e.start, e.end], [y0 + 0.5] * 2, color="0.6", lw=1)
        elif e.what == "issue":
            n = same_time[e.start] = same_time.get(e.start, -1) + 1
            ax.plot([e.start], [y0 + 0.8 - 0.2 * n], marker=">", ms=5, ls="none",
                    color=STAGE_COLOURS[e.stage % len(STAGE_COLOURS)], mec="black", mew=0.5)
        elif e.what == "epilogue":
            ax.add_patch(mp.Rectangle((e.start, y0 + 0.15), e.end - e.start, 0.7,
                                      facecolor="white", edgecolor="black", hatch="///",
                                      lw=0.6))
            ax.text((e.start + e.end) / 2, y0 + 0.5, "epilogue", ha="center", va="center",
                    fontsize=fontsize, bbox=dict(facecolor="white", edgecolor="none", pad=1.5))
        else:
            colour = STAGE_COLOURS[e.stage % len(STAGE_COLOURS)]
            ax.add_patch(mp.Rectangle((e.start, y0 + 0.15), e.end - e.start, 0.7,
                                      facecolor=colour, edgecolor="black", lw=0.5))
            if e.what == "wgmma":  # tile.k-block; a TMA box is too short for a label
                ax.text((e.start + e.end) / 2, y0 + 0.5, f"{e.tile}.{e.kb}", ha="center",
                        va="center", fontsize=fontsize)
    end = max(e.end for e in events)
    ax.set_xlim(-0.02 * end, end * 1.01)
    ax.set_ylim(0, len(lanes))
    ax.set_yticks([y[ln] + 0.5 for ln in lanes], [names.get(ln, ln) for ln in lanes],
                  fontsize=fontsize)
    ax.set_xlabel("time (model units)", fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    handles = [mp.Patch(color=STAGE_COLOURS[s % len(STAGE_COLOURS)], label=f"stage {s}")
               for s in range(stages)]
    # the legend under the time axis: above the lanes it ran into a long title
    ax.legend(handles=handles, loc="upper right", fontsize=fontsize, ncol=stages,
              frameon=False, bbox_to_anchor=(1, -0.22), handlelength=1.2,
              columnspacing=1.0)
    if title:
        ax.set_title(title, fontsize=fontsize, loc="left")
    return ax


# ---------------------------------------------------------------------------------------
# the comparison table, from the record

#: the multicast variant's row, by its name now and its name in records made before clusters
#: of two (without multicast) became the kernel's default
MULTICAST_ROWS = ("wgmma_dual_gemm_multicast", "wgmma_dual_gemm_cluster2")


def _same_run(a, b):
    pa, pb = a.get("provenance") or {}, b.get("provenance") or {}
    return (pa.get("date"), pa.get("commit")) == (pb.get("date"), pb.get("commit"))


def clustered(rec, shape) -> bool:
    """Whether the record's ``wgmma_dual_gemm`` row at ``shape`` ran the kernel's clusters of
    two: a record of that default has the unclustered variant (``wgmma_dual_gemm_single``)
    measured in the same run; an older record's row is the kernel without clusters."""
    dual = rec.find("wgmma_dual_gemm", "bfloat16", shape)
    single = rec.select(variant="wgmma_dual_gemm_single", dtype="bfloat16", shape=shape)
    return bool(single) and _same_run(dual, single[0])


def measurement_rows(rec, shape) -> list[tuple[str, str, dict]]:
    """(variant, label, row) of the chapter's comparison table at ``shape``, in its order:
    the dual GEMM, its two controls, the main-loop ceiling, the cluster variants the record
    has (as it names them), then cuBLAS alone, + compiled and + eager SwiGLU."""
    def row(v):
        return rec.find(v, "bfloat16", shape)

    paired = clustered(rec, shape)
    out = [("wgmma_dual_gemm", "**ours: wgmma dual GEMM, fused SwiGLU**"
            + (" (clusters of two)" if paired else " (no clusters)"), row("wgmma_dual_gemm")),
           ("wgmma_dual_gemm_identity", "control: identity epilogue",
            row("wgmma_dual_gemm_identity")),
           ("wgmma_unfused", "control: same GEMM + half8 pass", row("wgmma_unfused")),
           ("wgmma_ceiling", "wgmma main-loop ceiling", row("wgmma_ceiling"))]
    if paired:
        out.append(("wgmma_dual_gemm_single", "variant: no clusters",
                    row("wgmma_dual_gemm_single")))
    for v in MULTICAST_ROWS:
        found = rec.select(variant=v, dtype="bfloat16", shape=shape)
        if found:
            out.append((v, "variant: clusters of two, multicast", found[0]))
            break
    out += [("cublas_linear_gemm", "cuBLAS GEMM alone", row("cublas_linear_gemm")),
            ("cublas_linear_mlp_up_compiled", "cuBLAS + compiled SwiGLU",
             row("cublas_linear_mlp_up_compiled")),
            ("cublas_linear_mlp_up_eager", "cuBLAS + eager SwiGLU",
             row("cublas_linear_mlp_up_eager"))]
    return out


def cluster_repeats(doc) -> list[dict]:
    """Per run and T of a repeats record (``data.record("hopper/cluster_repeats_h100")``):
    ``run`` (1, 2, ...), ``T``, the default's and the unclustered kernel's rows
    (``clustered``, ``single``), ``speedup`` (the unclustered time over the default's: above
    1, the clusters are ahead), ``overlap`` (whether the two p10-p90 spreads overlap),
    ``vs_compiled`` (cuBLAS + compiled SwiGLU's time over the default's) and ``gemm`` (cuBLAS's
    GEMM alone, the row, or None)."""
    out = []
    for i, run in enumerate(doc["runs"], 1):
        rows = {(r["variant"], r["shape"][0]): r for r in run["rows"] if r["dtype"] == "bfloat16"}
        for T in sorted({t for _, t in rows}):
            c, s = rows[("wgmma_dual_gemm", T)], rows[("wgmma_dual_gemm_single", T)]
            comp = rows.get(("cublas_linear_mlp_up_compiled", T))
            out.append({"run": i, "T": T, "clustered": c, "single": s,
                        "gemm": rows.get(("cublas_linear_gemm", T)),
                        "speedup": s["seconds"] / c["seconds"],
                        "overlap": spreads_overlap(c, s),
                        "vs_compiled": comp["seconds"] / c["seconds"] if comp else None})
    return out


# ---------------------------------------------------------------------------------------
# the epilogue rule, from the record


def rule_rows(rec, gemm_row=None) -> list[dict]:
    """At each width d the record measured the rule at (``rule_*`` rows, T and h fixed):
    the separate pass's share predicted by 1.5 P / (BW d) (:func:`book.bench.hopper.
    predicted_share`, P the cuBLAS GEMM's rate of ``gemm_row``, by default the
    ``cublas_linear_gemm`` row at T = 2048, d = 4096, h = 14336, and BW the
    ``copy_bandwidth_bf16`` row's), the share measured (the compiled pass's time over GEMM
    + pass), and what fusing bought: the time of cuBLAS + the compiled pass over the wgmma
    dual GEMM's. Rows of {d, shape, predicted, measured, speedup, gemm_s, pass_s,
    fused_s, unfused_s}."""
    from .bench.hopper import RULE_H, RULE_T, predicted_share

    if gemm_row is None:
        gemm_row = rec.find("cublas_linear_gemm", "bfloat16", (RULE_T, 4096, RULE_H))
    bw = rec.find("copy_bandwidth_bf16", "bfloat16")["bandwidth"]
    p = gemm_row["flops_per_s"]
    out = []
    for row in sorted(rec.select(variant="rule_separate_pass_compiled"),
                      key=lambda r: r["shape"][1]):
        shape = tuple(row["shape"])
        d = shape[1]
        gemm = rec.find("rule_cublas_linear_gemm", "bfloat16", shape)
        fused = rec.find("rule_wgmma_dual_gemm", "bfloat16", shape)
        unfused = rec.find("rule_cublas_linear_mlp_up_compiled", "bfloat16", shape)
        out.append({"d": d, "shape": shape, "predicted": predicted_share(p, bw, d),
                    "measured": row["seconds"] / (row["seconds"] + gemm["seconds"]),
                    "speedup": unfused["seconds"] / fused["seconds"],
                    "gemm_s": gemm["seconds"], "pass_s": row["seconds"],
                    "fused_s": fused["seconds"], "unfused_s": unfused["seconds"],
                    "rate": p, "bandwidth": bw})
    return out
