"""Edits of a lab's master, declared beside its steps: one ``Edit`` (nbgrader's preprocessor
idea made small: one named change to the master's graded code) and ``Derived``, a whole
submission made from the master by edits. A step's ``PlantedBug`` is an ``Edit`` with the words
its check must say; a lab's bounds bugs, hazards, lesson controls and hostile submissions are
``Derived`` (``LabSpec.derived``). ``autograder.master`` reads the master and applies them;
``python -m tools.lab_fixtures --write`` writes each ``Derived`` where the suite grades it.

Declarations only: nothing here reads a notebook, so a lab module imports it freely.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# What a derived submission is for, by the folder of tests/fixtures/ it is written to (a
# lab's "hostile" ones go to tests/fixtures/lab<N>/): each kind is graded by its own tests.
KINDS = {
    "bounds": "a store outside an array, or blockIdx forgotten in one grid dimension: its "
              "cases lost, said as where it stored (tests/grader/test_bounds_grading.py)",
    "controls": "correct, but missing the lab's lesson: the one the rubric names "
                "([performance] control) sets its performance lines once timed on a GPU "
                "(tests/grader/test_lesson_controls.py)",
    "hazards": "a result kept between calls, a race, a read outside an input: its cases lost "
               "on every grader, said as the hazard",
    "sanitizer": "a fault only compute-sanitizer names on a GPU, beside the master unchanged",
    "hostile": "anything else a student may hand in, judged as its first line says (the lab's "
               "own test file grades it)",
}


class EditError(ValueError):
    """An edit that no longer applies: the master changed under it. The message names the
    cell and the text; look at what the edit stood for again (then rewrite the fixtures)."""


@dataclass(frozen=True)
class Edit:
    """In one graded cell of the master (``cell``: its id; None: the last cell read, the one
    defining the function the code is read up to), every ``old`` becomes ``new``. ``old``
    must be there: an edit that silently changed nothing would test the master itself."""

    old: str
    new: str
    cell: str | None = None

    def __post_init__(self):
        if not self.old or self.old == self.new:
            raise EditError(f"an Edit changes something: old={self.old!r}, new={self.new!r}")

    def apply(self, source: str, where: str) -> str:
        """``source`` (cell ``where``) with the edit made."""
        if self.old not in source:
            raise EditError(f"{self.old!r} is not in cell {where} of the master any more: the "
                            "master changed; edit the declaration to match it")
        return source.replace(self.old, self.new)


@dataclass(frozen=True)
class Derived:
    """A submission derived from the lab's master: its graded code (the cells up to the graded
    function's, or only ``cells``, by id), ``edits`` made, ``append`` added as a last cell,
    under a comment, ``what``, saying what it is and what the grader must make of it. Its
    file is ``<name>.py`` in its ``kind``'s folder, its stem the grader's submission id (a
    rubric names its control by it)."""

    kind: str
    name: str
    what: str
    edits: tuple = ()
    append: str = ""
    cells: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "edits", tuple(self.edits))
        object.__setattr__(self, "cells", tuple(self.cells))
        if self.kind not in KINDS:
            raise EditError(f"Derived {self.name!r}: kind {self.kind!r} is not one of "
                            f"{', '.join(KINDS)}")
        if not re.fullmatch(r"[a-z0-9_]+", self.name):
            raise EditError(f"Derived {self.name!r}: a name is a file stem (a-z, 0-9, _)")
        if not all(isinstance(e, Edit) for e in self.edits):
            raise EditError(f"Derived {self.name!r}: edits holds Edit(...) objects")
        if not self.what.strip():
            raise EditError(f"Derived {self.name!r}: say what it is in `what`")


# Every kernel lab keeps one of these among its hazards (issue 41): each case is called again
# on the same arrays with new inputs, so a result kept from the first call must lose it.
_KEPT_BY_SHAPE = """
# (planted) the first call's result kept by shape and copied into `out` on every later call
_FIRST = {{}}
_computed = {fn}


def {fn}(*args):
    key = tuple(tuple(a.shape) for a in args)
    out = args[-1]
    if key in _FIRST:
        out.copy_to_device(_FIRST[key])
        return out
    _computed(*args)
    _FIRST[key] = out.copy_to_host()
    return out
"""


def cache_by_shape(lab: str, function: str) -> Derived:
    """Lab ``lab``'s (``lab<N>``) master with its graded ``function`` wrapped in a cache by
    shape: the hazard fixture every kernel lab declares."""
    return Derived("hazards", f"{lab}_cache_by_shape", """\
the lab's master with its function wrapped in a cache: the first call at each shape runs the
kernels, every later call copies that call's result into `out`. Right on the first call of a
case, wrong on its second (the same arrays, new inputs): every case fails, on every grader,
said as a dependence on an earlier call.""", append=_KEPT_BY_SHAPE.format(fn=function))
