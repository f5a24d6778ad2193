"""The setup cell template (tools/setup_cell.py): the pin, its place after the title, its
behaviour off Colab. The cell's behaviour ON Colab is rehearsed in tests/tooling/test_colab_rehearsal.py
(a venv that mirrors Colab's image, the cell's own install step against a local index)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import nbformat
import pytest
import yaml

from autograder import setup_template as template
from tools import setup_cell
from repo import ROOT



def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)


def test_cell_installs_the_pinned_commit_and_the_tested_numba_cuda():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    cell = template.render()
    assert re.fullmatch(r"[0-9a-f]{40}", cfg["pin"])
    assert f'PIN = "{cfg["pin"]}"' in cell and f'git+{cfg["url"]}"' in cell
    assert "@main" not in cell and cfg["branch"] not in cell.split("git+")[1].split("\n")[0]
    pin = re.search(r"^numba-cuda\[cu13\]==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert f"=={pin.group(1)}" in cell
    # chapter code is at most 80 columns (the content column)
    assert max(len(line) for line in cell.splitlines()) <= 80


def test_pinned_commit_holds_the_library_of_head():
    """What students install (the pin) is what the book and tests use (HEAD), path for path.
    After a library commit: `make pin`, which also regenerates the cells that embed the pin."""
    pin = template.config()["pin"]
    if _git("cat-file", "-e", f"{pin}^{{commit}}").returncode != 0:
        shallow = _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true"
        if shallow:
            pytest.skip(f"shallow clone: pinned commit {pin[:10]} is not in it")
        pytest.fail(f"_config.yml repository.pin {pin} is no commit of this repository: `make pin`")
    diff = _git("diff", "--name-only", pin, "HEAD", "--", *setup_cell.LIBRARY_PATHS)
    names = diff.stdout.split()
    assert diff.returncode == 0 and not names, (
        f"the pinned commit {pin[:10]} differs from HEAD in {len(names)} file(s) that "
        f"`pip install` takes ({', '.join(names[:8])}{', ...' if len(names) > 8 else ''}): "
        "run `make pin` and commit _config.yml and the regenerated notebooks.")


def test_write_pin_changes_one_line_and_keeps_comments(tmp_path, monkeypatch):
    shutil.copy(ROOT / "_config.yml", tmp_path / "_config.yml")
    monkeypatch.setattr(setup_cell, "ROOT", tmp_path)   # where the tool writes the pin
    monkeypatch.setattr(template, "ROOT", tmp_path)     # where the cell reads it
    before = (tmp_path / "_config.yml").read_text()
    new = "0123456789abcdef0123456789abcdef01234567"
    assert setup_cell.write_pin(new) is True
    after = (tmp_path / "_config.yml").read_text()
    assert template.config()["pin"] == new
    changed = [(a, b) for a, b in zip(before.splitlines(), after.splitlines()) if a != b]
    assert len(changed) == 1 and changed[0][1].strip() == f"pin: {new}"
    assert setup_cell.write_pin(new) is False


def test_library_commit_is_the_newest_commit_of_the_library_paths():
    if _git("status", "--porcelain", "--", *setup_cell.LIBRARY_PATHS).stdout.strip():
        with pytest.raises(SystemExit, match="uncommitted changes"):
            setup_cell.library_commit()
    else:
        want = _git("log", "-1", "--format=%H", "HEAD", "--", *setup_cell.LIBRARY_PATHS).stdout
        assert setup_cell.library_commit() == want.strip()


def _nb(*cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s[3:]) if s.startswith("md:")
                else nbformat.v4.new_code_cell(s) for s in cells]
    return nb


def test_lab_shows_its_title_before_the_setup_cell(tmp_path):
    # how labs were generated: setup cell first, then the title
    nb = _nb("import book", "md:# Lab 9: a title", "md:Some words.", "x = 1")
    nb.cells[0]["id"] = template.CELL_ID
    path = tmp_path / "lab.ipynb"
    nbformat.write(nb, path)
    assert template.status(nb) == "stale"
    assert setup_cell.main(["--check", str(path)]) == 1
    assert setup_cell.main(["--write", str(path)]) == 0
    fixed = nbformat.read(path, as_version=4)
    assert [c.source[:9] for c in fixed.cells] == [
        "# Lab 9: ", template.render()[:9], "Some word", "x = 1"]
    assert template.status(fixed) == "ok"
    # moved back after the title if someone puts it first again
    fixed.cells.insert(0, fixed.cells.pop(1))
    assert template.status(fixed) == "misplaced"
    template.fix(fixed)
    assert fixed.cells[1].get("id") == template.CELL_ID and template.status(fixed) == "ok"


def test_the_written_cell_is_folded_and_a_cell_shown_whole_is_stale():
    """The scaffold's lab and a new chapter get the tag from the one writer (issue 44's trial:
    neither did, so the page showed 60 lines of plumbing first)."""
    nb = _nb("md:# A chapter", "import book", "x = 1")
    template.fix(nb)
    assert nb.cells[1].metadata["tags"] == [template.TAG] and template.status(nb) == "ok"
    nb.cells[1].metadata["tags"] = ["other"]
    assert template.status(nb) == "stale"
    template.fix(nb)
    assert nb.cells[1].metadata["tags"] == ["other", template.TAG]


def test_no_title_setup_goes_before_the_first_code_cell():
    nb = _nb("md:Intro without a heading.", "x = 1")
    assert template.status(nb) == "missing"
    template.fix(nb)
    assert [c.cell_type for c in nb.cells] == ["markdown", "code", "code"]
    assert nb.cells[1].source == template.render() and nb.cells[2].source == "x = 1"


def test_assign_puts_the_setup_cell_after_the_lab_title():
    """autograder/assign.py (GRADER's) generates labs with the same placement."""
    from autograder.assign import make_lab

    master = _nb("import book", "md:# Lab 9: a title", "y = 2")
    master.cells[0]["id"] = template.CELL_ID
    lab = make_lab(master, "lab1_bytes_and_roofline.ipynb")  # a lab without steps
    assert lab.cells[0].source.startswith("# Lab 9")
    assert lab.cells[1].source == template.render()
    assert template.status(lab) == "ok"


def test_every_page_folds_its_setup_cell():
    """The 60-line setup cell is plumbing: chapters and labs show it folded ("Show code cell
    source"), so a lab's page goes from its goals straight to its steps. Labs get the tag
    from their masters through `python -m autograder assign`."""
    unfolded = []
    for path in setup_cell.notebooks():
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            if cell.get("id") == template.CELL_ID and "hide-input" not in (
                    cell.metadata.get("tags") or []):
                unfolded.append(str(path.relative_to(ROOT)))
    assert not unfolded, (
        "setup cell shown in full on the page of: " + ", ".join(unfolded)
        + ": give the course-setup cell the tag hide-input (in solutions/ for labs, then "
        "`python -m autograder assign`)")


def test_off_colab_the_cell_installs_nothing_and_imports_book(tmp_path):
    proc = subprocess.run([sys.executable, "-c", template.render()], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "Installing" not in out and "pip" not in out
    assert "GPU ready" not in out  # the kernel check runs on Colab only: locally as before
