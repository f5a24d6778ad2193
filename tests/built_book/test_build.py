"""The book builds from a clean copy, executing every notebook; an error in a notebook fails the
build; a rebuild with no change executes nothing; the setup cells match their template; the
package installs with its data files.

The build itself is the session fixture ``built_book`` (tests/conftest.py), shared with the
browser tests in test_site.py.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import nbformat
import pytest
import yaml

from conftest import TIMINGS, copy_repo, run_make
from repo import ROOT

PY = sys.executable
JB = str(Path(sys.executable).parent / "jupyter-book")


def test_every_toc_page_is_built(built_book):
    missing = [f for f in built_book.toc_files if not built_book.page(f).is_file()]
    assert not missing, f"no HTML page for: {missing}"
    notebooks = [f for f in built_book.toc_files if f.endswith(".ipynb")]
    assert len(notebooks) >= 11, f"expected the 10 chapters and the GPU appendix, got {notebooks}"


def test_solutions_are_not_published(built_book):
    assert not (built_book.html / "solutions").exists()
    assert not list(built_book.html.rglob("_sources/solutions*"))


def _executed_notebooks(built_book) -> list[str]:
    cfg = yaml.safe_load((built_book.root / "_config.yml").read_text())
    skip = cfg["execute"]["exclude_patterns"]
    return [f for f in built_book.toc_files if f.endswith(".ipynb")
            and not any(Path(f).match(p) for p in skip)]


def test_notebooks_were_executed_without_errors(built_book):
    """Every executed notebook page shows its outputs and no error output anywhere."""
    problems = []
    for src in _executed_notebooks(built_book):
        html = built_book.page(src).read_text(encoding="utf-8")
        nb = nbformat.read(built_book.root / src, as_version=4)
        if any(c.cell_type == "code" for c in nb.cells) and 'class="cell_output' not in html:
            problems.append(f"{src}: code cells but no outputs on the page (not executed?)")
        for marker in ('class="output traceback', 'class="output error',
                       "Traceback (most recent call last)"):
            if marker in html:
                problems.append(f"{src}: error output on the page ({marker!r})")
    reports = built_book.html / "reports"
    if reports.is_dir():
        problems += [f"execution report: {p.name}" for p in reports.iterdir()]
    assert not problems, "\n".join(problems)


def test_labs_are_shown_not_executed(built_book):
    labs = [f for f in built_book.toc_files if f.startswith("labs/")]
    if not labs:
        pytest.skip("no labs in _toc.yml yet")
    for src in labs:
        html = built_book.page(src).read_text(encoding="utf-8")
        assert 'class="cell_output' not in html, f"{src} was executed at build time"


def test_rebuild_without_change_executes_nothing(built_book):
    if os.environ.get("BOOK_PREBUILT"):
        pytest.skip("BOOK_PREBUILT: not rebuilding someone's tree")
    rc, seconds, log = run_make(built_book.root)
    assert rc == 0, log[-3000:]
    timings = {"fresh_build_s": round(built_book.seconds, 1), "rebuild_s": round(seconds, 1)}
    (built_book.root / "_build" / "timings.json").write_text(json.dumps(timings))
    TIMINGS["`make book` again with no change"] = seconds
    assert "Executing notebook" not in log, "a rebuild with no change executed notebooks again"
    assert "executed notebooks are cached" in log, log[-3000:]  # tools/execute.py ran nothing
    assert "no targets are out of date" in log, log[-3000:]
    # Loose guard, not a benchmark (the target, < 30 s, is reported from measured timings).
    assert seconds < max(60.0, built_book.seconds / 2), timings


RAISING_NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "id": "m", "metadata": {}, "source": "# Raises"},
        {"cell_type": "code", "id": "c", "metadata": {}, "execution_count": None, "outputs": [],
         "source": "1 / 0  # this must fail the build"},
    ],
    "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                "language": "python"}},
    "nbformat": 4, "nbformat_minor": 5,
}


@pytest.mark.slow
def test_a_raising_notebook_fails_the_build(tmp_path):
    """Built with the course's own _config.yml: jupyter-book 1 would otherwise succeed."""
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n  - file: bad\n")
    (tmp_path / "intro.md").write_text("# A tiny book\n")
    (tmp_path / "bad.ipynb").write_text(json.dumps(RAISING_NOTEBOOK))
    shutil.copytree(ROOT / "tools", tmp_path / "tools")  # the book's Sphinx extension
    proc = subprocess.run([JB, "build", str(tmp_path)], capture_output=True, text=True,
                          timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, "a notebook raised ZeroDivisionError but the build succeeded"
    assert "ZeroDivisionError" in out and "bad.ipynb" in out, out[-3000:]


def _tiny_book(root: Path, chapters: dict[str, list[str]]) -> None:
    """A book with the course's _config.yml and tools/, and one chapter per entry (code cells),
    each recorded "on an H100" with outputs the simulator cannot produce."""
    from tools import recordings

    shutil.copytree(ROOT / "tools", root / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    (root / "intro.md").write_text("# A tiny book\n")
    (root / "chapters").mkdir()
    toc = "format: jb-book\nroot: intro\nchapters:\n"
    for name, sources in chapters.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell(f"# {name}")] + [
            nbformat.v4.new_code_cell(src) for src in sources]
        nbformat.write(nb, root / "chapters" / f"{name}.ipynb")
        rec = nbformat.reads(nbformat.writes(nb), as_version=4)
        for cell in recordings.code_cells(rec):
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                   text="recorded on the GPU: 42\n")]
        recordings.stamp(rec, {"gpu": "NVIDIA H100 80GB HBM3", "simulated": False,
                               "date": "2026-11-22T12:00:00+00:00", "commit": "c0ffee" * 6,
                               "driver_cuda": "13.0"}, f"chapters/{name}.ipynb", 1.0)
        path = recordings.record_path(f"chapters/{name}.ipynb", root=root)
        path.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(rec, path)
        toc += f"  - file: chapters/{name}\n"
    (root / "_toc.yml").write_text(toc)


@pytest.mark.slow
def test_recorded_outputs_are_published_and_the_chapter_still_runs_in_the_simulator(tmp_path):
    """The page shows the recording's outputs with its note; the chapter still executes at
    build time, so one that raises fails the build even with a recording; a chapter whose code
    changed since its recording shows the simulator's outputs, labelled."""
    _tiny_book(tmp_path, {"good": ["print(6 * 7)"], "bad": ["1 / 0"]})
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([PY, "-m", "tools.execute"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "chapters/bad.ipynb: ZeroDivisionError" in proc.stderr, proc.stderr[-2000:]
    # drop the raising chapter; make the second one's code differ from its recording
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: intro\nchapters:\n"
                                       "  - file: chapters/good\n  - file: chapters/edited\n")
    _tiny_book(tmp_path / "more", {"edited": ["print(6 * 7)"]})
    shutil.copy(tmp_path / "more/records/chapters/h100/edited.ipynb",
                tmp_path / "records/chapters/h100/edited.ipynb")
    nb = nbformat.read(tmp_path / "more/chapters/edited.ipynb", as_version=4)
    nb.cells[1].source = "print(7 * 6)"
    nbformat.write(nb, tmp_path / "chapters/edited.ipynb")
    shutil.rmtree(tmp_path / "more")
    proc = subprocess.run([PY, "-m", "tools.execute"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "chapters/good.ipynb" in proc.stdout and "the recording (NVIDIA H100" in proc.stdout
    assert "recording is STALE" in proc.stdout, proc.stdout
    proc = subprocess.run([JB, "build", str(tmp_path)], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "Executing notebook" not in proc.stdout, "the build executed a chapter again"
    raw = (tmp_path / "_build/html/chapters/good.html").read_text()
    good = re.sub(r"<[^>]+>", "", raw)
    assert "recorded on the GPU: 42" in good and "course-outputs-recorded" in raw
    assert "Outputs recorded on an NVIDIA H100 80GB HBM3" in good and "2026-11-22" in good
    assert "c0ffeec" in good and "python -m tools.record" in good
    assert "/blob/main/records/chapters/h100/good.ipynb" in raw  # the record, for its provenance
    assert raw.count("const THEBE_JS_URL") == 1, "THEBE_JS_URL declared twice"
    edited = (tmp_path / "_build/html/chapters/edited.html").read_text()
    assert "recorded on the GPU" not in edited and "course-outputs-simulator" in edited
    assert "its GPU recording is older than its code" in edited
    # the download is the source, without outputs
    src = nbformat.read(tmp_path / "_build/html/_sources/chapters/good.ipynb", as_version=4)
    assert not any(c.get("outputs") for c in src.cells)


def test_setup_cells_match_the_template():
    proc = subprocess.run([PY, "-m", "tools.setup_cell", "--check"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_setup_cell_names_the_configured_repository_and_runs_here(tmp_path):
    from autograder import setup_template as setup_cell

    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
    cell = setup_cell.render()
    assert f"git+{cfg['url']}" in cell and f'PIN = "{cfg["pin"]}"' in cell  # pinned: COLAB
    pin = re.search(r"^numba-cuda\[cu13\]==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert f"=={pin.group(1)}" in cell
    # Outside Colab the cell installs nothing and imports the course library.
    proc = subprocess.run([PY, "-c", cell], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                                            "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pip" not in proc.stdout + proc.stderr


def test_setup_cell_write_fixes_a_stale_notebook(tmp_path):
    from autograder.setup_template import render
    from tools import setup_cell

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# T"), nbformat.v4.new_code_cell("import book"),
                nbformat.v4.new_code_cell("x = 1")]
    path = tmp_path / "t.ipynb"
    nbformat.write(nb, path)
    assert setup_cell.main(["--check", str(path)]) == 1
    assert setup_cell.main(["--write", str(path)]) == 0
    assert setup_cell.main(["--check", str(path)]) == 0
    fixed = nbformat.read(path, as_version=4)
    assert [c.source for c in fixed.cells[2:]] == ["x = 1"]
    assert fixed.cells[1].source == render()


def test_wheel_holds_both_packages_and_their_data(tmp_path):
    """What `pip install git+<repository>` installs on Colab (built from a clean copy: setuptools
    writes build/ and *.egg-info next to the sources)."""
    src = copy_repo(tmp_path / "src", with_env=False)
    subprocess.run([PY, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(tmp_path / "dist"), str(src)], check=True, capture_output=True,
                   timeout=300)
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "book/__init__.py" in names and "book/gpu.py" in names
    expected = [p.relative_to(ROOT).as_posix() for pattern in
                ("book/data/**/*", "book/widgets/*.js", "book/widgets/*.css",
                 "autograder/**/*.py") for p in ROOT.glob(pattern) if p.is_file()]
    missing = [n for n in expected if n not in names and "__pycache__" not in n]
    assert not missing, f"not in the wheel: {missing}"
    assert not [n for n in names if n.startswith(("tests/", "chapters/", "solutions/"))]


def _makefile_build_flags() -> list[str]:
    """The flags `make book` gives `jupyter-book build`."""
    m = re.search(r"jupyter-book build ((?:-[-\w]+ )*)\.", (ROOT / "Makefile").read_text())
    assert m, "no `jupyter-book build ... .` line in the Makefile"
    return m.group(1).split()


def tiny_book(root: Path, pages: dict[str, str]):
    """A book of ``pages`` (name -> Markdown, the first its root) with the course's _config.yml
    and Sphinx extension, and its build with the Makefile's flags: ``build() -> (rc, output)``."""
    flags = _makefile_build_flags()
    shutil.copytree(ROOT / "tools", root / "tools", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "site_assets").mkdir()  # html_extra_path
    (root / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    first, *rest = pages
    (root / "_toc.yml").write_text(f"format: jb-book\nroot: {first}\nchapters:\n"
                                   + "".join(f"  - file: {name}\n" for name in rest))
    for name, text in pages.items():
        (root / f"{name}.md").write_text(text)

    def build():
        proc = subprocess.run([JB, "build", *flags, str(root)], capture_output=True, text=True,
                              timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
        return proc.returncode, proc.stdout + proc.stderr
    return build


@pytest.mark.slow
def test_a_reference_to_a_missing_section_fails_the_build(tmp_path):
    """Labs point to chapters with {ref} to a label on the chapter's section (tests/built_book/test_reader.py
    checks they do): built with the Makefile's flags, a reference whose section has gone fails the
    build and names the label, where it would otherwise only warn."""
    build = tiny_book(tmp_path, {
        "intro": "# A tiny book\n",
        "chapter": "# Chapter\n\n(loads-first)=\n## Move 1\n\nLoads first.\n",
        "lab": "# Lab\n\nAs in {ref}`chapter 6's Move 1 <loads-first>`.\n"})
    rc, out = build()
    assert rc == 0, out[-3000:]
    (tmp_path / "lab.md").write_text("# Lab\n\nAs in {ref}`chapter 5's parallelism <mlp-chapter-5>`.\n")
    rc, out = build()
    assert rc != 0, "a {ref} to a label that does not exist, and the build succeeded"
    assert "mlp-chapter-5" in out, out[-3000:]


@pytest.mark.slow
def test_a_measured_figure_is_computed_linked_and_a_wrong_key_fails_the_build(tmp_path):
    """{measured}`...` (tools/sphinx_course.py, book/quotes.py) puts the record's figure in the
    prose, linked to the record with its GPU and date on hover; a key that names no figure fails
    the build with the Makefile's flags and says what is wrong."""
    from book import quotes

    key = "norm_quant_vs_compile 8192"
    build = tiny_book(tmp_path, {"intro": "# A tiny book\n",
                                 "chapter": f"# Chapter\n\nOurs is {{measured}}`{key}` faster.\n"})
    rc, out = build()
    assert rc == 0, out[-3000:]
    html = (tmp_path / "_build" / "html" / "chapter.html").read_text()
    q = quotes.quote(key)
    link = re.search(r'<a class="[^"]*measured[^"]*"[^>]*>.*?</a>', html, re.S)
    assert link, html[-2000:]
    assert f"/blob/main/{quotes.NORM_QUANT}" in link.group(0) and q.where() in link.group(0)
    assert f"Ours is {q.text}" in re.sub(r"<[^>]+>", "", html)
    assert "No CUDA GPU found" not in out   # the role reads records: nothing of the simulator
    (tmp_path / "chapter.md").write_text("# Chapter\n\nOurs is {measured}`norm_quant_vs_cmpile 8192`.\n")
    rc, out = build()
    assert rc != 0, "a {measured} key that names nothing, and the build succeeded"
    assert "no measured family 'norm_quant_vs_cmpile'" in out, out[-3000:]
