"""The simulator's compile check (autograder/compiling.py): after the tests, every kernel a
passing test launched is compiled for a real GPU (sm_90) without one, in a sandboxed child with
the simulator off and NVVM from its wheel. A kernel whose body is host NumPy passes every test
in the simulator and loses every correctness point here, told which kernel and what Numba said
(never a hidden case); the master keeps every point; a kernel that compiles but is wrong is
graded as before. One real grading run of lab 2 in the simulator, no mocks."""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
from pathlib import Path

import pytest

from grading_runs import REPO, env, full_marks, grade_cmd, master, one_hidden_case, results
from repo import FIXTURES

pytestmark = pytest.mark.slow   # a grading run

LAB = "lab2_packed_swiglu"
NUMPY = FIXTURES / "compile" / "lab2_numpy_in_kernel.py"
WRONG = FIXTURES / "bounds" / "lab2_forgets_blockidx_x.py"   # compiles; fails the hidden case


@pytest.fixture(scope="module")
def graded():
    base = Path(tempfile.mkdtemp(prefix="agcompile-"))
    out = base / "out"
    p = subprocess.run(grade_cmd(LAB, [master(LAB), NUMPY, WRONG], out, "--simulator", "--rubric",
                                 one_hidden_case(LAB, base / "rubric.toml")),
                       cwd=REPO, env=env(), capture_output=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr).decode(errors="replace")[-3000:]
    return out


def logged(out, kind, sid):
    recs = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    return [r for r in recs if r.get("kind") == kind and r.get("id") == sid]


def test_the_master_compiles_and_keeps_every_correctness_point(graded):
    r = results(graded, LAB)
    assert full_marks(r), r["output"]
    [check] = logged(graded, "compile_check", LAB)
    assert check["cc"] == "sm_90" and check["failed"] == 0 and check["withheld"] is None
    assert check["kernels"] and all(k["compiled"] for k in check["kernels"])


def test_a_kernel_of_host_numpy_loses_every_correctness_point_with_numbas_words(graded):
    sid = NUMPY.stem
    r = results(graded, sid)
    assert r["score"] == 0, r["output"]
    [check] = logged(graded, "compile_check", sid)
    assert check["failed"] >= 1
    public = [t for t in r["tests"] if t["name"].startswith("public")]
    assert public
    for t in public:   # every test passed its values and was withdrawn, saying why
        assert t["score"] == 0
        said = t["output"]
        assert "the kernel `_one_thread` (cell" in said
        assert "cannot be compiled for a GPU (sm_90)" in said
        assert "Numba's GPU compiler" in said and "TypingError" in said
        assert "cheat" not in said.lower()
    feedback = (graded / sid / "feedback.md").read_text()
    assert "cannot be compiled for a GPU" in feedback


def test_the_compile_message_names_no_hidden_case(graded):
    sid = NUMPY.stem
    tests = [json.loads(line) for line in (graded / "measurements.jsonl").read_text().splitlines()]
    hidden = [t for t in tests if t.get("kind") == "test" and t.get("id") == sid and t.get("hidden")]
    assert hidden
    r = results(graded, sid)   # what a student sees before the due date: not a hidden test's own
    shown = "\n".join([(graded / sid / "feedback.md").read_text(), r["output"]]
                      + [t["output"] for t in r["tests"] if t.get("visibility") != "after_due_date"])
    for t in hidden:   # the hidden case's shape, as its own message (the instructor's) gives it
        for dims in re.findall(r"\[[0-9, ]+\]", t.get("message", "")):
            assert dims not in shown, dims
    note = [t["output"] for t in results(graded, sid)["tests"] if "cannot be compiled" in t["output"]]
    assert note and all("hidden" not in n.split("cannot be compiled")[1] for n in note)


def test_a_wrong_kernel_that_compiles_is_graded_as_before(graded):
    sid = WRONG.stem
    r = results(graded, sid)
    tests = {t["name"]: t for t in r["tests"]}
    assert all(t["score"] > 0 for n, t in tests.items() if n.startswith("public"))
    assert all(t["score"] == 0 for n, t in tests.items() if n.startswith("hidden"))
    assert not any("cannot be compiled" in t["output"] for t in r["tests"])
    [check] = logged(graded, "compile_check", sid)
    assert check["failed"] == 0 and check["withheld"] is None
