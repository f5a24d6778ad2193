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
    "book.kernels.instructions.tensorcore": "the tensor-core instructions as intrinsics, each with its "
                               "fragment table and its simulator version",
    "book.kernels.instructions.hopper": "Hopper's instructions as intrinsics, each with the model of what "
                           "it computes",
    "autograder.sandbox.children": "one sandboxed child from its start to its teardown: the "
                                   "protocol, the watchdog, the kill and the check that "
                                   "nothing of it is left",
    "autograder.sanitize": "the grader's compute-sanitizer runs: the case chosen by the "
                           "master's paths, the three tools' sandboxed children, their "
                           "findings as hazards that cost the case",
    "book.kernels.gemv.wgmma_gemv": "one kernel, the Hopper decode GEMV: its factory's producer, "
                               "finisher and consumer with the options of each (the fixes "
                               "it shares with the FP8 GEMV among them), read side by side",
    "book.kernels.gemv.fp8_gemv": "one kernel, the FP8 decode GEMV: its factory's producer, "
                             "finisher (one warp or, wide_settle, three) and consumer with "
                             "their options, the probes that time each part, and its launch",
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


# book/kernels/ by layer (book/kernels/__init__.py's map): a layer imports the layers before it,
# and the host side's plan and launch, which every wrapper uses; instructions import no other
# layer; host's fastcall and ptx, which launch and compile the kernels, sit above them all.
KERNEL_LAYERS = ("instructions", "elementwise", "gemms", "gemv", "probes")
EVERY_LAYER_USES = ("book.kernels.host.plan", "book.kernels.host.launch")


def kernel_layer_violations(found) -> list[str]:
    out = []
    for name, mod in sorted(found.items()):
        if not name.startswith("book.kernels.") or name.count(".") < 3:
            continue
        layer = name.split(".")[2]
        for dep in sorted(d for d in mod.imports if d.startswith("book.kernels.")):
            there = dep.split(".")[2]
            if dep.count(".") < 3 and dep != "book.kernels.reference":
                out.append(f"{name} -> {dep} (a package: import the module)")
            elif there == layer or dep == "book.kernels.reference" or layer == "host" and \
                    name not in EVERY_LAYER_USES:
                continue
            elif layer == "instructions":
                out.append(f"{name} -> {dep} (instructions import no other layer)")
            elif dep in EVERY_LAYER_USES:
                continue
            elif there not in KERNEL_LAYERS or layer == "host" or \
                    KERNEL_LAYERS.index(there) > KERNEL_LAYERS.index(layer):
                out.append(f"{name} -> {dep}")
    return out


def test_kernels_import_down_their_layers():
    assert kernel_layer_violations(FOUND) == []
    assert set(KERNEL_LAYERS) | {"host"} == {p.name for p in (structure.ROOT / "book" / "kernels").iterdir()
                                             if (p / "__init__.py").is_file()}


def test_the_layer_check_finds_an_import_up():
    def mod(name, *imports):
        return name, structure.Module(name, None, 1, set(imports))

    found = dict([mod("book.kernels.instructions.tensorcore", "book.kernels.gemms.tile"),
                  mod("book.kernels.gemms.tile", "book.kernels.gemv.decode_mlp"),
                  mod("book.kernels.host.launch", "book.kernels.elementwise.fused"),
                  mod("book.kernels.gemv.decode_mlp", "book.kernels.host.plan",
                      "book.kernels.gemms.tile", "book.kernels.host.fastcall")])
    assert kernel_layer_violations(found) == [
        "book.kernels.gemms.tile -> book.kernels.gemv.decode_mlp",
        "book.kernels.gemv.decode_mlp -> book.kernels.host.fastcall",
        "book.kernels.host.launch -> book.kernels.elementwise.fused",
        "book.kernels.instructions.tensorcore -> book.kernels.gemms.tile (instructions import no "
        "other layer)"]
