"""Labs 2-4 built in steps (issue 9): each step's check passes on the master's step solution,
fails with check()'s specific words on a wrong one, and says "not written yet" on the blank
lab; the masters and their lab objects agree (assign refuses drift); grading still grades the
final function only, whatever the steps hold. Everything runs in Numba's CUDA simulator."""

from __future__ import annotations

import copy
import json
import re

import nbformat
import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from grading_runs import REPO, env, full_marks, grade_cmd

from autograder import labs as L
from autograder.master import graded_cells, namespace, notebook

STAGED = L.staged()
STEPS = [(lab, s.name) for lab in STAGED for s in L.get(lab).steps]


def _namespace(lab: str, upto: str, where: str = "solutions", edits=()) -> dict:
    """A notebook's graded cells up to and including the one that defines step ``upto``'s
    function (autograder.master: check cells skipped), ``edits`` made."""
    return namespace(lab, edits, upto=upto, path=notebook(lab, where))


@pytest.mark.parametrize("lab,step", STEPS)
def test_step_check_passes_on_the_master(lab, step, capsys):
    from autograder.check import check

    fn = L.get(lab).step(step).function
    assert check(_namespace(lab, step)[fn], step=step) is True
    out = capsys.readouterr().out
    assert out.count("PASS ") == len(L.get(lab).step(step).cases) and "FAIL" not in out


def test_every_step_declares_a_planted_bug():
    """Each step's spec names a mistake its check is tested to catch (``Step.bug``)."""
    missing = [(lab, step) for lab, step in STEPS if L.get(lab).step(step).bug is None]
    assert not missing, f"steps without a planted bug (autograder/labs/spec.py PlantedBug): {missing}"


# A planted bug per step (a text edit of the master's own step cell, declared by the step's
# spec) and the words its check must say: a wrong value names the first bad index with
# expected and got; a grid too small names the elements never written.
@pytest.mark.parametrize("lab,step", STEPS)
def test_step_check_fails_on_a_wrong_step_with_a_specific_message(lab, step, capsys):
    from autograder.check import check

    st = L.get(lab).step(step)
    if st.bug is None:
        pytest.fail(f"{lab} step {step!r} declares no planted bug (Step.bug)")
    words = st.bug.says
    fn = _namespace(lab, step, edits=[st.bug.edit])[st.function]
    with pytest.raises(AssertionError) as e:
        check(fn, step=step)
    msg = str(e.value)
    assert msg.startswith(f"step {step!r}, ") and re.search(words, msg), msg
    assert "FAIL " in capsys.readouterr().out


@pytest.mark.parametrize("lab", STAGED)
def test_blank_lab_steps_say_not_written_yet(lab):
    from autograder.check import check

    first = L.get(lab).all_steps[0]
    fn = _namespace(lab, first.name, where="labs")[first.function]
    with pytest.raises(AssertionError, match=r"not written yet \("):
        check(fn, step=first.name)


def test_step_found_by_name_for_a_renamed_function_and_unknown_step_named():
    from autograder.check import check

    ns = _namespace("lab4_dual_gemm", "plain")
    mine = ns["gemm_plain"]
    renamed = lambda x, w, out: mine(x, w, out)  # noqa: E731  (a student's own name)
    assert check(renamed, step="plain", verbose=False) is True
    with pytest.raises(KeyError, match=r"no step 'tiles'.*'tiled' \(gemm_tiled\)"):
        check(mine, step="tiles")


def test_setup_cell_run_twice_still_gives_a_callable_check():
    import autograder.check  # noqa: F401  (binds the package attribute to the submodule)
    from autograder import check

    with pytest.raises(ValueError, match="pass lab="):
        check(lambda: 0)


def test_assign_refuses_a_master_that_drifts_from_its_steps():
    from autograder.assign import MarkerError, make_lab

    master = nbformat.read(REPO / "solutions" / "lab4_dual_gemm.ipynb", as_version=4)
    make_lab(master, "lab4_dual_gemm.ipynb")  # the committed master is consistent
    bad = copy.deepcopy(master)
    c = next(c for c in bad.cells if 'step="tiled"' in c.source)
    c.source = c.source.replace('step="tiled"', 'step="tile"')
    with pytest.raises(MarkerError, match=r"step='tile'.*plain, tiled, blocked"):
        make_lab(bad, "lab4_dual_gemm.ipynb")
    bad = copy.deepcopy(master)
    bad.cells = [c for c in bad.cells if c.get("id") != "lab4-s2-hints"]
    with pytest.raises(MarkerError, match=r"step 'tiled'.*hints"):
        make_lab(bad, "lab4_dual_gemm.ipynb")


@pytest.mark.parametrize("lab", STAGED)
def test_labs_strip_every_step_solution_and_keep_hints_in_order(lab):
    cells = nbformat.read(REPO / "labs" / f"{lab}.ipynb", as_version=4).cells
    for s in L.get(lab).all_steps:
        i = next(k for k, c in enumerate(cells)
                 if c.cell_type == "code" and re.search(rf"^def {s.function}\(", c.source, re.M))
        assert "raise NotImplementedError" in cells[i].source
        assert not re.search(r"^@cuda.jit", cells[i].source, re.M)  # the kernel: theirs
        if not s.graded:
            assert re.match(rf'check\({s.function}, step="{s.name}"\)', cells[i + 1].source)
            hints = re.findall(r"<summary>Hint (\d)</summary>", cells[i + 2].source)
            assert hints == [str(n) for n in range(1, len(hints) + 1)] and len(hints) >= 2


@pytest.mark.slow
def test_grading_ignores_unfinished_steps_and_a_final_may_call_a_step(tmp_path):
    """The blank lab 2 with only the final function written, and written by calling step 2's
    function (the master's step-2 cell pasted in): full marks; step 1 is still a stub."""
    import subprocess

    from grading_runs import FAST_RUBRIC

    nb = nbformat.read(REPO / "labs" / "lab2_packed_swiglu.ipynb", as_version=4)
    step2 = next(c for c in graded_cells("lab2") if c.id == "lab2-s2-code")
    final = next(c for c in nb.cells if "def swiglu_interleaved(" in c.source)
    final.source = (step2.source + "\n\n\ndef swiglu_interleaved(x, out):\n"
                    "    return swiglu_grid_stride(x, out, 4)\n")
    sub = tmp_path / "student.ipynb"
    nbformat.write(nb, str(sub))
    rub = tmp_path / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    out = tmp_path / "out"
    r = subprocess.run(grade_cmd("lab2", [sub], out, "--rubric", str(rub)), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    res = json.loads((out / "student" / "results.json").read_text())
    assert full_marks(res), json.dumps(res["tests"])[:2000]


class _FakeFeedback:
    """Stands in for autograder.feedback and autograder.sanitize (helper modules, tested on
    their own): what check() does with their lines is what is tested here."""

    def __init__(self, advice=None, boom=None):
        self.calls, self.advice, self.boom = [], advice or [], boom

    def access_advice(self, lab, fn, *, source=None):
        self.calls.append(("access", lab.name, fn.__name__))
        self.source = source
        if self.boom:
            raise self.boom
        return self.advice

    def sanitize(self, lab, fn=None, *, source=None):
        self.calls.append(("sanitize", lab.name, fn.__name__))
        return ["compute-sanitizer: not available on this machine (no GPU)"]


def _with_feedback(monkeypatch, fake):
    import sys

    import autograder

    for name in ("feedback", "sanitize"):
        monkeypatch.setitem(sys.modules, f"autograder.{name}", fake)
        monkeypatch.setattr(autograder, name, fake, raising=False)


def test_check_prints_access_advice_after_the_tests_and_sanitizer_lines(monkeypatch, capsys):
    from autograder.check import check

    fake = _FakeFeedback(advice=["warp 0's loads of x touch 16 sectors where 8 would do"])
    _with_feedback(monkeypatch, fake)
    fn = _namespace("lab2_packed_swiglu", "final")["swiglu_interleaved"]
    assert check(fn) is True
    out = capsys.readouterr().out
    assert out.index("PASS public") < out.index("warp 0's loads of x touch 16 sectors")
    assert fake.calls == [("access", "lab2_packed_swiglu", "swiglu_interleaved")]
    assert check(fn, sanitize=True) is True
    assert "not available on this machine" in capsys.readouterr().out
    assert fake.calls[-1] == ("sanitize", "lab2_packed_swiglu", "swiglu_interleaved")
    # a step check is about values only: no tracing there
    check(_namespace("lab2_packed_swiglu", "one")["swiglu_one"], step="one")
    assert len(fake.calls) == 3
    check(fn, access=False)                  # the student's quick re-check: no trace
    assert len(fake.calls) == 3
    fake.advice = []
    check(fn)
    assert "access pattern: no wasted bandwidth found" in capsys.readouterr().out


def test_feedback_that_fails_is_one_line_never_an_error(monkeypatch, capsys):
    from autograder.check import check

    _with_feedback(monkeypatch, _FakeFeedback(boom=RuntimeError("tracer broke")))
    fn = _namespace("lab2_packed_swiglu", "final")["swiglu_interleaved"]
    assert check(fn) is True
    assert "access feedback could not run: RuntimeError: tracer broke" in capsys.readouterr().out


def test_check_cli_runs_the_steps_a_notebook_has_written(capsys):
    from autograder.check import check_file

    assert check_file("lab2", str(REPO / "solutions" / "lab2_packed_swiglu.ipynb")) is True
    out = capsys.readouterr().out
    assert "step 'one' done" in out and "step 'grid_stride' done" in out
    assert check_file("lab2", str(REPO / "labs" / "lab2_packed_swiglu.ipynb")) is False
    out = capsys.readouterr().out
    assert "step 'one' not done yet" in out and "not written yet" in out


def test_check_cli_hands_the_files_cells_to_the_feedback(monkeypatch, capsys):
    # The CLI runs cells named "<cell N>": on a GPU the access advice re-runs the student's
    # code in a simulator process and must be given that code (it found none on the H100).
    from autograder.check import check_file

    fake = _FakeFeedback()
    _with_feedback(monkeypatch, fake)
    assert check_file("lab2", str(REPO / "solutions" / "lab2_packed_swiglu.ipynb")) is True
    assert "def swiglu_interleaved" in (fake.source or "")
    fn = _namespace("lab2_packed_swiglu", "final")["swiglu_interleaved"]
    from autograder.check import check

    check(fn)  # a notebook's check() afterwards: no file source left behind
    assert fake.source is None


def test_performance_without_torch_is_a_sentence_not_a_crash(monkeypatch):
    # A local GPU machine without PyTorch (not a course dependency): check() used to end in
    # ModuleNotFoundError: torch (seen in the Colab rehearsal's venv on the H100).
    import importlib
    import sys

    from autograder import labs

    chk = importlib.import_module("autograder.check")
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    said = []
    one = labs.get("lab2_packed_swiglu")
    fn = _namespace("lab2_packed_swiglu", "final")["swiglu_interleaved"]
    chk._report_performance(fn, one, {"points": 4, "zero_at": 0.3, "full_at": 0.8},
                            said.append)
    assert len(said) == 1 and "PyTorch, which is not installed" in said[0]
