"""book.decode_sweep: the MLP-up T sweep's curves and figure from a record's rows (synthetic
rows here: the record's own come from an H100 run of records/bench/decode_session.sh)."""

import pytest

import book  # noqa: F401
from book import decode_sweep as ds
from book.data import Results


def row(variant, T, seconds, path="cuda_cores"):
    wb, fl = 2 * 2 * 4096 * 14336, 4 * T * 4096 * 14336
    return {"kind": "decode_sweep", "variant": variant, "dtype": "bfloat16",
            "shape": [T, 4096, 14336], "seconds": seconds, "bandwidth": wb / seconds,
            "flops_per_s": fl / seconds, "path": path}


def record():
    rows = []
    for T, p in ((1, "cuda_cores"), (8, "cuda_cores"), (64, "tensor_cores"), (4096, "large_t")):
        rows.append(row("sweep_ours", T, 80e-6 * max(1, T / 256), p))
        rows.append(row("sweep_cublas_compiled", T, 88e-6 * max(1, T / 300)))
    rows.append(row("sweep_cublas", 64, 85e-6))
    rows.append(dict(row("sweep_ours", 2, 1.0), kind="decode"))  # another kind: not a sweep row
    return Results({"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-26"}, rows)


def test_curves_are_the_sweep_rows_in_t_order_and_paths_are_runs():
    cs = ds.curves(record())
    assert [r["shape"][0] for r in cs["sweep_ours"]] == [1, 8, 64, 4096]
    assert set(cs) == {"sweep_ours", "sweep_cublas_compiled", "sweep_cublas"}
    assert ds.paths(cs["sweep_ours"]) == [("cuda_cores", 1, 8), ("tensor_cores", 64, 64),
                                          ("large_t", 4096, 4096)]


def test_series_gives_any_variant_by_t_and_nothing_for_a_missing_one():
    rec = record()
    rec.rows.append(row("sweep_gemv_hopper", 8, 84e-6, "hopper_gemv"))
    got = ds.series(rec, "sweep_gemv_hopper")
    assert list(got) == [8] and got[8]["seconds"] == 84e-6
    assert ds.series(rec, "sweep_wgmma_dual") == {}
    assert 2 not in ds.series(rec, "sweep_ours")  # a decode row of another kind is no sweep row


def test_a_record_without_the_sweep_says_how_to_measure_it():
    with pytest.raises(KeyError, match="decode_session.sh OUT sweep"):
        ds.curves(Results({}, [row("cublas", 1, 1e-4)]))


def test_plot_draws_both_measures_with_the_peak():
    import matplotlib

    matplotlib.use("Agg")
    fig = ds.plot(record())
    bw, fl = fig.axes
    assert len(bw.lines) == 3 + 1 and len(fl.lines) == 3  # three series, the HBM peak dashed
    ours = bw.lines[0]
    assert list(ours.get_xdata()) == [1, 8, 64, 4096]
    assert ours.get_ydata()[0] == pytest.approx(2 * 2 * 4096 * 14336 / 80e-6 / 1e9)
    assert fl.get_xscale() == "log" and "GB/s of weights" in bw.get_ylabel()


def test_the_figure_names_the_sweep_s_own_run():
    """Reader QA: the figure's title gave the record's first run's date (2026-11-22) above a
    sweep merged in from a later run: it names the sweep rows' own run."""
    import matplotlib

    matplotlib.use("Agg")
    rec = record()
    for r in rec.rows:
        r["provenance"] = {"gpu": "NVIDIA H100 80GB HBM3", "date": "2026-11-26T20:30:00+00:00"}
    rec.provenance["date"] = "2026-11-22"
    title = ds.plot(rec)._suptitle.get_text()
    assert "2026-11-26" in title and "2026-11-22" not in title, title
