"""CONTRIBUTING.md is the map of the tree: every path it names exists, and every module it
runs (`python -m X`) is there. A path is named in backticks, from the repository's root or
from a folder its table row or paragraph named before it (`benchmarks/` ... `gemm_bench.py`);
`<...>` stands for a part the reader fills in (the folder before it must exist), `$OUT` for
the device's output folder and a leading dot for a git-ignored folder (not checked)."""

from __future__ import annotations

import re
from pathlib import Path

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


def named_paths():
    """(block's first words, token, resolved path or None) for every path CONTRIBUTING names."""
    for block in blocks(TEXT):
        folders = [ROOT]
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
