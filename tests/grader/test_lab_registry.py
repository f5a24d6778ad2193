"""A lab is its module, its master and its rubric: the module (autograder/labs/<lab>.py,
declaring ``LAB``: its steps with their planted bugs, and the submissions the suite derives from
the master), the master (solutions/<lab>.ipynb) and the rubric (autograder/rubrics/<lab>.toml).
The registry finds it; ``list``, ``assign``, ``grade``, ``check``, the tests' and the tools' lab
lists all follow, and the pages that list the labs and the derived fixtures are written from it.

The end-to-end test follows CONTRIBUTING.md's "Add a lab" literally in a copy of the tree
(nothing is left in this one), under the next free lab number: the template's three files, the
recipe's commands, in the simulator, then the suite's lab tests on the result."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import nbformat
import pytest

from autograder import labs
from autograder.labs import KernelLab, LabSpecError, NumericLab

from grading_runs import full_marks
from repo import ROOT as REPO
from tools import lab_pages

CONTRIBUTING = (REPO / "CONTRIBUTING.md").read_text()
SECTION = CONTRIBUTING[CONTRIBUTING.index("## Add a lab\n"):CONTRIBUTING.index("## Conventions\n")]
NEXT = max(s.number for s in labs.registry().values()) + 1   # the number a new lab takes


def recipe() -> list[str]:
    """The commands of CONTRIBUTING.md's "Add a lab", in order, as written there, for a lab
    numbered NEXT (the recipe's example number, whatever it is, replaced)."""
    block = re.search(r"```console\n(.*?)```", SECTION, re.S).group(1)
    lines = [line for line in block.split("\n") if line.strip()]
    example = re.search(r"new-lab lab(\d+)_", lines[0]).group(1)
    return [re.sub(rf"\blab{example}(?!\d)", f"lab{NEXT}", line) for line in lines]


RECIPE = recipe()
NAME = re.search(r"new-lab (lab\d+_\w+)", RECIPE[0]).group(1)
SHORT = f"lab{NEXT}"


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """A copy of the repository's files (its records aside), as a contributor's checkout."""
    root = tmp_path_factory.mktemp("course")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    for f in files:   # the records aside, but for the lessons' controls the lab tests read
        if (f.startswith("records/") and not f.startswith("records/labs/lesson_controls_")
                or not (REPO / f).is_file()):
            continue
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / f, root / f)
    return root


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and ".pytest_cache" not in p.parts}


def run(root: Path, *args, timeout=600):
    import os

    env = dict(os.environ, BOOK_SIMULATOR="1", PYTHONPATH=str(root))
    env.pop("PYTEST_ADDOPTS", None)   # the copy's suite runs as the recipe says, not with ours
    r = subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert r.returncode == 0, f"{args} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r.stdout


# The suite's lab tests, run on the copy for the new lab (its parametrized cases) and the
# registry-wide checks it must not break: registry and pages, steps (its master, planted bug and
# blank), the lesson control (correct; its lines provisional, skipped, saying so), the derived
# fixtures, the simulator's hidden cases, the folded setup cell. Not the grading runs (slow).
LAB_TESTS = ("tests/grader/test_lab_registry.py", "tests/grader/test_lab_steps.py",
             "tests/grader/test_lesson_controls.py", "tests/grader/test_bounds_grading.py",
             "tests/tooling/test_lab_fixtures.py", "tests/tooling/test_lab_pages.py",
             "tests/tooling/test_setup_cell.py")
WHOLE = ("test_lab_registry", "test_lab_fixtures", "test_lab_pages", "folds_its_setup_cell")


@pytest.mark.slow
def test_a_lab_added_by_following_contributing_literally_passes_the_suites_lab_tests(
        tree, tmp_path):
    """CONTRIBUTING.md's recipe, its commands run as written (the lab's number the next free
    one, the grade's output folder this test's own), in a copy of the tree: the new lab is its
    three files, the files the recipe's commands write, and it grades and passes the lab tests."""
    before = snapshot(tree)
    said = {}
    for line in RECIPE:
        args = shlex.split(re.sub(r"--out \S+", f"--out {tmp_path / 'graded'}", line))
        assert args[0] == "python", f"a recipe step that is not python: {line}"
        said[line] = run(tree, *args[1:])
    after = snapshot(tree)
    added = sorted(set(after) - set(before))
    changed = sorted(k for k in set(before) & set(after) if before[k] != after[k])
    assert added == sorted([f"autograder/labs/{NAME}.py", f"autograder/rubrics/{NAME}.toml",
                            f"solutions/{NAME}.ipynb", f"labs/{NAME}.ipynb",
                            f"tests/fixtures/bounds/{SHORT}_writes_past_end.py",
                            f"tests/fixtures/bounds/{SHORT}_forgets_blockidx_x.py",
                            f"tests/fixtures/hazards/{SHORT}_cache_by_shape.py",
                            f"tests/fixtures/controls/{SHORT}_two_passes.py"]), added
    pages = ["_toc.yml", "intro.md", "chapters/appendix_instructors.md", "autograder/README.md"]
    assert changed == sorted(pages + ["tests/fixtures/bounds/README.md",
                                      "tests/fixtures/controls/README.md"]), changed
    assert all(f"`{f}`" in SECTION for f in pages), "the recipe names every page it changes"

    graded = tmp_path / "graded"
    sol = json.loads((graded / f"solutions_{NAME}" / "results.json").read_text())
    blank = json.loads((graded / f"labs_{NAME}" / "results.json").read_text())
    assert full_marks(sol), json.dumps(sol["tests"])[:2000]   # (performance pending, issue 28)
    assert blank["score"] == 0
    checked = next(out for line, out in said.items() if "-m autograder check" in line)
    assert "PASS step one" in checked and "PASS public" in checked and "FAIL" not in checked
    lab = (tree / "labs" / f"{NAME}.ipynb").read_text()
    assert "NotImplementedError" in lab and "BEGIN SOLUTION" not in lab
    assert "# Course setup: generated by tools/setup_cell.py" in lab   # the student's install cell
    for other in labs.names():                                         # the other labs untouched
        assert (tree / "labs" / f"{other}.ipynb").read_text() == (REPO / "labs" / f"{other}.ipynb").read_text()

    out = run(tree, "-c", textwrap.dedent("""
        import json, sys
        sys.path[:0] = ["tests", "tests/grader"]
        import grading_runs
        from autograder.__main__ import main
        from tools import grader_report, lab_ptx
        main(["list"])
        print(json.dumps({"runs": grading_runs.LABS, "staged": list(lab_ptx.STAGED),
                          "report": list(grader_report.OTHER_LABS)}))
        """))
    assert out.index("lab5_tensor_core_dual_gemm") < out.index(NAME)  # in lab-number order
    found = json.loads(out.strip().splitlines()[-1])
    assert found["runs"] == [*labs.names(), NAME]
    assert found["staged"] == [*labs.staged(), NAME]
    assert NAME in found["report"]
    intro = (tree / "intro.md").read_text()
    assert f"**Labs.** {lab_pages.count(len(labs.names()) + 1, capital=True)} labs apply" in intro

    tested = run(tree, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsp", "-m", "not slow",
                 *LAB_TESTS, "-k", " or ".join((*WHOLE, SHORT)))
    assert "failed" not in tested, tested[-3000:]
    for test in (f"test_step_check_passes_on_the_master[{NAME}-one]",
                 f"test_step_check_fails_on_a_wrong_step_with_a_specific_message[{NAME}-one]",
                 f"test_blank_lab_steps_say_not_written_yet[{NAME}]",
                 f"test_every_rubric_names_its_lesson_and_a_control_of_its_own[{NAME}]",
                 f"test_a_control_is_a_correct_solution[{SHORT}_two_passes]",
                 f"test_hidden_cases_in_the_simulator_cross_every_block_boundary[{NAME}]",
                 "test_the_derived_fixtures_are_what_the_labs_derive",
                 "test_every_page_folds_its_setup_cell", "test_every_lab_is_titled_as_its_page"):
        assert re.search(rf"PASSED \S+::{re.escape(test)}", tested), (test, tested[-3000:])
    assert f"{NAME}: provisional performance lines" in tested, tested[-3000:]


def test_new_lab_refuses_a_taken_number_and_a_bad_name(tmp_path):
    from autograder.scaffold import new_lab

    with pytest.raises(LabSpecError, match="lab number 2 is taken by lab2_packed_swiglu"):
        new_lab("lab2_other", tmp_path)
    with pytest.raises(LabSpecError, match="lab<number>_<topic>"):
        new_lab("lab9", tmp_path)
    for d in ("autograder/labs", "autograder/rubrics", "solutions"):
        (tmp_path / d).mkdir(parents=True)
    (tmp_path / "solutions" / f"{NAME}.ipynb").write_text("{}")
    with pytest.raises(LabSpecError, match=f"solutions/{NAME}.ipynb exist already"):
        new_lab(NAME, tmp_path)
    assert not (tmp_path / "autograder" / "labs" / f"{NAME}.py").exists()


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
        labs.get(f"lab{NEXT}")


def test_every_lab_is_titled_as_its_page():
    """`python -m autograder list` and feedback name a lab as the student's page does: the
    spec's title is the master's first heading."""
    for name, spec in labs.registry().items():
        nb = nbformat.read(REPO / "solutions" / f"{name}.ipynb", as_version=4)
        heading = nb.cells[0].source.split("\n")[0]
        assert heading == f"# {spec.title}", f"{name}: title {spec.title!r}, page {heading!r}"


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
