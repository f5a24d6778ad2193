"""A submission writes on the grader's channel itself (its fd is in the child's config.json):
what it writes is its own doing, and a grader that cannot read it still grades the whole lab
(red-team pass). Lab 1 in the simulator, seconds each."""

from __future__ import annotations

import csv
import subprocess

from grading_runs import REPO, env, grade_cmd

FORGE = '''import json, os
def bytes_unfused(T, h, in_bytes, out_bytes):
    os.write(json.load(open("config.json"))["reply_fd"], {line!r} + b"\\n")
    return 0
'''
DEEP = b"[" * 3_000_000   # JSON nested too deep for the grader's json.loads: RecursionError
ODD = b'{"event": "reply", "cmd": "test", "ok": true, "repeats": 7}'   # a reply of odd types


def test_what_a_submission_writes_on_the_channel_is_its_own_and_the_lab_is_graded_whole(tmp_path):
    """JSON nested 3 million deep ended in RecursionError, caught as \"grader error\" (the
    grader's own bug, said so) with the one test that had run: max 1 of lab 1's 18 in
    grades.csv. It is the submission's protocol error now; and any grader error leaves every
    case in the results, not run, so the maximum is the lab's."""
    subs, out = tmp_path / "subs", tmp_path / "out"
    subs.mkdir()
    (subs / "deep.py").write_text(FORGE.format(line=DEEP))
    (subs / "odd.py").write_text(FORGE.format(line=ODD))
    p = subprocess.run(grade_cmd("lab1", [subs], out, "--simulator"), cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    with open(out / "grades.csv") as f:
        rows = {r["id"]: r for r in csv.DictReader(f)}
    assert {k: (r["total"], r["max"]) for k, r in rows.items()} == {"deep": ("0", "18"), "odd": ("0", "18")}
    assert rows["deep"]["status"] == "graded"
    assert "wrote garbage on the grader's channel" in (out / "deep" / "feedback.md").read_text()
