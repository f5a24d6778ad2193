"""What every kernel's tile is: one protocol for the compile-time shapes of the course's kernels.

A tile is a frozen dataclass of the sizes a kernel factory compiles in (rows a block, tokens,
stages of a ring, warps...), each a named value one can print and test (CuTe's and Triton's
habit), with the same three doors everywhere:

- ``problems()``: why this tile cannot be built, one sentence a problem naming the field and
  the limit (empty: it can). Each tile class writes only this.
- ``validate()``: the tile itself, or a ``ValueError`` ("invalid <the tile>: <problems>")
  naming every problem at once. Written here, once; factories call it before they compile.
- ``shared_bytes``: the shared memory one block of its kernel uses, static and dynamic
  (what ptxas or the launch is asked for; tests hold it to ptxas's report where they can).
- ``describe()``: one line for a reader: the tile's fields and its shared memory, unless the
  class says more.

The tiles: :class:`book.kernels.gemm.Tile` (chapter 7's CUDA-core GEMM),
:class:`book.kernels.mma_tile.MmaTile` (chapter 8's ``mma.sync`` GEMM),
:class:`book.kernels.wgmma_gemm_tile.HopperTile` and its
:class:`~book.kernels.wgmma_gemm_tile.ColumnSplit` (chapter 9's dual GEMM, bf16 and FP8), the decode GEMVs'
:class:`book.kernels.cuda_core_gemv.GemvTile`, :class:`book.kernels.mma_gemv.MmaGemvTile`,
:class:`book.kernels.staged_gemv.StagedTile`,
:class:`book.kernels.wgmma_gemv_tile.WgmmaGemvTile` and
:class:`book.kernels.fp8_gemv.Fp8GemvTile`. Each GEMV module also names its default tile for
``T`` tokens ``gemv_tile(T, ...)``. tests/library/test_tiles.py
finds every class of ``book.kernels`` with a ``validate`` and holds it to this protocol.
"""

from __future__ import annotations

import dataclasses

__all__ = ["TileShape"]


class TileShape:
    """The base of every tile (a frozen dataclass): ``validate`` and ``describe`` from the
    class's ``problems`` and ``shared_bytes``."""

    __slots__ = ()

    def problems(self) -> list[str]:
        """Why the tile cannot be built (each tile class says)."""
        raise NotImplementedError(f"{type(self).__name__} must say its problems()")

    @property
    def shared_bytes(self) -> int:
        """Shared memory of one block of the tile's kernel (each tile class says)."""
        raise NotImplementedError(f"{type(self).__name__} must say its shared_bytes")

    def validate(self):
        """The tile, or a ValueError naming every problem."""
        p = self.problems()
        if p:
            raise ValueError(f"invalid {self}: " + "; ".join(p))
        return self

    def describe(self) -> str:
        """One line: the tile's fields and the shared memory of a block."""
        fields = ", ".join(f"{f.name} {getattr(self, f.name)}"
                           for f in dataclasses.fields(self))
        return f"{type(self).__name__}: {fields}; {self.shared_bytes:,} bytes of shared memory a block"
