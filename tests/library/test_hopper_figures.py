"""book.hopper_figures: chapter 9's pictures follow the models of book.kernels.instructions.hopper (the
descriptor's bytes, the swizzle's bank groups, the mbarrier ring) and its rule table reads
the record."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest

import book  # noqa: F401
from book import data
from book import hopper_figures as hf
from book.bench.hopper import RULE_D, predicted_share
from book.kernels.instructions import hopper as H
from book.kernels.gemms import wgmma_gemm as W

# ------------------------------------------------------------------ the descriptor's bytes


@pytest.mark.parametrize("layout", sorted(hf.LAYOUTS))
def test_every_16_byte_chunk_holds_8_k_of_one_row_exactly_once(layout):
    own = hf.chunk_owners(layout)
    assert own["row"].shape == (8, 8)
    pieces = {(int(r), int(p)) for r, p in zip(own["row"].ravel(), own["piece"].ravel())}
    assert pieces == {(r, p) for r in range(8) for p in range(8)}
    assert np.array_equal(own["step"], own["piece"] // 2)  # a k16 step is two pieces


def test_the_swizzled_layout_is_where_tma_puts_each_element():
    """The figure's 128B layout (wgmma's descriptors, through operand_addresses) finds every
    element where the TMA model wrote it: the two models and the figure agree."""
    tile = (np.arange(8)[:, None] * 64 + np.arange(64)[None, :]).astype(np.uint16)
    img = H.tma_box(tile, 0, 0, (64, 8), "128B")
    addr = hf.operand_bytes("128B")
    got = img[addr].astype(np.uint16) | (img[addr + 1].astype(np.uint16) << 8)
    assert np.array_equal(got, tile)
    # and it is the swizzle of the plain layout, byte for byte
    assert np.array_equal(addr, H.swizzle(hf.operand_bytes("rows"), "128B"))


def test_the_unswizzled_layout_is_core_matrices_of_128_contiguous_bytes():
    addr = hf.operand_bytes("none")
    for piece in range(8):  # k 8p..8p+7 of the 8 rows: one core matrix
        core = addr[:, 8 * piece:8 * piece + 8]
        assert sorted(core.ravel().tolist()) == list(range(128 * piece, 128 * piece + 128, 2))
    d = H.decode_descriptor(hf.step_descriptor("none", 1))
    assert (d["addr"], d["lbo"], d["sbo"], d["mode"]) == (256, 128, 1024, "none")
    assert hf.step_descriptor("rows", 0) is None
    with pytest.raises(ValueError, match="layout must be one of"):
        hf.step_descriptor("64B", 0)


def test_the_kernels_descriptor_is_the_figures():
    d = H.decode_descriptor(hf.step_descriptor("128B", 3))
    assert d == {"addr": 96, "lbo": 16, "sbo": 1024, "base_offset": 0, "mode": "128B"}


def test_bank_group_passes_swizzle_none_and_plain_rows():
    assert hf.conflict_ways("128B") == [1] * 8
    assert hf.conflict_ways("none") == [1] * 8
    assert hf.conflict_ways("rows") == [8] * 8  # every row's chunk in one bank group


def test_the_figure_says_what_the_counts_say():
    fig, axes = plt.subplots(1, 3)
    hf.descriptor_figure(axes)
    titles = [ax.get_title() for ax in axes]
    assert "conflict-free" in titles[0] and "conflict-free" in titles[1]
    assert "8-way" in titles[2]
    assert all(len(ax.patches) == 64 + 8 for ax in axes)  # 64 chunks, 8 outlined
    plt.close(fig)


# ------------------------------------------------------------------ the ring


def _by(events, lane, what):
    return [e for e in events if e.lane == lane and e.what == what]


@pytest.mark.parametrize("copy", [1.0, 2.0, 4.0, 9.0])
@pytest.mark.parametrize("tile", [W.TILE, W.HopperTile(stages=2), W.HopperTile(bm=64)],
                         ids=["default", "2 stages", "1 consumer"])
def test_the_ring_never_reads_a_stage_before_it_lands_nor_overwrites_one_in_use(copy, tile):
    kb, tiles = 5, 3
    ev = hf.ring_model(tile, k_blocks=kb, tiles=tiles, copy=copy, mma=3.0, epilogue=4.0)
    landed = {}
    for e in _by(ev, "TMA", "x") + _by(ev, "TMA", "wg") + _by(ev, "TMA", "wu"):
        landed[e.tile, e.kb] = max(landed.get((e.tile, e.kb), 0), e.end)
    issued = {(e.tile, e.kb): e.start for e in _by(ev, "producer", "issue")}
    assert sorted(issued) == [(t, k) for t in range(tiles) for k in range(kb)]
    order = sorted(issued, key=lambda j: (issued[j], j))
    assert order == sorted(issued)  # the producer issues in order
    for c in range(tile.consumers):
        mmas = _by(ev, f"consumer {c}", "wgmma")
        assert [(e.tile, e.kb) for e in mmas] == sorted(issued)  # each k-block once, in order
        done = {}
        for e in mmas:
            assert e.start >= landed[e.tile, e.kb], "read before its bytes landed"
            assert e.stage == (e.tile * kb + e.kb) % tile.stages
            done[e.tile, e.kb] = e.end
        for (t, k), at in issued.items():  # stage reuse: the k-block `stages` earlier is read
            j = t * kb + k - tile.stages
            if j >= 0:
                assert at >= done[divmod(j, kb)], "overwrote a stage still being read"
        epis = _by(ev, f"consumer {c}", "epilogue")
        assert len(epis) == tiles
        for e in epis:  # after the tile's last k-block, before the next tile's first
            assert e.start == done[e.tile, kb - 1]
            if e.tile + 1 < tiles:
                nxt = [m for m in mmas if (m.tile, m.kb) == (e.tile + 1, 0)][0]
                assert nxt.start >= e.end


def test_copy_bound_and_compute_bound_rings_differ_as_they_should():
    fast = hf.ring_summary(hf.ring_model(copy=1.0, mma=3.0))
    slow = hf.ring_summary(hf.ring_model(copy=6.0, mma=3.0))
    assert fast["ready"] == W.TILE.stages  # the ring runs full ahead of the consumers
    assert slow["ready"] <= 2 and slow["waiting"] > fast["waiting"]
    assert slow["consumer_busy"]["consumer 0"] < fast["consumer_busy"]["consumer 0"]


def test_the_producers_first_wait_on_parity_0_is_a_deadlock_named_as_such():
    with pytest.raises(RuntimeError, match=r"stuck at t = 0: the producer waits on empty\[0\] "
                                           r"for parity 0"):
        hf.ring_model(first_parity=0)
    with pytest.raises(ValueError):
        hf.ring_model(k_blocks=0)


def test_the_timeline_draws_every_k_block_of_every_consumer():
    ev = hf.ring_model(k_blocks=3, tiles=2)
    fig, ax = plt.subplots()
    hf.ring_figure(ev, ax, title="a model")
    labels = [t.get_text() for t in ax.texts]
    assert labels.count("0.0") == W.TILE.consumers and labels.count("epilogue") == 4
    assert ax.get_title(loc="left") == "a model"
    plt.close(fig)


# ------------------------------------------------------------------ the comparison table


def test_measurement_rows_of_a_record_made_before_the_paired_default():
    rec = data.load("h100")
    shape = (2048, 4096, 14336)
    rows = hf.measurement_rows(rec, shape)
    names = [v for v, _, _ in rows]
    assert names[0] == "wgmma_dual_gemm" and names[-3:] == [
        "cublas_linear_gemm", "cublas_linear_mlp_up_compiled", "cublas_linear_mlp_up_eager"]
    if "wgmma_dual_gemm_single" not in rec.variants():
        assert not hf.clustered(rec, shape) and "(no clusters)" in rows[0][1]
    assert len([v for v in names if v in hf.MULTICAST_ROWS]) == 1
    for v, _, r in rows:
        assert r is rec.find(v, "bfloat16", shape)


def test_measurement_rows_of_a_record_of_the_paired_default():
    """A run of today's bench: the dual GEMM (clusters of two) beside its unclustered and
    multicast variants of the same run; an unclustered row of another run does not count."""
    import copy

    rec = copy.deepcopy(data.load("h100"))
    shape = [2048, 4096, 14336]
    dual = rec.find("wgmma_dual_gemm", "bfloat16", shape)
    if "wgmma_dual_gemm_single" not in rec.variants():  # an older record: make today's rows
        old = rec.find("wgmma_dual_gemm_cluster2", "bfloat16", shape)
        old["variant"] = "wgmma_dual_gemm_multicast"
        rec.rows.append(dict(dual, variant="wgmma_dual_gemm_single"))
    single = rec.find("wgmma_dual_gemm_single", "bfloat16", shape)
    assert single["provenance"] == dual["provenance"]
    assert hf.clustered(rec, shape)
    rows = hf.measurement_rows(rec, shape)
    labels = {v: label for v, label, _ in rows}
    assert "(clusters of two)" in labels["wgmma_dual_gemm"]
    assert labels["wgmma_dual_gemm_single"] == "variant: no clusters"
    assert labels["wgmma_dual_gemm_multicast"] == "variant: clusters of two, multicast"
    # an unclustered row of another run does not say how today's dual GEMM ran
    single["provenance"] = dict(dual["provenance"], date="2020-01-01T00:00:00+00:00")
    assert not hf.clustered(rec, shape)


def test_the_ring_model_refuses_multicast():
    with pytest.raises(ValueError, match="one CTA's ring"):
        hf.ring_model(W.HopperTile(cluster=2, multicast=True))


# ------------------------------------------------------------------ the rule


def test_rule_rows_are_the_records_rows_and_the_rules_prediction():
    rec = data.load("h100")
    rows = hf.rule_rows(rec)
    assert [r["d"] for r in rows] == list(RULE_D)
    bw = rec.find("copy_bandwidth_bf16", "bfloat16")["bandwidth"]
    p = rec.find("cublas_linear_gemm", "bfloat16", (2048, 4096, 14336))["flops_per_s"]
    for r in rows:
        assert r["predicted"] == pytest.approx(predicted_share(p, bw, r["d"]))
        passed = rec.find("rule_separate_pass_compiled", "bfloat16", r["shape"])
        assert r["measured"] == pytest.approx(passed["share"])  # the bench's own share
        assert r["speedup"] == pytest.approx(r["unfused_s"] / r["fused_s"])
