"""Hazards: what a kernel does wrong that its values may not show, in the words every grader uses.

A race between blocks, a race on shared memory, a barrier not every thread reaches, a read
past the end of an input: each can leave the values right on one run and wrong on the next,
so a grader that judged values alone gave the same kernel different verdicts run to run and
grader to grader (issue 41). Found by the simulator's access tracer (``book.simulator.hazard_recorder``: the
same check on every grader, a simulated run of the student's function) or, on a GPU, by
compute-sanitizer (``autograder/sanitize.py``), a hazard costs the case it was found in its
points, and is said as what it is, never as a wrong value or as work done on the host.

Runs in the trusted process: it reads what a child or the tool reported (untrusted data:
:func:`from_report` keeps only well-formed fields), never the student's objects.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# The kinds of hazard, each with the one sentence that says why it costs points.
KINDS = {
    "race_global": ("a race between blocks",
                    "blocks run in any order and at the same time: a word one block writes "
                    "and another reads (or writes) needs an atomic between them, with a "
                    "`cuda.threadfence()` before the atomic that publishes the writes"),
    "race_shared": ("a race on shared memory",
                    "a word one warp writes and another warp reads needs a "
                    "`cuda.syncthreads()` between the write and the read"),
    "barrier": ("a barrier not every thread reaches",
                "`cuda.syncthreads()` must be reached by every thread of the block (never "
                "inside a branch some threads skip)"),
    "read_past": ("a read outside an input",
                  "a load past the end (or before the start) of an array reads whatever "
                  "memory lies beside it; on a GPU it can fault or read another tensor"),
}

FOUND_BY = {
    "tracer": "the grader's access tracer, in a simulated run of your function",
    "racecheck": "compute-sanitizer's racecheck",
    "synccheck": "compute-sanitizer's synccheck",
    "memcheck": "compute-sanitizer's memcheck",
}


@dataclass(frozen=True)
class Hazard:
    """One hazard found in one call: ``kind`` (a key of KINDS), the array it concerns (a
    parameter's name, "shared memory" or "a scratch array"), the flat index of the first word
    found, ``detail`` (who wrote and who read: "written by block 2, read by block 5"), where
    in the student's code when known ("cell 4, line 12") and ``found_by`` (a key of FOUND_BY)."""

    kind: str
    array: str
    index: int | None = None
    detail: str = ""
    where: str = ""
    found_by: str = "tracer"
    count: int = 1          # how many words (or reports) of this kind and array

    def to_json(self) -> dict:
        return asdict(self)


def from_report(items) -> list[Hazard]:
    """Hazards from a child's or a tool's report (a list of dicts), each field checked and
    cut to length; anything not of that form is dropped (an untrusted report can only cost
    its own case points, never name another's)."""
    out = []
    for it in items if isinstance(items, list) else ():
        if not isinstance(it, dict) or it.get("kind") not in KINDS:
            continue
        try:
            index = None if it.get("index") is None else int(it["index"])
            count = max(1, int(it.get("count", 1)))
        except (TypeError, ValueError):
            continue
        found_by = it.get("found_by") if it.get("found_by") in FOUND_BY else "tracer"
        out.append(Hazard(kind=it["kind"], array=str(it.get("array", ""))[:60], index=index,
                          detail=str(it.get("detail", ""))[:300], where=str(it.get("where", ""))[:120],
                          found_by=found_by, count=count))
        if len(out) >= 20:
            break
    return out


def message(h: Hazard) -> str:
    """One hazard in the words every grader uses (the simulator, a GPU, ``check()``)."""
    name, why = KINDS[h.kind]
    at = f" `{h.array}`" if h.array and not h.array.startswith(("shared", "a ")) else \
        (f" {h.array}" if h.array else "")
    idx = f" at flat index {h.index}" if h.index is not None else ""
    more = f" ({h.count} words in all)" if h.count > 1 else ""
    where = f", {h.where}" if h.where else ""
    detail = f": {h.detail}" if h.detail else ""
    on = f" on{at}" if at else ""
    return (f"{name.upper()}{on}{idx}{more}{where}{detail}. Found by {FOUND_BY[h.found_by]}. "
            f"Why it costs this case its points: {why}")


def messages(hazards) -> str:
    """The lines a case's message gets for its hazards ("" when none)."""
    return "".join("\n" + message(h) for h in hazards)
