"""The labs, discovered: every module of this package named ``lab<number>_<topic>.py`` declares
one ``LAB = KernelLab(...)`` or ``LAB = NumericLab(...)`` (``autograder.labs.spec``), and
``registry()`` is the one list of labs that the grader, ``assign``, the tests and the tools
read. A lab is its module, its master ``solutions/<name>.ipynb`` and its rubric
``autograder/rubrics/<name>.toml``; nothing else names it. Instructor-side: the sandboxed
child never receives these modules, only seeds, shapes and argument order (see
autograder/sandbox/inside/).

The map: ``spec`` (the typed spec, ``KernelLab`` or ``NumericLab``, whose ``title``,
``chapters`` and ``asks`` the lab pages are written from); the problems labs share, each lab
binding its dtype and keeping what is its own: ``elementwise`` (an activation of gate and up,
``Elementwise``: labs 2 and 3 and the template) and ``linear_layer`` (an nn.Linear SwiGLU layer
and its single projection: labs 4, 5 and 6); ``seeds``: the per-array seeds; ``edits``: the
edits of a master a lab declares (``Edit``; ``Derived``, a submission made of them: its bounds
bugs, hazards, lesson controls and hostile submissions, ``LabSpec.derived``, which
``autograder.master`` makes and ``python -m tools.lab_fixtures`` writes for the suite); and the
labs, ``lab<number>_<topic>``, found by ``registry()`` (``python -m autograder list`` names them).
A staged lab's spec lists the ``Step``s its notebook builds the kernel in, each checked by
``check(fn, step=...)`` and each with the ``PlantedBug`` (an ``Edit``) its check is tested to catch,
optionally an ``explain(fn)`` that ``check`` prints after a failure (lab 5's first step draws
which lane holds what: ``book.kernels.probes.fragments.probe_tile``); each kernel lab declares the
``paths`` (``LabPath``) its master must take on every grader's case (logged per case;
tests/grader/test_lab_paths.py); a lab whose instructions the access tracer does not model
says why in ``untraced``, and ``check`` says so instead of tracing."""

from __future__ import annotations

import functools
import importlib
import pkgutil

from .spec import KernelLab, LabSpec, LabSpecError, NumericLab, Step, lab_number

__all__ = ["KernelLab", "LabSpec", "LabSpecError", "NumericLab", "Step", "get", "names",
           "registry", "resolve", "staged"]


@functools.cache
def registry() -> dict[str, LabSpec]:
    """{lab name: its spec}, in lab-number order, from the lab modules of this package."""
    found = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("lab"):
            continue  # spec, helpers: not labs
        lab_number(info.name)  # a lab module's name is the lab's name: refuse "lab5.py"
        module = importlib.import_module(f"{__name__}.{info.name}")
        spec = getattr(module, "LAB", None)
        if not isinstance(spec, LabSpec):
            raise LabSpecError(f"autograder/labs/{info.name}.py does not declare its lab: it "
                               "needs LAB = KernelLab(...) or NumericLab(...) "
                               "(autograder/labs/spec.py)")
        if spec.name != info.name:
            raise LabSpecError(f"autograder/labs/{info.name}.py declares name={spec.name!r}: "
                               "a lab's name is its module's file name; make them the same")
        found[info.name] = spec
    numbers = [s.number for s in found.values()]
    twice = sorted({n for n in numbers if numbers.count(n) > 1})
    if twice:
        raise LabSpecError("two lab modules share a number: "
                           + ", ".join(n for n in found if lab_number(n) in twice))
    return dict(sorted(found.items(), key=lambda kv: kv[1].number))


def names() -> tuple[str, ...]:
    """Every lab's full name, in order."""
    return tuple(registry())


def staged() -> tuple[str, ...]:
    """The labs whose notebook builds its kernel in steps (``check(fn, step=...)``)."""
    return tuple(n for n, s in registry().items() if s.staged)


def resolve(name: str) -> str:
    """Full lab name from 'lab2', '2', 'lab2_packed_swiglu' or a notebook path."""
    key = str(name).rsplit("/", 1)[-1].removesuffix(".ipynb").removesuffix(".py").lower()
    for full in registry():
        short = full.split("_")[0]
        if key in (full, short, short[3:]) or full.startswith(key + "_"):
            return full
    raise KeyError(f"unknown lab {name!r}: the labs are {', '.join(registry())} "
                   "(`python -m autograder list`)")


def get(name: str) -> LabSpec:
    """The spec of a lab, by any name ``resolve`` accepts."""
    return registry()[resolve(name)]
