"""Which measurement runs a notebook cell's numbers come from.

A *run* is one execution of a benchmark script, known by its provenance (GPU, date, commit,
command). A record of ``book/data`` can hold rows of several runs (``python -m
book.bench.merge`` keeps each merged row's own provenance), so a table that reads two rows may
set side by side numbers measured days apart. This module keeps that visible:

- :func:`book.data.load` hands out rows that note their run whenever a measured value is read
  from them (:data:`MEASURED`: seconds, bandwidth, ...), targets that note the runs of the rows
  they were computed from, and :func:`book.data.record` notes each run a record holds;
- in a notebook (IPython), :func:`watch` collects the runs read by each cell: after a cell whose
  numbers came from more than one run, it prints one line naming each (:func:`note`), and where
  ``COURSE_LINEAGE`` names a file it appends the cell's runs there, one JSON line per cell
  (``tools/record.py`` stores them in the recording; ``tests/chapters/test_one_run.py`` checks
  that every recorded cell drawing on several runs names each of them).
"""

from __future__ import annotations

import hashlib
import json
import os
import textwrap

__all__ = ["MEASURED", "Row", "Target", "run_of", "runs_of", "note", "noted", "reset", "watch",
           "run_line", "runs_note", "LOG_ENV"]

#: the fields of a row that hold a measurement (reading one notes the row's run)
MEASURED = frozenset({"seconds", "p10_s", "p90_s", "samples_s", "bandwidth", "flops_per_s",
                      "share", "bytes_actual"})
#: the fields of a target that report its measurement
TARGET_FIELDS = frozenset({"value", "detail", "met"})
#: where a recording collects each cell's runs (one JSON line per cell)
LOG_ENV = "COURSE_LINEAGE"

_seen: dict[str, dict] = {}  # run key -> provenance, for the cell running now


def run_of(prov: dict) -> dict:
    """A run's identity: its date, commit, GPU and command."""
    return {k: (prov or {}).get(k) for k in ("date", "commit", "gpu", "command")}


def _key(prov: dict) -> str:
    return f"{(prov or {}).get('date')}|{(prov or {}).get('commit')}"


def note(prov: dict) -> None:
    """Note that the running cell read a number measured in the run ``prov``."""
    if prov:
        _seen.setdefault(_key(prov), run_of(prov))


def noted() -> list[dict]:
    """The runs noted since the last :func:`reset`, oldest first."""
    return sorted(_seen.values(), key=lambda r: str(r.get("date")))


def reset() -> None:
    _seen.clear()


class Row(dict):
    """A measured row that notes its run when a measurement is read from it."""

    __slots__ = ("run",)

    def __init__(self, row, run):
        super().__init__(row)
        self.run = run

    def __getitem__(self, key):
        if key in MEASURED:
            note(self.run)
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key in MEASURED:
            note(self.run)
        return super().get(key, default)


class Target(dict):
    """A target (a measured ratio against a goal) that notes the runs of its rows when read."""

    __slots__ = ("runs",)

    def __init__(self, target, runs):
        super().__init__(target)
        self.runs = list(runs)

    def _note(self, key):
        if key in TARGET_FIELDS:
            for p in self.runs:
                note(p)

    def __getitem__(self, key):
        self._note(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self._note(key)
        return super().get(key, default)


def runs_of(doc) -> list[dict]:
    """Every provenance a loaded record holds (its own and any nested one's), outermost first."""
    found = []

    def walk(o):
        if isinstance(o, dict):
            p = o.get("provenance")
            if isinstance(p, dict) and p.get("date"):
                found.append(p)
            for k, v in o.items():
                if k != "provenance":
                    walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(doc)
    return found


def run_line(run: dict) -> str:
    """One run in words: date and time (UTC), commit, and the command without the machine's
    paths."""
    from book.provenance import without_paths

    date = str(run.get("date") or "?")
    when = date[:16].replace("T", " ") + " UTC" if "T" in date else date
    return (f"{when}, commit {str(run.get('commit') or '?')[:7]}: "
            f"{without_paths(run.get('command')) or '?'}")


def runs_note(runs: list[dict]) -> str:
    """The line printed under a cell whose numbers come from several runs."""
    lines = [f"(Numbers from {len(runs)} measurement runs of book/data, on "
             f"{runs[0].get('gpu') or 'the GPU'}:"]
    for r in runs:
        lines += textwrap.wrap(run_line(r), 80, initial_indent="  - ",
                               subsequent_indent="    ", break_on_hyphens=False)
    lines[-1] += ")"
    return "\n".join(lines)


def _cell_key(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()


_watching = False


def watch(ip=None) -> bool:
    """In IPython: collect each cell's runs, name them under a cell that mixes runs, and log
    them where ``COURSE_LINEAGE`` says. Returns whether it is watching (once per kernel)."""
    global _watching
    if _watching:
        return True
    if ip is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        ip = get_ipython()
    if ip is None or not hasattr(ip, "events"):
        return False

    def before(info=None):
        reset()

    def after(result=None):
        runs = noted()
        reset()
        if len(runs) > 1:
            print(runs_note(runs), flush=True)
        log = os.environ.get(LOG_ENV)
        if log:
            info = getattr(result, "info", None)
            source = getattr(info, "raw_cell", "") or ""
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps({"execution_count": getattr(result, "execution_count", None),
                                    "cell": _cell_key(source), "runs": runs}) + "\n")

    ip.events.register("pre_run_cell", before)
    ip.events.register("post_run_cell", after)
    _watching = True
    return True
