"""Gradescope rehearsed as Gradescope runs it (issue 18).

The bundle is built with `python -m autograder export gradescope`, unpacked into a tree laid out
as Gradescope's (ROOT/source, ROOT/run_autograder, ROOT/submission, ROOT/results; ROOT is
AUTOGRADER_ROOT, a tmp folder here instead of /autograder), its setup.sh is run in a fresh
venv, then run_autograder once per submission in a container root of its own, with no GPU.

The venv is fresh (made here, with its own pip) but sees the project's installed packages
through a .pth file, as `--system-site-packages` would show a system install, and pip runs with
PIP_NO_INDEX: setup.sh's `pip install -r requirements.txt` really runs and must find every pin
satisfied (it fails on a missing or misplaced file, or a pin that is not installed), without
downloading the stack on every CI run. Nothing of the repository is on the path: the course
runs from the unpacked bundle.

Each results.json is checked against Gradescope's schema and against the same files graded by
`python -m autograder grade` in one batch, with the bundle's seed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from grading_runs import FIX, REPO, THREATS, env, grade_cmd, master, one_hidden_case, zipped
from autograder.grade import collect
from autograder.rubric import course_points
from repo import FIXTURES

pytestmark = pytest.mark.slow   # every test reads the rehearsal: a venv laid out as Gradescope's and a batch graded

LAB = "lab2_packed_swiglu"
SEED = 20261124
MASTER = master(LAB)
MULTI = FIXTURES / "multikernel"

WRONG = '''# silu(gate) * up with the halves taken as [gate | up] (chapter 6's layout), not interleaved
import math
from numba import cuda, float32


@cuda.jit
def _k(x, out, M, F):
    j, i = cuda.grid(2)
    if i < M and j < F:
        g = x[i, j]
        out[i, j] = g / (float32(1.0) + math.exp(-g)) * x[i, F + j]


def swiglu_interleaved(x, out):
    M, F = out.shape
    _k[((F + 31) // 32, M), (32, 1)](x, out, M, F)
'''


def notebook(*sources) -> str:
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {},
                       "cells": [{"cell_type": "code", "metadata": {}, "outputs": [],
                                  "execution_count": None, "source": s} for s in sources]})


SYNTAX = notebook("import math\nfrom numba import cuda\n",
                  "def swiglu_interleaved(x, out)\n    pass\n")


# name -> {path in /autograder/submission: bytes}; and the file `grade` gets in the batch
CLASS = {
    "master": ({f"{LAB}.ipynb": MASTER.read_bytes()}, MASTER),
    "untouched": ({f"{LAB}.ipynb": (REPO / "labs" / f"{LAB}.ipynb").read_bytes()},
                  REPO / "labs" / f"{LAB}.ipynb"),
    "two_kernels": ({"lab2_two_kernels.py": (MULTI / "lab2_two_kernels.py").read_bytes()},
                    MULTI / "lab2_two_kernels.py"),
    "wrong": ({"lab2.py": WRONG.encode()}, None),
    "syntax_error": ({f"{LAB}.ipynb": SYNTAX.encode()}, None),
    "malformed": ({"malformed.ipynb": (FIX / "malformed.ipynb").read_bytes()}, FIX / "malformed.ipynb"),
    "empty": ({}, None),
    "a_zip": ({"work.zip": zipped({f"mywork/{LAB}.ipynb": MASTER.read_bytes(),
                                   "mywork/notes.txt": b"x"})}, MASTER),
    "two_files": ({f"Copy of {LAB} (1).ipynb": MASTER.read_bytes(), "notes/scratch.py": b"x = 1\n"},
                  MASTER),
    "ambiguous": ({"a.ipynb": MASTER.read_bytes(), "b.py": WRONG.encode()}, None),
    # two empty zips beside the notebook (the runner ended in FileExistsError: red-team pass)
    "empty_zips": ({"a.zip": zipped({}), "b.zip": zipped({}), f"{LAB}.ipynb": MASTER.read_bytes()},
                   MASTER),
    "needs_gpu": ({"grid.py": (THREATS / "grid_stride_264.py").read_bytes()},
                  THREATS / "grid_stride_264.py"),
}

TOP = {"score", "execution_time", "output", "output_format", "test_output_format",
       "test_name_format", "visibility", "stdout_visibility", "extra_data", "tests", "leaderboard"}
TEST = {"score", "max_score", "status", "name", "name_format", "number", "output",
        "output_format", "tags", "visibility", "extra_data"}
VIS = {"visible", "hidden", "after_due_date", "after_published"}


def check_schema(doc):
    """Gradescope's results.json (gradescope-autograders.readthedocs.io/en/latest/specs/)."""
    assert set(doc) <= TOP, set(doc) - TOP
    assert isinstance(doc["score"], (int, float)) and isinstance(doc["output"], str)
    assert doc.get("visibility", "visible") in VIS and doc.get("stdout_visibility", "hidden") in VIS
    assert isinstance(doc.get("extra_data", {}), dict)
    assert isinstance(doc["tests"], list) and doc["tests"]
    for t in doc["tests"]:
        assert set(t) <= TEST, set(t) - TEST
        assert isinstance(t["name"], str) and isinstance(t["output"], str)
        assert isinstance(t["score"], (int, float)) and isinstance(t["max_score"], (int, float))
        assert t["status"] in ("passed", "failed") and t["visibility"] in VIS


def no_repo_env(**extra):
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    e.update(CUDA_VISIBLE_DEVICES="", BOOK_SIMULATOR="1", PIP_NO_INDEX="1",
             PIP_DISABLE_PIP_VERSION_CHECK="1", **extra)
    return e


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gradescope")
    # the instructor's own rubric, carried in the bundle: the shipped one with one hidden case
    # (each of lab 2's is seconds of simulator a call, for the dozen gradings here)
    rubric = one_hidden_case(LAB, tmp / "rubric.toml")
    # the batch: the same single files graded by `grade` with the bundle's seed, started first
    batch_dir = tmp / "batch"
    batch_subs = []
    for name, (_, f) in CLASS.items():
        if f is None and name in ("wrong", "syntax_error"):
            f = tmp / "batch-in" / name / next(iter(CLASS[name][0]))
            f.parent.mkdir(parents=True)
            f.write_bytes(CLASS[name][0][f.name])
            CLASS[name] = (CLASS[name][0], f)
        if f is not None and f not in batch_subs:
            batch_subs.append(f)
    batch = subprocess.Popen(grade_cmd(LAB, batch_subs, batch_dir, "--rubric", str(rubric)), cwd=REPO,
                             env=dict(env(), AUTOGRADER_SEED=str(SEED)),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    # the bundle, unpacked as Gradescope unpacks it
    zpath = tmp / "autograder.zip"
    r = subprocess.run([sys.executable, "-m", "autograder", "export", "gradescope", "lab2", "--out",
                        str(zpath), "--seed", str(SEED), "--rubric", str(rubric)], cwd=REPO,
                       env=env(), capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    image = tmp / "image"
    (image / "source").mkdir(parents=True)
    with zipfile.ZipFile(zpath) as z:
        z.extractall(image / "source")
        for i in z.infolist():   # zipfile drops the mode bits Gradescope's unzip keeps
            mode = (i.external_attr >> 16) & 0o777
            if mode:
                os.chmod(image / "source" / i.filename, mode)
    # a fresh venv that sees the project's installed packages (see the module's docstring)
    venv = tmp / "venv"
    subprocess.run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", str(venv)],
                   check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "project_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    path = f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    setup = subprocess.run(["bash", str(image / "source" / "setup.sh")], cwd=image, capture_output=True,
                           text=True, env=no_repo_env(PATH=path), timeout=600)
    shutil.copy(image / "source" / "run_autograder", image / "run_autograder")
    # one container per submission: the image, its upload, an empty results folder
    def grade_one(name):
        root = tmp / "containers" / name
        shutil.copytree(image, root, symlinks=True)
        (root / "submission").mkdir()
        (root / "results").mkdir()
        for rel, data in CLASS[name][0].items():
            (root / "submission" / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / "submission" / rel).write_bytes(data)
        p = subprocess.run([str(root / "run_autograder")], cwd=root, capture_output=True, text=True,
                           env=no_repo_env(PATH=path, AUTOGRADER_ROOT=str(root)), timeout=600)
        rj = root / "results" / "results.json"
        return name, (json.loads(rj.read_text()) if rj.exists() else None, p)

    if setup.returncode == 0:
        with ThreadPoolExecutor(2) as ex:
            runs = dict(ex.map(grade_one, CLASS))
    else:
        runs = {}
    text, _ = batch.communicate(timeout=900)
    assert batch.returncode == 0, text.decode(errors="replace")[-3000:]
    ids = {f: sid for sid, f in collect(batch_subs)}
    return {"setup": setup, "runs": runs, "batch": batch_dir, "zip": zpath, "ids": ids,
            "export": r.stdout, "rubric": rubric}


def _run(rehearsal, name):
    assert rehearsal["setup"].returncode == 0, rehearsal["setup"].stdout + rehearsal["setup"].stderr
    doc, p = rehearsal["runs"][name]
    assert doc is not None, f"no results.json for {name}:\n{p.stdout}\n{p.stderr}"
    check_schema(doc)
    return doc


def _batch(rehearsal, name):
    sid = rehearsal["ids"][CLASS[name][1]]
    return json.loads((rehearsal["batch"] / sid / "results.json").read_text())


def _same(doc, ref):
    key = [(t["name"], t["score"], t["max_score"], t["status"], t["visibility"], t["output"])
           for t in doc["tests"]]
    assert key == [(t["name"], t["score"], t["max_score"], t["status"], t["visibility"], t["output"])
                   for t in ref["tests"]]
    assert doc["score"] == ref["score"]
    assert doc["output"].splitlines()[0] == ref["output"].splitlines()[0]


def test_the_bundle_installs_as_gradescope_lays_it_out(rehearsal):
    setup = rehearsal["setup"]
    assert setup.returncode == 0, setup.stdout + setup.stderr
    assert "Requirement already satisfied: numba-cuda" in setup.stdout   # the install step ran
    # and the repository is not what ran: outside the bundle the venv cannot import the course
    venv_python = next(Path(p) for p in (rehearsal["zip"].parent / "venv" / "bin").glob("python3"))
    r = subprocess.run([str(venv_python), "-c", "import autograder"], cwd=rehearsal["zip"].parent,
                       capture_output=True, text=True, env=no_repo_env())
    assert r.returncode != 0 and "No module named 'autograder'" in r.stderr
    names = zipfile.ZipFile(rehearsal["zip"]).namelist()
    assert {"setup.sh", "run_autograder", "requirements.txt", "gradescope.json",
            "autograder/grade.py", "book/gpu.py"} <= set(names)
    cfg = json.loads(zipfile.ZipFile(rehearsal["zip"]).read("gradescope.json"))
    assert cfg == dict(cfg, lab=LAB, seed=SEED, rubric="rubric.toml")
    assert zipfile.ZipFile(rehearsal["zip"]).read("rubric.toml").decode() == rehearsal["rubric"].read_text()


@pytest.mark.parametrize("name", ["master", "untouched", "two_kernels", "wrong", "syntax_error",
                                  "malformed", "needs_gpu"])
def test_each_file_is_graded_as_grade_grades_it_in_one_batch(rehearsal, name):
    doc = _run(rehearsal, name)
    _same(doc, _batch(rehearsal, name))   # the hidden cases' messages too: the class's seed
    pts = course_points(LAB, rehearsal["rubric"])
    assert sum(t["max_score"] for t in doc["tests"]) == pts["total"]   # the bundle's rubric's
    first = doc["output"].splitlines()[0]
    if name in ("master", "two_kernels"):
        assert doc["score"] == pts["correctness"] > 0, doc["output"]
    elif name in ("untouched", "wrong"):
        assert doc["score"] == 0
    elif name == "syntax_error":
        assert first == "ERROR: cell 2, line 1: SyntaxError: expected ':'", doc["output"]
        assert doc["tests"][0]["output"].startswith("cell 2, line 1: SyntaxError")
    elif name == "malformed":
        assert first.startswith("ERROR: malformed.ipynb is not a valid notebook: JSON error at line")
    elif name == "needs_gpu":
        assert first.startswith("NEEDS A GPU REGRADE"), doc["output"]


def test_needs_a_gpu_is_marked_for_the_instructor_in_grades_csv(rehearsal):
    import csv

    rows = {r["id"]: r for r in csv.DictReader(open(rehearsal["batch"] / "grades.csv"))}
    row = rows[rehearsal["ids"][CLASS["needs_gpu"][1]]]
    assert row["status"] == "needs a GPU" and "needs a GPU regrade" in row["flags"]


def test_uploads_that_are_not_one_file(rehearsal):
    empty = _run(rehearsal, "empty")
    total = course_points(LAB, rehearsal["rubric"])["total"]
    assert empty["score"] == 0 and empty["output"].startswith("nothing to grade: your submission held nothing")
    assert f"{LAB}.ipynb" in empty["output"] and "points for" not in empty["output"]
    assert [t["name"] for t in empty["tests"]] == ["submission"]
    # what Gradescope will record (the latest submission, 0 of the course's total), said
    assert empty["tests"][0]["max_score"] == total
    assert f"Gradescope records this attempt as 0/{total:g}" in empty["output"]
    assert "this attempt is not graded" not in empty["output"]
    # a zip, and files beside the notebook: the notebook named like the lab is graded
    for name in ("a_zip", "two_files", "empty_zips"):
        doc = _run(rehearsal, name)
        _same(doc, _batch(rehearsal, name))
        assert doc["score"] == course_points(LAB, rehearsal["rubric"])["correctness"] > 0
    assert "notes/scratch.py" in _run(rehearsal, "two_files")["output"]
    amb = _run(rehearsal, "ambiguous")
    assert amb["score"] == 0 and amb["output"].startswith("nothing graded: your submission holds 2 files")
    assert "a.ipynb" in amb["output"] and "b.py" in amb["output"]


def test_the_totals_are_the_courses_and_performance_is_pending(rehearsal):
    """Gradescope counts every test's max_score: the bundle's maximum is its rubric's (the
    course's, as `autograder list` says, for the shipped one; here the instructor's, one hidden
    case), which `export gradescope` tells the instructor to set, and the performance test,
    which needs a GPU, keeps its points as a pending test, never "passed" at 0/0."""
    shipped = course_points(LAB)
    listed = subprocess.run([sys.executable, "-m", "autograder", "list"], cwd=REPO, env=env(),
                            capture_output=True, text=True).stdout
    assert (f"{LAB}\n" in listed and f"points: {shipped['total']:g} ({shipped['correctness']:g} correctness, "
            f"{shipped['performance']:g} performance)" in listed.split(f"{LAB}\n")[1].split("lab")[0])
    pts = course_points(LAB, rehearsal["rubric"])
    assert pts["total"] < shipped["total"]   # the bundle's rubric, not the shipped one
    assert f"autograder points to {pts['total']:g}" in rehearsal["export"]
    doc = _run(rehearsal, "master")
    [perf] = [t for t in doc["tests"] if t["name"] == "performance"]
    assert (perf["score"], perf["max_score"], perf["status"]) == (0, pts["performance"], "failed")
    assert perf["output"].startswith(f"PENDING: these {pts['performance']:g} points are awarded when")
    assert doc["extra_data"]["pending_points"] == pts["performance"]


def test_run_autograders_stdout_says_what_it_did(rehearsal):
    _, p = rehearsal["runs"]["two_files"]
    said = p.stdout
    for line in (f"run_autograder: {LAB}, ", "run_autograder: closed to the submission's uid",
                 f"uploaded: Copy of {LAB} (1).ipynb, notes/scratch.py",
                 f"grading submission/Copy of {LAB} (1).ipynb (graded Copy of {LAB} (1).ipynb "
                 "(named like the lab)", "run_autograder: sandbox: containment ",
                 "run_autograder: wrote "):
        assert line in said, said[-3000:]
    _, p = rehearsal["runs"]["empty"]
    assert "uploaded: no notebook or .py" in p.stdout and "(nothing to grade)" in p.stdout
    assert str(SEED) not in p.stdout + rehearsal["runs"]["two_files"][1].stdout


def test_a_rubric_that_does_not_load_is_refused_at_export(tmp_path):
    """`export gradescope --rubric FILE` loads the rubric before it writes anything: one for
    another lab is said at export, by name, and no bundle is left to upload."""
    bad = tmp_path / "rubric.toml"
    bad.write_text((REPO / "autograder" / "rubrics" / "lab3_half_precision.toml").read_text())
    zpath = tmp_path / "autograder.zip"
    r = subprocess.run([sys.executable, "-m", "autograder", "export", "gradescope", "lab2", "--out",
                        str(zpath), "--rubric", str(bad)], cwd=REPO, env=env(),
                       capture_output=True, text=True)
    assert r.returncode != 0 and "is for lab 'lab3_half_precision', not 'lab2_packed_swiglu'" in r.stderr
    assert not zpath.exists()
