"""What a submission does after its hidden cases begin never reaches what it reads before the
due date (issue: red team, isolation). A hidden case's own test keeps its details (shown with
the hidden case), but the summary (`output`), feedback.md, the printed output and extra_data
are the student's now: a child that has seen a hidden case chooses every word and number it
makes from then on. Each submission here is lab 2's master plus a wrapper that, in a hidden
case (the simulator's hidden x has more than 8192 columns, the public ones 80 and 514), carries
the hidden shape and a value out by one route the grader used to repeat:

- ``too_large``: re-raises the simulator's "too large to simulate" exception with the shape as
  its message (it went into PROBLEM (simulator), the first ERROR line and a review flag);
- ``oom``: raises with CUDA_ERROR_OUT_OF_MEMORY beside another submission (the regrade's
  reason, "GRADED AGAIN: ... (test 'hidden 1': <its message>)");
- ``multibyte``: two-byte characters printed before the hidden cases, the shape printed in
  them (the printed output was cut at a byte count as if it were characters);
- ``bytes``: as many bytes printed in the hidden case as encode its shape (the "output cut: N
  more bytes (T in all)" note, extra_data.output_bytes).

One real `grade` run in the simulator, the grader's sandbox and two workers (the honest
master beside them)."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import pytest
from grading_runs import HIDDEN_RUBRIC, master
from repo import ROOT as REPO

pytestmark = pytest.mark.slow

LAB = "lab2_packed_swiglu"
PRE = """
import os, sys
_honest = swiglu_interleaved
def _hidden(x):
    return x.shape[1] > 8192
"""
LEAKS = {
    # named so that it starts beside another submission (two workers, names in order)
    "a_oom": PRE + """
import time
def swiglu_interleaved(x, out):
    if _hidden(x):
        raise MemoryError(f"CUDA_ERROR_OUT_OF_MEMORY LEAKED{tuple(x.shape)}")
    time.sleep(1.0)
    return _honest(x, out)
""",
    "b_too_large": PRE + """
from numba import cuda
@cuda.jit
def _nop(a):
    pass
def swiglu_interleaved(x, out):
    if _hidden(x):
        try:
            _nop[(300000,), (1,)](out)
        except Exception as e:
            raise type(e)(f"LEAKED{tuple(x.shape)} {float(x[0, 0])!r}")
    return _honest(x, out)
""",
    "c_multibyte": PRE + """
os.write(1, ("\u00e9" * 3000 + "\\n").encode())
def swiglu_interleaved(x, out):
    if _hidden(x):
        os.write(1, f"LEAKED{tuple(x.shape)}\\n".encode())
    return _honest(x, out)
""",
    "d_bytes": PRE + """
os.write(1, b"a" * 70000)
SECRET = 1_000_003
def swiglu_interleaved(x, out):
    if _hidden(x):
        os.write(1, b"b" * (SECRET + x.shape[0] * 10000 + x.shape[1]))
    return _honest(x, out)
""",
}


def notebook(extra: str) -> dict:
    nb = json.loads(master(LAB).read_text())
    nb = copy.deepcopy(nb)
    nb["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None,
                        "outputs": [], "source": extra})
    return nb


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("after_hidden")
    subs = tmp / "subs"
    subs.mkdir()
    for name, extra in LEAKS.items():
        (subs / f"{name}.ipynb").write_text(json.dumps(notebook(extra)))
    (subs / "z_honest.ipynb").write_text(master(LAB).read_text())
    rubric = tmp / "rubric.toml"
    rubric.write_text(HIDDEN_RUBRIC)
    out = tmp / "graded"
    env = dict(os.environ, BOOK_SIMULATOR="1", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "autograder", "grade", LAB, str(subs), "--out",
                        str(out), "--rubric", str(rubric), "--simulator", "--workers", "2", "--quiet"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return {name: (json.loads((out / name / "results.json").read_text()),
                   (out / name / "feedback.md").read_text()) for name in [*LEAKS, "z_honest"]}


def shown(doc: dict, feedback: str) -> str:
    """Everything a student reads before the due date: the summary, the visible tests, the
    extra data and feedback.md (whose hidden tests say only that details come later)."""
    visible = [t["output"] for t in doc["tests"] if t["visibility"] == "visible"]
    return "\n".join([doc["output"], *visible, json.dumps(doc["extra_data"]), feedback])


@pytest.mark.parametrize("name", list(LEAKS))
def test_nothing_done_after_the_hidden_cases_began_is_shown_before_the_due_date(graded, name):
    doc, feedback = graded[name]
    hidden = [t for t in doc["tests"] if t["name"].startswith("hidden")]
    assert hidden and all(t["visibility"] == "after_due_date" for t in hidden)
    text = shown(doc, feedback)
    assert "LEAKED" not in text, text[:3000]
    assert " in all)" not in text, text[:3000]   # the byte count the `bytes` submission chose
    assert doc["extra_data"]["output_bytes"] is None


def test_the_hidden_cases_own_output_keeps_its_details_for_after_the_due_date(graded):
    doc, _ = graded["b_too_large"]
    assert doc["extra_data"]["status"] == "needs a GPU"   # still marked for a GPU regrade
    assert doc["output"].startswith("NEEDS A GPU REGRADE")
    assert "a hidden case (hidden 1) could not be run in the simulator" in doc["output"]
    h = next(t for t in doc["tests"] if t["name"].startswith("hidden"))
    assert "LEAKED" in h["output"]          # its own test, shown with the hidden case


def test_the_oom_regrade_names_the_hidden_case_not_its_message(graded):
    doc, feedback = graded["a_oom"]
    assert "GRADED AGAIN" in doc["output"]
    assert "(a hidden case)" in doc["output"]


def test_printed_output_before_the_hidden_cases_is_still_shown(graded):
    doc, feedback = graded["c_multibyte"]
    assert "\u00e9" * 100 in feedback
    assert "printed while the hidden cases ran is withheld" in feedback
    doc, feedback = graded["z_honest"]
    assert all(t["score"] == t["max_score"] for t in doc["tests"] if t["name"] != "performance")
