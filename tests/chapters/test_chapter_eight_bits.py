"""The "Eight bits" chapter (chapters/09b_eight_bits.ipynb): in the table of contents after
chapter 9, its numbers read from the FP8 record (book/data/fp8/), its exercises built by the
library, its GPU cells guarded, and its decode table drawn from decode rows when a record has
them (here a record made up for the test: the real one comes from
benchmarks/fp8_decode_bench.py on the device); executed whole in the simulator (slow)."""

from __future__ import annotations

import json

import nbformat
import pytest
import yaml

import book
from book import fp8_data as D
from book import fp8_figures as ff
from repo import ROOT

CHAPTER = ROOT / "chapters" / "09b_eight_bits.ipynb"


def _nb():
    return nbformat.read(CHAPTER, as_version=4)


def _cell(cid):
    return next(c.source for c in _nb().cells if c.get("id") == cid)


def test_the_chapter_follows_chapter_9_in_the_table_of_contents():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [c["file"] for c in toc["parts"][0]["chapters"]]
    assert files.index("chapters/09b_eight_bits") == files.index("chapters/09_hopper") + 1
    assert "chapters/09b_eight_bits" in (ROOT / "intro.md").read_text()


def test_it_reads_its_numbers_from_the_record_and_says_what_runs_in_the_simulator():
    setup = _cell("ch09b-001")
    assert "fp8_data.load()" in setup and "HOPPER = False" in setup
    assert "runs the models" in setup
    code = "\n".join(c.source for c in _nb().cells if c.cell_type == "code")
    assert code.count("measured_on(") >= 5
    # a GPU-only call is behind HOPPER (the simulator has no wgmma)
    for cid in ("ch09b-030", "ch09b-038"):
        src = _cell(cid)
        assert "HOPPER" in src and src.index("HOPPER") < src.index("swiglu_fp8")


def test_every_exercise_comes_from_the_library_and_waits_for_an_answer():
    cells = [c for c in _nb().cells if c.get("id", "").startswith("ch09b-ex")]
    assert len(cells) == 4
    for c in cells:
        assert "exercises." in c.source and "answer = None" in c.source


def _decode_record(tmp_path):
    """The prefill record and a made-up decode record (the bench's row format), built into
    one record as book.fp8_data builds the chapter's."""
    prefill = json.loads((ROOT / "records/fp8/fp8_bench_h200.json").read_text())
    rows = []
    for T in (1, 4, 16):
        for k, (v, dt, _) in enumerate(ff.DECODE_ROWS):
            us = 26.0 + k + T / 8
            wb = 2 * 4096 * 14336 * (2 if dt == "bfloat16" else 1)
            rows.append({"name": v, "dtype": dt, "shape": [T, 4096, 14336], "median_us": us,
                         "p10_us": us - 0.5, "p90_us": us + 0.5, "samples": 48,
                         "weight_bytes": wb, "graph_us": us - 1, "graph_method": "graph",
                         "sm_mhz_median": 1980.0, "power_w_median": 300.0, "method": "made up"})
    fake = {"provenance": {**prefill["provenance"], "commit": "fake000",
                           "command": "a test's made-up record"}, "rows": rows}
    a, b = tmp_path / "prefill.json", tmp_path / "decode.json"
    a.write_text(json.dumps(prefill))
    b.write_text(json.dumps(fake))
    out = tmp_path / "fp8.json"
    out.write_text(json.dumps(D.build([a, b])))
    from book import data

    return data.load(str(out))


def test_the_decode_table_is_drawn_from_decode_rows(tmp_path):
    from book import specs

    rec = _decode_record(tmp_path)
    shown = []
    ns = {"rec": rec, "ff": ff, "d": 4096, "h": 14336, "spec": specs.get("H200"),
          "Markdown": lambda s: s, "display": shown.append,
          "measured_on": lambda r: f"measured {r['provenance']['commit']}"}
    printed = []
    ns["print"] = lambda *a, **k: printed.append(" ".join(map(str, a)))
    exec(_cell("ch09b-039b"), ns)
    [table] = shown
    assert table.count("\n") == 1 + 3 * len(ff.DECODE_ROWS)
    # the ratio and the share of the peak first (on screen at 375 px), the peak the record's
    assert "ours: FP8 GEMV, e4m3 out | 1 | 1.15 | 93% | 26.1 µs (25.6-26.6) | 25.1 µs |" in table
    assert "T = 1, 4, 16" in printed[0] and printed[-1] == "measured fake000"
    # and the roofline marks them
    _, drawn = ff.roofline_figure(rec)
    assert "ours, FP8 decode GEMV" in drawn and len(drawn["ours, FP8 decode GEMV"]) == 3


@pytest.mark.slow
@pytest.mark.extended   # CI's book build executes the chapter in the simulator too
def test_the_chapter_runs_in_the_simulator(tmp_path):
    """Executed as the build executes it (the simulator): no error, the models' lines."""
    from tools.execute import _run

    if not book.gpu.SIMULATED:
        pytest.skip("the build's run is the simulator's")
    rel, text, _, err = _run("chapters/09b_eight_bits.ipynb", 600, False)
    assert err is None, err[-3000:]
    nb = nbformat.reads(text, as_version=4)
    out = {c.get("id"): "".join(o.get("text", "") for o in c.outputs) for c in nb.cells
           if c.cell_type == "code"}
    assert "So this page runs the models" in out["ch09b-001"]
    assert "bit for bit: True" in out["ch09b-014"]
    assert "equals the fused GEMM's model: True" in out["ch09b-038"]
    assert "ridge with bf16" in out["ch09b-005"]


@pytest.mark.parametrize("cid,var", [("ch09b-ex1", "ex1"), ("ch09b-ex2", "ex2"),
                                     ("ch09b-ex3", "ex3"), ("ch09b-ex4", "ex4")])
def test_each_exercise_cell_asks_then_takes_the_right_answer_and_refuses_a_wrong_one(cid, var):
    from book import exercises

    ns = {"exercises": exercises, "spec_key": "H200", "h": 14336, "display": lambda _: None}
    exec(_cell(cid), ns)
    ex = ns[var]
    assert ns["answer"] is None and ex.name == var
    right = ex.truth if hasattr(ex, "truth") else ex.answer
    wrong = 3 * ex.truth + 1 if hasattr(ex, "truth") else next(
        k for k in ex.options if k != ex.answer)
    assert ex.check(right) and not ex.check(wrong)


def test_its_code_lines_fit_the_column():
    long = [(c.get("id"), line) for c in _nb().cells if c.cell_type == "code"
            and c.get("id") != "course-setup" for line in c.source.splitlines()
            if len(line) > 80]
    assert not long, long
