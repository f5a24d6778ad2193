"""The Hopper dual GEMM's geometry (:mod:`book.kernels.wgmma_gemm`, chapter 9): its tile as
named sizes one can print and test (:class:`HopperTile`: the ring's stages, the shared-memory
layout, wgmma's shape, the warpgroups' registers; the protocol: :mod:`book.kernels.tile`), a
GEMM split over two launches by columns (:class:`ColumnSplit`) and the order the persistent
blocks take the tiles in (:func:`schedule`). Plain Python: the simulator imports it, the
kernel factories (:mod:`book.kernels.wgmma_gemm`, :mod:`book.kernels.fp8_gemm`) and the wave
model (:mod:`book.kernels.waves`) read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..instructions.hopper import SWIZZLE_PERIOD
from ..host.launch import MAX_SHARED
from .tile import TileShape

__all__ = ["HopperTile", "TILE", "ColumnSplit", "ALIGN", "schedule"]

ALIGN = SWIZZLE_PERIOD  # a 128B-swizzled tile starts on 1024 bytes (the swizzle's period)


@dataclass(frozen=True)
class HopperTile(TileShape):
    """The kernel's geometry: every size the kernel is built from, as named values."""

    bm: int = 128  # rows of x per tile: 64 per consumer warpgroup
    bn: int = 128  # output columns per tile: gate and up bn each, so wgmma's N is 2 bn
    bk: int = 64  # k per stage: 64 16-bit elements = one 128-byte swizzled row
    stages: int = 4  # the ring: the producer runs up to this many stages ahead
    group: int = 8  # L2 order: column tiles walked together (:func:`schedule`)
    inflight: int = 0  # k-blocks of wgmma left in flight before a stage is released (0 or 1)
    cluster: int = 2  # CTAs per cluster: neighbouring row tiles 2p, 2p+1 run side by side
    max_blocks: int = 0  # at most this many blocks resident (0: one per SM)
    multicast: bool = False  # with clusters: one read of the weights for both (TMA multicast)
    producer_regs: int = 40  # setmaxnreg: the producer keeps this many registers ...
    consumer_regs: int = 232  # ... and the consumers grow to this many
    elem: int = 2  # bytes of an operand element (1: e4m3/e5m2, book.kernels.fp8_gemm)
    out_elem: int = 2  # bytes of an output element (1: e4m3 out)

    @property
    def consumers(self):
        return self.bm // 64

    @property
    def threads(self):
        return 128 * (self.consumers + 1)

    @property
    def wgmma_n(self):
        return 2 * self.bn

    @property
    def wgmma_k(self):  # k of one wgmma: 32 bytes of a row (k16 of 16-bit, k32 of 8-bit)
        return 32 // self.elem

    @property
    def a_bytes(self):  # one stage's tile of x
        return self.bm * self.bk * self.elem

    @property
    def b_half_bytes(self):  # one stage's tile of one weight (bn rows)
        return self.bn * self.bk * self.elem

    @property
    def b_bytes(self):
        return 2 * self.b_half_bytes

    @property
    def c_bytes(self):  # one consumer's output staging tile: 64 rows x bn outputs
        return 64 * self.bn * self.out_elem

    @property
    def stage_bytes(self):
        return self.a_bytes + self.b_bytes

    @property
    def layout(self) -> dict:
        """Byte offsets in shared memory (from a 1024-aligned base): the A ring, the B ring,
        each consumer's output tile (the TMA store's source), the full and the empty
        barriers."""
        a = 0
        b = self.stages * self.a_bytes
        c = b + self.stages * self.b_bytes
        full = c + self.consumers * self.c_bytes
        empty = full + 8 * self.stages
        return {"a": a, "b": b, "c": c, "full": full, "empty": empty,
                "end": empty + 8 * self.stages}

    @property
    def scale_bytes(self):
        """One-byte operands (:mod:`book.kernels.fp8_gemm`): the tile's scales, after the
        layout's end (float32: gate's and up's columns, each consumer's 64 rows); 0 for
        16-bit operands."""
        return 0 if self.elem == 2 else 2 * self.bn * 4 + self.consumers * 64 * 4

    @property
    def shared_bytes(self):
        """Dynamic shared memory to ask for: the layout, the scales of one-byte operands,
        and room to align the start."""
        return self.layout["end"] + self.scale_bytes + ALIGN

    def problems(self) -> list[str]:
        p = []
        if self.bm not in (64, 128, 192):
            p.append("bm must be 64, 128 or 192 (64 rows per consumer warpgroup)")
        if 2 * self.bn not in (64, 128, 256):
            p.append("bn must be 32, 64 or 128 (wgmma's N = 2 bn is at most 256)")
        if self.elem not in (1, 2) or self.out_elem not in (1, 2):
            p.append("elem and out_elem are 1 or 2 bytes")
        elif self.bk * self.elem != 128:
            p.append(f"bk must be {128 // self.elem} (one 128-byte swizzled row of "
                     f"{8 * self.elem}-bit elements)")
        if self.stages < 2:
            p.append("stages must be at least 2")
        if self.inflight not in (0, 1):
            p.append("inflight must be 0 or 1")
        if self.cluster not in (1, 2):
            p.append("cluster must be 1 or 2")
        if self.threads * self.consumer_regs > 65536 + 128 * (self.consumer_regs
                                                              - self.producer_regs):
            p.append("the consumers' registers do not fit the register file")
        if self.shared_bytes > MAX_SHARED:
            p.append(f"{self.shared_bytes} bytes of shared memory: a block gets at most "
                     f"{MAX_SHARED}")
        return p

    def describe(self) -> str:
        lay = self.layout
        return (f"tile {self.bm} x {self.bn} outputs ({self.consumers} consumer warpgroups of "
                f"64 rows, wgmma m64n{self.wgmma_n}k{self.wgmma_k}), k {self.bk} per stage, "
                f"{self.stages} stages of {self.stage_bytes // 1024} KiB (x {self.a_bytes // 1024}"
                f" + weights {self.b_bytes // 1024}); full barriers from byte {lay['full']:,},"
                f" empty barriers from byte {lay['empty']:,}; {self.shared_bytes:,} bytes of"
                f" dynamic shared memory asked for (the layout's {lay['end']:,}"
                + (f", the scales' {self.scale_bytes:,}" if self.scale_bytes else "")
                + f" and {ALIGN:,} to align its start); {self.threads} threads")


TILE = HopperTile()


@dataclass(frozen=True)
class ColumnSplit(TileShape):
    """One GEMM in two launches over the output's columns: ``wide`` takes columns
    [0, ``cols``), ``narrow`` the rest, one after the other on one stream. Why: a persistent
    grid runs its tiles in rounds of one tile per block, and a last round only partly full
    costs a whole one; the wide tiles' columns are chosen to fill whole rounds and the
    narrow tiles (half the columns, about half a round's time) finish the rest
    (:mod:`book.kernels.waves` chooses it, with the wave model's prediction)."""

    wide: HopperTile
    narrow: HopperTile
    cols: int

    @property
    def shared_bytes(self):  # the larger of the two launches' blocks
        return max(self.wide.shared_bytes, self.narrow.shared_bytes)

    def problems(self) -> list[str]:
        p = [f"wide: {q}" for q in self.wide.problems()]
        p += [f"narrow: {q}" for q in self.narrow.problems()]
        if self.cols <= 0 or self.cols % self.wide.bn or self.cols % self.narrow.bn:
            p.append(f"cols must be a positive multiple of both tiles' bn ({self.wide.bn}, "
                     f"{self.narrow.bn})")
        return p

    def describe(self) -> str:
        return (f"columns [0, {self.cols}) by {self.wide.bm} x {self.wide.bn} tiles, the rest "
                f"by {self.narrow.bm} x {self.narrow.bn} tiles, in a second launch; "
                f"{self.shared_bytes:,} bytes of dynamic shared memory a block at most")


def schedule(m_tiles: int, n_tiles: int, group: int, first: int = 0) -> np.ndarray:
    """The tiles in the order blocks take them, packed ``(row tile << 16) | column tile``:
    ``group`` column tiles at a time, each row of the group in turn. Blocks b, b + grid, ...
    take entries b, b + grid, ...: one wave works on about grid / group rows of ``group``
    neighbouring columns. Column tiles ``first`` to ``n_tiles - 1`` (a :class:`ColumnSplit`'s
    second launch starts past the first's columns)."""
    if m_tiles >= 1 << 15 or n_tiles >= 1 << 16:
        raise ValueError(f"{m_tiles} x {n_tiles} tiles do not fit the schedule's 16-bit fields")
    if not 0 <= first < n_tiles:
        raise ValueError(f"the first column tile must be in [0, {n_tiles}), got {first}")
    out = []
    for c0 in range(first, n_tiles, group):
        cols = range(c0, min(c0 + group, n_tiles))
        for m in range(m_tiles):
            out.extend((m << 16) | n for n in cols)
    return np.asarray(out, dtype=np.int32)
