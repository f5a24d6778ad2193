"""A lab is three files: its module (autograder/labs/<lab>.py, declaring ``LAB``), its master
(solutions/<lab>.ipynb) and its rubric (autograder/rubrics/<lab>.toml). The registry finds it;
``list``, ``assign``, ``grade``, ``check``, the tests' and the tools' lab lists all follow.

The end-to-end test writes a throwaway lab into a copy of the tree (nothing is left in this
one) and runs the real commands there, in the simulator."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from autograder import labs
from autograder.labs import KernelLab, LabSpecError, NumericLab

from grading_runs import fast_rubric
from repo import ROOT as REPO

NAME = "lab9_scale_add"

MODULE = '''
"""Lab 9 (a throwaway written by tests/grader/test_lab_registry.py): out = 2 x + y."""

import numpy as np

from ._kernel import seeds
from .spec import KernelLab, PlantedBug, Step

INPUTS = ("x", "y")


def input_specs(case):
    s = seeds(case["seed"], INPUTS)
    return {n: {"shape": [case["n"]], "dtype": "float32", "seed": s[n]} for n in INPUTS}


def out_spec(case):
    return {"shape": [case["n"]], "dtype": "float32"}


def reference(inputs):
    return 2.0 * inputs["x"].astype(np.float64) + inputs["y"].astype(np.float64)


def describe(case):
    return f"x, y [{case['n']}] float32"


def hidden_cases(rng, simulated, n=1):
    return [{"name": f"hidden {i + 1}", "n": int(rng.integers(1, 200)),
             "seed": int(rng.integers(1 << 30))} for i in range(n)]


def timing_case(simulated, seed):
    return {"name": "timing", "n": 64 if simulated else 1 << 24, "seed": seed}


def make_reference_runner(case):
    """torch.add on three float32 vectors."""
    import torch
    sets = [tuple(torch.randn(case["n"], device="cuda") for _ in range(3))]
    return (lambda x, y, out: torch.add(x, y, out=out)), sets


COMMON = dict(inputs=INPUTS, output="out", dtype="float32", rtol=1e-6, atol=1e-6,
              input_specs=input_specs, out_spec=out_spec, reference=reference, describe=describe)

LAB = KernelLab(
    name="lab9_scale_add", title="Lab 9: scale and add", chapters="none",
    function="scale_add", params=("x", "y", "out"), perf_metric="bandwidth",
    public_cases=({"name": "public n=100", "n": 100, "seed": 1},),
    hidden_cases=hidden_cases, timing_case=timing_case, min_bytes=lambda c: 12 * c["n"],
    flops=lambda c: 2 * c["n"], make_reference_runner=make_reference_runner,
    reference_name="torch's reference",
    steps=(Step(name="one", function="scale_add_one", params=("x", "y", "out"),
                cases=({"name": "step one n=70", "n": 70, "seed": 2},),
                teaches="one thread per element", **COMMON,
                bug=PlantedBug("(out.shape[0] + 63) // 64", "out.shape[0] // 64", "never written")),),
    **COMMON)
'''

RUBRIC = fast_rubric(NAME, hidden_cases=1, test_s=30)

CELLS = [
    ("markdown", "# Lab 9: scale and add\n\nWrite `scale_add(x, y, out)`: `out = 2 x + y`."),
    ("code", "# autograder: setup (the grader skips this cell)\nfrom autograder import check"),
    ("code", "from numba import cuda, float32\n\n\n@cuda.jit\ndef _kernel(x, y, out):\n"
             "    i = cuda.grid(1)\n    if i < out.shape[0]:\n"
             "        out[i] = float32(2.0) * x[i] + y[i]"),
    ("markdown", "## Step 1: one thread per element"),
    ("code", "def scale_add_one(x, y, out):\n    # BEGIN SOLUTION launch one thread per element\n"
             "    _kernel[(out.shape[0] + 63) // 64, 64](x, y, out)\n    # END SOLUTION"),
    ("code", 'check(scale_add_one, step="one")'),
    ("markdown", "<details><summary>Hint 1</summary>\n\nOne block of 64 threads per 64 "
                 "elements.\n\n</details>\n\n<details><summary>Hint 2</summary>\n\nRound the "
                 "number of blocks up.\n\n</details>"),
    ("markdown", "## The graded function"),
    ("code", "def scale_add(x, y, out):\n    # BEGIN SOLUTION call your step 1\n"
             "    scale_add_one(x, y, out)\n    # END SOLUTION"),
    ("code", "check(scale_add)"),
]


def write_throwaway_lab(root: Path) -> None:
    """The three files of a lab, and nothing else."""
    (root / "autograder" / "labs" / f"{NAME}.py").write_text(MODULE)
    (root / "autograder" / "rubrics" / f"{NAME}.toml").write_text(RUBRIC)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(s) if kind == "markdown" else nbformat.v4.new_code_cell(s)
                for kind, s in CELLS]
    for k, c in enumerate(nb.cells):
        c["id"] = f"lab9-{k:02d}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(root / "solutions" / f"{NAME}.ipynb"))


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the parts of the tree the grader, the tests and the tools run from, plus the
    throwaway lab's three files."""
    root = tmp_path_factory.mktemp("course")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    for d in ("autograder", "book", "tools", "solutions", "labs"):
        shutil.copytree(REPO / d, root / d, ignore=skip)
    # the test folders' Python files (the fixtures' submissions are not needed here)
    for f in (REPO / "tests").rglob("*.py"):
        rel = f.relative_to(REPO / "tests")
        if rel.parts[0] != "fixtures" and "__pycache__" not in rel.parts:
            (root / "tests" / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(f, root / "tests" / rel)
    write_throwaway_lab(root)
    return root


def run(root: Path, *args, timeout=600):
    import os

    env = dict(os.environ, BOOK_SIMULATOR="1", PYTHONPATH=str(root))
    r = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{args} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


@pytest.mark.slow
def test_a_new_lab_is_listed_assigned_checked_and_graded_from_its_three_files(tree, tmp_path):
    out = run(tree, "-m", "autograder", "list")
    assert f"{NAME}\n    Lab 9: scale and add\n    write: scale_add(x, y, out)" in out
    assert out.index("lab4_dual_gemm") < out.index(NAME)          # in lab-number order

    run(tree, "-m", "autograder", "assign")
    blank = (tree / "labs" / f"{NAME}.ipynb").read_text()
    assert "NotImplementedError" in blank and "scale_add_one(x, y, out)\\n    # END" not in blank
    assert "BEGIN SOLUTION" not in blank
    for lab in labs.names():                                      # the other labs are untouched
        assert (tree / "labs" / f"{lab}.ipynb").read_text() == (REPO / "labs" / f"{lab}.ipynb").read_text()

    checked = run(tree, "-m", "autograder", "check", NAME, f"solutions/{NAME}.ipynb")
    assert "PASS step one n=70" in checked and "PASS public n=100" in checked

    graded = tmp_path / "graded"
    run(tree, "-m", "autograder", "grade", "lab9", f"solutions/{NAME}.ipynb", f"labs/{NAME}.ipynb",
        "--out", str(graded), "--quiet")
    sol = json.loads((graded / f"solutions_{NAME}" / "results.json").read_text())
    blank = json.loads((graded / f"labs_{NAME}" / "results.json").read_text())
    assert sol["score"] == 3 == sol["extra_data"]["max_score"] - sol["extra_data"]["pending_points"], \
        json.dumps(sol["tests"])[:2000]   # (performance pending in the simulator, issue 28)
    assert blank["score"] == 0

    lists = run(tree, "-c", textwrap.dedent("""
        import json, sys
        sys.path[:0] = ["tests", "tests/grader"]
        import grading_runs, test_lab_steps
        from tools import grader_report, lab_ptx
        print(json.dumps({"runs": grading_runs.LABS, "steps": test_lab_steps.STEPS,
                          "staged": list(lab_ptx.STAGED), "report": list(grader_report.OTHER_LABS)}))
        """))
    found = json.loads(lists.strip().splitlines()[-1])
    assert found["runs"] == [*labs.names(), NAME]
    assert [NAME, "one"] in found["steps"]
    assert found["staged"] == [*labs.staged(), NAME]
    assert NAME in found["report"]

    # the step tests run on the new lab as on the others (its master, its blank, its bug)
    tested = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/grader/test_lab_steps.py",
                 "-k", NAME)
    assert "4 passed" in tested, tested


# ---------------------------------------------------------------- the registry, in this tree
def test_the_registry_is_every_lab_module_in_number_order():
    # every lab module on disk, in number order (a new lab adds itself: no list to edit here)
    on_disk = sorted((p.stem for p in (REPO / "autograder" / "labs").glob("lab*.py")),
                     key=lambda n: int(n[3:].split("_")[0]))
    assert labs.names() == tuple(on_disk)
    assert labs.names()[:4] == ("lab1_bytes_and_roofline", "lab2_packed_swiglu",
                                "lab3_half_precision", "lab4_dual_gemm")
    assert labs.staged() == labs.names()[1:]
    assert isinstance(labs.get("1"), NumericLab) and isinstance(labs.get("lab4"), KernelLab)
    assert labs.resolve("solutions/lab3_half_precision.ipynb") == "lab3_half_precision"
    for name, spec in labs.registry().items():
        assert (REPO / "solutions" / f"{name}.ipynb").exists()
        assert (REPO / "autograder" / "rubrics" / f"{name}.toml").exists()
        assert spec.name == name
    with pytest.raises(KeyError, match="the labs are lab1_bytes_and_roofline"):
        labs.get("lab7")


@pytest.fixture
def extra_labs(tmp_path, monkeypatch):
    """A second folder of lab modules for the package to scan (the registry is rebuilt)."""
    monkeypatch.setattr(labs, "__path__", [*labs.__path__, str(tmp_path)])
    labs.registry.cache_clear()
    yield tmp_path
    for m in [m for m, mod in sys.modules.items()
              if str(getattr(mod, "__file__", "")).startswith(str(tmp_path))]:
        del sys.modules[m]
    labs.registry.cache_clear()


@pytest.mark.parametrize("file,text,words", [
    ("lab8.py", "", "lab<number>_<topic>"),
    ("lab8_nothing.py", "X = 1\n", "does not declare its lab"),
    ("lab8_misnamed.py", "from autograder.labs.lab2_packed_swiglu import LAB\n",
     "declares name='lab2_packed_swiglu'"),
    ("lab2_again.py", "import dataclasses\nfrom autograder.labs.lab2_packed_swiglu import LAB\n"
     "LAB = dataclasses.replace(LAB, name='lab2_again')\n", "share a number: lab2_"),
])
def test_a_lab_module_that_declares_itself_wrongly_is_refused_by_name(extra_labs, file, text, words):
    (extra_labs / file).write_text(text)
    with pytest.raises(LabSpecError, match=words):
        labs.registry()


def test_a_spec_with_inconsistent_fields_says_which(extra_labs):
    import dataclasses

    lab2 = labs.get("lab2")
    with pytest.raises(LabSpecError, match="output 'y' is not one of params"):
        dataclasses.replace(lab2, output="y")
    with pytest.raises(LabSpecError, match="perf_metric 'speed'"):
        dataclasses.replace(lab2, perf_metric="speed")
    with pytest.raises(LabSpecError, match="used twice"):
        dataclasses.replace(lab2, steps=lab2.steps + lab2.steps[:1])
    with pytest.raises(LabSpecError, match="every public case needs its own"):
        dataclasses.replace(lab2, public_cases=lab2.public_cases[:1] * 2)
    lab1 = labs.get("lab1")
    with pytest.raises(LabSpecError, match="signatures and answers must name the same"):
        dataclasses.replace(lab1, answers={})


def test_assign_refuses_a_master_whose_lab_is_unknown():
    from autograder.assign import MarkerError, check_steps

    nb = nbformat.read(REPO / "solutions" / "lab2_packed_swiglu.ipynb", as_version=4)
    with pytest.raises(MarkerError, match="no lab named 'lab7_gone'.*autograder/labs/lab7_gone.py"):
        check_steps(nb, "lab7_gone.ipynb")


def test_every_lab_is_in_the_table_of_contents_and_the_instructors_tables():
    """A lab a student cannot find is not on the site: each registered lab has its place in
    _toc.yml, and the two tables instructors read (autograder/README.md, the instructors'
    appendix) name it."""
    toc = (REPO / "_toc.yml").read_text()
    readme = (REPO / "autograder" / "README.md").read_text()
    appendix = (REPO / "chapters" / "appendix_instructors.md").read_text()
    for name in labs.names():
        assert f"- file: labs/{name}\n" in toc, f"{name} is not in _toc.yml"
        assert f"| `{name}` |" in readme, f"{name} is not in autograder/README.md's table"
        assert f"</labs/{name}>" in appendix, f"{name} is not in the instructors' appendix"
