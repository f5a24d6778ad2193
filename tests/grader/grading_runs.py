"""Shared by the autograder tests: run `python -m autograder grade` in subprocesses, started
once and concurrently (the simulator is slow; the 2-core CI machine runs them side by side).

Two kinds of shared run, each read by the files of one of tests/conftest.py's SERIAL_UNITS:

- :func:`start_all`: every lab's master and untouched lab under the shipped rubric (a kernel
  lab's with one hidden case: every hidden case the simulator draws spans two of the largest
  blocks in every dimension, test_bounds_grading's first test, so one takes every path), and the
  flawed and hostile submissions of tests/fixtures/submissions under FAST_RUBRIC (the grader's
  plumbing: no hidden case) with the few that a hidden case is the point of under
  HIDDEN_RUBRIC;
- :func:`lab_run`: per lab, ONE simulated run of the master and of every fixture the suite's
  files grade it with (bounds, hazards, races, the lab's own fixtures, its control), under the
  shipped rubric with one hidden case. Each file says at import what it grades
  (:func:`grade_with_the_lab`); the master is graded once however many files compare with it.

A run grades what its readers need and no more: a hidden case of lab 2 is seconds of simulator
per call (two blocks of the largest block the lab allows in every dimension), its kernel proof
replays it again, so a test of the grader's plumbing grades none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from repo import FIXTURES, ROOT as REPO

from autograder import labs

FIX = FIXTURES / "submissions"
THREATS = FIXTURES / "threats"
LABS = list(labs.names())  # every lab of autograder/labs/
def fast_rubric(lab: str = "lab2_packed_swiglu", *, hidden_cases: int = 0, load_s: int = 60,
                test_s: int = 20, limits: str = "") -> str:
    """A rubric for test runs: no hidden case (``hidden_cases``: how many; lab 2's is seconds
    of simulator a call) and short limits (``limits``: more lines of its [limits] table).
    Full correctness under FAST_RUBRIC is FAST_FULL points."""
    return f"""lab = "{lab}"
[correctness]
public_points = 1
hidden_points = 2
hidden_cases = {hidden_cases}
[performance]
points = 4
zero_at = 0.30
full_at = 0.80
physical_limit = 1.08
[limits]
load_s = {load_s}
test_s = {test_s}
{limits}"""


FAST_RUBRIC = fast_rubric()
#: FAST_RUBRIC with one hidden case: for the runs whose point is what a hidden case shows
HIDDEN_RUBRIC = fast_rubric(hidden_cases=1)


def _fast_full(rubric: str = FAST_RUBRIC) -> int:
    """Full correctness under ``rubric``: lab 2's public cases and its hidden ones, by its points."""
    import tomllib

    c = tomllib.loads(rubric)["correctness"]
    return (len(labs.get("lab2").public_cases) * c["public_points"]
            + c["hidden_cases"] * c["hidden_points"])


FAST_FULL = _fast_full()


def one_hidden_case(lab: str, path: Path) -> Path:
    """Writes to ``path`` the lab's shipped rubric with one hidden case instead of three (each
    hidden case is seconds of simulator; a run that tests what the grader does with a kind of
    submission, not how many cases it draws, needs one): its points, limits and performance
    lines as shipped. Returns ``path``."""
    text = (REPO / "autograder" / "rubrics" / f"{labs.resolve(lab)}.toml").read_text()
    assert text.count("\nhidden_cases = 3\n") == 1, f"{lab}'s rubric no longer draws 3 hidden cases"
    path.write_text(text.replace("\nhidden_cases = 3\n", "\nhidden_cases = 1\n"))
    return path


def correctness_only(lab: str, path: Path, hidden_cases: int | None = None) -> Path:
    """Writes to ``path`` the lab's shipped rubric without its [performance] table (a run that
    judges the cases, with nothing to time: on a GPU no reference, master or replay is timed),
    with ``hidden_cases`` hidden cases where given. Returns ``path``."""
    text = (REPO / "autograder" / "rubrics" / f"{labs.resolve(lab)}.toml").read_text()
    start = text.index("[performance]")
    end = text.find("\n[", start + 1)
    text = text[:start] + (text[end + 1:] if end >= 0 else "")
    if hidden_cases is not None:
        assert text.count("\nhidden_cases = 3\n") == 1, f"{lab}'s rubric no longer draws 3 hidden cases"
        text = text.replace("\nhidden_cases = 3\n", f"\nhidden_cases = {hidden_cases}\n")
    path.write_text(text)
    return path


def full_correctness(lab: str, public_cases: int, rubric: Path) -> int:
    """The correctness points a right answer earns under ``rubric``: each of the lab's
    ``public_cases`` public cases and each hidden case the rubric draws."""
    from autograder.rubric import load_rubric

    c = load_rubric(lab, rubric)["correctness"]
    return public_cases * c["public_points"] + c["hidden_cases"] * c["hidden_points"]


_MASTERS: dict[str, Path] = {}


def master(lab: str) -> Path:
    """The lab's master as a student who finished every part hands it in: solutions/<lab>.ipynb
    without the instructor's hidden-test blocks (autograder.master.handed_in). A student's
    notebook never has them, and in the simulator they are seconds of kernels (lab 6's: 20)
    in every child that loads the submission: the graded one, the proof's replay. Written
    once per test process, in a folder named solutions/ (the submission id is the master's)."""
    name = labs.resolve(lab)
    if name not in _MASTERS:
        import nbformat

        from autograder.master import handed_in

        folder = Path(tempfile.mkdtemp(prefix="agmaster-")) / "solutions"
        folder.mkdir()
        nbformat.write(handed_in(name), folder / f"{name}.ipynb")
        _MASTERS[name] = folder / f"{name}.ipynb"
    return _MASTERS[name]


_RUNS = {}


def zipped(members: dict) -> bytes:
    """A zip of ``members`` (its name -> bytes), as a student uploads one."""
    import io
    import zipfile

    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return b.getvalue()


def env():
    e = dict(os.environ)
    e["BOOK_SIMULATOR"] = "1"
    e["PYTHONPATH"] = str(REPO)
    return e


def gpu_env() -> dict:
    """The environment of a grading run on this machine's GPU: the repository first on the path,
    then whatever the machine's path already holds (a GPU machine may carry pinned wheels
    there), and no BOOK_SIMULATOR."""
    e = dict(os.environ, PYTHONPATH=os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p))
    e.pop("BOOK_SIMULATOR", None)
    return e


def grade_cmd(lab, subs, out, *extra):
    return [sys.executable, "-m", "autograder", "grade", lab, *map(str, subs), "--out", str(out),
            "--quiet", *extra]


def start_grade(lab, subs, out, *extra, environ: dict | None = None) -> subprocess.Popen:
    """`grade LAB SUBS --out OUT EXTRA...` started in the repository, its output in one pipe;
    in the simulator unless ``environ`` says otherwise (e.g. :func:`gpu_env`)."""
    return subprocess.Popen(grade_cmd(lab, subs, out, *extra), cwd=REPO,
                            env=env() if environ is None else environ,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def start_all():
    """Start every long grading run at once; return {name: (Popen, out_dir)}."""
    if _RUNS:
        return _RUNS
    base = Path(tempfile.mkdtemp(prefix="agtest-"))
    rub = base / "fast.toml"
    rub.write_text(FAST_RUBRIC)
    for lab in LABS:
        out = base / lab
        subs = [master(lab), REPO / "labs" / f"{lab}.ipynb"]
        # one hidden case (lab_rubric): each crosses every block boundary
        extra = ("--rubric", str(lab_rubric(lab))) if labs.get(lab).kernel else ()
        _RUNS[lab] = (start_grade(lab, subs, out, *extra), out)
    # the flawed and hostile submissions, and the threats of issue 12 that the grader itself
    # answers (the escaping process and the memory grab are tests/grader/test_isolation.py's)
    subs = (sorted(FIX.glob("*.py")) + [FIX / "malformed.ipynb", master("lab2")]
            + [THREATS / f for f in ("host_numpy_counter.py", "replay_undercount.py", "grid_stride_264.py")])
    out = base / "robust"
    _RUNS["robust"] = (start_grade("lab2", subs, out, "--rubric", str(rub), "--sim-timing"), out)
    # what a hidden case shows before the due date: a wrong answer, the master and leftover memory
    hid = base / "hidden.toml"
    hid.write_text(HIDDEN_RUBRIC)
    out = base / "hidden"
    subs = [FIX / "unwritten_output.py", master("lab2"), FIX / "leftover_memory.py"]
    _RUNS["hidden"] = (start_grade("lab2", subs, out, "--rubric", str(hid)), out)
    # control: the file-reading submission WITHOUT isolation must find the solution (so the
    # isolated run's failure proves the hiding, not a broken fixture)
    out = base / "control"
    _RUNS["control"] = (start_grade("lab2", [FIX / "reads_hidden.py"], out, "--rubric", str(rub),
                                    "--no-isolation"), out)
    return _RUNS


def finished(name, timeout=600):
    proc, out = start_all()[name]
    text, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"grade run {name} failed:\n{text.decode(errors='replace')[-3000:]}"
    return out


def results(out: Path, sid: str) -> dict:
    return json.loads((out / sid / "results.json").read_text())


def graded_max(r: dict) -> float:
    """The points this run could award: the maximum (the course's total) less the pending
    ones (performance, in the simulator: it keeps its points in the maximum, issue 28)."""
    return r["extra_data"]["max_score"] - r["extra_data"].get("pending_points", 0)


def full_marks(r: dict) -> bool:
    return r["score"] == graded_max(r) > 0


def correctness(r: dict) -> tuple[float, float, list[dict]]:
    """(points, most points, tests) of a result's tests but performance."""
    tests = [t for t in r["tests"] if t["name"] != "performance"]
    return sum(t["score"] for t in tests), sum(t["max_score"] for t in tests), tests


# ------------------------------------------------------------------ one run per lab, its fixtures
_WANTED: dict[tuple, dict] = {}   # (lab, extended) -> {submission id: path}
_LAB_RUNS: dict[tuple, tuple] = {}
_RUBRICS: dict[str, Path] = {}


def grade_with_the_lab(lab: str, subs, *, extended: bool = False) -> None:
    """Called at import by a test file: ``subs`` join the lab's one simulated run
    (:func:`lab_run`), beside its master. ``extended``: only `make test-all`'s tests read
    them; they go to a run of their own, started only when such a test asks for it."""
    key = (labs.resolve(lab), extended)
    want = _WANTED.setdefault(key, {key[0]: master(key[0])})
    for p in map(Path, subs):
        have = want.setdefault(p.stem, p)
        assert have == p, f"two submissions named {p.stem} in {key[0]}'s run: {have} and {p}"


def lab_rubric(lab: str) -> Path:
    """The rubric of the lab's run: as shipped, with one hidden case (one_hidden_case)."""
    lab = labs.resolve(lab)
    if lab not in _RUBRICS:
        _RUBRICS[lab] = one_hidden_case(lab, Path(tempfile.mkdtemp(prefix="agrubric-")) / "rubric.toml")
    return _RUBRICS[lab]


def start_lab_run(lab: str, extended: bool = False) -> None:
    """Start the lab's one simulated run (:func:`lab_run`) unless it is started."""
    key = (labs.resolve(lab), extended)
    if key in _LAB_RUNS:
        return
    assert key in _WANTED, f"no test file gave {key[0]} a submission (grade_with_the_lab)"
    out = Path(tempfile.mkdtemp(prefix=f"aglab-{key[0]}-"))
    _LAB_RUNS[key] = (start_grade(key[0], list(_WANTED[key].values()), out / "graded",
                                  "--rubric", str(lab_rubric(key[0]))), out / "graded")


def lab_run(lab: str, extended: bool = False, timeout: int = 2400) -> dict:
    """{submission id: results.json} of the lab's one simulated run: the master (its id is the
    lab's name) and every submission a test file gave :func:`grade_with_the_lab` (with
    ``extended``, those of `make test-all`'s tests, in a run of their own). The first call
    starts every lab's `make test` run (they run side by side), then waits for this one."""
    key = (labs.resolve(lab), extended)
    for other, ext in list(_WANTED):
        if not ext:
            start_lab_run(other)
    start_lab_run(*key)
    proc, out = _LAB_RUNS[key]
    text, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"{key[0]}'s run failed:\n{text.decode(errors='replace')[-3000:]}"
    return {sid: results(out, sid) for sid in _WANTED[key]}
