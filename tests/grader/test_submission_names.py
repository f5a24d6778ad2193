"""A submission's file name never takes the place of the grader's own files in the run's folder
(red-team finding): a student's `grades.csv.py` became the folder `DIR/grades.csv/`, and the
class's grades.csv could not be written: the whole run ended in IsADirectoryError, every other
submission's grade with it. Ids have no dot; every entry the grader writes in the folder has
one. Graded by the real CLI in the simulator (submissions that define the function and launch
nothing: seconds each)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pytest

from grading_runs import REPO, env, grade_cmd

from autograder.grade import collect

NOTHING = "def decode_swiglu(x, wg, bg, wu, bu, out):\n    return out\n"
NAMES = ("grades.csv.py", "measurements.jsonl.py", ".grader.py", "grades.csv.tmp1.py",
         "ordinary.py")


def test_no_id_has_a_dot(tmp_path):
    for n in NAMES:
        (tmp_path / n).write_text(NOTHING)
    ids = [sid for sid, _ in collect([tmp_path])]
    assert len(set(ids)) == len(NAMES) and not any("." in sid for sid in ids), ids


def test_a_file_named_like_the_grades_is_graded_and_the_class_is_too(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    for n in NAMES:
        (subs / n).write_text(NOTHING)
    out = tmp_path / "out"
    p = subprocess.run(grade_cmd("lab6", [subs], out, "--simulator"), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    assert (out / "grades.csv").is_file() and (out / "measurements.jsonl").is_file()
    with open(out / "grades.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(NAMES), rows
    assert all((out / r["id"] / "results.json").is_file() for r in rows)


def _grades(out):
    with open(out / "grades.csv") as f:
        return {r["id"]: r["total"] for r in csv.DictReader(f)}


def _grade(lab, subs, out, quiet=True) -> subprocess.CompletedProcess:
    """`grade LAB SUBS --out OUT --simulator`, which must end well; ``quiet`` False: what it says."""
    cmd = [a for a in grade_cmd(lab, subs, out, "--simulator") if quiet or a != "--quiet"]
    p = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return p


def _log(out) -> list[dict]:
    return [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]


def test_a_file_that_takes_a_graded_id_is_graded_not_given_that_grade(tmp_path):
    """Red-team finding: an id comes from the file's name and the run's other files (`a b.ipynb`
    and `a_b.ipynb` are `a_b` and `a_b-2`, in sorted order), and a re-run skipped every id whose
    results.json existed. A late `a b.ipynb` (the master) added beside a graded `a_b.ipynb` (the
    untouched lab) took the id `a_b` and was given its 0, and `a_b.ipynb` was graded again as
    `a_b-2`. Results are reused only for the content they graded (their sha256)."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "a_b.ipynb").write_bytes((REPO / "labs" / "lab1_bytes_and_roofline.ipynb").read_bytes())

    def grade():
        _grade("lab1", [subs], out)
        return _log(out)

    grade()
    assert _grades(out) == {"a_b": "0"}
    (subs / "a b.ipynb").write_bytes((REPO / "solutions" / "lab1_bytes_and_roofline.ipynb").read_bytes())
    stale = [r for r in grade() if r["kind"] == "stale_result"]
    assert [(r["id"], Path(r["file"]).name, Path(r["was_file"]).name) for r in stale] == [
        ("a_b", "a b.ipynb", "a_b.ipynb")], stale
    assert _grades(out) == {"a_b": "18", "a_b-2": "0"}
    # the same files again: nothing graded again
    log = grade()
    assert len([r for r in log if r["kind"] == "stale_result"]) == 1
    assert [r["todo"] for r in log if r["kind"] == "run"][-1] == 0
    assert _grades(out) == {"a_b": "18", "a_b-2": "0"}


def test_no_file_of_the_folder_is_passed_over_without_a_word(tmp_path):
    """Red-team finding: a folder run took `*.ipynb` and `*.py` alone, by case: `bob.IPYNB` (the
    master) was not graded, had no row in grades.csv, and nothing said so; nor did the run say
    it passed over `carol.zip` or `dave.ipynb.txt`. A suffix is a suffix in any case, and the
    files it does not grade are said and logged (the run's own folder, checkpoints and hidden
    files aside)."""
    subs, out = tmp_path / "subs", tmp_path / "subs" / "graded"
    (subs / ".ipynb_checkpoints").mkdir(parents=True)
    master = (REPO / "solutions" / "lab1_bytes_and_roofline.ipynb").read_bytes()
    (subs / "bob.IPYNB").write_bytes(master)
    (subs / "carol.zip").write_bytes(b"PK")
    (subs / "dave.ipynb.txt").write_bytes(master)
    (subs / ".DS_Store").write_bytes(b"x")
    (subs / ".ipynb_checkpoints" / "bob-checkpoint.ipynb").write_bytes(master)
    for _ in range(2):   # the second run: the run's own folder, now inside subs, is not said
        p = _grade("lab1", [subs], out, quiet=False)
        assert _grades(out) == {"bob": "18"}
        assert "not graded, not a .ipynb or .py file or a link: 2 file(s) in the folders given (carol.zip, dave.ipynb.txt)" in p.stdout, p.stdout
    said = [r["files"] for r in _log(out) if r["kind"] == "not_submissions"]
    assert [[Path(f).name for f in files] for files in said] == [["carol.zip", "dave.ipynb.txt"]] * 2


def test_a_link_in_a_folder_is_not_followed(tmp_path):
    """Red-team finding: a link among the submissions (`unzip` of a student's archive keeps
    them) was graded as the file it names: `alice/lab1.ipynb -> <the course>/solutions/...` earned
    the master's full marks. A link inside a folder is said and never followed."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    (subs / "alice").mkdir(parents=True)
    (subs / "alice" / "lab1.ipynb").symlink_to(REPO / "solutions" / "lab1_bytes_and_roofline.ipynb")
    (subs / "bob.py").write_text("x = 1\n")
    p = _grade("lab1", [subs], out, quiet=False)
    assert _grades(out) == {"bob": "0"}
    assert "or a link: 1 file(s) in the folders given (lab1.ipynb)" in p.stdout, p.stdout


def test_the_runs_own_folder_is_never_searched_for_submissions(tmp_path):
    """Red-team finding: with the run's folder among the submissions (`grade LAB . --out
    graded`), the next run graded what it found there. A lab 2 submission that wrote
    `zz_phantom.py` into its recording folder during its call (the grader copies a recording's
    files into DIR/.grader/recordings/) added five phantom submissions to the class's
    grades.csv on the re-run. Planted here where that copy leaves it; lab 1, seconds."""
    subs = tmp_path / "subs"
    out = subs / "graded"
    subs.mkdir()
    (subs / "alice.ipynb").write_bytes((REPO / "solutions" / "lab1_bytes_and_roofline.ipynb").read_bytes())

    _grade("lab1", [subs], out)
    planted = out / ".grader" / "recordings" / "alice-proof-t0"
    planted.mkdir(parents=True)
    (planted / "zz_phantom.py").write_text("def bytes_unfused(T, h, i, o):\n    return 0\n")
    _grade("lab1", [subs], out)
    assert _grades(out) == {"alice": "18"}


JUNK = '''
import glob as _g, os as _o
_real = swiglu_interleaved
def swiglu_interleaved(x, out):
    r = _real(x, out)
    for d in _g.glob(_o.path.join(_o.getcwd(), "rec*")):
        open(_o.path.join(d, "junk.bin"), "wb").write(b"x" * (1 << 20))
    return r
'''


@pytest.mark.slow   # a lab 2 master graded: about 10 s alone, more beside others
def test_a_submissions_recordings_leave_the_runs_folder_with_it(tmp_path):
    """Red-team finding: the recordings of a submission (its proof's, its timing's) stayed in
    DIR/.grader/recordings/ after it was scored, with every file its code wrote into them (up
    to 3 GiB a recording). The lab 2 master with a cell that writes 1 MiB of junk into each
    recording still earns its marks, and nothing of its recordings is left."""
    nb = json.loads((REPO / "solutions" / "lab2_packed_swiglu.ipynb").read_text())
    nb["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                        "source": JUNK})
    sub, out = tmp_path / "junk.ipynb", tmp_path / "out"
    sub.write_text(json.dumps(nb))
    _grade("lab2", [sub], out)
    assert _grades(out) == {"junk": "8"}
    left = [str(f.relative_to(out)) for f in (out / ".grader").rglob("*") if f.is_file()]
    assert left == [".grader/secret.json"], left


def test_what_macos_and_git_leave_in_a_folder_is_not_a_submission(tmp_path):
    """Red-team finding: a class folder unzipped on a Mac holds `__MACOSX/alice/._lab1.ipynb`
    (binary AppleDouble data): graded as a submission whose id, `lab1`, was alice's own (she
    became `lab1-2`, her row beside an unreadable one); a `.git/hooks/x.py` was graded too.
    Hidden folders, __MACOSX and macOS's `._` copies are neither graded nor said (as on
    Gradescope)."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    for d in ("alice", "__MACOSX/alice", ".git/hooks"):
        (subs / d).mkdir(parents=True)
    (subs / "alice" / "lab1.ipynb").write_bytes((REPO / "solutions" / "lab1_bytes_and_roofline.ipynb").read_bytes())
    (subs / "__MACOSX" / "alice" / "._lab1.ipynb").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    (subs / ".git" / "hooks" / "x.py").write_text("x = 1\n")
    p = _grade("lab1", [subs], out, quiet=False)
    assert _grades(out) == {"lab1": "18"}
    assert "not graded" not in p.stdout, p.stdout
