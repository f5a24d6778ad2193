"""benchmarks/ holds the standing instruments, at most 18 scripts: every one names, in a
`Record:` line at its top, the record it writes (under records/ or book/data/, whose folder
exists; a record not made yet names the folder it goes into), and nothing but the scripts lives
there (what they write goes to records/ or book/data/, never here). The exceptions are
device_env.sh, the helper the device sessions source, and the package's `__init__.py`, its
map. A device session's runbook (a
*_session.sh: the commands of one GPU session) lies beside the records it made, under records/.
Diagnostics whose question is closed are retired, their findings kept in the records' READMEs;
one question asked of several labs is one script with an argument (lab_master_probe.py --lab N).

benchmarks/ is a package: its scripts run as modules from the repository's root
(`python3 -m benchmarks.X`; each says in its docstring how to run it), none touches sys.path,
one imports another as `benchmarks.X`, and importing any of them only defines (no output, no
file written, no arguments read: its work is under main()). Its `__init__.py` docstring is the
map (tests/tooling/test_contributing.py checks it names every file). The runbooks under
records/ keep `python3 benchmarks/X.py`, the command their session ran."""

from __future__ import annotations

import ast
import functools
import importlib
import json
import os
import re
import subprocess
import sys

import pytest
from repo import ROOT

BENCH = ROOT / "benchmarks"
HELPERS = {"device_env.sh": "sourced by the device sessions; it writes nothing",
           "__init__.py": "the package's map, its docstring"}
SCRIPTS = sorted(p.name for p in BENCH.iterdir() if p.is_file() and p.name not in HELPERS)
MODULES = [n.removesuffix(".py") for n in SCRIPTS if n.endswith(".py")]
MOST = 18
RUNBOOKS = sorted((ROOT / "records").rglob("*.sh"))


def records_named(path) -> list[str]:
    head = "\n".join(path.read_text().splitlines()[:40])
    m = re.search(r"^#? ?Record: (.*(?:\n#? ?\S.*)*)", head, re.M)
    return re.findall(r"`((?:records|book/data)/[^`]*)`", m.group(1)) if m else []


def test_benchmarks_holds_scripts_only():
    assert all(n.endswith((".py", ".sh")) for n in SCRIPTS), SCRIPTS
    assert not [p for p in BENCH.iterdir() if p.is_dir() and p.name != "__pycache__"]


def test_benchmarks_holds_standing_instruments_only():
    """At most MOST scripts, and no runbook: a session's commands go with its records."""
    assert len(SCRIPTS) <= MOST, (f"benchmarks/ holds {len(SCRIPTS)} scripts (at most {MOST}): "
                                  "retire a diagnostic whose question is closed (its findings in "
                                  "the records' README) or make one script of several")
    runbooks = [n for n in SCRIPTS if n.endswith(".sh")]
    assert not runbooks, f"{runbooks}: a device session's runbook lies beside its records"


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_names_the_record_it_writes(name):
    named = records_named(BENCH / name)
    assert named, f"benchmarks/{name} names no record: a `Record:` line at its top (records/ " \
                  "or book/data/), or, if its question is closed, retire it (records' READMEs)"
    for rec in named:
        assert (ROOT / rec).parent.is_dir(), f"benchmarks/{name} names {rec}, whose folder does not exist"


def test_a_helper_is_sourced_by_a_session():
    assert RUNBOOKS, "no device session's runbook under records/"
    assert any("benchmarks/device_env.sh" in p.read_text() for p in RUNBOOKS)


def test_runbooks_call_themselves_where_they_lie():
    """A runbook moved beside its records names its new path in its usage lines."""
    for p in RUNBOOKS:
        text = p.read_text()
        assert f"benchmarks/{p.name}" not in text, p.relative_to(ROOT)


def sys_path_uses(source: str) -> list[str]:
    """Where a module's code touches sys.path (`sys.path.insert(...)`, `sys.path[:0] = ...`,
    `from sys import path`, through any name `sys` is imported as) or site.addsitedir: a line
    each."""
    tree = ast.parse(source)
    names = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.Import)
             for a in node.names if a.name == "sys"}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == "path" \
                and isinstance(node.value, ast.Name) and node.value.id in names:
            found.append(f"line {node.lineno}: sys.path")
        elif isinstance(node, ast.ImportFrom) and node.module == "sys" \
                and any(a.name == "path" for a in node.names):
            found.append(f"line {node.lineno}: from sys import path")
        elif isinstance(node, ast.Attribute) and node.attr == "addsitedir":
            found.append(f"line {node.lineno}: addsitedir")
    return found


@pytest.mark.parametrize("name", [n for n in SCRIPTS if n.endswith(".py")] + ["__init__.py"])
def test_no_script_touches_sys_path(name):
    """A script finds the repository by running as a module from its root (`python3 -m
    benchmarks.X`), never by putting a folder on sys.path (issue 44)."""
    found = sys_path_uses((BENCH / name).read_text())
    assert not found, (f"benchmarks/{name} touches sys.path ({'; '.join(found)}): run it as "
                       f"`python3 -m benchmarks.{name.removesuffix('.py')}` from the repository's "
                       "root, and import another script as `from benchmarks.X import ...`")


def test_the_sys_path_check_finds_an_edit():
    assert sys_path_uses("import sys\nsys.path.insert(0, '..')\n") == ["line 2: sys.path"]
    assert sys_path_uses("import sys as s\ndef f():\n    s.path[:0] = ['x']\n")
    assert sys_path_uses("from sys import path\npath.append('x')\n")
    assert sys_path_uses("import site\nsite.addsitedir('x')\n")
    assert not sys_path_uses("import os\nos.path.join('a', 'b')\nfrom pathlib import Path\n")


# Imports every script as benchmarks.<name>, one after another, in a fresh interpreter in the
# simulator, run from an empty folder with an argument no script knows: a script that parses
# its arguments, prints, writes a file (in the repository or the working folder), changes
# sys.path or raises at import is reported by name. `import book` (and torch, which
# gemm_bench.py imports at its top) first: their own messages and warnings are not the script's.
_IMPORT_EACH = r"""
import builtins, contextlib, importlib, io, json, os, sys
import book
try:
    import torch  # noqa: F401
except ImportError:
    pass
roots = [os.path.realpath(p) for p in (sys.argv[1], os.getcwd())]
names, sys.argv = sys.argv[2:], ["benchmarks", "--no-such-option"]
wrote = []
def watch(real):
    def opened(file, mode="r", *args, **kwargs):
        path = os.path.realpath(file) if isinstance(file, (str, bytes, os.PathLike)) else ""
        if any(m in mode for m in "wax+") and any(
                os.path.commonpath([r, path]) == r for r in roots if path):
            wrote.append(path)
        return real(file, mode, *args, **kwargs)
    return opened
builtins.open, io.open = watch(builtins.open), watch(io.open)
result = {}
for name in names:
    path, folder, shown = list(sys.path), sorted(os.listdir(".")), io.StringIO()
    problems = []
    try:
        with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(shown):
            module = importlib.import_module("benchmarks." + name)
        if not callable(getattr(module, "main", None)):
            problems.append("no main()")
    except BaseException as e:
        problems.append("its import raised " + repr(e))
    if shown.getvalue():
        problems.append("it printed " + repr(shown.getvalue()[:300]))
    if sys.path != path:
        problems.append("it changed sys.path")
    if wrote or sorted(os.listdir(".")) != folder:
        problems.append("it wrote " + repr(wrote or sorted(os.listdir("."))))
        wrote.clear()
    result[name] = problems
print("RESULT " + json.dumps(result))
"""


@functools.cache
def imported_each(folder: str) -> dict[str, list[str]]:
    env = dict(os.environ, BOOK_SIMULATOR="1", PYTHONPATH=str(ROOT), PYTHONDONTWRITEBYTECODE="1")
    res = subprocess.run([sys.executable, "-c", _IMPORT_EACH, str(ROOT), *MODULES], cwd=folder,
                         env=env, capture_output=True, text=True, timeout=600)
    line = [x for x in res.stdout.splitlines() if x.startswith("RESULT ")]
    assert res.returncode == 0 and line, (res.stdout[-3000:], res.stderr[-3000:])
    return json.loads(line[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def empty_folder(tmp_path_factory):
    return str(tmp_path_factory.mktemp("import_each"))


@pytest.mark.parametrize("name", MODULES)
def test_each_script_imports_as_a_module_and_only_defines(name, empty_folder):
    """`import benchmarks.<name>` with no GPU: definitions only, the GPU work under main()."""
    problems = imported_each(empty_folder)[name]
    assert not problems, (f"benchmarks/{name}.py as the module benchmarks.{name}: "
                          + "; ".join(problems) + " (its work belongs under main(), run by "
                          "`if __name__ == \"__main__\":`)")


def _module(name: str):
    return importlib.import_module(f"benchmarks.{name}")


def test_the_lab_master_probe_reads_each_labs_master():
    """lab_master_probe.py without a GPU: each lab's graded cells define its function, lab 2's
    launch constants are found and replaced (one `min(M, ROWS)`), lab 6's fixtures are
    submissions its lab derives, each defining the lab's function."""
    from autograder.labs import get

    probe = _module("lab_master_probe")
    for number, name in probe.LABS.items():
        lab = get(name)
        assert any(re.search(rf"^def {lab.function}\(", src, re.M)
                   for src in probe.graded_cells(name)), (number, lab.function)
    cells = probe.lab2_cells(probe.LABS[2])
    assert callable(probe.lab2_variant(cells, *probe.LAB2_VARIANTS[1]))
    for fixture in probe.LAB6_FIXTURES.values():
        assert callable(probe.derived(probe.LABS[6], fixture)[get(probe.LABS[6]).function])
