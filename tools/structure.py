"""The structure map of the course's code: its modules, their sizes, who imports whom, and the
circles (modules that import each other, directly or through others).

    python -m tools.structure            # the packages' modules, largest first, and any circle
    python -m tools.structure --edges    # and every module's imports

Every import counts, at the top of a module or inside a function: a function-level import is a
dependency too, only a later one. ``tests/tooling/test_structure.py`` holds the map to its
rules: no circle, distinct module names, no module over ``MAX_LINES`` but the few that hold
one job and say which (``LARGE``).
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("autograder", "book", "tools")
MAX_LINES = 600


@dataclass
class Module:
    name: str
    path: Path
    lines: int
    imports: set[str] = field(default_factory=set)


def modules(root: Path = ROOT, packages=PACKAGES) -> dict[str, Module]:
    """{dotted name: Module} of every .py file under ``packages``, with its imports among them."""
    found = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = Module(".".join(parts), path, len(path.read_text().splitlines()))
    for mod in found.values():
        mod.imports = _imports(mod, found)
    return found


def _known(name: str, found) -> str | None:
    """The longest prefix of ``name`` that is one of the modules."""
    while name and name not in found:
        name = name.rpartition(".")[0]
    return name or None


def _imports(mod: Module, found) -> set[str]:
    package = mod.name.split(".") if mod.path.name == "__init__.py" else mod.name.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(mod.path.read_text(), str(mod.path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package[:len(package) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            # `from pkg import sub` names the submodule when there is one, else the package
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in found else base
                     for a in node.names]
        else:
            continue
        out |= {k for k in map(lambda n: _known(n, found), names) if k and k != mod.name}
    return out


def circles(found: dict[str, Module]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(found[v].imports):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(found)))
    try:
        for v in sorted(found):
            if v not in index:
                visit(v)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(out)


def same_names(found: dict[str, Module]) -> dict[str, list[str]]:
    """{file name: modules} for the file names more than one module has (packages aside)."""
    by = {}
    for m in found.values():
        if m.path.name not in ("__init__.py", "__main__.py"):
            by.setdefault(m.path.name, []).append(m.name)
    return {k: sorted(v) for k, v in sorted(by.items()) if len(v) > 1}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.structure", description=__doc__.split("\n\n")[0])
    ap.add_argument("--edges", action="store_true", help="list every module's imports")
    args = ap.parse_args(argv)
    found = modules()
    edges = sum(len(m.imports) for m in found.values())
    print(f"{len(found)} modules in {', '.join(PACKAGES)}, {edges} imports among them")
    for m in sorted(found.values(), key=lambda m: -m.lines):
        mark = "  (over %d lines)" % MAX_LINES if m.lines > MAX_LINES else ""
        print(f"{m.lines:6d}  {m.name}{mark}")
        if args.edges:
            for i in sorted(m.imports):
                print(f"          -> {i}")
    groups = circles(found)
    print(f"circles: {len(groups)}")
    for g in groups:
        print("  " + " <-> ".join(g))
    return 1 if groups else 0


if __name__ == "__main__":
    sys.exit(main())
