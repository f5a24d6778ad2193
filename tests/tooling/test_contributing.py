"""CONTRIBUTING.md is the map of the tree on one screen (under MOST_BYTES, a line per
top-level folder), every path it names exists, and every module it runs (`python -m X`) is
there; each folder's own map (a package's docstring, else its README) names every module. A path is named in backticks, from the repository's root or
from a folder its table row or paragraph named before it (`benchmarks/` ... `gemm_bench.py`);
`<...>` stands for a part the reader fills in (the folder before it must exist), `$OUT` for
the device's output folder and a leading dot for a git-ignored folder (not checked)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from repo import ROOT

TEXT = (ROOT / "CONTRIBUTING.md").read_text()
SUFFIXES = (".py", ".md", ".toml", ".yml", ".yaml", ".ipynb", ".sh", ".json", ".txt", ".js",
            ".css", ".csv", ".log")


def blocks(text: str) -> list[str]:
    """Table rows, list items and paragraphs: the scope a folder named in it gives context to."""
    out, cur = [], []
    for line in text.split("\n"):
        starts = line.startswith(("|", "- ", "#")) or re.match(r"\d+\. ", line) or not line.strip()
        if starts and cur:
            out.append("\n".join(cur))
            cur = []
        if line.strip():
            cur.append(line)
    return out + (["\n".join(cur)] if cur else [])


def is_path(tok: str) -> bool:
    return ("/" in tok or tok.endswith(SUFFIXES)) and not (
        " " in tok or "$" in tok or tok.startswith((".", "-", "http")) or "::" in tok and "/" not in tok)


def resolve(tok: str, folders: list[Path]) -> Path | None:
    tok = tok.split("::")[0].rstrip(":,")
    if "<" in tok:   # a placeholder: the folder before it
        tok = tok[:tok.index("<")]
        tok = tok[:tok.rfind("/") + 1] if "/" in tok else ""
        if not tok:
            return folders[0]
    for base in folders:
        hits = list(base.glob(tok)) if any(c in tok for c in "*?[") else \
            [base / tok] if (base / tok).exists() else []
        if hits:
            return hits[0]
    return None


def named_paths(text: str = TEXT, base: tuple[Path, ...] = (ROOT,)):
    """(block's first words, token, resolved path or None) for every path CONTRIBUTING (or a
    folder's README, from its folder) names."""
    for block in blocks(text):
        folders = list(base)
        for tok in re.findall(r"`([^`\n]+)`", block):
            if not is_path(tok):
                continue
            found = resolve(tok, folders)
            yield block[:60], tok, found
            if found is not None and found.is_dir() and found not in folders:
                folders.append(found)


def test_every_path_contributing_names_exists():
    missing = [(where, tok) for where, tok, found in named_paths() if found is None]
    assert not missing, "CONTRIBUTING.md names paths that do not exist:\n" + "\n".join(
        f"  {tok!r} (in: {where!r})" for where, tok in missing)


@pytest.mark.parametrize("folder", ["tools", "records"])
def test_every_path_a_folders_readme_names_exists(folder):
    missing = [(where, tok) for where, tok, found in named_paths(
        (ROOT / folder / "README.md").read_text(), (ROOT / folder, ROOT)) if found is None]
    assert not missing, f"{folder}/README.md names paths that do not exist: {missing}"


def test_every_module_contributing_runs_exists():
    missing = []
    for mod in set(re.findall(r"python3? -m ([\w.]+)", TEXT)):
        parts = mod.split(".")
        if not (ROOT.joinpath(*parts).with_suffix(".py").exists()
                or (ROOT.joinpath(*parts) / "__init__.py").exists()
                or (ROOT.joinpath(*parts) / "__main__.py").exists()) and parts[0] not in (
                "pip", "pytest", "http", "venv"):
            missing.append(mod)
    assert not missing, f"CONTRIBUTING.md runs modules that do not exist: {sorted(missing)}"


def test_the_check_finds_a_path_that_is_gone():
    """The test above can fail: a made-up path is reported, a folder's context is used."""
    folders = [ROOT]
    assert resolve("book/exercises.py", folders) is None        # a package now, not a module
    assert resolve("book/exercises/", folders) == ROOT / "book" / "exercises"
    assert resolve("spec.py", folders) is None                     # no context: not at the root
    assert resolve("spec.py", [ROOT, ROOT / "autograder" / "labs"]) == ROOT / "autograder" / "labs" / "spec.py"
    assert resolve("records/chapters/<gpu>/", folders) == ROOT / "records" / "chapters"


# CONTRIBUTING.md is a map on one screen; the detail lives beside the code: each package's
# `__init__.py` docstring is its map, and a folder that is not a package has a README (or, for
# tests/, the docstring of the file that holds its rules). benchmarks/ is a package of scripts
# and device_env.sh: its docstring names them all.
MOST_BYTES = 10_000
PACKAGES = ("book", "book/kernels", "book/kernels/instructions", "book/kernels/host",
            "book/kernels/elementwise", "book/kernels/gemms", "book/kernels/gemv",
            "book/kernels/probes", "book/bench", "book/exercises", "book/widgets", "book/tracer",
            "book/data", "autograder", "autograder/labs", "autograder/sandbox",
            "autograder/sandbox/inside")


def docstring(path: Path) -> str:
    import ast

    return ast.get_docstring(ast.parse(path.read_text())) or ""


# Where each folder's map is, and what in the folder it names: (folder, the map's text, entries).
def maps() -> list[tuple[str, str, list[str]]]:
    out = []
    for pkg in PACKAGES:
        d = ROOT / pkg
        entries = [p.stem for p in d.glob("*.py") if p.name != "__init__.py"]
        entries += [p.name + "/" for p in d.iterdir() if (p / "__init__.py").is_file()]
        out.append((pkg, docstring(d / "__init__.py"), entries))
    tools = ROOT / "tools"
    out.append(("tools", (tools / "README.md").read_text(),
                [p.name for p in tools.iterdir() if p.suffix in (".py", ".sh")]
                + [p.name for p in (tools / "colab").glob("*.py")]
                + [p.name + "/" for p in tools.iterdir() if p.is_dir() and p.name != "__pycache__"]))
    tests = ROOT / "tests"
    out.append(("tests", docstring(tests / "conftest.py"),
                [p.name + "/" for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))]
                + [p.name + "/" for p in (tests / "fixtures").iterdir() if p.is_dir()]
                + [p.name for p in tests.glob("*.py") if p.name != "conftest.py"]))
    out.append(("benchmarks", docstring(ROOT / "benchmarks" / "__init__.py"),
                [p.name for p in (ROOT / "benchmarks").iterdir()
                 if p.is_file() and p.name != "__init__.py"]))
    records = ROOT / "records"
    out.append(("records", (records / "README.md").read_text(),
                [p.name + "/" for p in records.iterdir() if p.is_dir()]))
    return out


def names(text: str, entry: str) -> bool:
    """Whether a map names this module, file or folder: as ``x`` or `x`, x.py, x/ or :mod:`...x`."""
    stem = re.escape(re.sub(r"(\.py|\.sh|/)$", "", entry))
    return bool(re.search(rf"``?{stem}(\.py|\.sh|/)?``?|(?<![\w.]){stem}(\.py|\.sh|/)(?![\w])|"
                          rf":mod:`[~\w.]*(?<=[.~`]){stem}`", text))


def test_contributing_fits_on_one_screen():
    size = len(TEXT.encode())
    assert size < MOST_BYTES, (f"CONTRIBUTING.md is {size} bytes (under {MOST_BYTES}): a line per "
                               "folder and the recipes; the detail goes in the package's docstring")


MAPS = maps()


@pytest.mark.parametrize("folder,text,entries", MAPS, ids=[m[0] for m in MAPS])
def test_each_folders_map_names_every_module(folder, text, entries):
    assert text, f"{folder} has no map"
    lab_modules = re.compile(r"lab\d+_\w+$")
    missing = sorted(e for e in entries if not names(text, e)
                     and not (folder == "autograder/labs" and lab_modules.match(e)
                              and "lab<number>_<topic>" in text))
    assert not missing, f"{folder}'s map does not name {missing}"


def test_the_map_check_finds_a_module_left_out():
    assert names("``reference``: the float64 truth", "reference.py")
    assert names("its verbs in `colab/`: `mirror.py`", "mirror.py")
    assert names(":mod:`~book.exercises.core`", "core")
    assert not names("``references``: the float64 truth", "reference")
    assert not names("a <gpu>.json record", "gpu")


def top_level_folders() -> list[str]:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split("\n")
    return sorted({f.split("/")[0] for f in files if "/" in f and not f.startswith(".")})


def test_every_top_level_folder_has_its_line_in_the_map():
    section = TEXT[TEXT.index("## Map\n"):]
    section = section[:section.index("\n## ")]
    lines = [line for line in section.split("\n") if line.startswith("- ")]
    missing = [d for d in top_level_folders()
               if not any(re.match(rf"- (`[\w/]+`, )*`{d}/`", line) for line in lines)]
    assert not missing, f"CONTRIBUTING.md's map has no line for {missing}"
