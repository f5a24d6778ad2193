"""Wave quantization of the persistent dual GEMM (:mod:`book.kernels.wgmma_gemm`), and the
tile the dispatcher gives it for T tokens.

A persistent grid of one block per SM works through its tiles in *rounds*: every block takes
a tile, then the next, so ``tiles / blocks`` rounds, and a last round only partly full costs
as long as a full one. At d = 4096, h = 14336 and T = 512 the default 128 x 128 tile makes
4 x 112 = 448 tiles on 132 SMs: 3.39 rounds, run as 4, the fourth 39% full (chapter 9's
T = 512 row). Clusters of two pair row tiles 2p and 2p + 1, so an odd count of row tiles
leaves one CTA of each last pair idle: T = 384's 3 row tiles cost as 4.

What this module chooses among, priced in rounds of the wide tile (:data:`ROUND_COST`):

- the wide tile (128 x 128, clusters of two), and without its cluster where the row tiles
  are odd;
- a :class:`book.kernels.wgmma_gemm_tile.ColumnSplit`: the wide tile over as many columns as fill
  whole rounds, then the narrow tile (128 x 64: half the columns, a round about half as
  long) over the rest, in a second launch.

The prices are measured, not assumed: the H200 run of ``benchmarks/hopper_bench.py
--tiles`` (``records/hopper/hopper_tiles_h200.json``, ``hopper_tiles2_h200.json``) timed the
wide tile at 4 and 6 rounds (T = 512, 768: 45.2 and 44.7 us a round) and the narrow tile at
7 and 11 (24.1 and 23.8 us a round): the narrow round is 0.53 of the wide one. The third
run (``hopper_tiles3_h200.json``) timed the choices themselves: a split's second launch
costs about 0.2 of a round more than its rounds (its start and its last tiles: 6.7, 8 and
15 us at T = 512, 768, 640), and the wide tile without its cluster 1.03 of one with it
(T = 384: 46.7 us a round). With those prices the model's ratio of each choice to the
default tile is within 3% of the measured one at every T of that run
(``tests/library/test_waves.py`` holds it). Plain Python: it runs in the simulator and its
tests run in CI.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from .wgmma_gemm_tile import TILE, ColumnSplit, HopperTile

__all__ = ["NARROW", "ROUND_COST", "SPLIT_GAIN", "Rounds", "rounds", "predicted", "choose",
           "dispatch_tile"]

#: the narrow tile a ColumnSplit finishes with: half the wide tile's columns, a deeper ring
#: (T = 512: 168.8 us against 181.5 with the default four stages; records/hopper)
NARROW = HopperTile(bn=64, stages=6)

#: a round of each tile in rounds of the wide tile (clusters of two), and a split's second
#: launch, measured on the H200 (module doc)
ROUND_COST = {"wide": 1.0, "wide_single": 1.03, "narrow": 0.53, "second_launch": 0.2}

#: the least predicted gain for which the dispatcher leaves the wide tile: below it the
#: model's error (3% on the record) can eat the gain
SPLIT_GAIN = 0.03


@dataclass(frozen=True)
class Rounds:
    """A launch's tiles on ``blocks`` resident blocks: ``tiles`` (idle cluster partners
    counted), ``waves`` (tiles / blocks) and ``rounds`` (whole rounds run)."""

    tiles: int
    blocks: int

    @property
    def waves(self) -> float:
        return self.tiles / self.blocks

    @property
    def rounds(self) -> int:
        return -(-self.tiles // self.blocks)


def rounds(T: int, cols: int, tile: HopperTile, blocks: int) -> Rounds:
    """The rounds of ``tile`` over T rows and ``cols`` output columns on ``blocks`` blocks:
    row tiles padded to whole clusters."""
    m = -(-T // tile.bm)
    m = -(-m // tile.cluster) * tile.cluster
    return Rounds(m * -(-cols // tile.bn), blocks)


def _cost(tile: HopperTile) -> float:
    if tile.bn == NARROW.bn:
        return ROUND_COST["narrow"]
    return ROUND_COST["wide" if tile.cluster == 2 else "wide_single"]


def predicted(T: int, h: int, tile, blocks: int) -> float:
    """The predicted time of ``tile`` (a HopperTile or a ColumnSplit) at T x h, in rounds of
    the wide tile."""
    if isinstance(tile, ColumnSplit):
        cut = min(tile.cols, h)
        out = rounds(T, cut, tile.wide, blocks).rounds * _cost(tile.wide)
        if cut < h:
            out += (rounds(T, h - cut, tile.narrow, blocks).rounds * _cost(tile.narrow)
                    + ROUND_COST["second_launch"])
        return out
    return rounds(T, h, tile, blocks).rounds * _cost(tile)


def _split(T: int, h: int, wide: HopperTile, blocks: int):
    """The ColumnSplit whose wide part fills its whole rounds, or None."""
    m = rounds(T, wide.bn, wide, blocks).tiles  # (padded) row tiles: tiles of one column
    full = rounds(T, h, wide, blocks).tiles // blocks  # whole rounds the wide tile fills
    step = math.lcm(wide.bn, NARROW.bn)
    cols = (full * blocks // m) * wide.bn // step * step
    if not 0 < cols < h:
        return None
    narrow = replace(NARROW, cluster=wide.cluster)
    return ColumnSplit(wide, narrow, cols)


def choose(T: int, h: int, blocks: int, wide: HopperTile = TILE):
    """The tile (or ColumnSplit) of least predicted time for T x h on ``blocks`` blocks:
    the wide tile unless another is predicted :data:`SPLIT_GAIN` faster; without its cluster
    where that pads fewer row tiles."""
    base = wide
    if wide.cluster == 2 and -(-T // wide.bm) % 2:  # odd row tiles: an idle partner each
        single = replace(wide, cluster=1)
        if predicted(T, h, single, blocks) < predicted(T, h, wide, blocks):
            base = single
    best = base
    split = _split(T, h, base, blocks)
    if split is not None and (predicted(T, h, split, blocks)
                              < (1 - SPLIT_GAIN) * predicted(T, h, base, blocks)):
        best = split
    return best


@functools.lru_cache(maxsize=1024)
def dispatch_tile(T: int, h: int):
    """:func:`choose` on this GPU's SMs, remembered (the dispatcher asks at every call)."""
    from ..host.launch import sm_count

    return choose(T, h, sm_count())
