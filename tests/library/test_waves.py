"""The wave model of the persistent dual GEMM (book.kernels.gemms.waves): rounds counted with the
idle cluster partners, the dispatcher's tile at every T of the decode sweep, a ColumnSplit's
two schedules covering every output tile once, and the model against the H200's record."""

import json
from pathlib import Path

import pytest

from book.kernels.gemms import waves as V
from book.kernels.gemms import wgmma_gemm as W

H, SMS = 14336, 132
RECORDS = Path(__file__).resolve().parents[2] / "records" / "hopper"


def test_rounds_count_whole_rounds_and_idle_cluster_partners():
    r = V.rounds(512, H, W.TILE, SMS)  # chapter 9's T = 512: 4 x 112 tiles
    assert (r.tiles, r.rounds) == (448, 4) and r.waves == pytest.approx(3.394, abs=1e-3)
    # 3 row tiles in clusters of two: the last pair's second CTA has no rows, still a tile
    assert V.rounds(384, H, W.TILE, SMS).tiles == 4 * 112
    assert V.rounds(384, H, W.HopperTile(cluster=1), SMS).tiles == 3 * 112


@pytest.mark.parametrize("T", [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192,
                               384, 640, 768])
def test_the_dispatchers_tile_is_never_predicted_slower_than_the_default(T):
    tile = V.choose(T, H, SMS)
    assert V.predicted(T, H, tile, SMS) <= V.predicted(T, H, W.TILE, SMS)
    if T >= 1024:  # the prefill shapes keep the chapter's tile
        assert tile == W.TILE
    if T <= 128:  # one row tile: no idle cluster partner
        assert tile == W.HopperTile(cluster=1)


def test_t512_is_split_where_three_wide_rounds_end():
    split = V.choose(512, H, SMS)
    assert isinstance(split, W.ColumnSplit)
    wide = V.rounds(512, split.cols, split.wide, SMS)
    assert wide.tiles == 3 * SMS  # whole rounds, none part full
    assert V.predicted(512, H, split, SMS) == pytest.approx(
        3 + V.ROUND_COST["narrow"] + V.ROUND_COST["second_launch"])
    split.validate()


@pytest.mark.parametrize("T,h", [(512, H), (768, H), (640, H), (200, 1016)])
def test_a_splits_two_schedules_cover_every_output_column_once(T, h):
    split = V.choose(T, h, SMS)
    if not isinstance(split, W.ColumnSplit):
        split = W.ColumnSplit(W.TILE, V.NARROW, 512)
    covered = []
    for tile, (c0, c1) in ((split.wide, (0, split.cols)), (split.narrow, (split.cols, h))):
        m_units = -(-(-(-T // tile.bm)) // tile.cluster)
        for v in W.schedule(m_units, -(-c1 // tile.bn), tile.group, c0 // tile.bn):
            n = int(v) & 0xFFFF
            covered.extend(range(n * tile.bn, min((n + 1) * tile.bn, h)))
    m_units_w = -(-(-(-T // split.wide.bm)) // split.wide.cluster)
    m_units_n = -(-(-(-T // split.narrow.bm)) // split.narrow.cluster)
    assert m_units_w == m_units_n  # both launches cover the same rows
    assert sorted(covered) == sorted(list(range(h)) * m_units_w)


def test_a_schedule_refuses_a_first_column_past_its_end():
    with pytest.raises(ValueError, match="first column tile"):
        W.schedule(2, 5, 8, 5)
    with pytest.raises(ValueError, match="multiple of both"):
        W.ColumnSplit(W.TILE, V.NARROW, 100).validate()


def test_the_model_predicts_the_measured_ratio_of_each_choice_to_the_default():
    """The H200's timing of the dispatcher's choice beside the default tile at every mid-size
    T (records/hopper/hopper_tiles3_h200.json): the model's ratio within 3% of the measured
    one, and the choice never slower than the default by more than the timing's spread."""
    doc = json.loads((RECORDS / "hopper_tiles3_h200.json").read_text())
    blocks = doc["blocks"]
    rows = {(r["T"], r["name"]): r for r in doc["rows"]}
    ts = sorted({T for T, _ in rows})
    assert {256, 384, 512, 640, 768, 1024, 2048} <= set(ts)
    for T in ts:
        base, chosen = rows[T, "HopperTile()"], rows[T, "dispatcher"]
        assert chosen["tile"] == repr(V.choose(T, H, blocks)), T  # the record's is today's
        measured = chosen["median_us"] / base["median_us"]
        model = V.predicted(T, H, V.choose(T, H, blocks), blocks) / V.predicted(
            T, H, W.TILE, blocks)
        assert abs(measured - model) < 0.03, (T, measured, model)
        assert measured <= base["p90_us"] / base["median_us"], T
