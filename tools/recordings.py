"""Chapter recordings: a chapter executed on a real GPU, kept with its provenance.

CI and `make book` have no GPU, so they execute the chapters in Numba's CUDA simulator, where
nothing can be timed. `python -m tools.record` (on a GPU machine) executes every chapter there and
keeps each executed notebook under ``records/chapters/<gpu>/<chapter>.ipynb``, its metadata
holding ``book.provenance.provenance()`` and a hash of each code cell's source. The published site
shows those outputs (see tools/execute.py and tools/sphinx_course.py) while the build still runs
every chapter in the simulator, so a chapter that raises still fails the build.

A recording is used only while every code cell of the chapter is the one that was recorded;
otherwise it is *stale*: the page falls back to the simulator's outputs, and the staleness test
(tests/chapters/test_record.py) names the chapter, the cell and the command to record it again.

This module is the one place that knows where recordings live, how a cell is hashed and how
recorded outputs are merged into a chapter's source.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / "records" / "chapters"
# The GPU whose recordings the published site shows (a folder of RECORDS).
PUBLISHED_GPU = "h100"
# Where the recording's metadata lives inside a recorded notebook.
META_KEY = "course_recording"
# Where a recorded code cell keeps the measurement runs its numbers came from (book/data/lineage.py)
RUNS_KEY = "course_runs"
RECORD_COMMAND = "python -m tools.record --out DIR"
INSTALL_COMMAND = "python -m tools.record --install DIR/chapters-<gpu>.tar.gz"


def cell_hash(source: str | list[str]) -> str:
    """sha256 of a code cell's source (the text, however the .ipynb split it into lines)."""
    text = "".join(source) if isinstance(source, list) else source
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


# The first cell of every chapter is generated from one template (tools/setup_cell.py) and
# names the course's pinned commit, which moves with every library change: it is checked by the
# setup-cell tests, not here, so regenerating it does not make every recording stale.
SETUP_CELL_ID = "course-setup"
SETUP_CELL_KEY = "<the generated setup cell: tools/setup_cell.py>"


def cell_key(cell) -> str:
    """The hash that stands for a code cell in a recording."""
    if cell.get("id") == SETUP_CELL_ID:
        return cell_hash(SETUP_CELL_KEY)
    return cell_hash(cell.source)


def cell_hashes(nb) -> list[str]:
    return [cell_key(c) for c in code_cells(nb)]


def _shape(node):
    """An AST as nested tuples, leaving out empty fields (ast.dump's text differs between
    Python versions in exactly those: 3.12 adds ``type_params=[]``, 3.13 drops empty lists)."""
    if isinstance(node, ast.AST):
        return (type(node).__name__,) + tuple(
            (k, _shape(v)) for k, v in ast.iter_fields(node) if v is not None and v != [])
    if isinstance(node, list):
        return tuple(_shape(x) for x in node)
    return repr(node)


def code_key(cell) -> str:
    """What a code cell *does*: its syntax tree, so re-wrapping a line or editing a comment
    leaves a recording current while any change to the code makes it stale. (Source that is
    not Python, an IPython magic say, counts by its text.)"""
    if cell.get("id") == SETUP_CELL_ID:
        return cell_hash(SETUP_CELL_KEY)
    text = "".join(cell.source) if isinstance(cell.source, list) else cell.source
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return cell_hash(text)
    return cell_hash(repr(_shape(tree)))


def record_path(src: str | Path, gpu: str = PUBLISHED_GPU, root: Path = ROOT) -> Path:
    """The recording of chapter ``src`` ("chapters/04_first_kernel.ipynb") for ``gpu``."""
    return root / "records" / "chapters" / gpu / Path(src).name


def _first_line(source: str | list[str]) -> str:
    for line in "".join(source).splitlines():
        if line.strip():
            return line.strip()[:70]
    return "(empty)"


@dataclass
class Recording:
    """What a chapter's recording says about the chapter as it is now."""

    src: str                      # "chapters/04_first_kernel.ipynb"
    path: Path | None             # the recorded notebook (None: no recording)
    provenance: dict = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)   # why it is stale (empty: current)
    notebook: object = None       # the recorded nbformat notebook

    @property
    def exists(self) -> bool:
        return self.path is not None

    @property
    def usable(self) -> bool:
        return self.exists and not self.problems

    def describe(self) -> str:
        """One line: 'NVIDIA H100 80GB HBM3, 2026-11-22, commit 1234abc'."""
        p = self.provenance
        commit = (p.get("commit") or "unknown")[:7]
        return f"{p.get('gpu') or 'unknown GPU'}, {(p.get('date') or '?')[:10]}, commit {commit}"

    def stale_message(self) -> str:
        where = f"records/chapters/{self.path.parent.name}/{self.path.name}" if self.path else ""
        return (f"{self.src}: the recording {where} "
                f"({self.describe()}) no longer matches the chapter:\n  "
                + "\n  ".join(self.problems)
                + f"\nRecord it again on a GPU: {RECORD_COMMAND} {self.src} "
                  f"(COURSE_COMMIT=<sha> on a machine without .git), then "
                  f"{INSTALL_COMMAND} here and commit records/chapters/.")


def compare(src_nb, rec_nb) -> list[str]:
    """Why ``rec_nb`` is not a recording of ``src_nb``'s code (empty list: it is)."""
    meta = rec_nb.metadata.get(META_KEY) or {}
    recorded = [c["sha256"] for c in meta.get("cells", [])]
    if not recorded:
        return ["the recording holds no cell hashes (not written by tools.record)"]
    # The hashes must also describe the outputs stored beside them.
    if recorded != cell_hashes(rec_nb):
        return ["the recorded cells do not match their own hashes (edited by hand?)"]
    now, then = code_cells(src_nb), code_cells(rec_nb)
    problems = []
    for i, cell in enumerate(now):
        if i >= len(recorded):
            problems.append(f"code cell {i + 1} ({_first_line(cell.source)!r}) is new")
        elif code_key(cell) != code_key(then[i]):
            problems.append(f"code cell {i + 1} ({_first_line(cell.source)!r}) changed "
                            "since it was recorded")
    if len(recorded) > len(now):
        problems.append(f"the recording has {len(recorded)} code cells, the chapter "
                        f"{len(now)} (cells removed)")
    return problems


def _read(src: str, gpu: str, root: Path, src_nb=None) -> Recording:
    path = record_path(src, gpu, root)
    if not path.is_file():
        return Recording(src, None)
    rec_nb = nbformat.read(path, as_version=4)
    src_nb = src_nb or nbformat.read(root / src, as_version=4)
    meta = rec_nb.metadata.get(META_KEY) or {}
    return Recording(src, path, meta.get("provenance") or {}, compare(src_nb, rec_nb), rec_nb)


def find(src: str, root: Path = ROOT, gpu: str | None = None) -> Recording:
    """The recording of chapter ``src`` (relative to ``root``) and whether it is current:
    ``gpu``'s where one is named; else, of the GPU folders holding a current recording, the
    one made last (its provenance's date): a chapter whose code did not change may still print
    what the library says differently now (a refusal's wording, a live check), and the later
    run shows it as it is; the published GPU's wins a tie. Where none is current, the published
    GPU's recording, else the first other folder's by name, so the page and the staleness test
    name what to record again. Its provenance names the GPU on the page."""
    if gpu is not None:
        return _read(src, gpu, root)
    folders = [PUBLISHED_GPU] + sorted(
        d.name for d in (root / "records" / "chapters").glob("*")
        if d.is_dir() and d.name != PUBLISHED_GPU)
    src_nb = nbformat.read(root / src, as_version=4)  # once, for every folder's comparison
    found = [r for r in (_read(src, g, root, src_nb) for g in folders) if r.exists]
    current = [r for r in found if r.usable]
    if current:     # max keeps the first of equal dates: the published GPU's
        return max(current, key=lambda r: r.provenance.get("date") or "")
    return found[0] if found else Recording(src, None)


def all_recordings(root: Path = ROOT, gpu: str = PUBLISHED_GPU) -> list[Path]:
    folder = root / "records" / "chapters" / gpu
    return sorted(folder.glob("*.ipynb")) if folder.is_dir() else []


# ---------------------------------------------------------------- what recorded outputs say

# An absolute path on the recording machine (/root/out/h100.json, /usr/local/cuda/bin/ncu,
# ~/...): a slash after a space, quote, bracket or "~" and before a name; a URL's "//" and a
# ratio like "TB/s" do not start one.
MACHINE_PATH = re.compile(r"(?:(?<=[\s\"'(\[=,])|^|~)/(?:[\w.+-]+/)+[\w.+-]*", re.M)


def _widget_text(nb, outputs) -> str:
    """The data traits (not the front-end code) of the widgets these outputs display."""
    state = (nb.metadata.get("widgets") or {}).get(
        "application/vnd.jupyter.widget-state+json", {}).get("state", {})
    texts = []
    for o in outputs:
        view = (o.get("data") or {}).get("application/vnd.jupyter.widget-view+json")
        if view and view.get("model_id") in state:
            st = state[view["model_id"]].get("state", {})
            texts.append(" ".join(str(v) for k, v in st.items() if not k.startswith("_")))
    return "\n".join(texts)


def output_text(nb, cell) -> str:
    """Everything a reader can read in a recorded cell's outputs: streams, text and Markdown
    and HTML results, tracebacks, and the data of the widgets it shows."""
    parts = []
    for o in cell.get("outputs", []):
        if o.get("output_type") == "stream":
            parts.append("".join(o.get("text", "")))
        elif o.get("output_type") == "error":
            parts.append("\n".join(o.get("traceback", [])))
        for mime, value in (o.get("data") or {}).items():
            if mime.startswith("text/"):
                parts.append("".join(value) if isinstance(value, list) else str(value))
    parts.append(_widget_text(nb, cell.get("outputs", [])))
    return "\n".join(parts)


def machine_paths(nb) -> list[str]:
    """'code cell N: /path' for every absolute path a recorded notebook's outputs show."""
    found = []
    for i, cell in enumerate(code_cells(nb), 1):
        for m in MACHINE_PATH.finditer(output_text(nb, cell)):
            found.append(f"code cell {i} ({cell.get('id')}): {m.group(0)}")
    return found


def unnamed_runs(nb) -> list[str]:
    """For a recording made with lineage (``META_KEY``'s ``lineage``): each code cell whose
    numbers came from several benchmark runs but whose outputs do not name every one of them
    (its date and its commit)."""
    meta = nb.metadata.get(META_KEY) or {}
    cells = code_cells(nb)
    problems = []
    for entry in meta.get("cells", []):
        runs = entry.get("runs") or []
        if len(runs) < 2:
            continue
        text = output_text(nb, cells[entry["index"]])
        for run in runs:
            date, commit = str(run.get("date") or "")[:10], str(run.get("commit") or "")[:7]
            if date not in text or commit not in text:
                problems.append(f"code cell {entry['index'] + 1} ({entry.get('id')}) mixes "
                                f"{len(runs)} runs but does not name the run of {date}, "
                                f"commit {commit}")
    return problems


def with_recorded_outputs(src_nb, rec: Recording):
    """The chapter's source with the recorded outputs (and saved widget state) in its cells.

    Markdown comes from the source, so prose edits need no new recording; code cells are the
    recorded ones (``rec`` must be usable).
    """
    assert rec.usable, rec.problems
    nb = copy.deepcopy(src_nb)
    for cell, recorded in zip(code_cells(nb), code_cells(rec.notebook)):
        cell.outputs = copy.deepcopy(recorded.get("outputs", []))
        cell.execution_count = recorded.get("execution_count")
    widgets = rec.notebook.metadata.get("widgets")
    if widgets:
        nb.metadata["widgets"] = current_widget_code(copy.deepcopy(widgets))
    else:
        nb.metadata.pop("widgets", None)
    return nb


def current_widget_code(widgets: dict) -> dict:
    """Saved widget state with each course widget's front-end code (``_esm``, ``_css``) taken
    from the library as it is now. The recording keeps what was measured (the widget's data
    traits); the code that draws it is the library's, not a measurement: a fix to a widget's
    JavaScript reaches the published pages without recording the chapters on a GPU again."""
    import importlib

    state = widgets.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for model in state.values():
        st = model.get("state", {})
        ident = st.get("_anywidget_id", "")
        if not ident.startswith("book.widgets.") or "_esm" not in st:
            continue
        module, _, cls = ident.rpartition(".")
        try:
            widget = getattr(importlib.import_module(module), cls)
        except (ImportError, AttributeError):
            continue   # a widget since renamed or removed: its recorded code stays
        for trait in ("_esm", "_css"):
            code = getattr(widget, trait, None)
            if isinstance(code, str) and trait in st:
                st[trait] = code
    return widgets


def stamp(executed_nb, provenance: dict, src: str, seconds: float) -> None:
    """Write the recording's metadata (provenance, cell hashes) into an executed notebook."""
    cells = []
    for i, c in enumerate(code_cells(executed_nb)):
        entry = {"index": i, "id": c.get("id"), "sha256": cell_key(c)}
        if RUNS_KEY in c.metadata:  # the runs the cell read (absent: not executed)
            entry["runs"] = c.metadata.pop(RUNS_KEY)
        cells.append(entry)
    executed_nb.metadata[META_KEY] = {
        "source": src,
        "provenance": provenance,
        "seconds": round(seconds, 1),
        "lineage": True,  # each executed cell lists the measurement runs it read
        "cells": cells,
    }


IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg")
BUILD_FIGURE_NOTE = ("(The figure above was drawn when this page was built, by the same code "
                     "from the same recorded data; the GPU run that recorded this cell's text "
                     "did not keep its figures.)\n")
# Text that marks a cell whose simulator run measured nothing: its figure (if any) would be the
# simulator's, not the GPU's, so it is never taken.
SIMULATOR_MARKERS = ("nothing to time", "Simulator:", "simulator: ")


def _images(outputs) -> list:
    return [o for o in outputs if o.get("output_type") in ("display_data", "execute_result")
            and any(t in o.get("data", {}) for t in IMAGE_TYPES)]


def with_build_figures(published_nb, built_nb) -> int:
    """Give recorded cells that hold no figure the figure the build drew for the same cell.

    Recordings made while the recorder ran matplotlib without IPython's inline backend kept
    each cell's text but no figure. A chapter's figures are drawn from recorded data (JSON
    under book/data, records/) or computed (diagrams, the tracer), so the build's own run of
    the same cell draws the same picture; it is taken only where that cell's build run shows
    no simulator marker, and is captioned as drawn at build time. Returns how many were taken.
    """
    taken = 0
    for pub, built in zip(code_cells(published_nb), code_cells(built_nb)):
        if code_key(pub) != code_key(built) or _images(pub.get("outputs", [])):
            continue
        figs = _images(built.get("outputs", []))
        text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", ""))
                       for o in built.get("outputs", []))
        if not figs or any(m in text for m in SIMULATOR_MARKERS):
            continue
        for fig in figs:
            pub.outputs.append(copy.deepcopy(fig))
            taken += 1
        # A stream, not display_data: myst-nb wraps every display_data output of a cell with a
        # figure caption in its own numbered figure, which would repeat the caption here.
        pub.outputs.append(nbformat.v4.new_output("stream", name="stdout",
                                                  text=BUILD_FIGURE_NOTE))
    return taken

