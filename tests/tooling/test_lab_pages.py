"""The pages that list the labs are written from the lab registry (tools/lab_pages.py): the
table of contents, the introduction's list and count, the instructors' table and the grader's
README. Here the check CI runs, and that it catches a stale page and a page without its
markers."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from repo import ROOT

from autograder import labs
from tools import lab_pages


def test_the_lab_pages_are_the_registrys():
    r = subprocess.run([sys.executable, "-m", "tools.lab_pages", "--check"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    n = len(labs.registry())
    intro = (ROOT / "intro.md").read_text()
    assert f"**Labs.** {lab_pages.count(n, capital=True)} labs apply" in intro
    for name, spec in labs.registry().items():
        assert f"{{doc}}`labs/{name}` (after {spec.chapters})" in intro


def _copy(tmp_path):
    for rel in lab_pages.parts(labs.registry()):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_a_stale_page_is_named_and_rewritten(tmp_path):
    root = _copy(tmp_path)
    appendix = root / "chapters" / "appendix_instructors.md"
    appendix.write_text(appendix.read_text().replace("| correctness, bandwidth |", "| bandwidth |", 1))
    toc = root / "_toc.yml"
    toc.write_text(toc.read_text().replace("      - file: labs/lab2_packed_swiglu\n", ""))
    assert lab_pages.stale(root) == ["_toc.yml", "chapters/appendix_instructors.md"]
    assert lab_pages.write(root) == ["_toc.yml", "chapters/appendix_instructors.md"]
    assert lab_pages.stale(root) == []
    assert (root / "_toc.yml").read_text() == (ROOT / "_toc.yml").read_text()


def test_a_page_without_its_markers_says_where_they_go(tmp_path):
    root = _copy(tmp_path)
    readme = root / "autograder" / "README.md"
    readme.write_text(readme.read_text().replace("<!-- BEGIN labs", "<!-- labs", 1))
    with pytest.raises(SystemExit, match="autograder/README.md has no generated part"):
        lab_pages.stale(root)


def test_the_count_is_a_word_up_to_twelve():
    assert [lab_pages.count(n) for n in (5, 6, 12, 13)] == ["five", "six", "twelve", "13"]
    assert lab_pages.count(6, capital=True) == "Six"
