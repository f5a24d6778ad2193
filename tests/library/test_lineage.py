"""Which benchmark runs a cell's numbers come from (book/data/lineage.py): rows, targets and
records note their runs when read, and in an IPython shell a cell that reads several runs names
each of them under its output (issue 30: tables mixing runs under one date)."""

from __future__ import annotations

import json

import pytest

from book import data
from book.data import lineage


@pytest.fixture(autouse=True)
def fresh():
    lineage.reset()
    yield
    lineage.reset()


def _runs_of_h100_rows():
    rec = data.load("h100")
    runs = {}
    for r in rec.rows:
        p = r.get("provenance") or rec.provenance
        runs.setdefault(p["date"], r)
    return rec, runs


def test_reading_a_measurement_notes_the_rows_run_and_reading_a_name_does_not():
    rec, runs = _runs_of_h100_rows()
    assert len(runs) > 1, "the record holds rows of one run only: nothing to tell apart"
    (d1, r1), (d2, r2) = list(runs.items())[:2]
    r1["variant"], r1.get("shape"), r2["dtype"]  # names, not measurements
    assert lineage.noted() == []
    r1["seconds"]
    assert [x["date"] for x in lineage.noted()] == [d1]
    r2.get("bandwidth")
    assert sorted(x["date"] for x in lineage.noted()) == sorted([d1, d2])
    assert set(lineage.noted()[0]) == {"date", "commit", "gpu", "command"}


def test_a_target_notes_the_runs_of_the_rows_it_was_computed_from():
    rec = data.load("h100")
    by_key = {(r.get("kind"), r["variant"], r["dtype"], tuple(r["shape"])): r for r in rec.rows}
    for t in rec.targets:
        assert t.get("rows") is not None, f"{t.get('target')!r} lists no rows: --retarget"
        lineage.reset()
        t["value"]
        want = {(by_key[(a, b, c, tuple(d))].get("provenance") or rec.provenance)["date"]
                for a, b, c, d in t["rows"]}
        assert {x["date"] for x in lineage.noted()} == want, t["target"]
    lineage.reset()
    rec.targets[0]["target"]  # its name is no measurement
    assert lineage.noted() == []


def test_a_record_notes_every_run_it_holds():
    data.record("ncu/tensorcore_h100")  # its two profiles: the first version and the final
    commits = {x["commit"][:7] for x in lineage.noted()}
    doc = json.loads((data.HERE / "ncu" / "tensorcore_h100.json").read_text())
    assert commits == {doc["profiles"][k]["provenance"]["commit"][:7] for k in ("first", "final")}


def test_the_note_names_each_run_without_the_machines_paths():
    rec, runs = _runs_of_h100_rows()
    for r in runs.values():
        r["seconds"]
    text = lineage.runs_note(lineage.noted())
    for r in runs.values():
        p = r.get("provenance") or rec.provenance
        assert p["date"][:10] in text and p["commit"][:7] in text
    assert "/root/" not in text and all(len(line) <= 80 for line in text.splitlines())


def test_an_ipython_cell_that_mixes_runs_names_them_and_logs_every_cell(tmp_path, capsys,
                                                                         monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    log = tmp_path / "runs.jsonl"
    monkeypatch.setenv(lineage.LOG_ENV, str(log))
    monkeypatch.setattr(lineage, "_watching", False)
    ip = InteractiveShell.instance()
    try:
        assert lineage.watch(ip)
        ip.run_cell("from book import data\nrec = data.load('h100')\n"
                    "a = rec.find('vec4', 'float32', (8192, 14336))['seconds']")
        one = capsys.readouterr().out
        ip.run_cell("b = rec.find('torch_eager', 'float32', (8192, 14336))['seconds']\n"
                    "c = rec.find('vec4', 'float32', (8192, 14336))['seconds']")
        two = capsys.readouterr().out
    finally:
        ip.events.callbacks["pre_run_cell"].clear()
        ip.events.callbacks["post_run_cell"].clear()
        InteractiveShell.clear_instance()
    assert "measurement runs" not in one  # one run: nothing to say
    rec = data.load("h100")
    eager = rec.find("torch_eager", "float32", (8192, 14336))
    vec4 = rec.find("vec4", "float32", (8192, 14336))
    for row in (eager, vec4):
        p = row.get("provenance") or rec.provenance
        assert p["date"][:10] in two and p["commit"][:7] in two
    entries = [json.loads(x) for x in log.read_text().splitlines()]
    assert [len(e["runs"]) for e in entries] == [1, 2]
