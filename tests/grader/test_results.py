"""The result of one submission (autograder/results.py) and what the exporters make of it
(autograder/export.py): typed test records in, Gradescope's JSON and feedback.md out, the same
shape whichever part of the run wrote a test; a result saved as pending.json (a GPU run's
phase 2) comes back with its tests typed."""

from __future__ import annotations

import json

from autograder import gradescope
from autograder.export import feedback_markdown, gradescope_json
from autograder.results import PENDING, PERFORMANCE, Result, TestRecord

TEST_KEYS = ["name", "score", "max_score", "status", "output", "visibility"]


def a_result() -> Result:
    r = Result(id="s1", file="s1.py", lab="lab2_packed_swiglu", run="r", hidden_visibility="after_due_date")
    public = {"name": "public M=3 F=40", "visibility": "public", "points": 1}
    hidden = {"name": "hidden M=7 F=96", "visibility": "hidden", "points": 2}
    r.tests = [TestRecord.for_case(public, r.hidden_visibility, score=1, output="ok"),
               TestRecord.for_case(hidden, r.hidden_visibility, output="max abs err 3 at [0, 5]"),
               TestRecord(PERFORMANCE, 4, output="not measured: no GPU", status=PENDING),
               TestRecord("compute-sanitizer", 0, status="failed", output="racecheck: a hazard")]
    r.score, r.max_score = 1, 7
    return r


def test_gradescope_json_spells_every_test_the_same_way():
    doc = gradescope_json(a_result())
    assert list(doc) == ["score", "execution_time", "output", "visibility", "stdout_visibility",
                         "tests", "extra_data"]
    assert all(list(t) == TEST_KEYS for t in doc["tests"])
    public, hidden, perf, san = doc["tests"]
    assert public["status"] == "passed" and public["visibility"] == "visible"
    assert hidden["name"] == "hidden M=7 F=96 (hidden case)" and hidden["status"] == "failed"
    assert hidden["visibility"] == "after_due_date" and hidden["max_score"] == 2
    # pending (the simulator cannot time): its points stay in the total, Gradescope's two
    # statuses leave "failed", and it says first that it is pending, never "passed" at 0/0
    assert (perf["score"], perf["max_score"], perf["status"]) == (0, 4, "failed")
    assert perf["output"] == ("PENDING: these 4 points are awarded when your kernels are timed on "
                              "a GPU (your instructor grades performance there); until then they "
                              "count as 0\nnot measured: no GPU")
    assert doc["extra_data"]["pending_points"] == 4
    assert doc["output"].startswith("1/7 points for lab2_packed_swiglu (4 of them pending")
    assert san["status"] == "failed"             # its own status: red, with no points lost


def test_feedback_marks_each_test_by_its_record():
    md = feedback_markdown(a_result())
    assert "| public M=3 F=40 | 1/1 | pass |" in md
    assert "| hidden M=7 F=96 (hidden) | 0/2 | FAIL |" in md
    assert "| performance | 0/4 | pending (timed on a GPU) |" in md
    assert "PENDING: these 4 points are awarded when your kernels are timed on a GPU" in md
    assert "| compute-sanitizer | 0/0 | see below |" in md
    # a hidden case's details wait for the due date; the sanitizer's findings are shown
    assert "max abs err" not in md and "racecheck: a hazard" in md


def test_a_pending_result_comes_back_with_typed_tests():
    r = a_result()
    back = Result.from_json(json.loads(json.dumps(r.to_json(), default=str)))
    assert all(isinstance(t, TestRecord) for t in back.tests)
    assert back.tests == r.tests and back.test(PERFORMANCE) is back.tests[2]
    assert gradescope_json(back) == gradescope_json(r)


def test_the_gradescope_refusal_has_the_graded_shape_less_the_time():
    doc = gradescope.refusal("lab2_packed_swiglu", "nothing to grade", ["a.txt"], 8.0)
    assert list(doc) == ["score", "output", "visibility", "stdout_visibility", "tests", "extra_data"]
    [t] = doc["tests"]
    assert list(t) == TEST_KEYS
    assert (t["name"], t["score"], t["max_score"], t["status"]) == ("submission", 0.0, 8.0, "failed")
    # what Gradescope records: it counts this latest attempt, 0 of the total
    assert doc["output"] == t["output"] == ("nothing to grade. Gradescope records this attempt as "
                                            "0/8 and, as your latest submission, it is the one "
                                            "that counts: submit your notebook again.")
    assert doc["extra_data"] == {"lab": "lab2_packed_swiglu", "status": "nothing graded",
                                 "files": ["a.txt"]}
