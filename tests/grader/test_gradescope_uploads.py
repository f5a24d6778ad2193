"""What Gradescope's runner makes of odd uploads (red-team pass), without the rehearsal's venv:
``candidates`` and ``choose`` on real upload folders, then the words the student reads. The
whole container flow of the same uploads is in test_gradescope.py (slow)."""

from __future__ import annotations

import json
import os
import subprocess

from grading_runs import REPO, env, grade_cmd, zipped

from autograder.gradescope import candidates, choose

LAB = "lab2_packed_swiglu"
MASTER = (REPO / "solutions" / f"{LAB}.ipynb").read_bytes()


def _upload(tmp_path, files: dict, links: dict | None = None):
    sub, work = tmp_path / "submission", tmp_path / "work"
    sub.mkdir()
    work.mkdir()
    for rel, data in files.items():
        (sub / rel).parent.mkdir(parents=True, exist_ok=True)
        (sub / rel).write_bytes(data)
    for rel, target in (links or {}).items():
        os.symlink(target, sub / rel)
    return candidates(sub, work)


def test_two_empty_zips_beside_the_notebook_leave_it_graded(tmp_path):
    """Each zip was unpacked into a folder named by the counts of files found so far: an empty
    zip adds none, so the second one's folder existed and the runner ended in FileExistsError
    (\"GRADER ERROR\", 0 points) with the student's notebook beside them."""
    found, other = _upload(tmp_path, {"a.zip": zipped({}), "b.zip": zipped({}),
                                      "c.zip": zipped({"x/notes.txt": b"x"}), f"{LAB}.ipynb": MASTER})
    assert [n for n, _ in found] == [f"{LAB}.ipynb"] and other == ["c.zip:x/notes.txt"]
    assert choose(found, LAB, "swiglu_interleaved")[0].read_bytes() == MASTER


def test_a_link_is_not_followed_and_said(tmp_path):
    """A link (a repository submission can hold one) is never read: it could name the bundle's
    seed. It was skipped without a word, and the student read \"your submission held nothing\"."""
    found, other = _upload(tmp_path, {}, {f"{LAB}.ipynb": "/autograder/source/gradescope.json"})
    assert found == []
    assert other == [f"{LAB}.ipynb (a link, not followed: upload the file itself)"]


def test_a_suffix_in_capitals_is_a_notebook(tmp_path):
    """`LAB2.IPYNB` was refused as \"nothing to grade\"; the folder run dropped it unsaid
    (test_submission_names.py)."""
    found, other = _upload(tmp_path, {"LAB2.IPYNB": MASTER, "notes.ZIP": zipped({"a.PY": b"x = 1\n"})})
    assert [n for n, _ in found] == ["LAB2.IPYNB", "notes.ZIP:a.PY"] and other == []
    assert choose(found, LAB, "swiglu_interleaved")[0].name == "LAB2.IPYNB"


def test_a_notebook_for_another_lab_is_said_to_be_one(tmp_path):
    """A student who uploads lab 2's file to lab 1's assignment read only \"no function named
    `bytes_unfused` is defined (functions your code defines: swiglu_interleaved)\": now also
    which lab it looks like and what to hand in (graded by `grade`, as the runner grades it)."""
    sub = tmp_path / "lab2_packed_swiglu.py"
    sub.write_text("def swiglu_interleaved(x, out):\n    pass\n")
    p = subprocess.run(grade_cmd("lab1", [sub], tmp_path / "out", "--simulator"), cwd=REPO,
                       env=env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    doc = json.loads((tmp_path / "out" / "lab2_packed_swiglu" / "results.json").read_text())
    assert doc["output"].startswith("ERROR: no function named `bytes_unfused`"), doc["output"]
    assert ("This looks like lab2_packed_swiglu's notebook (it defines `swiglu_interleaved`): this "
            "assignment is lab1_bytes_and_roofline; hand in that lab's notebook") in doc["output"]
