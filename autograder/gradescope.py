"""Gradescope: the autograder bundle, and the run of one submission inside Gradescope's container.

Gradescope (https://gradescope-autograders.readthedocs.io/en/latest/specs/) unpacks the
bundle's zip into ``/autograder/source`` (``setup.sh`` and ``run_autograder`` must sit at the
zip's root), runs ``setup.sh`` once when it builds the image, copies ``run_autograder`` to
``/autograder/run_autograder`` and runs it once per submission, in a fresh container, with the
student's upload in ``/autograder/submission``; whatever ``/autograder/results/results.json``
holds afterwards is the grade. There is no GPU there: the simulator grades correctness.

The root is ``AUTOGRADER_ROOT`` when set (a rehearsal points it at a folder of its own,
``tests/grader/test_gradescope.py``), else ``/autograder``.

``python -m autograder.gradescope run`` (what ``run_autograder`` calls) picks the file to grade
from whatever was uploaded (files in subfolders, zips, several files), grades it with
``python -m autograder grade`` and copies its results.json, or writes one that says what was
expected when there is nothing it can grade; it never grades a file that is not the student's.
Its stdout (Gradescope shows it to the instructor) says what it did.
Every student of a class draws the same hidden cases: the bundle carries a seed drawn when it
was exported (``export gradescope --seed N`` or ``AUTOGRADER_SEED`` at export time pin it;
``AUTOGRADER_SEED`` in the container overrides it). The rubric is the lab's shipped one, or the
instructor's own (``export gradescope --rubric FILE``: carried in the bundle as RUBRIC and
graded with, its points the bundle's totals).

The totals are the course's (rubric.course_points: what `autograder list` says). Gradescope
counts every test's max_score; the performance test, which needs a GPU, keeps its points there
as a pending test (export.gradescope_test), so the bundle's maximum is the course's and the
assignment's total is set to it (`export gradescope` prints it).

Gradescope runs this as root in a container with Docker's default limits (no CAP_SYS_ADMIN:
no namespaces, the cgroup file system read-only): the submission runs as a uid of its own
(sandbox/containment.py, 'uid'), and what that uid may read is what permissions allow. So before
grading, ``protect`` closes the bundle to other users (the class's seed in gradescope.json,
the grader's package, the references), leaves the venv readable and not writable by them,
and every trusted process starts with ``python -I``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
import shutil
import signal
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

from .export import gradescope_doc
from .results import TestRecord
from .rubric import course_points
from .sandbox import TRUSTED_BOOT, let_go, new_folder, sweep_stale_storage, trusted_command
from .submission import is_submission, junk_dir

ROOT_ENV = "AUTOGRADER_ROOT"
CONFIG = "gradescope.json"          # in the bundle's root: the lab, the class's seed
RUBRIC = "rubric.toml"              # in the bundle's root when exported with --rubric
# the grader's runtime in the container: no GPU there (no torch, no book build stack), the
# versions pinned as the course's requirements.txt pins them
RUNTIME = ("numba", "numba-cuda", "numpy")
GRADE_TIMEOUT_S = 3000              # Gradescope's own limit is the assignment's (up to hours)
STOP_GRACE_S = 20                   # a stopped `grade`'s time to end its children and their folders

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
# the venv is shared, read-only, with every submission's uid: readable, never writable by it
if [ -d venv ]; then chmod -R a+rX,go-w venv; fi
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
# `python -I`: nothing from PYTHONPATH, the user's site-packages or this folder is imported
# (a module planted there would run as the grader); the bundle is put on the path explicitly
exec "$PY" -I -c "%s" 1 "$ROOT/source" autograder.gradescope run
""" % TRUSTED_BOOT


def root() -> Path:
    return Path(os.environ.get(ROOT_ENV) or "/autograder")


def assignment_total(lab: str, rubric_path=None) -> str:
    """What the instructor sets in Gradescope, said when the bundle is exported."""
    p = course_points(lab, rubric_path)
    return (f"{lab}: set the Gradescope assignment's autograder points to {p['total']:g} "
            f"({p['correctness']:g} correctness, graded in Gradescope's container, and "
            f"{p['performance']:g} performance, pending there: its test shows 0 of "
            f"{p['performance']:g} until you grade the class again on a GPU with "
            "`python -m autograder grade`)")


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


def bundle(lab: str, out: Path, repo: Path, seed: int | None = None, rubric=None) -> Path:
    """autograder.zip: setup.sh, run_autograder, requirements.txt, gradescope.json (the lab and
    the class's seed), the instructor's ``rubric`` where given (RUBRIC: checked here, so that
    a rubric that does not load is said at export, not in every student's container) and the
    course's `book` and `autograder` at the zip's root, as Gradescope wants them in
    /autograder/source."""
    out = Path(out)
    if seed is None:
        env = os.environ.get("AUTOGRADER_SEED")
        seed = int(env) if env else secrets.randbits(62)
    cfg = {"lab": lab, "seed": int(seed),
           "exported": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    if rubric is not None:
        course_points(lab, rubric)   # SystemExit naming the problem if it does not load
        cfg["rubric"] = RUBRIC

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
        if rubric is not None:
            add(z, RUBRIC, Path(rubric).read_text())
        for sub in ("book", "autograder"):
            for p in sorted((repo / sub).rglob("*")):
                if p.is_file() and "__pycache__" not in p.parts:
                    z.write(p, str(p.relative_to(repo)))
        if (repo / "pyproject.toml").exists():
            z.write(repo / "pyproject.toml", "pyproject.toml")
    return out


# --------------------------------------------------------------------------- one submission
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
    found, other, zips = [], [], []

    def walk(folder: Path, shown: str, depth: int):
        for dirpath, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if not junk_dir(d))
            for f in sorted(files):
                p = Path(dirpath) / f
                name = shown + str(p.relative_to(folder))
                if f.startswith("."):
                    continue
                if p.is_symlink():   # never followed (it could name the grader's own files): said
                    other.append(f"{name} (a link, not followed: upload the file itself)")
                    continue
                if is_submission(p):
                    found.append((name, p))
                elif p.suffix.lower() == ".zip" and depth == 0:
                    # a folder per zip, named by its own count: an empty zip adds nothing to
                    # found or other, and a name made of those counts was taken twice
                    zips.append(p)
                    dest = work / f"unzipped-{len(zips)}"
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
        nb = [x for x in named if x[1].suffix.lower() == ".ipynb"]
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


def recorded(max_score: float) -> str:
    """What Gradescope does with a results.json that awards nothing: said to the student, who
    may think an attempt that was not graded leaves the previous grade standing."""
    return (f"Gradescope records this attempt as 0/{max_score:g} and, as your latest submission, "
            "it is the one that counts: submit your notebook again")


def refusal(lab: str, message: str, files: list[str], max_score: float) -> dict:
    """results.json for an upload with nothing to grade: what was expected, in the first line,
    and what Gradescope records (0 of the course's total: it counts every test's max_score)."""
    message = f"{message}. {recorded(max_score)}."
    return gradescope_doc(0.0, message, [TestRecord("submission", max_score, 0.0, message,
                                                    status="failed")],
                          {"lab": lab, "status": "nothing graded", "files": files[:50]})


def protect(base: Path) -> list[str]:
    """Close the bundle to every uid but the grader's (root): a submission runs as a uid of its
    own that may read only what others may. The class's seed (gradescope.json), the grader's
    package and the course library (their references and hidden-case generators) become the
    grader's alone, the results folder is not writable by others, the source folder may be
    entered (the venv lies in it) but not listed or changed. What was changed, for the log."""
    src = base / "source"
    done = []

    def chmod(p: Path, clear: int, add: int = 0):
        try:
            st = p.lstat()
        except OSError:
            return
        if stat.S_ISLNK(st.st_mode):
            return
        mode = (stat.S_IMODE(st.st_mode) & ~clear) | add
        if mode != stat.S_IMODE(st.st_mode):
            os.chmod(p, mode)
            done.append(f"{p.relative_to(base)} {mode:o}")

    chmod(base, 0o022)
    chmod(src, 0o066, 0o011)   # enter (the venv is inside), not list, not change
    for entry in sorted(src.iterdir()) if src.is_dir() else []:
        if entry.name != "venv":
            chmod(entry, 0o077)
    results = base / "results"
    if results.is_dir():
        chmod(results, 0o022)
    return done


def run(base: Path | None = None) -> int:
    """Grade the upload in ``base`` (/autograder): results.json, and a log on stdout for the
    instructor (Gradescope keeps it in results/stdout)."""
    base = base or root()
    results = base / "results"
    results.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((base / "source" / CONFIG).read_text())
    lab = cfg["lab"]
    rubric = [str(base / "source" / cfg["rubric"])] if cfg.get("rubric") else []
    say = lambda *a: print("run_autograder:", *a, flush=True)  # noqa: E731
    total = course_points(lab, *rubric)["total"]
    say(f"{lab}, {total:g} points (the course's total: correctness here, performance pending "
        "until a GPU regrade)")
    changed = protect(base)
    say("closed to the submission's uid: " + (", ".join(changed) or "nothing to change"))
    swept = sweep_stale_storage()   # what a grader killed before here left (its seed with it)
    if swept:
        say(f"removed what killed graders left: {', '.join(swept)}")

    def write(doc, why: str):
        (results / "results.json").write_text(json.dumps(doc, indent=1))
        say(f"wrote {results / 'results.json'}: {doc['score']:g}/"
            f"{sum(t['max_score'] for t in doc['tests']):g} ({why})")

    from . import labs

    function = next(iter(labs.get(lab).functions))
    # ag-<pid>-gradescope-..., held by this process: the next grader removes it if this one is
    # killed (its lock then free: sweep_stale_storage), never while it runs
    work = new_folder("gradescope-")
    proc = None

    def stop(signum, _frame):   # Gradescope's time limit, a Ctrl-C: nothing left behind
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)   # `grade` kills its children whole on SIGTERM
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()   # gone before its folder goes: nothing written into it after
        shutil.rmtree(work, ignore_errors=True)
        let_go(work)
        say(f"stopped by {signal.Signals(signum).name}")
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    try:
        found, other = candidates(base / "submission", work)
        say(f"uploaded: {', '.join(n for n, _ in found) or 'no notebook or .py'}"
            + (f"; other files: {', '.join(other[:20])}" if other else ""))
        if not found:
            held = ", ".join(other[:20]) or "nothing"
            write(refusal(lab, f"nothing to grade: your submission held {held}. Expected the lab's "
                          f"notebook, {lab}.ipynb, as downloaded from Colab (File > Download > "
                          "Download .ipynb), or a .py file that defines "
                          f"`{function}`", other, total), "nothing to grade")
            return 0
        try:
            path, note = choose(found, lab, function)
        except NothingToGrade as e:
            write(refusal(lab, f"nothing graded: {e}", [n for n, _ in found] + other, total),
                  "could not choose a file")
            return 0
        say(f"grading {path.relative_to(work) if work in path.parents else path.relative_to(base)}"
            + (f" ({note})" if note else ""))
        out = work / "graded"
        env = dict(os.environ)
        env.setdefault("AUTOGRADER_SEED", str(cfg["seed"]))   # the class's seed, unless overridden
        proc = subprocess.Popen(trusted_command("autograder", "grade", lab, str(path), "--out",
                                                str(out), "--quiet",
                                                *(["--rubric", *rubric] if rubric else []),
                                                path=[str(base / "source")]),
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, preexec_fn=_die_with_parent)
        try:
            text, _ = proc.communicate(timeout=GRADE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            text, _ = proc.communicate(timeout=30)
        graded = sorted(out.glob("*/results.json"))
        if proc.returncode != 0 or len(graded) != 1:
            raise RuntimeError(f"the grader stopped (exit {proc.returncode}): {text[-1500:]}")
        doc = json.loads(graded[0].read_text())
        if note:
            doc["output"] = doc.get("output", "") + "\n" + note
        iso = doc.get("extra_data", {}).get("isolation") or {}
        say(f"sandbox: containment {iso.get('containment')}, uid {iso.get('uid')}, network "
            f"{iso.get('network', 'n/a')}")
        for m in iso.get("missing", []):
            say(f"  without {m}")
        write(doc, doc.get("extra_data", {}).get("status", "graded"))
        say(doc.get("output", "").splitlines()[0] if doc.get("output") else "")
        return 0
    except Exception as e:  # the grader's own failure: the student is told it is not theirs
        msg = (f"GRADER ERROR (not your code's fault): {type(e).__name__}: {e}"[:2000]
               + f"\nYour instructor has the details. {recorded(total)}, or ask your instructor "
               "to grade it again.")
        write(gradescope_doc(0.0, msg, [TestRecord("grader", total, 0.0, msg, status="failed")],
                             {"lab": lab, "status": "grader error"}), "grader error")
        print(msg, file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
        let_go(work)


def _die_with_parent() -> None:
    """In the `grade` process: SIGTERM when this runner dies, however (its handler kills every
    child whole, whose launchers remove their folders)."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


if __name__ == "__main__":
    if sys.argv[1:] != ["run"]:
        raise SystemExit("usage: python -m autograder.gradescope run   (what run_autograder calls)")
    sys.exit(run())
