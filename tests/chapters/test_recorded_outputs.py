"""What the recorded pages print (records/chapters/<gpu>/, the outputs the site publishes), kept
honest (issue 30):

- each table and figure draws its numbers from one benchmark run, or names each run it mixes:
  tools.record keeps, for every executed cell, the runs its numbers came from
  (book/data/lineage.py), and a cell with several must name each one (its date and commit) in
  its outputs, which `import book` does by itself in a notebook;
- no output shows a path of the machine that recorded it or measured the numbers
  ("--out /root/out/h100.json", "/usr/local/cuda/bin/ncu").

No GPU or build needed: these read the recordings. A recording made before tools.record kept
the runs fails the first test until the chapter is recorded again."""

from __future__ import annotations

import nbformat
import pytest

from tools import recordings


def _recordings():
    return [(p.name, nbformat.read(p, as_version=4)) for p in recordings.all_recordings()]


def test_every_recording_keeps_the_runs_of_its_cells():
    recs = _recordings()
    if not recs:
        pytest.skip("no recordings yet")
    missing = [name for name, nb in recs
               if not (nb.metadata.get(recordings.META_KEY) or {}).get("lineage")]
    assert not missing, (
        "recorded before tools.record kept each cell's measurement runs, so nothing says which "
        "runs their tables mix: record them again on a GPU, "
        f"{recordings.RECORD_COMMAND} " + " ".join(f"chapters/{m}" for m in missing)
        + f", then {recordings.INSTALL_COMMAND}")


def test_a_recorded_cell_that_mixes_runs_names_each_of_them():
    problems = [f"{name}: {p}" for name, nb in _recordings() for p in recordings.unnamed_runs(nb)]
    assert not problems, "\n".join(problems)


def test_no_recorded_output_shows_a_machine_path():
    found = [f"{name}: {p}" for name, nb in _recordings() for p in recordings.machine_paths(nb)]
    assert not found, ("outputs that print a path of the machine that recorded or measured them "
                       "(print commands through book.provenance.without_paths):\n"
                       + "\n".join(found))


# ---------------------------------------------------------------- the checks themselves

RUN_A = {"date": "2026-11-22T22:07:18+00:00", "commit": "e8f24dee3230", "gpu": "G",
         "command": "python -m book.bench --out /root/out/h100.json"}
RUN_B = {"date": "2026-11-24T08:21:04+00:00", "commit": "5b1c8900", "gpu": "G",
         "command": "python -m book.bench --only x"}


def _recorded(*cells):
    """A recording of code cells, each (printed text, its runs)."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"x = {i}") for i, _ in enumerate(cells)]
    for c, (text, _) in zip(nb.cells, cells):
        c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    nb.metadata[recordings.META_KEY] = {
        "lineage": True,
        "cells": [{"index": i, "id": None, "sha256": "", "runs": runs}
                  for i, (_, runs) in enumerate(cells)]}
    return nb


def test_a_cell_mixing_runs_unnamed_is_found_and_the_lineage_note_names_them():
    from book.data.lineage import runs_note

    nb = _recorded(("3,496 us\n", [RUN_A]),                  # one run: fine unnamed
                   ("2,477 us + 721.8 us\n", [RUN_A, RUN_B]),  # two, unnamed
                   ("a table\n" + runs_note([RUN_A, RUN_B]), [RUN_A, RUN_B]))
    found = recordings.unnamed_runs(nb)
    assert len(found) == 2 and all(f.startswith("code cell 2 ") for f in found)
    assert "2026-11-22, commit e8f24de" in found[0] and "2026-11-24, commit 5b1c890" in found[1]


@pytest.mark.parametrize("text,found", [
    ("with: python -m book.bench --out /root/out/h100.json\n", ["/root/out/h100.json"]),
    ("/usr/local/cuda/bin/ncu --clock-control none\n", ["/usr/local/cuda/bin/ncu"]),
    ("with: python -m book.bench --out h100.json\n", []),
    ("3.00 TB/s, 1/thread, https://pyptx.dev/guides/swiglu/, records/tests/x.json\n", []),
])
def test_machine_paths_are_found_and_nothing_else(text, found):
    got = recordings.machine_paths(_recorded((text, [])))
    assert [g.split(": ", 1)[1] for g in got] == found
