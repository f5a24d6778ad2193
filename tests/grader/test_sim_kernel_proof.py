"""The simulator's kernel proof replays what the GPU's replays (issue 18): buffers made inside
the function carry data from one recorded launch to the next, so multi-kernel solutions of
labs 2, 3 and 4 earn full correctness; a proof the simulator cannot carry out is withheld
("needs a GPU to verify", no points taken, marked for the instructor), never called a host
result; host results smuggled through scratch buffers still earn nothing. Graded through
the real CLI (`python -m autograder grade --simulator`), one run per lab, side by side, each
with its lab's rubric but one hidden case."""

from __future__ import annotations

import csv
import json
import subprocess
import tempfile
from pathlib import Path

import pytest

from grading_runs import REPO, env, full_marks, grade_cmd, one_hidden_case, results
from repo import FIXTURES

pytestmark = [pytest.mark.slow, pytest.mark.extended]   # every test reads a grading run of the multi-kernel solutions

MULTI = FIXTURES / "multikernel"
RUNS = {
    "lab2": ["lab2_two_kernels", "lab2_like_views", "lab2_kernel_in_function",
             "lab2_host_result_in_scratch"],
    "lab3": ["lab3_table_each_call"],
    "lab4": ["lab4_transposed_scratch"],
}
HONEST = ["lab2_two_kernels", "lab2_like_views", "lab3_table_each_call", "lab4_transposed_scratch"]


@pytest.fixture(scope="module")
def graded():
    base = Path(tempfile.mkdtemp(prefix="agproof-"))
    procs = {}
    for lab, names in RUNS.items():
        out = base / lab
        procs[lab] = (subprocess.Popen(grade_cmd(lab, [MULTI / f"{n}.py" for n in names], out, "--simulator",
                                                 "--rubric", one_hidden_case(lab, base / f"{lab}.toml")),
                                       cwd=REPO, env=env(), stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT), out)
    where = {}
    for lab, (p, out) in procs.items():
        text, _ = p.communicate(timeout=600)
        assert p.returncode == 0, text.decode(errors="replace")[-3000:]
        for n in RUNS[lab]:
            where[n] = out
    return where


def outputs(r):
    return r["output"] + "\n" + "\n".join(t["output"] for t in r["tests"])


def proof(out, sid):
    recs = [json.loads(line) for line in (out / "measurements.jsonl").read_text().splitlines()]
    return [r for r in recs if r.get("kind") == "kernel_proof" and r.get("id") == sid][-1]


@pytest.mark.parametrize("sid", HONEST)
def test_multi_kernel_solutions_earn_full_correctness(graded, sid):
    r = results(graded[sid], sid)
    assert full_marks(r), outputs(r)
    assert r["extra_data"]["status"] == "graded"
    p = proof(graded[sid], sid)
    assert p["reproduced"] is True and p["launches"] >= 2, p


def test_a_proof_the_simulator_cannot_carry_out_is_withheld_not_an_accusation(graded):
    sid = "lab2_kernel_in_function"
    out = graded[sid]
    r = results(out, sid)
    text = outputs(r)
    assert full_marks(r), text    # no points taken
    assert "needs a GPU to verify" in text and "created inside your function" in text
    assert "host" not in text and "did not compute the answer" not in text
    assert r["extra_data"]["status"] == "needs a GPU"
    assert proof(out, sid)["reproduced"] is None
    row = next(row for row in csv.DictReader(open(out / "grades.csv")) if row["id"] == sid)
    assert row["status"] == "needs a GPU" and "needs a GPU to verify" in row["flags"]


def test_a_host_result_carried_in_a_scratch_buffer_earns_nothing(graded):
    sid = "lab2_host_result_in_scratch"
    r = results(graded[sid], sid)
    assert r["score"] == 0, outputs(r)
    # said as what the replay showed, with the causes it can have, none of them asserted
    assert "did not compute the answer" in outputs(r)
    assert "work done outside the kernels (on the host, copied into `out`)" in outputs(r)
    assert proof(graded[sid], sid)["reproduced"] is False
