"""Stream-K for the decode GEMV on Hopper (:mod:`book.kernels.wgmma_gemv`): which block reads
which (row tile, k-block) steps, worked out on the host. The kernel divides nothing: ptxas
makes a 64-bit division a subroutine call, and a call serializes every wgmma.

The row tiles that do not divide evenly among the blocks are cut into equal, contiguous
ranges of steps, one a block (*stream-K*); after its range each block reads whole tiles of its
own (:func:`split`). :func:`stream_k` is the table the kernel reads, :func:`walk` the order a
block reads in (the kernel's producer, consumer and finisher all step through it), and the
seams' bookkeeping: :func:`pieces` (the blocks that share a tile), :func:`slot_of` (where a
piece's sums go), :func:`first_visit` (where resident tokens are copied).
"""

from __future__ import annotations

import numpy as np

__all__ = ["ENTRY", "ranges", "cta_of", "pieces", "slot_of", "split", "stream_k", "walk",
           "step_at", "next_step", "rotated", "first_visit", "guided_bounds", "guided"]


#: int32 words of a block's entry in the table (:func:`stream_k`)
ENTRY = 5


def ranges(iters: int, blocks: int):
    """[(start, end)] of each block: ``iters`` (row tile, k-block) iterations cut into
    ``blocks`` contiguous ranges whose lengths differ by at most one."""
    return [(b * iters // blocks, (b + 1) * iters // blocks) for b in range(blocks)]


def cta_of(j: int, iters: int, blocks: int) -> int:
    """The block whose range holds iteration ``j`` (the inverse of :func:`ranges`)."""
    return ((j + 1) * blocks - 1) // iters


def pieces(m: int, nk: int, iters: int, blocks: int):
    """The blocks that read part of row tile ``m`` (``nk`` k-blocks), in order."""
    return list(range(cta_of(m * nk, iters, blocks), cta_of(m * nk + nk - 1, iters, blocks) + 1))


def slot_of(c: int, m: int, table) -> int:
    """Block ``c``'s workspace slot for its piece of row tile ``m``: a block's stream-K range
    can cut only its first and its last tile, so two slots a block (2c, 2c + 1) hold every
    seam."""
    return 2 * c + (0 if m == table[ENTRY * c] else 1)


def split(mt: int, nk: int, blocks: int) -> tuple[int, int]:
    """(``shared``, ``whole``): the first ``shared`` row tiles are cut into stream-K ranges,
    one a block; after its range each block reads ``whole`` tiles of its own, uncut. Whole
    tiles are the most that leave every block a range of at least one k-block (a block with
    nothing to share would sit between two pieces of a tile and never arrive)."""
    if not 1 <= blocks <= mt * nk:
        raise ValueError(f"{blocks} blocks for {mt * nk} iterations: launch 1 to {mt * nk} "
                         "blocks")
    whole = mt // blocks
    while whole and (mt - whole * blocks) * nk < blocks:
        whole -= 1
    return mt - whole * blocks, whole


def stream_k(mt: int, nk: int, blocks: int) -> np.ndarray:
    """The kernel's table (int32) for ``blocks`` (at most ``mt nk``, so none is idle) over
    ``mt`` row tiles of ``nk`` k-blocks. Each block walks its stream-K range first (the
    seams, met while the ring still has a whole tile to read behind them), then its whole
    tiles (no seam: the launch ends on plain epilogues), :func:`split`. For each block b,
    ``[5b : 5b + 5]`` = its range's first row tile, the k-block it starts at and its length
    in k-blocks, then its first whole tile and how many; then for each row tile m,
    ``[5 blocks + 2m : + 2]`` = the first and the last block that read part of it
    (:func:`walk` is the order a block reads in)."""
    shared, whole = split(mt, nk, blocks)
    iters = shared * nk
    out = np.zeros(ENTRY * blocks + 2 * mt, dtype=np.int32)
    for b, (s, e) in enumerate(ranges(iters, blocks)):
        first = shared + b * whole
        out[ENTRY * b: ENTRY * (b + 1)] = (s // nk, s % nk, e - s, first, whole)
        for m in range(first, first + whole):
            out[ENTRY * blocks + 2 * m: ENTRY * blocks + 2 * m + 2] = (b, b)
    for m in range(shared):
        ps = pieces(m, nk, iters, blocks)
        out[ENTRY * blocks + 2 * m: ENTRY * blocks + 2 * m + 2] = (ps[0], ps[-1])
    return out


def first_visit(q: int, kb: int, n: int, kb0: int, nk: int) -> bool:
    """Whether step ``q`` of a walk (at k-block ``kb``; the range ``n`` long from ``kb0``)
    is the block's first read of that k-block: where resident x's box is copied. The
    range's first ``nk`` steps each read a new k-block; after it, the first whole tile's
    steps at k-blocks the range did not reach (the kernel runs this same function)."""
    if q < n:
        return q < nk
    ek = kb - kb0
    if ek < 0:
        ek += nk
    return q - n < nk and n < nk and ek >= n


def step_at(q: int, m: int, kb: int, n: int, w0: int):
    """(row tile, k-block) of step ``q`` of a block's walk, given (``m``, ``kb``) where
    :func:`next_step` left step q - 1: at step ``n`` its range is read and its whole tiles
    begin, at tile ``w0`` (the kernels run this same function)."""
    if q == n:
        return w0, 0
    return m, kb


def next_step(m: int, kb: int, nk: int):
    """The (row tile, k-block) after (``m``, ``kb``) in tiles of ``nk`` k-blocks (the kernels
    run this same function)."""
    kb += 1
    if kb == nk:
        return m + 1, 0
    return m, kb


def rotated(kb: int, m: int, rotate: int, pw: int, nk: int) -> int:
    """The k-block row tile ``m`` reads at its step ``kb`` when each tile starts ``rotate``
    steps further on than the one before, modulo ``pw`` (a power of two at most ``nk``: no
    division on the device), wrapping at ``nk`` (the kernels run this same function)."""
    kr = kb + ((m * rotate) & (pw - 1))
    if kr >= nk:
        kr -= nk
    return kr


def walk(table, b: int, nk: int):
    """[(row tile, k-block)] block ``b`` reads, in order: what the kernel's producer and
    consumer both step through, one :func:`step_at` and :func:`next_step` at a time."""
    m, kb, n, first, whole = (int(v) for v in table[ENTRY * b: ENTRY * (b + 1)])
    out = []
    for q in range(n + whole * nk):
        m, kb = step_at(q, m, kb, n, first)
        out.append((m, kb))
        m, kb = next_step(m, kb, nk)
    return out


def guided_bounds(mt: int, nk: int, blocks: int, chunk: int, pool: float) -> list[int]:
    """Where the ranges of a launch whose blocks take their work as they go begin and end:
    ``blocks`` equal ranges over the first ``1 - pool`` of the ``mt nk`` iterations (block b
    starts with range b), then ranges of ``chunk`` iterations to the end, which the blocks
    take in turn as each runs out (:func:`guided`)."""
    iters = mt * nk
    if chunk < 1 or not 0 <= pool < 1 or not 1 <= blocks <= iters:
        raise ValueError(f"chunk >= 1, pool in [0, 1) and 1 to {iters} blocks, got {chunk}, "
                         f"{pool}, {blocks}")
    tail = min(iters - blocks, int(round(iters * pool / chunk)) * chunk)
    head = iters - tail
    bounds = [s for s, _ in ranges(head, blocks)] + [head]
    return bounds + list(range(head + chunk, iters, chunk)) + ([iters] if tail else [])


def guided(mt: int, nk: int, blocks: int, chunk: int, pool: float) -> np.ndarray:
    """The table of a launch whose ranges are taken as the blocks run out of work (the wgmma
    GEMV's ``dynamic`` tile): word 0 the number of ranges R, then for each range c
    ``[1 + 5c : 6 + 5c]`` = its first row tile, the k-block it starts at, its length, 0, 0
    (no whole tiles of its own: a range may hold whole tiles, met with no seam), then for
    each row tile m ``[1 + 5R + 2m : + 2]`` = the first and the last range that read part
    of it. Which block reads a range changes from launch to launch; where the ranges cut
    the tiles does not, and a tile's pieces are added in range order: the same sums every
    launch."""
    bounds = guided_bounds(mt, nk, blocks, chunk, pool)
    R = len(bounds) - 1
    out = np.zeros(1 + ENTRY * R + 2 * mt, dtype=np.int32)
    out[0] = R
    for c in range(R):
        s, e = bounds[c], bounds[c + 1]
        out[1 + ENTRY * c: 1 + ENTRY * (c + 1)] = (s // nk, s % nk, e - s, 0, 0)
    first = np.searchsorted(bounds, np.arange(mt) * nk, side="right") - 1
    last = np.searchsorted(bounds, np.arange(mt) * nk + nk - 1, side="right") - 1
    out[1 + ENTRY * R::2] = first
    out[2 + ENTRY * R::2] = last
    return out
