"""autograder/master.py, the one reader of a master's graded cells, and autograder/labs/edits.py,
its one kind of edit: which cells are a solution, where an edit goes, and that an edit whose
text is gone says so instead of testing the unchanged master."""

from __future__ import annotations

import dataclasses

import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from autograder import labs, master
from autograder.labs import LabSpecError
from autograder.labs.edits import Derived, Edit, EditError
from autograder.labs.spec import PlantedBug

LAB2 = labs.get("lab2")


def test_the_graded_cells_leave_out_setup_checks_and_hidden_tests():
    ids = [c.id for c in master.graded_cells("lab2")]
    assert ids == ["lab2-02", "lab2-s1-code", "lab2-s2-code", "lab2-03"]
    assert [c.id for c in master.graded_cells(LAB2, upto="one")] == ["lab2-02", "lab2-s1-code"]
    assert master.graded_cells(LAB2, upto="final")[-1].id == "lab2-03"
    student = master.graded_cells(LAB2, master.notebook("lab2", "labs"), upto="one")
    assert [c.id for c in student] == ["lab2-02", "lab2-s1-code"]
    assert "NotImplementedError" in student[-1].source


def test_an_edit_goes_to_its_cell_or_to_the_last_one_read():
    cells = [master.Cell("a", "x = 1\n"), master.Cell("b", "x = 1\ny = 2\n")]
    assert [c.source for c in master.edited(cells, [Edit("x = 1", "x = 3")])] == [
        "x = 1\n", "x = 3\ny = 2\n"]
    assert master.edited(cells, [Edit("x = 1", "x = 3", "a")])[0].source == "x = 3\n"
    with pytest.raises(EditError, match="cell 'c' is not among the cells read: a, b"):
        master.edited(cells, [Edit("x", "y", "c")])


def test_an_edit_whose_text_is_gone_names_the_cell():
    with pytest.raises(EditError, match=r"'z = 9' is not in cell lab2-03 of the master any more"):
        master.namespace(LAB2, [Edit("z = 9", "z = 8", "lab2-03")])
    with pytest.raises(EditError, match="changes something"):
        Edit("x", "x")


def test_the_namespace_names_each_cell_and_a_planted_bug_is_an_edit():
    ns = master.namespace(LAB2, upto="one")
    assert ns["swiglu_one"].__code__.co_filename == "<lab2_packed_swiglu lab2-s1-code>"
    bug = LAB2.step("one").bug
    assert bug.edit == Edit(bug.right, bug.wrong, None)
    assert PlantedBug("a", "b", "c", cell="lab2-02").edit.cell == "lab2-02"
    master.namespace(LAB2, [bug.edit], upto="one")   # it applies to the step's own cell


def test_a_derived_submission_is_the_graded_code_edited_under_what_it_is():
    d = Derived("hostile", "demo", "what it is,\non two lines", [Edit("if j < F:", "if j <= F:")],
                append="\n\ndef extra():\n    pass\n")
    text = master.derive(LAB2, d)
    assert text.startswith("# what it is,\n# on two lines\nimport math\n")
    assert "if j <= F:" in text and "BEGIN SOLUTION" not in text
    assert text.endswith("\n\n\ndef extra():\n    pass\n")
    only = master.derive(LAB2, dataclasses.replace(d, edits=(), append="", cells=("lab2-02",)))
    assert "def swiglu_interleaved" not in only
    with pytest.raises(EditError, match=r"cells \['nope'\]"):
        master.derive(LAB2, dataclasses.replace(d, cells=("nope",)))


def test_a_lab_refuses_derived_names_twice_or_without_its_prefix():
    d = Derived("bounds", "lab2_again", "x")
    with pytest.raises(LabSpecError, match="names of their own"):
        dataclasses.replace(LAB2, derived=(d, d))
    with pytest.raises(LabSpecError, match="starts with 'lab2_'"):
        dataclasses.replace(LAB2, derived=(Derived("bounds", "other", "x"),))
    with pytest.raises(EditError, match="kind 'bound' is not one of"):
        Derived("bound", "lab2_x", "x")
    assert LAB2.derived_named("lab2_two_kernels").kind == "controls"
    with pytest.raises(KeyError, match="derives no submission 'nope'"):
        LAB2.derived_named("nope")


def test_the_master_handed_in_has_no_hidden_tests_and_nothing_else_changed():
    import nbformat

    assert master.without_hidden_tests(
        "a = 1\n### BEGIN HIDDEN TESTS\nassert a\n### END HIDDEN TESTS\nb = 2") == "a = 1\nb = 2"
    nb = nbformat.read(master.notebook("lab2"), as_version=4)
    handed = master.handed_in("lab2")
    assert [c.get("id") for c in handed.cells] == [c.get("id") for c in nb.cells]
    changed = [c.get("id") for c, h in zip(nb.cells, handed.cells) if c.source != h.source]
    assert changed and all("BEGIN HIDDEN TESTS" in c.source for c in nb.cells
                           if c.get("id") in changed), changed
    assert not any("HIDDEN TESTS" in c.source for c in handed.cells)
