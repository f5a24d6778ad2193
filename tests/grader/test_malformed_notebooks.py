"""A notebook no Jupyter wrote (hand-edited JSON) is that submission's problem, said to it,
never the end of the class's run (red-team finding): JSON nested thousands deep raised
RecursionError out of read_cells, a cell whose `metadata` is a list or whose `tags` is a number
raised AttributeError / TypeError, and the first of them ended `grade` over a folder with a
traceback, the submissions after it never graded. Graded by the real CLI in the simulator
(submissions that launch nothing: seconds each)."""

from __future__ import annotations

import csv
import json
import subprocess

import pytest

from grading_runs import REPO, env, grade_cmd

from autograder.submission import SubmissionError, read_cells

CODE = "def decode_swiglu(x, wg, bg, wu, bu, out):\n    return out\n"


def _nb(**cell):
    c = dict({"cell_type": "code", "source": CODE, "metadata": {}, "outputs": [],
              "execution_count": None}, **cell)
    return json.dumps({"cells": [c], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


ODD = {"meta_list.ipynb": _nb(metadata=[1]), "tags_number.ipynb": _nb(metadata={"tags": 5}),
       "id_list.ipynb": _nb(id=["x"]), "deep.ipynb": "[" * 100_000 + "]" * 100_000}


def test_odd_cell_metadata_is_read_as_none(tmp_path):
    for name in ("meta_list.ipynb", "tags_number.ipynb", "id_list.ipynb"):
        (tmp_path / name).write_text(ODD[name])
        assert [c["source"] for c in read_cells(tmp_path / name)] == [CODE]


def test_json_nested_too_deeply_is_said_as_such(tmp_path):
    (tmp_path / "deep.ipynb").write_text(ODD["deep.ipynb"])
    with pytest.raises(SubmissionError, match="nested too deeply"):
        read_cells(tmp_path / "deep.ipynb")


def test_a_folder_with_odd_notebooks_is_graded_whole(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for name, text in ODD.items():
        (subs / name).write_text(text)
    (subs / "after_them.py").write_text(CODE)
    out = tmp_path / "out"
    p = subprocess.run(grade_cmd("lab6", [subs], out, "--simulator"), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    with open(out / "grades.csv") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"meta_list", "tags_number", "id_list", "deep", "after_them"}, rows
    assert rows["deep"]["status"] == "unreadable"
    assert all(rows[k]["status"] == "graded" for k in rows if k != "deep"), rows


def test_a_byte_order_mark_is_not_the_students_error(tmp_path):
    """Red-team finding: a file saved with a UTF-8 byte order mark (Windows' Notepad; `python
    file.py` runs it) scored 0: the lab 1 master's code as a .py was \"line 1: SyntaxError:
    invalid non-printable character U+FEFF\" in every test, and the master notebook \"not a valid
    notebook ... do not edit the file in a text editor\". Both are read as the text they hold."""
    from autograder.master import graded_cells

    src = "\n\n".join(c.source for c in graded_cells("lab1_bytes_and_roofline"))
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "py_bom.py").write_bytes(b"\xef\xbb\xbf" + src.encode())
    (subs / "nb_bom.ipynb").write_bytes(
        b"\xef\xbb\xbf" + (REPO / "solutions" / "lab1_bytes_and_roofline.ipynb").read_bytes())
    p = subprocess.run(grade_cmd("lab1", [subs], out, "--simulator"), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    with open(out / "grades.csv") as f:
        assert {r["id"]: r["total"] for r in csv.DictReader(f)} == {"py_bom": "18", "nb_bom": "18"}
