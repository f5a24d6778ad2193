"""The recorded GPU results: complete, self-consistent, correct, and readable by chapters.

book/data/h100.json is written by ``python -m book.bench`` on an H100 (device tool). These
tests do not re-measure anything; they check that the file says where it came from, that
every number in it agrees with the others, that every correctness check recorded on the
GPU passed, and that the claims table can be built from it.
"""

import math
import re

import pytest

import book
from book import data
from book import dtypes
from book.bench import suite, targets

PROVENANCE_KEYS = {"gpu", "driver", "cuda", "numba", "numba_cuda", "torch", "numpy", "python",
                   "date", "command"}
ROW_KEYS = {"variant", "dtype", "shape", "seconds", "bytes", "bandwidth", "flops", "flops_per_s",
            "method"}


@pytest.fixture(scope="module")
def h100():
    return data.load("h100")


def test_provenance(h100):
    p = h100.provenance
    assert PROVENANCE_KEYS <= set(p), PROVENANCE_KEYS - set(p)
    assert "H100" in p["gpu"]
    assert p["command"].startswith("python -m book.bench")
    assert all(p[k] for k in PROVENANCE_KEYS)


def test_rows_are_complete_and_consistent(h100):
    assert h100.rows
    for r in h100.rows:
        assert ROW_KEYS <= set(r), (r.get("variant"), ROW_KEYS - set(r))
        assert r["seconds"] > 0 and math.isfinite(r["seconds"])
        if r["bytes"]:
            assert r["bandwidth"] == pytest.approx(r["bytes"] / r["seconds"], rel=1e-9)
        if r["flops"]:
            assert r["flops_per_s"] == pytest.approx(r["flops"] / r["seconds"], rel=1e-9)


def test_every_variant_dtype_and_shape_was_measured(h100):
    from book.kernels import VARIANTS

    for name, v in VARIANTS.items():
        for dtype in v.dtypes:
            for shape in suite.SHAPES:
                h100.find(name, dtype, shape)  # raises KeyError naming what exists
    for dtype in suite.DTYPES:
        for shape in suite.SHAPES:
            for ref in ("torch_eager", "torch_add", "copy"):
                h100.find(ref, dtype, shape)
    for T, d, h in targets.GEMM_SHAPES:
        for ref in ("torch_matmul_float32", "numba_dual_gemm", "numba_unfused"):
            h100.find(ref, "float32", (T, d, h))
        h100.find("torch_matmul_tf32", "tf32", (T, d, h))


def test_minimum_bytes_are_three_transfers_per_element(h100):
    for r in h100.select(kind="kernel"):
        if len(r["shape"]) == 2 and not r["variant"].endswith("_graph"):
            n = r["shape"][0] * r["shape"][1]
            assert r["bytes"] == 3 * n * dtypes.ITEMSIZE[r["dtype"]], r["variant"]


def test_no_bandwidth_above_what_a_copy_reaches(h100):
    # a kernel that reads and writes HBM cannot beat the device copy by much; more would
    # mean the inputs sat in L2 (or a timing error)
    for dtype in suite.DTYPES:
        copy = h100.find("copy", dtype, targets.LARGE)["bandwidth"]
        for r in h100.select(dtype=dtype, shape=targets.LARGE, kind="kernel"):
            assert r["bandwidth"] < 1.05 * copy, (r["variant"], r["bandwidth"], copy)


def test_all_gpu_correctness_checks_passed(h100):
    assert len(h100.checks) > 100
    failed = [c for c in h100.checks if not c["ok"]]
    assert not failed, failed[:3]
    shapes = {tuple(c["shape"]) for c in h100.checks if c["shape"]}
    assert {(1, 11008), (127, 129), (129, 127), (1, 18944), (8192, 14336)} <= shapes
    assert any(c["variant"].endswith("_misaligned") for c in h100.checks)


def test_targets_are_recorded_as_measured_ratios(h100):
    names = " ".join(t["target"] for t in h100.targets)
    for key in ("torch.add", "peak", "torch eager", "2048, 8192", "naive / fused", "decode",
                "dual GEMM"):
        assert key in names, key
    for t in h100.targets:
        assert isinstance(t["met"], bool) and math.isfinite(t["value"])


def test_find_explains_a_missing_row(h100):
    with pytest.raises(KeyError, match="variants recorded"):
        h100.find("no_such_kernel", "float32", (1, 1))
    with pytest.raises(FileNotFoundError, match="available"):
        data.load("no-such-gpu")


def test_claims_table_is_built_from_the_data(h100):
    from book import claims

    rows = claims.table(h100)
    sources = {r["source"] for r in rows}
    assert {"vizuara", "orin", "ptx-dsl"} <= sources
    assert sum(r["source"] == "orin" for r in rows) == 8  # fp32/fp16 x decode/prefill x 2 widths
    assert all(r["ours"] and r["why"] for r in rows)
    md = claims.markdown(h100)
    assert md.count("\n") == len(rows) + 1 and "why we differ" in md
    # the table names each source document, never a key or a file number
    from book.sources import SOURCES
    assert all(SOURCES[k].short in md for k in sources)
    assert not re.search(r"(?i)\bseed", md)
    # ours comes from the file: change a row and the table changes
    row = h100.find("torch_eager", "float32", targets.PREFILL)
    before = [r["ours"] for r in claims.table(h100) if "F.silu" in r["claim"]][0]
    row["seconds"] *= 2
    after = [r["ours"] for r in claims.table(h100) if "F.silu" in r["claim"]][0]
    row["seconds"] /= 2
    assert before != after
    # torch.compile beside eager, where the record has the row
    b = min((r for r in h100.select(dtype="float32", shape=targets.PREFILL)
             if r["kind"] == "kernel" and not r["variant"].endswith(("_graph", "_l2_warm"))
             and r.get("correct", True)), key=lambda r: r["seconds"])
    extra = dict(row, variant="torch_compile", kind="reference", seconds=b["seconds"] * 1.01)
    recorded = h100.select(variant="torch_compile", dtype="float32", shape=targets.PREFILL)
    for r in recorded:          # the record's own compiled row stands aside for the test's
        h100.rows.remove(r)
    h100.rows.append(extra)
    try:
        detail = [r["detail"] for r in claims.table(h100) if "F.silu" in r["claim"]][0]
    finally:
        h100.rows.remove(extra)
        h100.rows.extend(recorded)
    assert "torch.compile'd" in detail and f"1.01x {b['variant']}" in detail


def test_the_published_gemm_figure_is_labelled_as_published_and_names_its_source():
    from book import claims, sources

    pub = claims.published_gemm()
    assert pub["source"] in sources.SOURCES and pub["name"] == sources.name(pub["source"])
    assert pub["flops_per_s"] == claims.PTX_DSL_GEMM_FLOPS and pub["shape"] == (8192,) * 3
    assert "pyptx" in pub["project"] and "release notes" in pub["where"]
    # not a row of the table of our measurements beside theirs: nothing of ours to compare
    # on that shape, so it stays out of chapters 5 and 6
    assert not [r for r in claims.table() if "GEMM" in r["claim"]]


def test_ncu_cross_check_recorded():
    doc = data.ncu("h100")
    assert doc["within_5_percent"] is True
    assert abs(doc["ratio_harness_over_ncu_bandwidth"] - 1) <= 0.05
    assert 1e-4 < doc["ncu"]["gpu_time_s"] < 1e-2  # seconds, not nanoseconds


def test_sass_recorded_on_the_gpu_shows_the_instructions_the_chapters_name():
    vec4 = data.sass("vec4")
    assert vec4.count("LDG.E.128") >= 4 and "STG.E.128" in vec4
    assert "MUFU.EX2" in vec4 and "MUFU.RCP" in vec4
    f64 = data.sass("fused_f64_literal")
    assert "DMUL" in f64 or "DADD" in f64 or "DFMA" in f64
    for name in ("fused", "fused_fastmath", "vec4", "half8"):
        text = data.sass(name, "float16" if name == "half8" else "float32")
        assert not any(op in text for op in ("DMUL", "DADD", "DFMA")) or name == "fused_f64_literal"
        assert "LDL" not in text and "STL" not in text  # no local memory
    with pytest.raises(FileNotFoundError, match="recorded"):
        data.sass("no_such_kernel")


def test_benchmark_refuses_to_time_in_the_simulator(capsys):
    if not book.gpu.SIMULATED:
        pytest.skip("a GPU is present")
    assert suite.main(["--quick"]) == 2
    assert "not measured" in capsys.readouterr().out


def test_a_claims_ratio_of_rows_from_two_runs_names_both(h100):
    """Issue 30: "2.44 -> 2.52 us" divided rows of two benchmark runs under one date."""
    from book import claims

    def row_run(variant, dtype, shape):
        r = h100.find(variant, dtype, shape)
        return (r.get("provenance") or h100.provenance)["date"][:10]

    rows = {r["claim"]: r for r in claims.table(h100)}
    [decode] = [r for c, r in rows.items() if c.startswith("float32 decode F=18944")]
    fused, vec4 = row_run("fused", "float32", (1, 18944)), row_run("vec4", "float32", (1, 18944))
    if fused != vec4:
        assert f"rows of two runs: {fused} and {vec4}" in decode["ours"]
        assert "two benchmark runs" in decode["why"]
    for c, r in rows.items():  # a ratio below 1 is never told as "does not move the time"
        if "decode" in c and ", 0." in r["ours"] and "two runs" not in r["ours"]:
            assert "slower" in r["why"], (c, r["why"])
