"""What a split-K GEMV invites, graded (issue 41): lab 6's master and its faulty variants by
`python -m autograder grade` with the shipped rubric's cases (one hidden case), in the
simulator (CI, and Gradescope, which grades there: lab 6's one run, grading_runs.lab_run) and
on a GPU (marker `gpu`, the GPU lane: no timing, grading_runs.correctness_only), each family
losing correctness points in the same words on both:

- the arrival counter never set back to zero (tests/fixtures/hazards/): right on the first call
  of a case, wrong on the second on the same arrays, said as a dependence on an earlier call
  (never "launched no CUDA kernel" nor "did your function launch the kernel");
- one 16-byte piece per thread, no loop over a block's share: wrong on the cases the master
  splits (the simulator's cases split d now: autograder/labs/lab6_decode_mlp_up.py PATHS);
- the counter counted without an atomic: a race between blocks, found by the access tracer;
- no barrier before the cross-warp sum (tests/fixtures/sanitizer/, two copies: one verdict,
  whatever the run): a race on shared memory;
- token loops that read rows of x past its end and never store them: a read outside `x`;
- the master keeps full marks.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import pytest
from grading_runs import (correctness_only, full_marks, gpu_env, grade_with_the_lab, lab_run, master,
                          results, start_grade)
from repo import FIXTURES

import book  # GPU or simulator, decided before numba.cuda is imported
from autograder import labs

pytestmark = pytest.mark.slow

LAB = labs.resolve("lab6")
SPEC = labs.get(LAB)
# The cases the master splits: the public case with d = 2056 on every grader; the simulator's
# first hidden case (T = 1, 2 or 3 rows), whose GPU version (T = 1, d = 4096, h > 2048) has one
# block per row of 4 pieces a thread. The tracer's findings are the simulator's cases' on
# every grader (on a GPU: judge.Judge.trace_hazards).
PUBLIC_SPLIT = [c["name"] for c in SPEC.public_cases if c["d"] >= 1024]
SPLIT_SIM = PUBLIC_SPLIT + ["hidden 1"]
FAULTS = {  # fixture -> (the words its failing cases say, {simulated: the cases that fail})
    # (a case whose rows and split an earlier case already used finds the count left over
    # from that case on its first call: nothing written, said as such)
    "lab6_counter_never_reset": ("the first call of this case was right; call 2 of|nothing was "
                                 "written at all in this call: no store reached `out`",
                                 {True: SPLIT_SIM, False: PUBLIC_SPLIT}),
    "lab6_one_piece_per_thread": ("first bad index", {True: SPLIT_SIM, False: SPLIT_SIM}),
    "lab6_counter_without_atomic": ("A RACE BETWEEN BLOCKS on", {True: SPLIT_SIM, False: SPLIT_SIM}),
    "lab6_missing_syncthreads": ("A RACE ON SHARED MEMORY", None),   # None: every case
    "lab6_missing_syncthreads_again": ("A RACE ON SHARED MEMORY", None),
    "lab6_reads_x_past_end": ("A READ OUTSIDE AN INPUT on `x`", None),
}
_RUNS = {}


def _subs(folder: Path) -> list[Path]:
    """The faults (the missing barrier twice: the second a copy in ``folder``)."""
    hz, sz = FIXTURES / "hazards", FIXTURES / "sanitizer"
    again = folder / "lab6_missing_syncthreads_again.py"
    shutil.copy(sz / "lab6_missing_syncthreads.py", again)
    return [hz / "lab6_counter_never_reset.py", hz / "lab6_one_piece_per_thread.py",
            hz / "lab6_counter_without_atomic.py", sz / "lab6_missing_syncthreads.py", again,
            sz / "lab6_reads_x_past_end.py"]


# in the simulator they join lab 6's one run (grading_runs.lab_run), beside the master
grade_with_the_lab(LAB, _subs(Path(tempfile.mkdtemp(prefix="agsplitk-"))))


def graded(simulated: bool) -> dict:
    """{submission id: results.json} of one grading run of the master and the faults: in the
    simulator lab 6's one run (the shipped rubric, one hidden case), on a GPU its own
    (correctness only: nothing is timed)."""
    if simulated:
        return lab_run(LAB)
    if simulated not in _RUNS:
        tmp = Path(tempfile.mkdtemp(prefix="agsplitk-"))
        subs = [master(LAB), *_subs(tmp)]
        rubric = correctness_only(LAB, tmp / "r.toml", hidden_cases=1)
        _RUNS[simulated] = (start_grade(LAB, subs, tmp / "graded", "--rubric", str(rubric),
                                        environ=gpu_env()), tmp / "graded", subs)
    proc, out, subs = _RUNS[simulated]
    text, _ = proc.communicate(timeout=2400)
    assert proc.returncode == 0, text.decode(errors="replace")[-3000:]
    return {p.stem if p.suffix == ".py" else LAB: results(out, p.stem if p.suffix == ".py" else LAB)
            for p in subs}


def _cases(r) -> dict:
    """{case name: test} of the correctness cases (a hidden case's test is named "hidden 1
    (hidden case)" in results.json: by its case's name here)."""
    return {t["name"].removesuffix(" (hidden case)"): t for t in r["tests"]
            if t["name"] != "performance" and not t["name"].startswith("compute-sanitizer")}


def _check(simulated: bool):
    got = graded(simulated)
    assert full_marks(got[LAB]), _cases(got[LAB])
    for name, (words, failing) in FAULTS.items():
        cases = _cases(got[name])
        failing = failing[simulated] if failing else list(cases)
        for case in failing:
            t = cases[case]
            assert t["score"] == 0, (name, case, t["output"][:600])
            assert re.search(words, t["output"]), (name, case, t["output"][:600])
            assert "launched no CUDA kernel" not in t["output"], (name, case)
            assert "did your function launch" not in t["output"], (name, case)
            assert "computed on the host" not in t["output"], (name, case)
        assert got[name]["score"] < got[LAB]["score"]
    # one kernel, one verdict: the flaky fault of issue 41 graded twice in one run
    a, b = got["lab6_missing_syncthreads"], got["lab6_missing_syncthreads_again"]
    assert [(t["name"], t["score"]) for t in a["tests"]] == [(t["name"], t["score"]) for t in b["tests"]]


@pytest.mark.skipif(not book.gpu.SIMULATED, reason="the simulator's run (CI)")
def test_each_split_k_fault_loses_its_cases_in_the_simulator():
    _check(simulated=True)


@pytest.mark.gpu
def test_each_split_k_fault_loses_its_cases_on_a_gpu():
    _check(simulated=False)
