"""The tensor-core GEMM's tile (:mod:`book.kernels.mma_gemm`): ``MmaTile``, one kernel
configuration (warps, m16 and n8 tiles per warp, the k depth and the stages of the
shared-memory ring), and ``MmaGeometry``, every size the kernel is built from, derived from
the tile once, named and printable (``print(TILE.geometry)``): what the kernel factory reads
its compile-time constants from. ``TILE`` is the configuration measured on the H100,
``SIM_TILE`` a small one the CPU simulator runs in seconds."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..host.launch import MAX_SHARED, STATIC_SHARED  # (re-exported: mma_gemm's users read them here)
from ..instructions.tensorcore import SIMULATED
from .tile import TileShape

__all__ = ["MmaTile", "MmaGeometry", "TILE", "SIM_TILE", "default_tile", "STATIC_SHARED",
           "MAX_SHARED"]



@dataclass(frozen=True)
class MmaTile(TileShape):
    """One kernel configuration (all compile-time constants; the protocol:
    :mod:`book.kernels.tile`)."""

    warps_m: int = 2  # warps down a block
    warps_n: int = 2  # warps across
    mt: int = 4  # m16 tiles per warp (a warp covers 16*mt rows)
    nt: int = 8  # n8 tiles per warp: half from each half of the B tile
    bk: int = 32  # k depth of one shared-memory stage
    stages: int = 3  # shared-memory ring: stages - 1 in flight while one is used
    group_m: int = 8  # block-rows per group of the block order (L2 reuse)
    min_blocks: int = 0  # launch bounds (0: none)

    @property
    def threads(self):
        return 32 * self.warps_m * self.warps_n

    @property
    def bm(self):
        return 16 * self.mt * self.warps_m

    @property
    def bn(self):  # accumulator columns of a block (dual GEMM: half gate, half up)
        return 8 * self.nt * self.warps_n

    @property
    def shared_bytes(self):
        return 2 * self.stages * (self.bm * self.bk + self.bk * self.bn)

    @property
    def dynamic(self):
        """Beyond 48 KiB shared memory must be dynamic (and the kernel allowed to use it)."""
        return self.shared_bytes > STATIC_SHARED

    @property
    def geometry(self) -> "MmaGeometry":
        """Every size the kernel is built from, named: what ``make_mma_gemm`` reads."""
        return MmaGeometry.of(self)

    def problems(self) -> list[str]:
        p = []
        if self.bk % 16 or self.bk < 16:
            p.append("bk must be a multiple of 16 (one m16n8k16 step)")
        if self.nt % 4:
            p.append("nt must be a multiple of 4 (two halves, pairs of n-tiles per ldmatrix)")
        if self.stages < 2:
            p.append("stages must be at least 2")
        if (self.bm * self.bk // 8) % self.threads:
            p.append("each thread must copy whole 16-byte chunks of the A tile")
        if (self.bk * self.bn // 16) % self.threads:
            p.append("each thread must copy whole 16-byte chunks of each B half")
        ch = self.bk // 8
        if ch & (ch - 1) or (self.bn // 8) & (self.bn // 8 - 1) or self.bn < 64:
            p.append("bk and bn must be powers of two, bn at least 64 (the swizzle)")
        if (self.threads // ch) % 8 or (self.threads // (self.bn // 16)) % 8:
            p.append("a thread's copies must be whole multiples of 8 rows apart (the swizzle "
                     "repeats every 8 rows)")
        if self.shared_bytes > MAX_SHARED:
            p.append(f"{self.shared_bytes} bytes of shared memory: a block gets at most "
                     f"{MAX_SHARED} (sm_90; sm_80: 163 KiB)")
        return p


@dataclass(frozen=True)
class MmaGeometry:
    """The sizes of one :class:`MmaTile`'s kernel, derived once and named (``print`` shows
    them, one a line, with what each is): the kernel factory reads its constants from here.
    Elements are 16-bit; a *chunk* is 16 bytes (8 elements: one ``cp.async`` or one
    ``ldmatrix`` row); A is the stage's tile of x (``bm`` rows by ``bk``), B its tile of the
    weights (``bk`` rows by ``bn`` columns: two halves of ``half`` columns, gate and up)."""

    half: int = field(metadata={"is": "columns of one B half (gate's or up's)"})
    n_half_tiles: int = field(metadata={"is": "n8-tiles of a warp in one half"})
    n_pairs: int = field(metadata={"is": "n8-tile pairs one ldmatrix.x4.trans reads"})
    ksteps: int = field(metadata={"is": "16-deep mma steps per stage"})
    a_chunks: int = field(metadata={"is": "16-byte chunks per A row"})
    b_chunks: int = field(metadata={"is": "16-byte chunks per B row"})
    b_half_chunks: int = field(metadata={"is": "16-byte chunks per B row of one half"})
    a_swizzle: tuple = field(metadata={"is": "(shift, mask) of A's chunk swizzle"})
    b_swizzle: tuple = field(metadata={"is": "(shift, mask) of B's chunk swizzle"})
    a_stage: int = field(metadata={"is": "elements of one A stage"})
    b_stage: int = field(metadata={"is": "elements of one B stage"})
    a_ring: int = field(metadata={"is": "elements of the A ring"})
    b_ring: int = field(metadata={"is": "elements of the B ring"})
    b_base: int = field(metadata={"is": "element where the B ring starts"})
    a_row_bytes: int = field(metadata={"is": "bytes of one A row in shared memory"})
    b_row_bytes: int = field(metadata={"is": "bytes of one B row"})
    a_stage_bytes: int = field(metadata={"is": "bytes of one A stage"})
    b_stage_bytes: int = field(metadata={"is": "bytes of one B stage"})
    a_copies: int = field(metadata={"is": "A chunks each thread copies per stage"})
    b_copies: int = field(metadata={"is": "chunks of each B half each thread copies"})
    a_row_step: int = field(metadata={"is": "rows between one thread's A copies"})
    b_row_step: int = field(metadata={"is": "k rows between one thread's B copies"})
    wait: int = field(metadata={"is": "cp.async groups left in flight (stages - 2)"})

    @classmethod
    def of(cls, t: "MmaTile") -> "MmaGeometry":
        half = t.bn // 2
        a_chunks, b_chunks = t.bk // 8, t.bn // 8
        a_stage, b_stage = t.bm * t.bk, t.bk * t.bn
        return cls(
            half=half, n_half_tiles=t.nt // 2, n_pairs=t.nt // 2, ksteps=t.bk // 16,
            a_chunks=a_chunks, b_chunks=b_chunks, b_half_chunks=b_chunks // 2,
            a_swizzle=_swizzle_mask(a_chunks), b_swizzle=_swizzle_mask(b_chunks),
            a_stage=a_stage, b_stage=b_stage, a_ring=t.stages * a_stage,
            b_ring=t.stages * b_stage, b_base=t.stages * a_stage if t.dynamic else 0,
            a_row_bytes=2 * t.bk, b_row_bytes=2 * t.bn, a_stage_bytes=2 * a_stage,
            b_stage_bytes=2 * b_stage, a_copies=t.bm * a_chunks // t.threads,
            b_copies=t.bk * (b_chunks // 2) // t.threads,
            a_row_step=t.threads // a_chunks, b_row_step=t.threads // (b_chunks // 2),
            wait=t.stages - 2)

    def __str__(self) -> str:
        import dataclasses

        fields = dataclasses.fields(self)
        width = max(len(f.name) for f in fields)
        return "\n".join(f"{f.name:<{width}} = {getattr(self, f.name)!s:<8} {f.metadata['is']}"
                         for f in fields)


#: The configuration measured on the H100: the fastest dual GEMM of the sweep in
#: records/tensorcore/tensorcore_tune_h100.json (4 stages: 64 KiB of dynamic shared memory;
#: 3 stages, static 48 KiB, ran within 1% of it).
TILE = MmaTile(stages=4).validate()
#: A small configuration (2 warps) that the CPU simulator runs in seconds; same source.
SIM_TILE = MmaTile(warps_m=1, warps_n=2, mt=1, nt=4, bk=32, stages=2, group_m=2).validate()


def default_tile():
    return SIM_TILE if SIMULATED else TILE


def _swizzle_mask(chunks):
    """(shift, mask): chunk c of row r is stored at c ^ ((r >> shift) & mask), so the 8 rows
    an ``ldmatrix`` phase reads (16 bytes each) land in 8 different 16-byte bank groups."""
    if chunks >= 8:
        return 0, 7
    return {4: (1, 3), 2: (2, 1), 1: (0, 0)}[chunks]
