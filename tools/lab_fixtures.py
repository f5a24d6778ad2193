"""The submissions each lab derives from its master, written where the suite grades them, so
that a lab's fixtures are its module's declarations and nothing in tests/ names a lab by hand:

    python -m tools.lab_fixtures --write    # (re)write every derived fixture and the READMEs' tables
    python -m tools.lab_fixtures --check    # exit 1 naming what differs (tests/tooling/test_lab_fixtures.py)

A lab module declares them (``LabSpec.derived``: ``Derived`` of autograder/labs/edits.py, each
the master's graded code with edits made and a cell appended); ``autograder.master.derive``
makes each file's text. A ``Derived`` of kind K is ``tests/fixtures/K/<name>.py``, a lab's
``hostile`` ones ``tests/fixtures/lab<N>/<name>.py``. The tables of ``tests/fixtures/bounds/``
and ``controls/`` READMEs are written from the same declarations (what each file is: the first
sentence of its ``what``), between marker lines this tool keeps.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from tools.lab_pages import render

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
COMMAND = "python -m tools.lab_fixtures --write"
TABLES = ("bounds", "controls")   # the folders whose README lists what each file is
MARKER = "<!-- {} derived: written by `" + COMMAND + "` from autograder/labs/ (edit the labs there) -->"


def path(spec, d) -> Path:
    """Where derived submission ``d`` of lab ``spec`` is kept."""
    folder = spec.name.split("_")[0] if d.kind == "hostile" else d.kind
    return FIXTURES / folder / f"{d.name}.py"


def derived() -> dict[Path, tuple]:
    """{file: (lab spec, Derived)} for every lab's derived submissions, in file order."""
    from autograder import labs

    found = {path(spec, d): (spec, d) for spec in labs.registry().values() for d in spec.derived}
    return dict(sorted(found.items()))


def fixtures(folder: str, lab: str | None = None) -> list[Path]:
    """The derived files in tests/fixtures/<folder>/ (of one lab: a name ``labs.resolve`` takes)."""
    from autograder import labs

    name = None if lab is None else labs.resolve(lab)
    return [p for p, (spec, _) in derived().items()
            if p.parent.name == folder and (name is None or spec.name == name)]


def control(lab: str) -> Path:
    """The file of the control the lab's rubric names ([performance] control, by name)."""
    from autograder import labs
    from autograder.rubric import load_rubric

    spec = labs.get(lab)
    return path(spec, spec.derived_named(load_rubric(spec.name)["performance"]["control"]))


def sentence(text: str) -> str:
    """The first sentence of a ``what``, on one line, fit for a table cell."""
    one = " ".join(text.split())
    m = re.search(r"\.(\s+(?=[A-Z])|$)", one)
    return (one[:m.start()] if m else one).replace("|", "\\|")


def table(folder: str) -> str:
    """The README table of a folder's derived files: file, lab, what it is."""
    from autograder.rubric import load_rubric

    rows = ["| file | lab | what it is |", "| --- | --- | --- |"]
    for p, (spec, d) in derived().items():
        if p.parent.name != folder:
            continue
        named = d.kind == "controls" and load_rubric(spec.name).get(
            "performance", {}).get("control") == d.name
        what = ("**the rubric's control**: " if named else "") + sentence(d.what)
        rows.append(f"| `{p.name}` | {spec.number} | {what} |")
    return "\n".join(rows) + "\n\n"   # a blank line: the table ends before the marker


def expected() -> dict[Path, str]:
    """Every file this tool writes, with the text the labs give it."""
    from autograder.master import derive

    out = {p: derive(spec, d) for p, (spec, d) in derived().items()}
    for folder in TABLES:
        readme = FIXTURES / folder / "README.md"
        out[readme] = render(readme, MARKER, table(folder), str(readme.relative_to(ROOT)))
    return out


def orphans() -> list[Path]:
    """Files of the folders that hold only derived fixtures which no lab derives (a lab's
    declaration renamed or dropped: the old file would still be graded)."""
    made = set(derived())
    return sorted(p for folder in ("bounds", "controls", "hazards")
                  for p in (FIXTURES / folder).glob("*.py") if p not in made)


def stale() -> list[str]:
    """What differs from the labs' declarations: files to (re)write, then orphans."""
    out = [str(p.relative_to(ROOT)) for p, text in expected().items()
           if not p.exists() or p.read_text() != text]
    return out + [f"{p.relative_to(ROOT)} (derived by no lab: delete it)" for p in orphans()]


def write() -> list[Path]:
    done = []
    for p, text in expected().items():
        if not p.exists() or p.read_text() != text:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
            done.append(p)
    return done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.lab_fixtures",
                                 description=__doc__.split("\n\n")[0])
    how = ap.add_mutually_exclusive_group(required=True)
    how.add_argument("--write", action="store_true", help="rewrite what differs")
    how.add_argument("--check", action="store_true", help="exit 1 if anything differs")
    args = ap.parse_args(argv)
    if args.check:
        old = stale()
        if old:
            print(f"stale (run `{COMMAND}`): " + ", ".join(old))
            return 1
        print(f"the {len(derived())} derived fixtures are what the labs derive")
        return 0
    for p in write():
        print(f"wrote {p.relative_to(ROOT)}")
    for p in orphans():
        print(f"derived by no lab (delete it if nothing else grades it): {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
