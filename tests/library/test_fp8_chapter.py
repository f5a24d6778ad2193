"""What the "Eight bits" chapter (chapters/09b_eight_bits.ipynb) reads from the library, on the
CPU: the table encoder (book.kernels.instructions.fp8.encode_fast) against the model, block scales and
static scales in book.quantize, the record built from records/fp8 (book.fp8_data), the
chapter's pictures and tables (book.fp8_figures) and its checked exercises
(book.exercises.fp8_chapter)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import book  # noqa: F401
from book import exercises as X
from book import fp8_data as D
from book import fp8_figures as ff
from book import quantize as Q
from book.exercises import fp8_chapter as C
from book.kernels.instructions import fp8 as F
from repo import ROOT

# ------------------------------------------------------------------ the table encoder


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_the_table_encodes_every_float32_class_as_the_model_does(fmt):
    """Each entry stands for the float32 values sharing their upper 16 bits and whether any
    lower bit is set: three other members of every class encode as the model says."""
    rng = np.random.default_rng(1)
    top = np.arange(1 << 16, dtype=np.uint32) << 16
    with np.errstate(invalid="ignore"):
        for _ in range(3):
            low = rng.integers(1, 1 << 16, size=top.size, dtype=np.uint32)
            x = (top | low).view(np.float32)
            assert np.array_equal(F.encode_fast(x, fmt), F.encode(x, fmt))
        x = top.view(np.float32)  # the lower half zero: the class's own member
        assert np.array_equal(F.encode_fast(x, fmt), F.encode(x, fmt))


def test_the_table_keeps_the_models_ties_and_saturation():
    v = F.values("e4m3")[:0x7F]
    mids = ((v[:-1] + v[1:]) / 2).astype(np.float32)
    x = np.concatenate([mids, -mids, [464, 470, 1e30, -np.inf, np.nan, 0.0, -0.0]]).astype(
        np.float32)
    assert np.array_equal(F.encode_fast(x), F.encode(x))
    assert F.encode_fast(np.float32(470)) == 0x7E and F.encode_fast(np.float32(-0.0)) == 0x80


# ------------------------------------------------------------------ quantization


def test_block_scales_cover_ragged_edges_and_keep_each_blocks_largest_exact():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((300, 200)).astype(np.float32)
    q = Q.per_block(w, (128, 128))
    assert q.scale.shape == (3, 2) and q.block == (128, 128) and q.saturated == 0
    each = q.scale_of_each()
    assert each.shape == w.shape
    for i in range(3):
        for j in range(2):
            blk = np.abs(w[128 * i:128 * (i + 1), 128 * j:128 * (j + 1)])
            assert np.isclose(q.scale[i, j], blk.max() / 448, rtol=1e-6)
    big = np.abs(F.decode(q.codes))
    assert big[:128, :128].max() == 448 and big[256:, 128:].max() == 448
    # half a step of each value's own scale, among the normals and the subnormals
    bound = 2.0 ** -4 * np.abs(w) + each * 2.0 ** -10
    assert (np.abs(q.values() - w) <= bound).all()
    act = Q.per_block(w, Q.ACT_BLOCK)
    assert act.scale.shape == (300, 2)


def test_quantizing_in_chunks_gives_the_codes_of_one_pass(monkeypatch):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((260, 384)).astype(np.float32)
    whole = {s: Q.quantize(w, Q.scales_for(w, s, block=(128, 128)), block=(128, 128)
                           if s == "block" else None) for s in Q.SCHEMES}
    monkeypatch.setattr(Q, "_CHUNK", 1000)  # a few rows at a time (whole blocks for "block")
    for s, q in whole.items():
        again = Q.quantize(w, q.scale, block=q.block)
        assert np.array_equal(again.codes, q.codes), s


def test_a_static_activation_scale_saturates_and_is_counted():
    x, wg, wu = Q.random_layer(8, 256, 64, seed=2)
    calibrated = float(np.abs(x[:4]).max()) / 448 / 4  # too small for these tokens
    r = Q.mlp_up_error(x, wg, wu, act_scale=calibrated)
    assert r["act"] == "static" and r["saturated"]["x"] > 0
    fine = Q.mlp_up_error(x, wg, wu)
    assert fine["saturated"]["x"] == 0 and fine["rel_error"] < r["rel_error"]
    ref = Q.reference(x, wg, wu)
    assert Q.mlp_up_error(x, wg, wu, ref=ref) == fine
    assert Q.bf16_error(x, wg, wu, ref=ref) == Q.bf16_error(x, wg, wu)


def test_the_random_layer_puts_its_outliers_where_asked():
    x, wg, wu = Q.random_layer(16, 512, 128, seed=0, channel_outliers=1e3,
                               feature_outliers=50.0, n_outliers=3)
    rows = np.abs(wg).max(axis=1)
    assert (rows > 1).sum() == 3 and (np.abs(wu).max(axis=1) > 1).sum() == 3
    cols = np.abs(x).max(axis=0)
    assert (cols > 40).sum() == 3
    plain = Q.random_layer(16, 512, 128, seed=0)
    assert abs(np.std(plain[1]) * np.sqrt(512) - 1) < 0.05


def test_a_weight_channel_ten_thousand_times_larger_costs_per_tensor_scales():
    """The chapter's sweep in one point: per tensor loses the ordinary channels to the
    subnormals, per channel never sees the outliers, 128 x 128 blocks share their fate."""
    rows = ff.outlier_sweep(8, 512, 256, factors=(1, 1e5), kinds=("channel",))
    plain, big = rows
    per_row = "per token, per channel"
    per_tensor, per_block = ff.SCHEMES[0][0], ff.SCHEMES[2][0]
    assert abs(big[per_row] - plain[per_row]) < 0.01
    assert big[per_tensor] > 5 * plain[per_tensor] and big[per_block] > 3 * plain[per_block]
    assert all(r["bf16"] < 0.02 for r in rows)


def test_a_static_output_scale_saturates_below_the_calibrations_largest_output():
    x, wg, wu = Q.random_layer(8, 512, 128, seed=2)
    cal = (Q.random_layer(8, 512, 128, seed=3)[0], wg, wu)
    rows = ff.out_scale_rows(x, wg, wu, cal, factors=(1 / 8, 8, 64))
    small, roomy, roomier = rows
    assert small["saturated"] > 0 and roomy["saturated"] == roomier["saturated"] == 0
    assert small["error"] > 2 * roomy["error"]
    assert abs(roomy["error"] - roomier["error"]) < 0.005  # headroom costs ~nothing


# ------------------------------------------------------------------ the record


def test_the_chapters_record_is_built_from_the_fp8_records_unchanged():
    path = D.path_for("h200")
    doc = json.loads(path.read_text())
    again = D.build([ROOT / p for p in doc["records"]])
    assert json.loads(json.dumps(again, default=float)) == doc


def test_each_row_keeps_its_runs_provenance_and_the_records_numbers():
    doc = json.loads(D.path_for("h200").read_text())
    raw = json.loads((ROOT / doc["records"][0]).read_text())
    rec = D.load("h200")
    r = rec.find("fp8_fused_e4m3_out", "e4m3", (2048, 4096, 14336))
    src = next(x for x in raw["rows"] if x["name"] == "fp8_fused_e4m3_out"
               and x["shape"][0] == 2048)
    assert r["seconds"] == src["median_us"] * 1e-6
    assert r["torch_events_s"] == src["torch_events_us"] * 1e-6
    assert r["provenance"]["commit"] == raw["provenance"]["commit"]
    assert rec.find("wgmma_dual_gemm_bf16", "bfloat16", (8192, 4096, 14336))
    for row in rec.rows:
        assert {"variant", "dtype", "shape", "seconds", "p10_s", "p90_s", "flops_per_s",
                "method", "provenance"} <= set(row)
        assert row["p10_s"] <= row["seconds"] <= row["p90_s"]
    assert D.available()[0] in ("h100", "h200")


def test_the_record_says_each_of_issue_42s_lines_as_its_rows_measure_it():
    """Every line of book.fp8_data.TARGETS at each of its T, from the rows beside it: their
    time ratio (or the GEMV's share of the HBM peak of the run's provenance), met or not."""
    doc = json.loads(D.path_for("h200").read_text())
    by = {(r["variant"], r["shape"][0]): r for r in doc["rows"]}
    got = {(t["ours"], t["theirs"], t["T"]): t for t in doc["targets"]}
    assert len(got) == sum(len(ts) for *_, ts, _ in D.TARGETS)
    for (ours, theirs, T), t in got.items():
        a = by[ours, T]
        want = (a["bandwidth"] / doc["provenance"]["peak_bandwidth"] if theirs == "hbm_peak"
                else by[theirs, T]["seconds"] / a["seconds"])
        assert t["value"] == pytest.approx(want, rel=1e-12)
        assert t["met"] == (t["value"] >= t["goal"])


def test_building_refuses_records_of_two_gpus(tmp_path):
    raw = json.loads((ROOT / "records/fp8/fp8_bench_h200.json").read_text())
    other = json.loads(json.dumps(raw))
    other["provenance"]["gpu"] = "NVIDIA H100 80GB HBM3"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(raw))
    b.write_text(json.dumps(other))
    with pytest.raises(ValueError, match="several GPUs"):
        D.build([a, b])


def test_a_later_records_row_replaces_the_earlier_one(tmp_path):
    raw = json.loads((ROOT / "records/fp8/fp8_bench_h200.json").read_text())
    later = json.loads(json.dumps(raw))
    later["provenance"]["commit"] = "abc1234"
    later["rows"] = [dict(raw["rows"][0], median_us=1.0, p10_us=0.9, p90_us=1.1)]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(raw))
    b.write_text(json.dumps(later))
    doc = D.build([a, b])
    assert len(doc["rows"]) == len(raw["rows"])
    [r] = [r for r in doc["rows"] if r["variant"] == raw["rows"][0]["name"]
           and r["shape"] == raw["rows"][0]["shape"]]
    assert r["seconds"] == 1e-6 and r["provenance"]["commit"] == "abc1234"
    assert doc["provenance"]["commit"] == raw["provenance"]["commit"]


# ------------------------------------------------------------------ pictures and tables


def test_a_codes_fields_and_value():
    f = ff.fields(0x7E)
    assert (f["sign"], f["exponent"], f["mantissa"], f["value"]) == (0, 15, 6, 448.0)
    assert ff.fields(0x01)["subnormal"] and ff.fields(0x01)["value"] == 2.0 ** -9
    assert "infinity" in ff.fields(0x7C, "e5m2")["text"] and ff.fields(0x7F)["text"] == "NaN"
    e4, e5 = ff.ladder("e4m3"), ff.ladder("e5m2")
    assert (e4["per_octave"], e5["per_octave"]) == (8, 4)
    assert e4["max"] == 448 and e5["max"] == 57344 and e4["step_at_1"] == 0.125


def test_one_byte_per_value_halves_every_roof_and_moves_no_ridge():
    from book.specs import get

    spec = get("H200")
    peak8 = ff.FP8_PEAK["H200"][0]
    assert peak8 == 2 * spec.peak("bf16")
    for T in (1, 16, 2048, 8192):
        bf = ff.predicted_seconds(T, 4096, 14336, 2, spec.memory_bandwidth, spec.peak("bf16"))
        e4 = ff.predicted_seconds(T, 4096, 14336, 1, spec.memory_bandwidth, peak8)
        assert e4 == pytest.approx(bf / 2)
    c = ff.call_bytes(1, 4096, 14336, 1)
    assert c["weights"] == 2 * 4096 * 14336 and c["flops"] == 4 * 4096 * 14336


def test_the_tables_rows_come_in_order_and_decode_rows_only_when_recorded():
    rec = D.load("h200")
    rows = ff.measurement_rows(rec, 2048)
    assert [v for v, _, _ in rows][:3] == ["fp8_fused_e4m3_out", "fp8_fused_bf16_out",
                                           "scaled_mm_rowwise_mlp_up_e4m3_compiled"]
    assert rows[-1][0] == "wgmma_dual_gemm_bf16"
    have = {r["variant"] for r in rec.rows if r["shape"][0] <= 16}
    got = ff.decode_rows(rec)
    assert bool(got) == bool(have & {v for v, _, _ in ff.DECODE_ROWS})


@pytest.mark.parametrize("draw", ["bits", "values", "roofline", "scales", "sweep"])
def test_the_chapters_figures_keep_their_text_readable(draw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from book import figures

    if draw == "bits":
        fig = ff.bits_figure().figure
    elif draw == "values":
        fig = ff.values_figure().figure
    elif draw == "roofline":
        fig = ff.roofline_figure(D.load("h200"))[0].figure
    elif draw == "scales":
        fig = ff.scales_figure()[0][0].figure
    else:
        rows = ff.outlier_sweep(4, 256, 64, factors=(1, 1e5))
        fig = ff.sweep_figure(rows)[0].figure
    fig.tight_layout()
    px, text = figures.smallest_text_px(fig)
    plt.close(fig)
    assert px >= figures.MIN_TEXT_PX, (draw, px, text)


# ------------------------------------------------------------------ the exercises


def test_the_exercises_take_their_answers_from_the_library():
    from book.specs import get

    ex = X.fp8_weight_read(d=5120, h=13824, gpu="H200")
    assert ex.truth == pytest.approx(2 * 5120 * 13824 / get("H200").memory_bandwidth * 1e6)
    assert ex.check(ex.truth) and not ex.check(2 * ex.truth)
    assert "bf16" in ex.check(2 * ex.truth).message
    ex2 = X.e4m3_value(0xD5)
    assert ex2.truth == -13.0 and ex2.check(-13) and not ex2.check(13)
    assert "bias" in ex2.check(-6.5).message
    with pytest.raises(ValueError):
        X.e4m3_value(0x01)  # a subnormal: the hints would mislead
    ex4 = X.unfused_pass_bytes(T=2048, h=14336, gpu="H200")
    assert ex4.truth == pytest.approx(8 * 2048 * 14336 / get("H200").memory_bandwidth * 1e6)
    assert not ex4.check(ex4.truth / 2) and ex4.check(ex4.truth)


def test_which_scales_factor_out_of_the_k_sum_is_computed():
    assert C.factors_out("tensor", "tensor") and C.factors_out("row", "row")
    assert C.factors_out("row", "tensor") and not C.factors_out("block", "block")
    assert not C.factors_out("row", "block") and not C.factors_out("block", "row")
    ex = X.epilogue_scales()
    assert ex.answer == "b" and ex.check("b") and not ex.check("c")
    assert "inside the main loop" in ex.check("c").message
