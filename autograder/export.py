"""Outputs of a grading run: Gradescope's results.json, feedback.md, grades.csv, merging shards
(the Gradescope bundle is autograder/gradescope.py).

Gradescope's format: {"score", "execution_time", "output", "visibility", "stdout_visibility",
"tests": [{"name", "score", "max_score", "status", "output", "visibility"}]}; extra keys
live under "extra_data".
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import threading
from pathlib import Path

from .results import PENDING, PERFORMANCE

NEEDS_GPU_REGRADE = ("NEEDS A GPU REGRADE: the simulator could not judge this submission (see "
                     "below); this score is not final, an instructor will grade it again on a GPU")


def pending_note(points: float) -> str:
    """What a pending test says first: its points are in the maximum and not yet awarded."""
    return (f"PENDING: these {points:g} points are awarded when your kernels are timed on a GPU "
            "(your instructor grades performance there); until then they count as 0")


def first_error(result) -> str | None:
    """The first thing that went wrong, with its line: a cell's error (a SyntaxError's message
    and line, or the innermost line of a traceback), else the first problem's first line."""
    if result.cell_errors:
        e = result.cell_errors[0]
        msg = str(e.get("message", "")).strip()
        notebook = not str(result.file).endswith(".py")     # a .py file is one "cell"

        def at(cell, line=None):
            return ", ".join(x for x in (f"cell {cell}" if notebook else "",
                                         f"line {line}" if line else "") if x) or Path(result.file).name

        if e.get("error") == "SyntaxError":          # "line N: message"
            line, _, what = msg.partition(": ")
            return f"ERROR: {at(e['cell'], line.removeprefix('line '))}: SyntaxError: {what}"
        frames = re.findall(r'File "<cell (\d+)>", line (\d+)', msg)
        where = at(*frames[-1]) if frames else at(e["cell"])
        return f"ERROR: {where}: {(msg.splitlines() or [e.get('error', '')])[-1]}"
    for v in result.problems.values():
        return "ERROR: " + str(v).strip().splitlines()[0][:500]
    return None


def _summary(result) -> str:
    """Gradescope's `output`: what went wrong first (a regrade on a GPU, the first error and
    its line), then the score, a regrade alone if there was one, and every problem."""
    lines = [NEEDS_GPU_REGRADE] if result.status == "needs a GPU" else []
    first = first_error(result)
    if first:
        lines.append(first)
    pending = result.pending_points
    lines.append(f"{result.score}/{result.max_score} points for {result.lab}"
                 + (f" ({pending:g} of them pending: performance is timed on a GPU, by your "
                    "instructor; until then they count as 0)" if pending else ""))
    if (getattr(result, "regraded", None) or {}).get("note"):   # graded again, alone (grade.py)
        lines.append(f"GRADED AGAIN: {result.regraded['note']}")
    for k, v in result.problems.items():
        lines.append(f"PROBLEM ({k}): {v}")
    return "\n".join(lines)


HIDDEN_NOTE = "details of hidden cases (shapes, values) are shown after the due date"


def _shows_hidden(result) -> bool:
    return result.hidden_visibility == "visible"


def printed_output(result) -> str:
    """What the submission printed; before the due date only the part printed before the first
    hidden case ran (a student's print of an array's shape would show a hidden shape)."""
    text = result.output or ""
    cut = result.public_output_len          # characters (grade.py counts them from the bytes)
    if cut is not None and not _shows_hidden(result) and len(text) > cut:
        # the cut note's byte counts include what was printed during the hidden cases: not said
        note = ("\n[... output cut: the grader keeps the first part of it]"
                if "\n[... output cut:" in text else "")
        text = (text[:cut] + f"\n[... output printed while the hidden cases ran is withheld: {HIDDEN_NOTE}]"
                + note)
    return text


def gradescope_test(t) -> dict:
    """One test of a ``Result`` (a ``results.TestRecord``) as Gradescope's JSON spells it.

    Gradescope's specification (gradescope-autograders.readthedocs.io/en/latest/specs/, "Test
    case status"; github.com/gradescope/autograder_samples docs/specs.md) knows two statuses,
    "passed" and "failed", and counts every test's max_score in the total: a test cannot be
    left ungraded. A PENDING test (performance, where nothing can be timed) therefore keeps
    its points in the maximum (the course's total, as `autograder list` says), scores 0, is
    "failed" (a test "passed" at 0/0 said the opposite of the truth) and says first that it
    is pending and why."""
    status = t.status or ("passed" if t.passed else "failed")
    output = t.output
    if status == PENDING:
        status, output = "failed", pending_note(t.max_score) + "\n" + t.output
    return {"name": t.name + (" (hidden case)" if t.hidden else ""),
            "score": t.score, "max_score": t.max_score,
            # a test may say its own status: the sanitizer's 0-point test fails
            # (red on Gradescope) when it found something, with no points lost
            "status": status, "output": output, "visibility": t.visibility}


def gradescope_doc(score, output: str, tests, extra_data: dict, execution_time=None) -> dict:
    """A whole results.json: the one place Gradescope's top-level keys are written (a graded
    submission, and gradescope.py's refusals and grader errors)."""
    doc = {"score": score}
    if execution_time is not None:
        doc["execution_time"] = round(execution_time, 2)
    doc.update({"output": output, "visibility": "visible", "stdout_visibility": "hidden",
                "tests": [gradescope_test(t) for t in tests], "extra_data": extra_data})
    return doc


def gradescope_json(result) -> dict:
    """Gradescope's results.json. Hidden cases carry the rubric's visibility (after_due_date by
    default: Gradescope shows them, with their details, only after the due date)."""
    extra = {"id": result.id, "lab": result.lab, "max_score": result.max_score,
             "pending_points": result.pending_points, "status": result.status, "file": result.file, "sha256": result.sha256,
             "run": result.run, "flags": [f["what"] + " [" + f["where"] + "]" for f in result.flags]
             + list((result.performance or {}).get("flags", [])),
             "cell_errors": result.cell_errors, "isolation": result.isolation,
             "performance": result.performance,
             "output_bytes": None if result.after_hidden else result.output_bytes,
             "printed": printed_output(result)[:4000],
             "regraded": getattr(result, "regraded", None)}
    return gradescope_doc(result.score, _summary(result), result.tests, extra,
                          execution_time=result.execution_time)


def feedback_markdown(result) -> str:
    L = [f"# Feedback: {result.lab}", ""]
    if result.status == "needs a GPU":
        L += [f"**{NEEDS_GPU_REGRADE}**", ""]
    L += [f"**{result.score} / {result.max_score} points** (submission `{result.id}`)", ""]
    if result.pending_points:
        L += [pending_note(result.pending_points) + ".", ""]
    if (getattr(result, "regraded", None) or {}).get("note"):
        L += [f"**Graded again, alone:** your submission {result.regraded['note']}.", ""]
    for k, v in result.problems.items():
        L += [f"**Problem ({k}):**", "", "```", str(v).strip(), "```", ""]
    if result.cell_errors:
        L += ["## Cells that raised while your notebook ran", ""]
        for e in result.cell_errors:
            L += [f"- cell {e['cell']}: `{e['error']}`", "", "```", e["message"].strip()[-1500:], "```", ""]
    L += ["## Tests", "", "| test | points | |", "|---|---|---|"]
    for t in result.tests:
        mark = ("pending (timed on a GPU)" if t.status == PENDING else
                ("see below" if t.status == "failed" else "nothing found") if t.status else
                "not measured" if t.max_score == 0 else
                "pass" if t.passed else "FAIL")
        L.append(f"| {t.name}{' (hidden)' if t.hidden else ''} | {t.score}/{t.max_score} | {mark} |")
    L.append("")
    for t in result.tests:
        if (t.output and (not t.passed or t.status == "failed")
                or t.name == PERFORMANCE):
            text = str(t.output).strip()[-3000:]
            if t.hidden and not _shows_hidden(result):
                text = f"failed: {HIDDEN_NOTE}"
            L += [f"### {t.name}", "", "```", text, "```", ""]
    if result.flags:
        L += ["## For review", "", "The grader noticed these in your code; they cost no points (the "
              "score rests on the grader's replay of your kernels), but an instructor may look:", ""]
        for f in result.flags:
            L.append(f"- {f['what']} ({f['where']})")
        L.append("")
    if result.output:
        L += ["## Your code's printed output (first part)", "", "```", printed_output(result)[-4000:], "```", ""]
    return "\n".join(L)


def merge(out: Path, shard_dirs) -> Path:
    """Combine shard folders of one lab (DIR/<id>/ and measurements.jsonl) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    labs = set()
    with open(out / "measurements.jsonl", "a") as log:
        for d in map(Path, shard_dirs):
            if not d.is_dir():
                raise SystemExit(f"merge: {d} is not a folder")
            for rj in sorted(d.glob("*/results.json")):
                meta = json.loads(rj.read_text()).get("extra_data", {})
                labs.add(meta.get("lab"))
                dst = out / rj.parent.name
                if dst.exists() and dst.resolve() != rj.parent.resolve():
                    if (dst / "results.json").exists():
                        raise SystemExit(f"merge: {rj.parent.name} is graded in two shards")
                if dst.resolve() != rj.parent.resolve():
                    shutil.copytree(rj.parent, dst, dirs_exist_ok=True)
            m = d / "measurements.jsonl"
            if m.exists() and m.resolve() != (out / "measurements.jsonl").resolve():
                log.write(m.read_text())
    labs.discard(None)
    if len(labs) > 1:
        raise SystemExit(f"merge: the shards grade different labs: {sorted(labs)}")
    return write_grades_csv(out, labs.pop()) if labs else out


_csv_lock = threading.Lock()


def write_grades_csv(out: Path, lab: str) -> Path:
    """grades.csv from every DIR/<id>/results.json (so it is always complete and consistent)."""
    rows, names = [], []
    for rj in sorted(Path(out).glob("*/results.json")):
        try:
            r = json.loads(rj.read_text())
        except (OSError, ValueError):
            continue
        meta = r.get("extra_data", {})
        if meta.get("lab") != lab:
            continue
        row = {"id": meta.get("id", rj.parent.name), "total": r.get("score"),
               "max": meta.get("max_score"), "status": meta.get("status"),
               "flags": " | ".join(meta.get("flags", []))}
        for t in r.get("tests", []):
            row[t["name"]] = t["score"]
            if t["name"] not in names:
                names.append(t["name"])
        rows.append(row)
    path = Path(out) / "grades.csv"
    with _csv_lock:
        tmp = path.with_name(f"grades.csv.tmp{os.getpid()}")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["id", "total", "max", *names, "status", "flags"])
            w.writeheader()
            for row in rows:
                w.writerow(row)
        os.replace(tmp, path)
    return path
