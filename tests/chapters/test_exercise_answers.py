"""Exercise answers are computed by the code the exercise runs, never typed (issue 30: chapter
8's exercise 4 told an outcome the simulator does not produce).

- a question that asks the reader to run or change code is a checked exercise (book.exercises),
  whose answer the library computes, not a Markdown answer typed under it;
- a checked exercise built in a chapter cell, or in book/exercises/chapters.py, takes its truth
  from a computation, not a number literal;
- chapter 8's exercise 4: its answer is what the chapter's own one-warp cell produces, run in
  the simulator with the changed table."""

from __future__ import annotations

import ast
import json
import re

import numpy as np
import pytest

import book  # GPU or simulator, decided before numba.cuda is imported
from repo import ROOT

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
ANSWER = re.compile(r"```\{admonition\} Answer")
# what a question says when its answer is the outcome of running code: an instruction to the
# reader (the verb opening a clause: "..., change `c_coords` ... and run the cell")
RUNS_CODE = re.compile(r"(?i)(?:^|[.;:!?]\s+|,\s+|\band\s+|\bthen\s+)"
                       r"(?:run|rerun|execute|change|edit|modify)\b[^.?]*?"
                       r"(?:cell|kernel|code|function|notebook|`)")


def _cells(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def questions_with_typed_answers(markdown: str) -> list[str]:
    """The question before each typed Answer admonition of a Markdown cell."""
    out = []
    for m in ANSWER.finditer(markdown):
        before = markdown[:m.start()].rstrip()
        out.append(before.split("\n\n")[-1])
    return out


def test_a_question_that_runs_code_has_its_answer_computed():
    found = []
    for path in CHAPTERS:
        for c in _cells(path):
            if c["cell_type"] != "markdown":
                continue
            for q in questions_with_typed_answers("".join(c["source"])):
                if RUNS_CODE.search(q):
                    found.append(f"{path.name} {c.get('id')}: {q[:160]!r}")
    assert not found, ("questions whose answer is what running code produces, answered in typed "
                       "Markdown: make each a book.exercises exercise that runs it and derives "
                       "the answer (as chapter 8's exercise 4 does)\n" + "\n".join(found))


@pytest.mark.parametrize("text,flagged", [
    ("**4.** In `book/kernels/instructions/tensorcore.py`, change `c_coords` so that ... and run the one-warp "
     "cell above in the simulator. What fails?", True),
    ("**2.** Why does the check fill the output with NaN before the kernel runs?", False),
    ("**3.** Why must the control run the *same* kernel, not cuBLAS?", False),
    ("**1.** Using Little's law: how many bytes must be in flight?", False),
])
def test_the_rule_finds_a_question_that_runs_code(text, flagged):
    md = text + "\n\n```{admonition} Answer\n:class: dropdown\n\nIt does.\n```"
    [q] = questions_with_typed_answers(md)
    assert bool(RUNS_CODE.search(q)) == flagged


def _literal_truths(tree, where) -> list[str]:
    """Exercise constructors given a number literal as their truth."""
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        if name != "Number":
            continue
        truth = [k.value for k in node.keywords if k.arg == "truth"] or node.args[1:2]
        for t in truth:
            if isinstance(t, ast.Constant) or (isinstance(t, ast.UnaryOp)
                                               and isinstance(t.operand, ast.Constant)):
                bad.append(f"{where}, line {node.lineno}: Number(..., {ast.unparse(t)})")
    return bad


def test_checked_exercises_take_their_truth_from_a_computation():
    bad = []
    for path in CHAPTERS:
        for c in _cells(path):
            if c["cell_type"] == "code" and c.get("id") != "course-setup":
                try:
                    tree = ast.parse("".join(c["source"]))
                except SyntaxError:
                    continue
                bad += _literal_truths(tree, f"{path.name} {c.get('id')}")
    lib = ROOT / "book" / "exercises" / "chapters.py"
    bad += _literal_truths(ast.parse(lib.read_text(encoding="utf-8")), "book/exercises/chapters.py")
    assert not bad, "exercise truths typed as numbers:\n" + "\n".join(bad)
    assert _literal_truths(ast.parse("ex = exercises.Number('q', truth=12.5)"), "x")  # it finds one


def _cell(name, cid):
    for c in _cells(ROOT / "chapters" / name):
        if c.get("id") == cid:
            return "".join(c["source"])
    raise KeyError(cid)


@pytest.mark.skipif(not book.gpu.SIMULATED, reason="runs the chapter's cell in the simulator")
def test_chapter_8_exercise_4_answers_what_the_one_warp_cell_produces(monkeypatch):
    """The chapter's own one-warp cell, run with c_coords changed as the exercise says (accumulators
    2 and 3 at rows g + 4), in the simulator: the rows it gets right and leaves unwritten are the
    exercise's answer, word for word."""
    from book import accumulator_table as at
    from book import exercises
    from book.kernels.probes import fragments
    from book.kernels.instructions import tensorcore as tc

    monkeypatch.delenv("COURSE_TARGET_CC", raising=False)
    monkeypatch.setattr(tc, "c_coords", at.moved_table(4))
    fragments.tile_mma_kernel.cache_clear()
    try:
        ns = {"np": np, "tc": tc, "fragments": fragments}
        exec(_cell("08_tensor_cores.ipynb", "ch08-012"), ns)
    finally:
        monkeypatch.undo()
        fragments.tile_mma_kernel.cache_clear()
    D, A, B = ns["D"], ns["A"], ns["B"]
    assert not np.array_equal(D, A @ B)  # what the cell prints: D == A @ B exactly: False
    truth = A @ B
    right = [r for r in range(16) if np.array_equal(D[r], truth[r])]
    unwritten = [r for r in range(16) if np.isnan(D[r]).all()]
    assert sorted(right + unwritten) == list(range(16))
    ex = exercises.moved_accumulators(A, B)  # what the chapter's exercise cell builds
    answer = ex.options[ex.answer]
    assert answer == (f"Rows {at.spans(right)} right and rows {at.spans(unwritten)} never "
                      "written"), answer
    assert ex.check(ex.answer) and not ex.check(next(k for k in ex.options if k != ex.answer))
    assert "exercises.moved_accumulators(A, B" in _cell("08_tensor_cores.ipynb", "ch08-ex4")


def test_the_gpu_outcome_of_exercise_4_follows_from_the_two_tables():
    from book import accumulator_table as at

    gpu = at.on_a_gpu(4)
    assert (gpu.right, gpu.raced, gpu.wrong, gpu.unwritten) == (
        (0, 1, 2, 3), (4, 5, 6, 7), (8, 9, 10, 11), (12, 13, 14, 15))
    assert at.on_a_gpu(8) == at.Rows(tuple(range(16)), (), (), ())  # the ISA's own table
    assert at.spans([0, 1, 2, 3, 8]) == "0-3 and 8" and at.spans([]) == "none"
