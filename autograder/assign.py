"""Generate the student labs (labs/*.ipynb) from the masters (solutions/*.ipynb).

Markers (otter-grader / nbgrader conventions):
- ``# BEGIN SOLUTION [hint]`` ... ``# END SOLUTION`` (any number of ``#``): the region is
  replaced. Indented (inside a function): ``raise NotImplementedError("<hint>")``. At the top
  level of a cell: a ``# YOUR CODE HERE: <hint>`` comment, so the cell still runs.
- ``### BEGIN HIDDEN TESTS`` ... ``### END HIDDEN TESTS``: removed (the instructor's own
  checks when running the master).
- Cells tagged ``remove_cell``, ``solution`` or ``instructor``: dropped.
- The setup cell (autograder/setup_template.py, one template) follows the lab's title cell; a master
  without one (nor its placeholder, a bare `import book`) is refused.
- A kernel lab built in steps (the ``steps`` of its spec, autograder/labs/): each step's
  function is defined in a cell of its own, with its solution between markers like the final
  one's, followed by a check cell ``check(<function>, step="<name>")`` and a Markdown cell of
  hints (``<details><summary>Hint 1</summary>``...). A master that drifts from its lab object
  (a step without its cell, check or hints; a check naming a step the lab does not have) is
  refused with the step named.
Outputs and execution counts are cleared. The output is deterministic, so a test can say
when labs/ is stale.
"""

from __future__ import annotations

import copy
import re
import textwrap
from pathlib import Path

import nbformat

from . import setup_template
from .master import BEGIN, BEGIN_HIDDEN, END, END_HIDDEN  # the master's markers: its reader's

REPO = Path(__file__).resolve().parent.parent
DROP_TAGS = {"remove_cell", "solution", "instructor"}
DEFAULT_HINT = "write this part (see the instructions above)"


class MarkerError(ValueError):
    pass


WIDTH = 80  # the book's code column: generated lines keep to it as the masters do


def _raise_hint(indent: str, hint: str) -> list[str]:
    """``raise NotImplementedError(hint)``, the hint split over lines of at most WIDTH."""
    one = f"{indent}raise NotImplementedError({hint!r})"
    if len(one) <= WIDTH:
        return [one]
    pad = indent + "    "
    parts = textwrap.wrap(hint, WIDTH - len(pad) - 4, drop_whitespace=False)
    return ([f"{indent}raise NotImplementedError("]
            + [f"{pad}{part!r}" for part in parts] + [f"{indent})"])


def strip_source(src: str, where: str = "") -> str:
    out, i = [], 0
    lines = src.split("\n")
    while i < len(lines):
        line = lines[i]
        m = BEGIN.match(line)
        if m:
            indent, hint = m.group(1), (m.group(2).strip() or DEFAULT_HINT)
            j = i + 1
            while j < len(lines) and not END.match(lines[j]):
                if BEGIN.match(lines[j]):
                    raise MarkerError(f"{where}: nested BEGIN SOLUTION at line {j + 1}")
                j += 1
            if j == len(lines):
                raise MarkerError(f"{where}: BEGIN SOLUTION at line {i + 1} has no END SOLUTION")
            if indent:
                out.append(f"{indent}# YOUR CODE HERE")
                out.extend(_raise_hint(indent, hint))
            else:
                out.extend(textwrap.wrap(f"YOUR CODE HERE: {hint}", WIDTH,
                                         initial_indent="# ", subsequent_indent="#   "))
            i = j + 1
            continue
        if BEGIN_HIDDEN.match(line):
            j = i + 1
            while j < len(lines) and not END_HIDDEN.match(lines[j]):
                j += 1
            if j == len(lines):
                raise MarkerError(f"{where}: BEGIN HIDDEN TESTS at line {i + 1} has no END HIDDEN TESTS")
            i = j + 1
            continue
        if END.match(line) or END_HIDDEN.match(line):
            raise MarkerError(f"{where}: END marker at line {i + 1} without BEGIN")
        out.append(line)
        i += 1
    return "\n".join(out).rstrip() + ("\n" if src.endswith("\n") else "")


def setup_source() -> str | None:
    try:
        return setup_template.render()
    except Exception:  # no checkout's _config.yml (an installed package): keep the master's cell
        return None


CHECK_STEP = re.compile(r"""^\s*check\(\s*(\w+)\s*,\s*step\s*=\s*["'](\w+)["']""", re.M)


def check_steps(nb, name: str) -> None:
    """Raise MarkerError where the master and its lab's steps disagree (see the docstring)."""
    from . import labs

    stem = name.removesuffix(".ipynb")
    if stem not in labs.registry():
        raise MarkerError(f"{name}: no lab named {stem!r} (the labs: {', '.join(labs.names())}): "
                          f"a master needs its lab module autograder/labs/{stem}.py declaring "
                          "LAB (autograder/labs/spec.py), or rename it after its lab")
    lab = labs.get(stem)
    steps = {s.name: s for s in lab.steps}
    cells = list(nb.cells)
    seen = set()
    for k, cell in enumerate(cells):
        for fn, step in CHECK_STEP.findall(cell.source) if cell.cell_type == "code" else ():
            if step not in steps:
                raise MarkerError(f"{name} cell {k + 1}: check(..., step={step!r}) but "
                                  f"{lab.name} has steps {', '.join(steps) or 'none'} "
                                  "(autograder/labs/)")
            if fn != steps[step].function:
                raise MarkerError(f"{name} cell {k + 1}: step {step!r} checks {fn}, but the "
                                  f"lab's step is {steps[step].function}")
            defined = [c for c in cells[:k] if c.cell_type == "code"
                       and re.search(rf"^def {fn}\(", c.source, re.M)]
            if not defined or not any(BEGIN.match(line)
                                      for line in defined[-1].source.split("\n")):
                raise MarkerError(f"{name}: step {step!r}: no cell before its check defines "
                                  f"{fn}() with its solution between BEGIN/END SOLUTION")
            if not any(c.cell_type == "markdown" and "<summary>Hint 1</summary>" in c.source
                       for c in cells[k + 1:k + 2]):
                raise MarkerError(f"{name}: step {step!r}: its check cell is not followed by "
                                  "a Markdown cell of hints (<details><summary>Hint 1...)")
            seen.add(step)
    missing = [s for s in steps if s not in seen]
    if missing:
        raise MarkerError(f"{name}: no check cell for step(s) {', '.join(missing)}: add "
                          "check(<function>, step=\"<name>\") after each step's cell")


def make_lab(master_nb, name: str):
    check_steps(master_nb, name)
    if setup_template.setup_index(master_nb) is None:
        raise MarkerError(f"{name}: no setup cell: the first code cell after the title must be the "
                          "course's setup cell (a bare `import book` is its placeholder; "
                          f"`python -m tools.setup_cell --write solutions/{name}` writes it). "
                          "Without it the student's lab would not install the course on Colab")
    nb = copy.deepcopy(master_nb)
    cells = []
    for k, cell in enumerate(nb.cells):
        tags = set((cell.get("metadata") or {}).get("tags") or [])
        if tags & DROP_TAGS:
            continue
        if cell.cell_type == "code":
            was = cell.source.strip()
            cell.source = strip_source(cell.source, f"{name} cell {k + 1}")
            if was and not cell.source.strip():
                continue  # only hidden tests: nothing left for the student
            cell.outputs = []
            cell.execution_count = None
        cells.append(cell)
    nb.cells = cells
    if setup_source() is not None:
        setup_template.fix(nb)  # the template (or the master's placeholder made one), after the title
    nb.metadata.pop("widgets", None)
    return nb


def render_lab(master_path: Path) -> str:
    nb = nbformat.read(str(master_path), as_version=4)
    lab = make_lab(nb, master_path.name)
    return nbformat.writes(lab) + "\n"


def masters_of_labs(sol: Path) -> list[Path]:
    """The master of every lab in the registry, in lab order; a lab without its master, or a
    master without its lab, is refused by name."""
    from . import labs

    masters = [sol / f"{n}.ipynb" for n in labs.names()]
    missing = [m.name for m in masters if not m.exists()]
    if missing:
        raise SystemExit(f"no master in {sol} for {', '.join(missing)}: each lab module "
                         "(autograder/labs/) needs its master notebook solutions/<lab>.ipynb")
    orphans = sorted(p.name for p in sol.glob("lab*.ipynb") if p.stem not in labs.registry())
    if orphans:
        raise SystemExit(f"masters without a lab module: {', '.join(orphans)}: add "
                         "autograder/labs/<lab>.py declaring LAB, or remove the master")
    return masters


def assign_all(check_only: bool = False) -> list[str]:
    sol, labs = REPO / "solutions", REPO / "labs"
    labs.mkdir(exist_ok=True)
    stale = []
    masters = masters_of_labs(sol)
    for m in masters:
        text = render_lab(m)
        dst = labs / m.name
        if not dst.exists() or dst.read_text() != text:
            stale.append(m.name)
            if not check_only:
                dst.write_text(text)
                print(f"wrote {dst.relative_to(REPO)}")
    return stale
