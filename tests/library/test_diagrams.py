"""book.diagrams: the GEMM pictures of chapter 7 follow the kernel's tile arithmetic."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest

import book  # noqa: F401
from book import diagrams
from book.kernels.gemms import gemm

TILES = [gemm.TILE, gemm.SIM_TILE, gemm.Tile(bm=64)]


@pytest.mark.parametrize("tile", TILES, ids=str)
def test_every_accumulator_belongs_to_exactly_one_thread(tile):
    owner = {}
    for tid in range(tile.threads):
        cells = diagrams.thread_cells(tile, tid)
        assert len(cells) == tile.tm * tile.tn
        for cell in cells:
            assert cell not in owner, (cell, owner.get(cell), tid)
            owner[cell] = tid
    assert set(owner) == {(r, c) for r in range(tile.bm) for c in range(tile.bn)}


@pytest.mark.parametrize("tile", TILES, ids=str)
def test_gate_and_up_of_one_output_sit_in_one_thread(tile):
    # the dual-GEMM epilogue pairs acc[i, j] (gate) with acc[i, tn/2 + j] (up): the up
    # column is the gate column plus half the tile, in the same row
    tn2, hn = tile.tn // 2, tile.bn // 2
    for tid in range(tile.threads):
        cells = diagrams.thread_cells(tile, tid)
        where = {ij: rc for rc, ij in cells.items()}
        for i in range(tile.tm):
            for j in range(tn2):
                (rg, cg), (ru, cu) = where[(i, j)], where[(i, tn2 + j)]
                assert (ru, cu) == (rg, cg + hn)
                assert cg < hn <= cu


@pytest.mark.parametrize("prefetch", ["peeled", "clamped", "branchy"])
@pytest.mark.parametrize("nk", [1, 2, 5])
def test_double_buffer_schedule_multiplies_what_was_stored(nk, prefetch):
    steps = diagrams.schedule(nk, prefetch)
    assert steps[0][0] == -1 and steps[0][2] is None  # the prologue multiplies nothing
    holds = {}
    multiplied = []
    for kt, load, mul, store in steps:
        if mul is not None:
            assert mul != store, "a step may not overwrite the buffer it multiplies"
            assert holds[mul] == kt, f"step {kt} multiplies slab {holds[mul]}"
            multiplied.append(kt)
        if store is not None:
            holds[store] = load  # after the barrier the other buffer holds the loaded slab
    assert multiplied == list(range(nk))
    last = steps[-1]
    assert (last[1] is None) == (prefetch != "clamped")  # only "clamped" reloads at the end
    with pytest.raises(ValueError, match="nk must be at least 1"):
        diagrams.schedule(0)
    with pytest.raises(ValueError, match="prefetch must be"):
        diagrams.schedule(3, "sometimes")


def test_schedule_matches_the_kernel_default():
    assert gemm.TILE.prefetch in ("peeled", "clamped", "branchy")
    assert diagrams.schedule(4, gemm.TILE.prefetch)


def texts(ax):
    return " ".join(t.get_text() for t in ax.texts) + " ".join(
        t.get_text() for t in ax.get_yticklabels())


@pytest.mark.parametrize("tile", [gemm.TILE, gemm.SIM_TILE], ids=str)
def test_drawings_label_the_tile_they_draw(tile):
    try:
        ax = diagrams.block_tile(tile)
        assert f"{tile.bm} x {tile.bk}" in texts(ax) and len(ax.patches) >= 8
        ax = diagrams.k_slab(tile)
        nbytes = 4 * tile.bk * (tile.bm + tile.pad + tile.bn)
        assert f"{nbytes:,} B" in texts(ax) and "Wg" in texts(ax)
        ax = diagrams.register_block(tile)
        assert f"{tile.tm} x {tile.tn}" in texts(ax)
        assert len(ax.patches) >= tile.tm * tile.tn  # one square per accumulator
        ax = diagrams.double_buffer(tile, nk=3)
        expect = 2 + 3 * 3 - (0 if tile.prefetch == "clamped" else 2)
        assert "shared memory" in texts(ax) and len(ax.patches) == expect
    finally:
        plt.close("all")
