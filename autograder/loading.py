"""Start a sandboxed child and load a submission's cells in it: the one way every part of a
grading run does it (the judge's tests, the lab's master the timer records, the simulator's
replay of a recording, the public tests under compute-sanitizer), with one typed outcome.

The child first imports Python, Numba and the course library and makes its CUDA context
(none of the submission's code has run: a failure then is never the submission's), says
``ready``, and runs the cells when told to ``load``. So a start ends in one of four ways:

- ``Loaded``: the cells ran (each cell's error, and a missing or miscalled function, are in
  its ``event``: the submission's own problems, for the judge to report);
- ``FailedBeforeCode``: the sandbox, the library or CUDA failed before any of the
  submission's code ran (a ``fatal`` event, or the child died or hung while it started);
- ``CrashedLoading``: the child died, hung or ran out of memory while the cells ran;
- ``Unexpected``: the child answered something the protocol does not have (the grader's bug
  or a broken child, never the student's to be told about as their error).

Every outcome holds the child (to read its output, and to close: the caller closes it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

from .sandbox import Child, ChildError

# the words a stage of the child's start is said in ("failed in ... before any of its code ran")
STAGES = {"cuda_init": "CUDA initialisation", "import": "importing the course library"}


@dataclass
class Loaded:
    """The cells ran. ``event``: the child's ``loaded`` reply (``isolation``, ``cell_errors``,
    ``problems``)."""

    child: Child
    event: dict
    loaded = True

    @property
    def isolation(self) -> dict:
        return self.event.get("isolation") or {}

    @property
    def cell_errors(self) -> list:
        return self.event.get("cell_errors", [])

    @property
    def problems(self) -> dict:
        return dict(self.event.get("problems", {}))


@dataclass
class FailedBeforeCode:
    """Stopped before any of the submission's code ran. ``stage``: the child's own word for
    where (``STAGES``; None when it died or hung without saying); ``message``: its account;
    ``error``: the ChildError when the child died or hung instead."""

    child: Child | None
    stage: str | None = None
    message: str = ""
    error: ChildError | None = None
    loaded = False

    def where(self) -> str:
        """Where it failed, in words: 'CUDA initialisation', 'the sandbox's start'."""
        return STAGES.get(self.stage, "the sandbox's start")

    def describe(self) -> str:
        return self.message or (f"{self.error.reason}: {self.error.detail}" if self.error else
                                "the sandbox failed to start")


@dataclass
class CrashedLoading:
    """The child died, hung or broke a budget while the cells ran (``error``)."""

    child: Child
    error: ChildError
    loaded = False

    def describe(self) -> str:
        return f"{self.error.reason}: {self.error.detail}"


@dataclass
class Unexpected:
    """The child answered ``event``, which the protocol does not have at this point."""

    child: Child
    event: dict
    loaded = False

    def describe(self) -> str:
        return self.event.get("error") or f"unexpected answer {str(self.event)[:200]}"


Outcome = Union[Loaded, FailedBeforeCode, CrashedLoading, Unexpected]


def load(ctx, cells, gpu: int | None, *, who: str | None = None,
         load_s: float | Callable[[], float] | None = None, simulated: bool | None = None,
         setup: Callable[[Child], None] | None = None, **wrapper) -> Outcome:
    """A child of ``ctx.children`` (the run's one factory: its isolation, budgets and hidden
    paths) for ``cells`` on ``gpu``, started and loaded; the outcome. ``who``: the
    submission's id, for the log (and the tests' fault injection, tests/grader/faults.py);
    ``load_s``: each wait's deadline (the rubric's load_s by default; a callable is asked
    before each wait, for a caller with a budget of its own); ``setup(child)``: what the
    caller puts in the child's folder before any of the submission's code runs there (the
    simulator's replay brings the recording: once the cells have run, the folder is theirs
    too); ``simulated``, ``wrapper``: ChildFactory.student's. The caller closes
    ``outcome.child``."""
    if load_s is None:
        load_s = ctx.limits.get("load_s", 120)
    wait = load_s if callable(load_s) else (lambda: load_s)
    child = ctx.children.student(cells, gpu, simulated=simulated, **wrapper)
    if setup is not None:
        try:
            setup(child)
        except BaseException:
            child.close()
            raise
    try:   # Python, numba, book and the CUDA context: none of the submission's code yet
        ev = child.recv(wait())
    except ChildError as e:
        return FailedBeforeCode(child, error=e)
    if ev.get("event") == "fatal":   # the child stopped before any of the submission's code
        return FailedBeforeCode(child, stage=ev.get("stage"),
                                message=ev.get("error") or "the sandbox failed to start")
    if ev.get("event") != "ready":
        return Unexpected(child, ev)
    try:
        ev = ctx.ask(child, wait(), cmd="load")
    except ChildError as e:
        return CrashedLoading(child, e)
    if ev.get("event") != "loaded":
        return Unexpected(child, ev)
    return Loaded(child, ev)
