"""One answer checker (issue 44): a chapter's exercise and a lab's check (the notebook's
``check()`` and ``grade`` both call the lab spec's) say a wrong result in the same words,
book.answers' (tests/library/test_answers.py holds the words themselves), and no second
tolerance test is left beside it."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import sys

import numpy as np
import pytest
from repo import ROOT

from autograder import labs
from book import answers
from book.exercises import KernelExercise, Number
from book.kernels import reference


def _wrong(kind: str):
    """(out, gate, up, expected): a float32 output of 300 elements, wrong in one way."""
    gate, up = reference.random_inputs(300, "float32", seed=3)
    expected = reference.swiglu(gate, up, "float32")
    out = expected.astype(np.float32)
    if kind == "never written":
        out[150:] = np.nan                           # a grid that covers half
    elif kind == "wrong values":
        out[7::2] = -out[7::2]                       # a sign flipped
    else:                                            # both: a gap after a wrong value
        out[20:40] = np.nan
        out[3] *= 2
    return out, gate, up, expected


@pytest.mark.parametrize("kind", ["never written", "wrong values", "both"])
def test_an_exercise_and_a_lab_check_say_a_wrong_array_the_same_way(kind):
    out, gate, up, expected = _wrong(kind)
    fb = KernelExercise("q", n=300, block=128).verdict(out, gate, up)
    # lab 2's check with the exercise's tolerance (float32's), on the same array
    tol = reference.TOLERANCE["float32"]
    lab = dataclasses.replace(labs.get("lab2"), rtol=tol["rtol"], atol=tol["atol"])
    case = lab.public_cases[0]
    ok, said = lab.check(out, case, expected)
    assert fb.correct is False and ok is False
    # the same words; the lab names its case's shape, the exercise adds its worked value
    shared = said.replace(f" for {lab.show(case)}", "", 1)
    assert f" for {lab.show(case)}:" in said
    assert fb.message.startswith(shared + ". ") and len(fb.message) > len(shared) + 2
    assert "first bad index" in shared and ("never written" in shared) == (kind != "wrong values")


def test_the_exercise_and_the_lab_agree_on_a_right_array():
    gate, up = reference.random_inputs(300, "float32", seed=3)
    expected = reference.swiglu(gate, up, "float32")
    out = expected.astype(np.float32)
    fb = KernelExercise("q", n=300, block=128).verdict(out, gate, up)
    tol = reference.TOLERANCE["float32"]
    lab = dataclasses.replace(labs.get("lab2"), rtol=tol["rtol"], atol=tol["atol"])
    case = lab.public_cases[0]
    ok, said = lab.check(out, case, expected)
    assert fb.correct and ok and said.replace(f" for {lab.show(case)}", "") in fb.message


def test_a_lab_answer_and_a_chapter_number_say_how_far_the_same_way():
    lab = labs.get("lab1")
    case = next(c for c in lab.public_cases if c["function"] == "bytes_fused")
    truth = lab.expected(case)
    for got in (truth * 8, truth / 3, truth * 1.05, truth * 1024):
        ok, said = lab.check(got, case)
        fb = Number("q", truth, unit="bytes").check(got)
        phrase = answers.how_far(got, truth)
        assert not ok and fb.correct is False
        assert said.startswith(f"{case['name']}: expected ") and f": {phrase}" in said
        assert phrase in fb.message, (phrase, fb.message)


def test_importing_the_grader_does_not_import_book():
    # importing book decides GPU or simulator; grade decides that first (--simulator), so
    # importing the grader (its judge, timer and labs use the checker) must not import book
    code = ("import sys\nimport autograder.grade, autograder.labs, autograder.check\n"
            "assert 'book' not in sys.modules, sorted(m for m in sys.modules if 'book' in m)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_no_second_tolerance_test_is_left():
    """|got - expected| against rtol and atol is written once, in book/answers.py."""
    pattern = re.compile(r"abs\([^)\n]*\)\s*(<=|>|<)\s*[^#\n]*\b(rtol|atol|rel|abs_tol|tol)\b")
    found = [f"{p.relative_to(ROOT)}:{i}" for folder in ("autograder", "book", "tools")
             for p in sorted((ROOT / folder).rglob("*.py")) if p.name != "answers.py"
             for i, line in enumerate(p.read_text().splitlines(), 1)
             if pattern.search(line.split("#")[0])]
    assert not found, f"a tolerance test beside book.answers.within: {found}"
