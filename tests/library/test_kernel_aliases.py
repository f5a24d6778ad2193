"""book.kernels' old flat names (book/kernels/aliases.py): the chapters', labs' and graded
code's imports by them give the one module of the new path, never a second copy; importing
book.kernels stays cheap; and nothing but notebooks and graded code uses the old names."""

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

import book  # noqa: F401
import book.kernels as K

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("old", sorted(K.ALIASES))
def test_an_old_name_is_the_module_of_its_new_path(old):
    new = K.ALIASES[old]
    module = importlib.import_module(new)
    assert importlib.import_module(f"book.kernels.{old}") is module
    assert sys.modules[f"book.kernels.{old}"] is module
    assert getattr(K, old) is module
    assert module.__name__ == module.__spec__.name == new   # its own spec kept
    assert module.__file__ == str(ROOT / (new.replace(".", "/") + ".py"))


def test_every_module_of_a_layer_has_its_old_name():
    moved = {p.stem: ".".join(p.relative_to(ROOT).with_suffix("").parts)
             for p in (ROOT / "book" / "kernels").glob("*/*.py") if p.name != "__init__.py"}
    assert moved == K.ALIASES
    # and no module is left at the old place to be a second copy
    assert sorted(p.name for p in (ROOT / "book" / "kernels").glob("*.py")) == [
        "__init__.py", "aliases.py", "reference.py"]


def test_the_notebooks_imports_by_the_old_names():
    ns = {}
    exec("from book.kernels import hopper, tensorcore as tc, gemm, naive, reference\n"
         "from book.kernels.launch import cdiv, sm_count\n"
         "from book.kernels.tensorcore import shfl_xor\n"
         "import book.kernels.fragments\n", ns)
    assert ns["gemm"] is importlib.import_module("book.kernels.gemms.gemm")  # not the layer
    assert ns["tc"].shfl_xor is ns["shfl_xor"]
    assert ns["cdiv"] is importlib.import_module("book.kernels.host.launch").cdiv
    from book.tracer.recorder import resolve

    assert resolve("book.kernels.naive:swiglu_naive") is \
        importlib.import_module("book.kernels.elementwise.naive").swiglu_naive
    with pytest.raises(AttributeError):
        K.no_such_module


def test_importing_book_kernels_imports_no_kernel():
    code = ("import sys, book.kernels as K; K.ALIASES; "
            "print(sorted(m for m in sys.modules if m.startswith(('numba', 'book.kernels.'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip().splitlines()[-1] == "['book.kernels.aliases', 'book.kernels.reference']"


OLD = "|".join(sorted(K.ALIASES, key=len, reverse=True))


def old_name_imports(path: Path) -> list[str]:
    """The imports of a module by an old flat name (or a dotted old name in its code)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if re.fullmatch(r"(book|\.*)\.?kernels", mod.lstrip(".") if node.level else mod) \
                    or (node.level and mod == "kernels"):
                out += [f"{path}:{node.lineno} {a.name}" for a in node.names if a.name in K.ALIASES]
            elif re.search(rf"(^|\.)kernels\.({OLD})(\.|$)", mod):
                out.append(f"{path}:{node.lineno} {mod}")
        elif isinstance(node, ast.Import):
            out += [f"{path}:{node.lineno} {a.name}" for a in node.names
                    if re.match(rf"book\.kernels\.({OLD})(\.|$)", a.name)]
    return out


def test_the_code_imports_by_the_new_paths():
    files = [p for d in ("book", "autograder", "tools", "benchmarks", "tests")
             for p in (ROOT / d).rglob("*.py")
             if "fixtures" not in p.parts and "__pycache__" not in p.parts]
    found = [hit for p in files for hit in old_name_imports(p)]
    assert found == [], "imports by an old name (book.kernels.ALIASES): " + "; ".join(found)


def test_the_check_finds_an_old_name(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("from book.kernels import hopper, VARIANTS\nfrom book.kernels.launch import cdiv\n"
                 "import book.kernels.tensorcore\nfrom ..kernels import fused\n"
                 "from book.kernels.instructions import hopper\n")
    assert [h.split(" ")[1] for h in old_name_imports(p)] == [
        "hopper", "book.kernels.launch", "book.kernels.tensorcore", "fused"]
