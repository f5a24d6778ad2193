"""The structure map's rules (tools/structure.py): no circle among the modules of autograder,
book and tools (an import inside a function counts); module names distinct, but for the
layers that measure or draw a module of book under its name; no module over MAX_LINES but
the few, each one job, named here with it."""

from __future__ import annotations

import pytest

from tools import structure

FOUND = structure.modules()

# Over MAX_LINES, one job each: what it is, so that a module growing past the line is a choice.
LARGE = {
    "book.kernels.tensorcore": "the tensor-core instructions as intrinsics, each with its "
                               "fragment table and its simulator version",
    "book.kernels.hopper": "Hopper's instructions as intrinsics, each with the model of what "
                           "it computes",
    "autograder.sandbox.children": "one sandboxed child from its start to its teardown: the "
                                   "protocol, the watchdog, the kill and the check that "
                                   "nothing of it is left",
    "autograder.sanitize": "the grader's compute-sanitizer runs: the case chosen by the "
                           "master's paths, the three tools' sandboxed children, their "
                           "findings as hazards that cost the case",
    "book.kernels.wgmma_gemv": "one kernel, the Hopper decode GEMV: its factory's producer, "
                               "finisher and consumer with the options of each (the fixes "
                               "it shares with the FP8 GEMV among them), read side by side",
}
# The layers that measure or draw a module of book, named after it (book/bench/X: the rows of
# X's kernels; book/widgets/X: the explorer of book's X).
LAYERS = ("book.bench.", "book.widgets.")


def test_no_circles():
    groups = structure.circles(FOUND)
    assert groups == [], "modules that import each other (python -m tools.structure):\n" + \
        "\n".join(" <-> ".join(g) for g in groups)


def test_the_map_finds_a_circle():
    a = structure.Module("a", None, 1, {"b"})
    b = structure.Module("b", None, 1, {"c"})
    c = structure.Module("c", None, 1, {"a"})
    assert structure.circles({"a": a, "b": b, "c": c}) == [["a", "b", "c"]]
    assert structure.circles({"a": structure.Module("a", None, 1, set())}) == []


def test_function_level_imports_count(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "one.py").write_text("def f():\n    from .two import g\n")
    (pkg / "two.py").write_text("from pkg import one\n")
    found = structure.modules(tmp_path, ("pkg",))
    assert found["pkg.one"].imports == {"pkg.two"} and found["pkg.two"].imports == {"pkg.one"}
    assert structure.circles(found) == [["pkg.one", "pkg.two"]]


def test_module_names_are_distinct_but_for_the_layers_of_book():
    clashes = {}
    for name, mods in structure.same_names(FOUND).items():
        plain = [m for m in mods if not m.startswith(LAYERS)]
        if len(plain) > 1 or len(plain) == 0 or any(m.startswith("autograder.") for m in mods):
            clashes[name] = mods
    assert clashes == {}, f"modules that share a name: {clashes}"


@pytest.mark.parametrize("name", sorted(FOUND))
def test_no_module_over_the_line_but_the_single_jobs_named(name):
    mod = FOUND[name]
    if name in LARGE:
        return
    assert mod.lines <= structure.MAX_LINES, (
        f"{name} has {mod.lines} lines (> {structure.MAX_LINES}): split it by job, or, if it "
        "is one job, name it in tests/tooling/test_structure.py's LARGE")


def test_the_large_ones_are_large():
    for name in LARGE:
        assert FOUND[name].lines > structure.MAX_LINES, f"{name} is no longer large: drop it from LARGE"
