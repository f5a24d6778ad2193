"""Gradescope: the autograder bundle, and the run of one submission inside Gradescope's container.

Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/) unpacks the
bundle's zip into ``/autograder/source`` (``setup.sh`` and ``run_autograder`` must sit at the
zip's root), runs ``setup.sh`` once when it builds the image, copies ``run_autograder`` to
``/autograder/run_autograder`` and runs it once per submission, in a fresh container, with the
student's upload in ``/autograder/submission``; whatever ``/autograder/results/results.json``
holds afterwards is the grade. There is no GPU there: the simulator grades correctness.

The root is ``AUTOGRADER_ROOT`` when set (a rehearsal points it at a folder of its own,
``tests/test_gradescope.py``), else ``/autograder``.

``python -m autograder.gradescope run`` (what ``run_autograder`` calls) picks the file to grade
from whatever was uploaded (files in subfolders, zips, several files), grades it with
``python -m autograder grade`` and copies its results.json, or writes one that says what was
expected when there is nothing it can grade; it never grades a file that is not the student's.
Every student of a class draws the same hidden cases: the bundle carries a seed drawn when it
was exported (``export gradescope --seed N`` or ``AUTOGRADER_SEED`` at export time pin it;
``AUTOGRADER_SEED`` in the container overrides it).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT_ENV = "AUTOGRADER_ROOT"
CONFIG = "gradescope.json"          # in the bundle's root: the lab, the class's seed
# the grader's runtime in the container: no GPU there (no torch, no book build stack), the
# versions pinned as the course's requirements.txt pins them
RUNTIME = ("numba", "numba-cuda", "numpy")
GRADE_TIMEOUT_S = 3000              # Gradescope's own limit is the assignment's (up to hours)

SETUP_SH = """#!/usr/bin/env bash
# Gradescope runs this once, when it builds the image, from the unpacked bundle
# (/autograder/source): the grader's runtime, then a check that the course imports.
set -euo pipefail
cd "$(dirname "$0")"
PY="${AUTOGRADER_PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    # the pins need Python 3.11+ (Ubuntu 22.04's python3 is 3.10; it packages python3.11)
    apt-get update && apt-get install -y python3.11 python3.11-venv
    PY=python3.11
fi
if ! "$PY" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
    # a system Python (Ubuntu 24.04's refuses pip installs, PEP 668): the grader's own venv,
    # which run_autograder uses; already in a virtual environment (a rehearsal), install there
    "$PY" -m venv venv 2>/dev/null || {
        apt-get update && apt-get install -y python3-venv "$(basename "$PY")-venv" || true
        "$PY" -m venv venv; }
    PY="$PWD/venv/bin/python"
fi
"$PY" -m pip install --disable-pip-version-check -r requirements.txt
PYTHONPATH="$PWD" "$PY" -m autograder list >/dev/null
chmod +x run_autograder
"""

RUN_AUTOGRADER = """#!/usr/bin/env bash
# Gradescope runs this once per submission (as /autograder/run_autograder); the results go to
# $ROOT/results/results.json. ROOT is AUTOGRADER_ROOT when set (a rehearsal), else /autograder.
set -u
ROOT="${AUTOGRADER_ROOT:-/autograder}"
cd "$ROOT/source"
PY=python3
if [ -x "$ROOT/source/venv/bin/python" ]; then PY="$ROOT/source/venv/bin/python"; fi
PYTHONPATH="$ROOT/source" exec "$PY" -m autograder.gradescope run
"""


def root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or "/autograder")


# --------------------------------------------------------------------------- the bundle
def runtime_requirements(repo: Path) -> str:
    """The bundle's requirements.txt: the course's pins of the grader's runtime."""
    lines = ["# The grader's runtime in Gradescope's container (no GPU: the simulator grades),",
             "# pinned as the course's requirements.txt pins it.", 'tomli; python_version < "3.11"']
    for line in (repo / "requirements.txt").read_text().splitlines():
        spec = line.split("#")[0].strip()
        name = re.split(r"[\[=<>~! ;]", spec, maxsplit=1)[0].lower()
        if name in RUNTIME:
            lines.append(spec)
    missing = set(RUNTIME) - {re.split(r"[\[=<>~! ;]", s, maxsplit=1)[0].lower() for s in lines[3:]}
    if missing:
        raise SystemExit(f"export gradescope: requirements.txt pins no {', '.join(sorted(missing))}")
    return "\n".join(lines) + "\n"


def bundle(lab: str, out: Path, repo: Path, seed: int | None = None) -> Path:
    """autograder.zip: setup.sh, run_autograder, requirements.txt, gradescope.json (the lab and
    the class's seed) and the course's `book` and `autograder` at the zip's root, as Gradescope
    wants them in /autograder/source."""
    out = Path(out)
    if seed is None:
        env = os.environ.get("AUTOGRADER_SEED")
        seed = int(env) if env else secrets.randbits(62)
    cfg = {"lab": lab, "seed": int(seed),
           "exported": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}

    def add(z, name, text, mode=0o644):
        info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
        info.external_attr = (0o100000 | mode) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info, text)

    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        add(z, "setup.sh", SETUP_SH, 0o755)
        add(z, "run_autograder", RUN_AUTOGRADER, 0o755)
        add(z, "requirements.txt", runtime_requirements(repo))
        add(z, CONFIG, json.dumps(cfg, indent=1) + "\n")
        for sub in ("book", "autograder"):
            for p in sorted((repo / sub).rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    z.write(p, str(p.relative_to(repo)))
        if (repo / "pyproject.toml").exists():
            z.write(repo / "pyproject.toml", "pyproject.toml")
    return out


# --------------------------------------------------------------------------- one submission
SKIP_DIRS = {"__MACOSX", ".ipynb_checkpoints", "__pycache__"}
ZIP_MAX_BYTES, ZIP_MAX_FILES = 100 << 20, 2000


class NothingToGrade(Exception):
    """What was uploaded holds no file this lab can grade, or several it cannot choose among."""


def _unzip(path: Path, dest: Path) -> list[str]:
    """Extract a zip the student uploaded, refusing paths outside ``dest`` and zip bombs."""
    notes = []
    try:
        with zipfile.ZipFile(path) as z:
            infos = [i for i in z.infolist() if not i.is_dir()]
            if len(infos) > ZIP_MAX_FILES or sum(i.file_size for i in infos) > ZIP_MAX_BYTES:
                return [f"{path.name}: too large to unpack (more than {ZIP_MAX_FILES} files or "
                        f"{ZIP_MAX_BYTES >> 20} MiB)"]
            for i in infos:
                target = (dest / i.filename).resolve()
                if not str(target).startswith(str(dest.resolve()) + os.sep):
                    notes.append(f"{path.name}: skipped {i.filename!r} (outside the archive)")
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(i) as fin, open(target, "wb") as fout:
                    shutil.copyfileobj(fin, fout)
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        notes.append(f"{path.name}: not a readable zip ({e})")
    return notes


def candidates(sub: Path, work: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """Every .ipynb and .py uploaded, in subfolders and inside zips, as (the name the student
    gave it, where it is now); and the other files' names (said back when nothing fits)."""
    found, other = [], []

    def walk(folder: Path, shown: str, depth: int):
        for dirpath, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
            for f in sorted(files):
                p = Path(dirpath) / f
                name = shown + str(p.relative_to(folder))
                if f.startswith(".") or p.is_symlink():
                    continue
                if p.suffix in (".ipynb", ".py"):
                    found.append((name, p))
                elif p.suffix == ".zip" and depth == 0:
                    dest = work / f"unzipped-{len(found)}-{len(other)}"
                    dest.mkdir(parents=True)
                    other.extend(_unzip(p, dest))
                    walk(dest, name + ":", depth + 1)
                else:
                    other.append(name)

    if sub.is_dir():
        walk(sub, "", 0)
    return found, other


def _norm(stem: str) -> str:
    s = stem.lower().strip()
    s = re.sub(r"^copy of ", "", s)
    s = re.sub(r"\s*\(\d+\)$|[-_ ]\d+$", "", s)      # "lab2 (1)", a browser's second download
    return re.sub(r"[\s-]+", "_", s)


def choose(found, lab: str, function: str) -> tuple[Path, str]:
    """The file a student plausibly meant: the only one; else the one named like the lab (a
    notebook first); else the only one that defines the lab's function. Otherwise refuse,
    naming them. Returns (path, a note for the output, '' when there was one file)."""
    if len(found) == 1:
        return found[0][1], ""
    names = ", ".join(n for n, _ in found)
    short = lab.split("_")[0]
    named = [(n, p) for n, p in found if _norm(Path(n.split(":")[-1]).stem) in (lab, short)]
    if len(named) > 1:
        nb = [x for x in named if x[1].suffix == ".ipynb"]
        named = nb if len(nb) == 1 else named
    if len(named) == 1:
        return named[0][1], f"graded {named[0][0]} (named like the lab) of the files you submitted: {names}"
    defines = []
    for n, p in found:
        try:
            if re.search(rf"def\s+{re.escape(function)}\s*\(", p.read_text(errors="replace")):
                defines.append((n, p))
        except OSError:
            pass
    if len(defines) == 1:
        return defines[0][1], (f"graded {defines[0][0]} (the only one that defines `{function}`) "
                               f"of the files you submitted: {names}")
    raise NothingToGrade(
        f"your submission holds {len(found)} files that could be this lab ({names}) and the "
        f"grader cannot tell which one to grade. Submit only your notebook, named {lab}.ipynb "
        "(File > Download > Download .ipynb in Colab)")


def refusal(lab: str, message: str, files: list[str], max_score: float) -> dict:
    """results.json for an upload with nothing to grade: what was expected, in the first line."""
    return {"score": 0.0, "output": message, "visibility": "visible", "stdout_visibility": "hidden",
            "tests": [{"name": "submission", "score": 0.0, "max_score": max_score,
                       "status": "failed", "output": message, "visibility": "visible"}],
            "extra_data": {"lab": lab, "status": "nothing graded", "files": files[:50]}}


def _max_score(lab: str) -> float:
    """The lab's points in the simulator, as `grade` counts them (performance is worth nothing
    where nothing can be timed)."""
    import numpy as np

    from . import labs
    from .rubric import load_rubric

    rub = load_rubric(lab)["correctness"]
    cases = labs.get(lab).cases(np.random.default_rng(0), True, rub)
    return float(sum(rub["public_points"] if c["visibility"] == "public" else rub["hidden_points"]
                     for c in cases))


def run(base: Path | None = None) -> int:
    base = base or root()
    results = base / "results"
    results.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((base / "source" / CONFIG).read_text())
    lab = cfg["lab"]

    def write(doc):
        (results / "results.json").write_text(json.dumps(doc, indent=1))

    from . import labs

    function = next(iter(labs.get(lab).functions))
    work = Path(tempfile.mkdtemp(prefix="ag-gradescope-"))
    try:
        found, other = candidates(base / "submission", work)
        if not found:
            held = ", ".join(other[:20]) or "nothing"
            write(refusal(lab, f"nothing to grade: your submission held {held}. Expected the lab's "
                          f"notebook, {lab}.ipynb, as downloaded from Colab (File > Download > "
                          "Download .ipynb), or a .py file that defines "
                          f"`{function}`. Submit it again; this attempt is not graded.",
                          other, _max_score(lab)))
            return 0
        try:
            path, note = choose(found, lab, function)
        except NothingToGrade as e:
            write(refusal(lab, f"nothing graded: {e}. This attempt is not graded.",
                          [n for n, _ in found] + other, _max_score(lab)))
            return 0
        out = work / "graded"
        env = dict(os.environ)
        env.setdefault("AUTOGRADER_SEED", str(cfg["seed"]))   # the class's seed, unless overridden
        proc = subprocess.run([sys.executable, "-m", "autograder", "grade", lab, str(path),
                               "--out", str(out), "--quiet"], env=env, capture_output=True,
                              text=True, timeout=GRADE_TIMEOUT_S)
        graded = sorted(out.glob("*/results.json"))
        if proc.returncode != 0 or len(graded) != 1:
            raise RuntimeError(f"the grader stopped (exit {proc.returncode}): "
                               f"{(proc.stdout + proc.stderr)[-1500:]}")
        doc = json.loads(graded[0].read_text())
        if note:
            doc["output"] = doc.get("output", "") + "\n" + note
        write(doc)
        print(doc.get("output", ""))
        return 0
    except Exception as e:  # the grader's own failure: the student is told it is not theirs
        msg = (f"GRADER ERROR (not your code's fault): {type(e).__name__}: {e}"[:2000]
               + "\nYour instructor has the details; submit again later or ask them.")
        write({"score": 0.0, "output": msg, "visibility": "visible", "stdout_visibility": "hidden",
               "tests": [{"name": "grader", "score": 0.0, "max_score": 0.0, "status": "failed",
                          "output": msg, "visibility": "visible"}],
               "extra_data": {"lab": lab, "status": "grader error"}})
        print(msg, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:] != ["run"]:
        raise SystemExit("usage: python -m autograder.gradescope run   (what run_autograder calls)")
    sys.exit(run())
