"""The result of grading one submission: what the parts of a run (judge.py, timing.py,
sanitizer.py) fill in and the exporters (export.py: results.json, feedback.md, grades.csv)
read. A test is a typed record here; the exporter alone decides how Gradescope spells it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

PERFORMANCE = "performance"   # the name of the performance test, in every output
# A test whose points no grader here can award yet (performance in the simulator: it is timed
# on a GPU): it keeps its points in the maximum, scores 0 until then, and says so.
PENDING = "pending"


@dataclass
class TestRecord:
    """One line of the grade: a test with its points."""

    __test__ = False   # a record, not a pytest class

    name: str
    max_score: float
    score: float = 0
    output: str = ""
    visibility: str = "visible"    # Gradescope's: visible, after_due_date, ...
    hidden: bool = False           # a hidden case: its details withheld before the due date
    status: str | None = None      # its own status (the sanitizer's 0-point test; PENDING), else by score

    @classmethod
    def for_case(cls, case: dict, hidden_visibility: str, **kw) -> TestRecord:
        """The test of one correctness case, worth the case's points."""
        hidden = case["visibility"] == "hidden"
        return cls(name=case["name"], max_score=case["points"], hidden=hidden,
                   visibility=hidden_visibility if hidden else "visible", **kw)

    @property
    def passed(self) -> bool:
        return self.score >= self.max_score


WITHHELD = ("its details are withheld: it happened after the hidden cases began, and what your code "
            "did from then on is not shown before the due date (your instructor has it)")


def withheld(what: str) -> str:
    """What a student reads of something that happened after the hidden cases began."""
    return f"{what}; {WITHHELD}"


@dataclass
class Result:
    id: str
    file: str
    lab: str
    run: str
    status: str = "graded"
    sha256: str | None = None
    tests: list[TestRecord] = field(default_factory=list)
    flags: list = field(default_factory=list)      # the source scan's notes for review
    cell_errors: list = field(default_factory=list)
    problems: dict = field(default_factory=dict)   # what stopped grading, by where it happened
    performance: dict | None = None
    isolation: dict | None = None
    kernel_proof: dict | None = None
    after_exit: dict | None = None
    output: str = ""                               # what the submission printed (capped)
    output_bytes: int | None = None
    public_output_len: int | None = None           # printed before the first hidden case ran
    storage_before_hidden: dict | None = None      # sandbox.storage_use when the first hidden case began
    rss_peak_mib: int | None = None
    hidden_visibility: str = "after_due_date"
    score: float = 0.0
    max_score: float = 0.0
    execution_time: float = 0.0
    # the run's working state, never exported
    replies: dict = field(default_factory=dict, repr=False)    # case id -> (case, reply, ok)
    cells: list | None = field(default=None, repr=False)
    timing: dict | None = None                     # a recording waiting for phase 2
    oom: str | None = None                         # a test ran out of GPU memory beside others
    stopped_for_time: dict | None = None           # what was stopped for time: {"what", "beside_others"}
    # a failure that may not be the submission's (in CUDA or OS initialisation, before its code
    # ran): {"what", "before_code", "beside_others"}; graded again alone before it is scored
    not_own: dict | None = None
    regraded: dict | None = None                   # this is the regrade alone: {"why", "outcome"}
    t_start: float | None = None

    WORKING = ("replies", "cells")

    @property
    def after_hidden(self) -> bool:
        """The hidden cases have begun and their details are withheld (visibility not
        "visible"): whatever the child does from then on, its words, its numbers (bytes
        printed, files written, processes refused, an exit status) and its kinds of failure, could
        carry a hidden case's shape or values, so what the student reads of it is the grader's
        fixed words (``withheld``); the instructor has the rest in measurements.jsonl."""
        return self.public_output_len is not None and self.hidden_visibility != "visible"

    def oom_said(self) -> str | None:
        """The first thing said about this result that names CUDA's out-of-memory error."""
        said = [str(v) for v in self.problems.values()] + [e.get("message", "") for e in self.cell_errors] \
            + [t.output for t in self.tests if not (t.hidden and self.after_hidden)]
        hit = next((x for x in said if "OUT_OF_MEMORY" in x.upper().replace(" ", "_")), None)
        if hit is None:   # a hidden case's output is the child's words about a hidden case: its name only
            hit = next((f"test '{t.name}' (a hidden case)" for t in self.tests if t.hidden and self.after_hidden
                        and "OUT_OF_MEMORY" in t.output.upper().replace(" ", "_")), None)
        return hit[:300] if hit else None

    def test(self, name: str) -> TestRecord | None:
        return next((t for t in self.tests if t.name == name), None)

    @property
    def pending_points(self) -> float:
        """Points of the maximum that no grader here could award yet (PENDING tests)."""
        return sum(t.max_score for t in self.tests if t.status == PENDING)

    def to_json(self) -> dict:
        """For pending.json: everything but the working state that cannot be saved."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in self.WORKING}

    @classmethod
    def from_json(cls, d: dict) -> Result:
        names = {f.name for f in dataclasses.fields(cls)}
        out = cls(**{k: v for k, v in d.items() if k in names})
        out.tests = [t if isinstance(t, TestRecord) else TestRecord(**t) for t in out.tests]
        return out
