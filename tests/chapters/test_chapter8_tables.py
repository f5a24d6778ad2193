"""Chapter 8's two tables of cuBLAS times: reader QA found the share table's cuBLAS GEMM at
T = 8192 (2,430 us) beside the measurement table's (2,543 us) with nothing on the page to say
they are two timings of the same GEMM. The share table marks every row whose GEMM is the share
phase's own timing, and under it names the measurement table's figure where the two differ;
both tables say which benchmark run measured them."""

import contextlib
import io
import json

import book  # noqa: F401
from book import data
from book.bench.tensorcore import pass_shares
from repo import ROOT

CHAPTER = ROOT / "chapters" / "08_tensor_cores.ipynb"


def _run(*markers):
    """The chapter's setup cell and the cells holding ``markers``, run against the record:
    what they print and the Markdown tables they display."""
    cells = [c for c in json.loads(CHAPTER.read_text())["cells"] if c["cell_type"] == "code"]
    src = ["".join(c["source"]) for c in cells]
    [setup] = [s for s in src if "def measured_on(row)" in s]
    ns, shown, out = {}, [], io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(setup, ns)
        ns["display"] = lambda m: shown.append(m.data)
        for marker in markers:
            [cell] = [s for s in src if marker in s]
            exec(cell, ns)
    return out.getvalue(), shown


def us(s):
    return f"{s * 1e6:,.1f} µs" if s < 1e-3 else f"{s * 1e6:,.0f} µs"


def test_the_share_table_says_which_cublas_timing_each_row_is():
    rec = data.load("h100")
    said, (table,) = _run("pass_shares(rec, T, d, h)")
    said = " ".join(said.split())
    rows = {int(r.split("|")[1]): r for r in table.splitlines()[2:]}
    d, h = 4096, 14336
    for T, row in rows.items():
        s = pass_shares(rec, T, d, h)
        gemm_cell = row.split("|")[2].strip()
        assert gemm_cell.endswith("*") == (s["timed"] == "apart"), row
        other = rec.select(variant="cublas_bf16_gemm", dtype="bfloat16", shape=(T, d, h))
        if s["timed"] == "apart" and other:
            assert (f"At T = {T} this table's cuBLAS GEMM ({us(s['gemm']['seconds'])})"
                    in said and us(other[0]["seconds"]) in said), said
    assert "Measured in a benchmark run on" in said


def test_the_measurement_table_names_its_run():
    said, _ = _run("pass_shares(rec, T, d, h)", '("tc_ceiling", "main-loop ceiling")')
    assert said.count("Measured in a benchmark run on") == 2
