"""A submission's file name never takes the place of the grader's own files in the run's folder
(red-team finding): a student's `grades.csv.py` became the folder `DIR/grades.csv/`, and the
class's grades.csv could not be written: the whole run ended in IsADirectoryError, every other
submission's grade with it. Ids have no dot; every entry the grader writes in the folder has
one. Graded by the real CLI in the simulator (submissions that define the function and launch
nothing: seconds each)."""

from __future__ import annotations

import csv
import subprocess

from grading_runs import REPO, env, grade_cmd

from autograder.grade import collect

NOTHING = "def decode_swiglu(x, wg, bg, wu, bu, out):\n    return out\n"
NAMES = ("grades.csv.py", "measurements.jsonl.py", ".grader.py", "grades.csv.tmp1.py",
         "ordinary.py")


def test_no_id_has_a_dot(tmp_path):
    for n in NAMES:
        (tmp_path / n).write_text(NOTHING)
    ids = [sid for sid, _ in collect([tmp_path])]
    assert len(set(ids)) == len(NAMES) and not any("." in sid for sid in ids), ids


def test_a_file_named_like_the_grades_is_graded_and_the_class_is_too(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for n in NAMES:
        (subs / n).write_text(NOTHING)
    out = tmp_path / "out"
    p = subprocess.run(grade_cmd("lab6", [subs], out, "--simulator"), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert (out / "grades.csv").is_file() and (out / "measurements.jsonl").is_file()
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(NAMES), rows
    assert all((out / r["id"] / "results.json").is_file() for r in rows)
