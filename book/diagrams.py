"""Diagrams of the tiled GEMM of chapter 7, drawn from the kernel's own tile sizes.

Each function draws one picture on a matplotlib ``Axes`` from a
:class:`book.kernels.gemms.gemm.Tile`, so the figures follow the measured configuration
(``gemm.TILE``) and change with it:

- :func:`block_tile`: ``out = a @ b`` split into block tiles; the row panel of ``a`` and
  the column panel of ``b`` one block reads, and the k-slab it stages at one step.
- :func:`k_slab`: the two shared-memory tiles of one stage (``As`` transposed and padded,
  ``Bs`` with the gate and up halves of the dual GEMM).
- :func:`register_block`: which accumulators of the block tile one thread owns (its
  ``tm x tn`` register block in four quadrants), and where gate and up sit among them.
- :func:`double_buffer`: the k loop's schedule: the next slab's loads in flight while the
  current buffer is multiplied, then stored into the other buffer.

The geometry comes from :func:`thread_cells` and :func:`schedule`, which restate the
kernel's index arithmetic (``make_tiled_gemm``) and are checked against it in the tests.

And chapter 8's :func:`fragment_grids`: which lane of a warp holds each element of an
``mma.sync`` fragment, from the tables of :mod:`book.kernels.instructions.tensorcore`.
"""

from __future__ import annotations

from .roofline import OKABE_ITO as OI

__all__ = ["thread_cells", "schedule", "block_tile", "k_slab", "register_block",
           "double_buffer", "fragment_grids", "FRAGMENT_FIGSIZE"]

GATE, UP = OI["blue"], OI["orange"]


def _tile(tile):
    if tile is None:
        from .kernels.gemms.gemm import TILE

        tile = TILE
    return tile.validate()


def thread_cells(tile, tid):
    """{(row, col) in the block tile: (i, j) in the thread's ``acc``} for thread ``tid``.

    The same arithmetic as the kernel's epilogue: rows ``(i // tm2) * bm/2 + ty * tm2 +
    i % tm2``, columns ``(j // tn2) * bn/2 + tx * tn2 + j % tn2``. In the dual GEMM the left
    half of the columns (``j < tn2``) holds gate, the right half up, for the same output
    columns.
    """
    tile = _tile(tile)
    tx_count = tile.bn // tile.tn
    ty, tx = divmod(tid, tx_count)
    tm2, tn2, hm, hn = tile.tm // 2, tile.tn // 2, tile.bm // 2, tile.bn // 2
    return {((i // tm2) * hm + ty * tm2 + i % tm2, (j // tn2) * hn + tx * tn2 + j % tn2): (i, j)
            for i in range(tile.tm) for j in range(tile.tn)}


def schedule(nk, prefetch="peeled"):
    """The k loop of the kernel as steps ``(kt, load_slab, multiply_buffer, store_buffer)``.

    Before the loop slab 0 is loaded and stored into buffer 0 (step ``kt = -1``, nothing
    multiplied). Step ``kt`` multiplies buffer ``kt % 2`` (slab ``kt``) while slab
    ``kt + 1`` travels from global memory into registers, then stores those registers into
    buffer ``1 - kt % 2``; a barrier ends each step. The last step has nothing to fetch:
    ``prefetch="peeled"`` (or ``"branchy"``) runs it without loads or stores
    (``load_slab`` and ``store_buffer`` are None); ``"clamped"`` reloads its own slab, so
    that the loop body has no branch (the ``Tile.prefetch`` options of the kernel).
    """
    if nk < 1:
        raise ValueError(f"nk must be at least 1 (slabs along k), got {nk}")
    if prefetch not in ("peeled", "clamped", "branchy"):
        raise ValueError(f"prefetch must be 'peeled', 'clamped' or 'branchy', got {prefetch!r}")
    steps = [(-1, 0, None, 0)]
    for kt in range(nk):
        if kt + 1 < nk or prefetch == "clamped":
            steps.append((kt, min(kt + 1, nk - 1), kt % 2, 1 - kt % 2))
        else:
            steps.append((kt, None, kt % 2, None))
    return steps


def _rect(ax, x, y, w, h, fc="none", ec="black", lw=0.8, **kw):
    import matplotlib.patches as mp

    ax.add_patch(mp.Rectangle((x, y), w, h, facecolor=fc, edgecolor=ec, lw=lw, **kw))


def _axes(ax, size):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=size)
    ax.set_aspect("equal")
    ax.axis("off")
    return ax


def block_tile(tile=None, ax=None, blocks=(4, 4)):
    """``a @ b`` with one block's tile of ``out``, its panels of ``a`` and ``b`` and a k-slab.

    Not to scale along k: a slab is drawn one unit wide, a block tile four units."""
    tile = _tile(tile)
    ax = _axes(ax, (7, 4.6))
    bm, bn, bk = tile.bm, tile.bn, tile.bk
    t = 4.0  # a block tile is t x t units; a k-slab 1 unit deep
    M, N, K = blocks[0] * t, blocks[1] * t, 10.0
    gap = 1.5
    bx, by = K + gap, M + gap  # W above out, x left of out
    _rect(ax, 0, 0, K, M, lw=1.2)
    _rect(ax, bx, by, N, K, lw=1.2)
    _rect(ax, bx, 0, N, M, lw=1.2)
    for r in range(1, blocks[0]):
        ax.plot([bx, bx + N], [r * t] * 2, color=OI["black"], lw=0.3)
    for c in range(1, blocks[1]):
        ax.plot([bx + c * t] * 2, [0, M], color=OI["black"], lw=0.3)
    r0, c0, kt = 1, 2, 3  # the block drawn (row 1, column 2 of the grid) at k step 3
    y0, x0 = M - (r0 + 1) * t, bx + c0 * t
    _rect(ax, 0, y0, K, t, fc=OI["sky_blue"], alpha=0.4, lw=0)
    _rect(ax, x0, by, t, K, fc=OI["sky_blue"], alpha=0.4, lw=0)
    _rect(ax, kt, y0, 1, t, fc=OI["blue"], lw=1.2)
    _rect(ax, x0, by + K - kt - 1, t, 1, fc=OI["blue"], lw=1.2)
    _rect(ax, x0, y0, t, t, fc=OI["vermillion"], lw=1.2)
    fs = 8
    ax.text(K / 2, -0.6, "x (M x K)", ha="center", va="top", fontsize=fs)
    ax.text(bx + N / 2, -0.6, "out (M x N), one block tile per block",
            ha="center", va="top", fontsize=fs)
    ax.text(bx + N / 2, by + K + 0.3, "W (K x N)", ha="center", va="bottom", fontsize=fs)
    ax.text(x0 + t / 2, y0 + t / 2, f"block\n{bm} x {bn}", ha="center", va="center",
            fontsize=fs - 1, color="white")
    ax.text(K / 2, y0 + t + 0.3, f"row panel: {bm} x K", ha="center", va="bottom",
            fontsize=fs)
    ax.text(x0 - 0.3, by + K - 0.5, f"column panel:\nK x {bn}", ha="right", va="top",
            fontsize=fs)
    ax.annotate(f"k-slab {bm} x {bk}\n(step kt = {kt})", (kt + 0.5, y0), (kt + 0.5, y0 - 3),
                fontsize=fs, ha="center", va="top", arrowprops=dict(arrowstyle="->", lw=0.8))
    ax.annotate(f"k-slab {bk} x {bn}", (x0 + t, by + K - kt - 0.5),
                (bx + N + 0.4, by + K - kt - 2.5), fontsize=fs, ha="left", va="center",
                arrowprops=dict(arrowstyle="->", lw=0.8))
    ax.set_xlim(-0.5, bx + N + 6)
    ax.set_ylim(-2, by + K + 1.5)
    return ax


def k_slab(tile=None, ax=None, dual=True):
    """The shared-memory stage: ``As[k, m]`` (transposed, padded) and ``Bs[k, n]``."""
    tile = _tile(tile)
    ax = _axes(ax, (7, 2.6))
    bm, bn, bk, pad = tile.bm, tile.bn, tile.bk, tile.pad
    s = 0.05  # drawing units per float
    h = bk * s * 4  # k rows, drawn 4x taller so they can be told apart
    _rect(ax, 0, 0, bm * s, h, fc=OI["sky_blue"], alpha=0.5)
    _rect(ax, bm * s, 0, pad * s, h, fc="white", hatch="////", ec=OI["black"])
    for k in range(1, bk):
        ax.plot([0, (bm + pad) * s], [k * h / bk] * 2, color=OI["black"], lw=0.3)
    x0 = (bm + pad) * s + 1.0
    if dual:
        _rect(ax, x0, 0, bn / 2 * s, h, fc=GATE, alpha=0.6)
        _rect(ax, x0 + bn / 2 * s, 0, bn / 2 * s, h, fc=UP, alpha=0.6)
    else:
        _rect(ax, x0, 0, bn * s, h, fc=OI["sky_blue"], alpha=0.5)
    for k in range(1, bk):
        ax.plot([x0, x0 + bn * s], [k * h / bk] * 2, color=OI["black"], lw=0.3)
    fs = 8
    ax.text(bm * s / 2, h + 0.15, f"As: {bk} x ({bm} + {pad} pad), x's slab transposed",
            ha="center", va="bottom", fontsize=fs)
    if dual:
        ax.text(x0 + bn / 4 * s, h / 2, f"Wg\n{bk} x {bn // 2}", ha="center", va="center",
                fontsize=fs, color="white")
        ax.text(x0 + 3 * bn / 4 * s, h / 2, f"Wu\n{bk} x {bn // 2}", ha="center", va="center",
                fontsize=fs)
    ax.text(x0 + bn * s / 2, h + 0.15, f"Bs: {bk} x {bn}, W's slab" + (", same output columns"
            if dual else ""), ha="center", va="bottom", fontsize=fs)
    nbytes = 4 * bk * (bm + pad + bn)
    ax.text((x0 + bn * s) / 2, -0.25,
            f"one stage {nbytes:,} B; two stages (double buffer) {2 * nbytes:,} B",
            ha="center", va="top", fontsize=fs)
    ax.text(-0.2, h / 2, "k", ha="right", va="center", fontsize=fs)
    ax.set_xlim(-0.6, x0 + bn * s + 0.2)
    ax.set_ylim(-0.8, h + 0.8)
    return ax


def register_block(tile=None, ax=None, tid=None, dual=True):
    """The block tile's accumulators; one thread's register block highlighted."""
    tile = _tile(tile)
    ax = _axes(ax, (7, 4.2))
    bm, bn, tm, tn = tile.bm, tile.bn, tile.tm, tile.tn
    tx_count = bn // tn
    if tid is None:
        tid = 2 * tx_count + 5  # a thread that is neither first nor last in its row
    cells = thread_cells(tile, tid)
    _rect(ax, 0, 0, bn, bm, lw=1.2)
    for c in range(0, bn, tn // 2):
        ax.plot([c, c], [0, bm], color=OI["black"], lw=0.15)
    for r in range(0, bm, tm // 2):
        ax.plot([0, bn], [r, r], color=OI["black"], lw=0.15)
    ax.plot([bn / 2] * 2, [0, bm], color=OI["black"], lw=1.0)
    ax.plot([0, bn], [bm / 2] * 2, color=OI["black"], lw=1.0, ls=":")
    for (r, c), (i, j) in cells.items():
        colour = (GATE if j < tn // 2 else UP) if dual else OI["vermillion"]
        _rect(ax, c, bm - r - 1, 1, 1, fc=colour, lw=0)
    fs = 8
    ty, tx = divmod(tid, tx_count)
    ax.text(bn / 2, bm + 2, f"block tile: {bm} x {bn} accumulators, {tile.threads} threads",
            ha="center", va="bottom", fontsize=fs)
    # the thread's own accumulator array, as the kernel indexes it: acc[i, j]
    cs = 5.0  # drawing units per accumulator
    x0, y0 = bn + 16, bm - 22 - tm * cs
    where = {ij: rc for rc, ij in cells.items()}
    for i in range(tm):
        for j in range(tn):
            colour = (GATE if j < tn // 2 else UP) if dual else OI["vermillion"]
            _rect(ax, x0 + j * cs, y0 + (tm - 1 - i) * cs, cs, cs, fc=colour, ec="white",
                  lw=0.5)
    ax.text(x0 + tn * cs / 2, y0 + tm * cs + 1.5, f"thread {tid} (ty={ty}, tx={tx}):\n"
            f"acc[i, j], {tm} x {tn}, in registers", ha="center", va="bottom", fontsize=fs)
    ax.text(x0 - 1, y0 + (tm - 0.5) * cs, "i=0", ha="right", va="center", fontsize=fs - 1)
    ax.text(x0 - 1, y0 + 0.5 * cs, f"i={tm - 1}", ha="right", va="center", fontsize=fs - 1)
    for (i, j) in ((0, 0), (0, tn // 2), (tm - 1, tn // 2 - 1)):
        r, c = where[(i, j)]
        ax.annotate("", (c + 0.5, bm - r - 0.5),
                    (x0 + (j + 0.5) * cs, y0 + (tm - 1 - i + 0.5) * cs),
                    arrowprops=dict(arrowstyle="->", lw=0.6, color=OI["black"]))
    if dual:
        text = (f"columns 0..{tn // 2 - 1}: gate = x @ Wg\n"
                f"columns {tn // 2}..{tn - 1}: up = x @ Wu,\n  same output columns\n"
                f"epilogue, per pair:\n  out = silu_mul(acc[i, j],\n"
                f"                 acc[i, {tn // 2} + j])")
    else:
        text = f"four {tm // 2} x {tn // 2} quadrants\nof the block tile"
    ax.text(x0 - 4, y0 - 3, text, ha="left", va="top", fontsize=fs)
    ax.set_xlim(-2, x0 + tn * cs + 28)
    ax.set_ylim(-2, bm + 8)
    return ax


def double_buffer(tile=None, ax=None, nk=5):
    """The k loop over ``nk`` slabs: what each step loads, multiplies and stores."""
    tile = _tile(tile)
    import matplotlib.patches as mp

    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 2.8))
    lanes = ["global memory\n-> registers", "multiply from\nshared memory",
             "registers ->\nshared memory"]
    buf_colour = {0: OI["sky_blue"], 1: OI["bluish_green"]}
    fs = 8
    prefetch = getattr(tile, "prefetch", "peeled")
    for x, (kt, load, mul, store) in enumerate(schedule(nk, prefetch)):
        if load is not None:
            ax.add_patch(mp.Rectangle((x + 0.05, 2.1), 0.9, 0.8, fc=OI["yellow"], ec="black",
                                      lw=0.6))
            again = kt == nk - 1  # "clamped": the last step reloads its own slab
            ax.text(x + 0.5, 2.5, f"slab {load}" + ("\n(again)" if again else ""),
                    ha="center", va="center", fontsize=fs)
        if mul is not None:
            ax.add_patch(mp.Rectangle((x + 0.05, 1.1), 0.9, 0.8, fc=buf_colour[mul],
                                      ec="black", lw=0.6))
            ax.text(x + 0.5, 1.5, f"buf {mul}\nslab {kt}", ha="center", va="center",
                    fontsize=fs)
        if store is not None:
            ax.add_patch(mp.Rectangle((x + 0.05, 0.1), 0.9, 0.8, fc=buf_colour[store],
                                      ec="black", lw=0.6, alpha=0.45))
            ax.text(x + 0.5, 0.5, f"slab {load}\n-> buf {store}", ha="center",
                    va="center", fontsize=fs)
        if kt < nk - 1:
            ax.plot([x + 1, x + 1], [0, 3], color=OI["vermillion"], lw=1.2, ls="--")
    ax.set_xlim(0, nk + 1)
    ax.set_ylim(0, 3.5)
    ax.set_yticks([2.5, 1.5, 0.5], lanes, fontsize=fs)
    ax.set_xticks([x + 0.5 for x in range(nk + 1)],
                  ["before\nthe loop"] + [f"kt = {k}" for k in range(nk)], fontsize=fs)
    ax.text(nk + 1, 3.05, "dashed: cuda.syncthreads()", ha="right", va="bottom",
            fontsize=fs, color=OI["vermillion"])
    ax.text(0, 3.05, f"BK = {tile.bk}: each step consumes one {tile.bk}-deep slab "
            f"(prefetch: {prefetch})", ha="left", va="bottom", fontsize=fs)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return ax


# ---------------------------------------------------------------------------------------
# chapter 8: which lane holds each element of an mma.sync fragment

#: the figure :func:`fragment_grids` draws on by default (chapter 8)
FRAGMENT_FIGSIZE = (10, 4.4)


def fragment_grids(axes=None, fontsize: float = 9):
    """The three fragments of ``mma.sync`` m16n8k16 (A 16 x 16, B 16 x 8, C and D 16 x 8) as
    grids: each element's cell holds the lane that owns it, coloured by the lane's group
    (``lane >> 2``), rows and columns numbered. Drawn from the PTX ISA's tables as
    :mod:`book.kernels.instructions.tensorcore` states them (``a_coords``, ``b_coords``, ``c_coords``).
    ``fontsize``: of every label, in points (lane numbers, ticks, axis names, titles)."""
    import numpy as np

    from .kernels.instructions import tensorcore as tc

    if axes is None:
        import matplotlib.pyplot as plt

        _, axes = plt.subplots(1, 3, figsize=FRAGMENT_FIGSIZE,
                               gridspec_kw={"width_ratios": [16, 8, 8]})
    panels = ((tc.a_coords, (16, 16), 8, "A (16 × 16): 8 per lane", "row m", "column k"),
              (tc.b_coords, (16, 8), 4, "B (16 × 8): 4 per lane", "row k", "column n"),
              (tc.c_coords, (16, 8), 4, "C, D (16 × 8, float32): 4 per lane", "row m",
               "column n"))
    for ax, (coords, shape, n, title, rows, cols) in zip(axes, panels):
        owner = np.zeros(shape, int)
        for lane in range(32):
            for e in range(n):
                owner[coords(lane, e)] = lane
        ax.imshow(owner >> 2, cmap="tab10", vmin=0, vmax=9)  # colour: the group g
        for (r, c), lane in np.ndenumerate(owner):
            ax.text(c, r, lane, ha="center", va="center", fontsize=fontsize)
        ax.set_title(title, fontsize=fontsize + 1)
        ax.set_xticks(range(shape[1])), ax.set_yticks(range(shape[0]))
        ax.tick_params(labelsize=fontsize, length=0)
        ax.set_xlabel(cols, fontsize=fontsize), ax.set_ylabel(rows, fontsize=fontsize)
    return axes
