"""A lab's master, read and edited: the one reader of its graded cells, in nbgrader's
preprocessor spirit (each transformation of the master small and named: autograder.labs.edits).

- ``graded_cells(lab)``: the code of ``solutions/<lab>.ipynb`` (or another notebook of that
  lab, its student version) that a solution consists of, as ``Cell(id, source)``: the cells
  the grader runs (``autograder.submission``'s reading: the setup cells left out), less the
  ``check(...)`` calls and the instructor's hidden tests, which no grade rests on. ``upto``:
  up to the cell that defines a step's function.
- ``edited(cells, edits)``: those cells with ``Edit``s made (a step's planted bug, a fixture's
  bounds bug), each refused where its text is gone.
- ``namespace(lab, edits)``: the cells, edited, executed as the notebook runs them.
- ``derive(lab, derived)``: the text of a submission derived from the master (``Derived``).
- ``handed_in(lab)``: the master notebook as a student who finished every part hands it in
  (its instructor's hidden-test blocks removed, nothing else changed).

Also the master's markers (otter-grader's and nbgrader's), which ``assign`` strips.
"""

from __future__ import annotations

import linecache
import re
from dataclasses import dataclass
from pathlib import Path

from .labs import get
from .labs.edits import Derived, Edit, EditError
from .submission import is_setup

__all__ = ["BEGIN", "BEGIN_HIDDEN", "END", "END_HIDDEN", "Cell", "Derived", "Edit", "EditError",
           "defines", "derive", "edited", "graded_cells", "handed_in", "namespace", "notebook",
           "without_hidden_tests"]

REPO = Path(__file__).resolve().parent.parent
BEGIN = re.compile(r"^(\s*)#+\s*BEGIN SOLUTION\b[:\s]*(.*)$")
END = re.compile(r"^\s*#+\s*END SOLUTION\b")
BEGIN_HIDDEN = re.compile(r"^\s*#+\s*BEGIN HIDDEN TESTS\b")
END_HIDDEN = re.compile(r"^\s*#+\s*END HIDDEN TESTS\b")
CHECK = re.compile(r"\s*check\(")   # a check cell: the student's self-test, not a solution


@dataclass(frozen=True)
class Cell:
    id: str       # the notebook's cell id (cell-<index> where it has none)
    source: str


def notebook(lab, where: str = "solutions") -> Path:
    """The lab's master (``where="labs"``: its student notebook)."""
    return REPO / where / f"{get(lab).name}.ipynb"


def defines(source: str, function: str) -> bool:
    return re.search(rf"^def {re.escape(function)}\(", source, re.M) is not None


def graded_cells(lab, path: str | Path | None = None, upto: str | None = None) -> list[Cell]:
    """The graded code of lab ``lab`` (a name or a spec) in its master or ``path``, in order;
    ``upto``: a step's name or function (``"final"``: the graded function), the cells up to
    and including the one that defines it."""
    import nbformat   # here: listing a lab's fixtures (tools.lab_fixtures) needs no nbformat

    spec = get(lab) if isinstance(lab, str) else lab
    path = Path(path) if path else notebook(spec.name)
    fn = None if upto is None else spec.step(upto).function
    out = []
    for i, c in enumerate(nbformat.read(path, as_version=4).cells):
        src = c.source
        if (c.cell_type != "code" or is_setup(c, src) or CHECK.match(src)
                or any(BEGIN_HIDDEN.match(line) for line in src.split("\n"))):
            continue
        out.append(Cell(c.get("id") or f"cell-{i}", src))
        if fn is not None and defines(src, fn):
            return out
    if fn is not None:
        raise LookupError(f"no graded cell of {path} defines {fn}")
    return out


def without_hidden_tests(source: str) -> str:
    """``source`` less its instructor's hidden-test blocks, marker lines included."""
    kept, hidden = [], False
    for line in source.split("\n"):
        if BEGIN_HIDDEN.match(line):
            hidden = True
        elif END_HIDDEN.match(line):
            hidden = False
        elif not hidden:
            kept.append(line)
    return "\n".join(kept)


def handed_in(lab):
    """Lab ``lab``'s master notebook (nbformat) as a student who finished every part hands it
    in: each code cell without its hidden-test blocks, which a student's notebook never has
    (``assign`` strips them with the solutions); the rest as it is."""
    import nbformat

    nb = nbformat.read(notebook(lab), as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = without_hidden_tests(cell.source)
    return nb


def edited(cells: list[Cell], edits=()) -> list[Cell]:
    """``cells`` with ``edits`` made in order; an edit without a cell goes to the last one."""
    out = list(cells)
    index = {c.id: i for i, c in enumerate(out)}
    for e in edits:
        i = len(out) - 1 if e.cell is None else index.get(e.cell)
        if i is None or i < 0:
            raise EditError(f"cell {e.cell!r} is not among the cells read: "
                            + ", ".join(index))
        out[i] = Cell(out[i].id, e.apply(out[i].source, out[i].id))
    return out


def namespace(lab, edits=(), upto: str | None = None, path: str | Path | None = None,
              into: dict | None = None) -> dict:
    """The names the graded cells define (``edits`` made), each cell executed in turn as the
    notebook runs it, its code named ``<lab cell-id>`` (with its lines: tracebacks and the
    access tracer quote them)."""
    spec = get(lab) if isinstance(lab, str) else lab
    ns = {"__name__": "__main__"} if into is None else into
    for c in edited(graded_cells(spec, path, upto), edits):
        name = f"<{spec.name} {c.id}>"
        linecache.cache[name] = (len(c.source), None, c.source.splitlines(True), name)
        exec(compile(c.source, name, "exec"), ns)
    return ns


def _without_markers(source: str) -> str:
    return "\n".join(line for line in source.split("\n")
                     if not (BEGIN.match(line) or END.match(line))).strip("\n")


def derive(lab, d: Derived) -> str:
    """The text of submission ``d`` of lab ``lab``: ``d.what`` as a comment, then the master's
    graded code up to the graded function's cell (or ``d.cells``) with ``d.edits`` made and
    the solution markers dropped, then ``d.append``; cells three lines apart."""
    spec = get(lab) if isinstance(lab, str) else lab
    cells = graded_cells(spec, upto=spec.function)
    if d.cells:
        unknown = set(d.cells) - {c.id for c in cells}
        if unknown:
            raise EditError(f"{d.name}: cells {sorted(unknown)} are not among the master's "
                            "graded cells")
        cells = [c for c in cells if c.id in d.cells]
    parts = [_without_markers(c.source) for c in edited(cells, d.edits)]
    if d.append:
        parts.append(d.append.strip("\n"))
    head = "\n".join("# " + line if line else "#" for line in d.what.strip().split("\n"))
    return head + "\n" + "\n\n\n".join(parts) + "\n"

