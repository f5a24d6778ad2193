"""The simulator's threads under the sandbox's address-space limit (issue 28), by
`python -m autograder grade` as shipped, in the simulator:

- glibc's malloc arenas are capped in a simulated child (autograder/sandbox/inside/threads.py):
  uncapped, 64 threads that allocate at once make 8 arenas per CPU (16 on a 2-CPU machine,
  128 on the 16-CPU H100 machine, each 64 MiB of address space), capped, two;
- so lab 4's master, whose 256-thread blocks wait at barriers (every thread alive at once),
  grades in full under an address-space limit of 1100 MiB (on the H100 machine, uncapped, the
  same block died at 105 threads with 6.29 GB of address space reserved; here, uncapped, at
  65 threads under 1100 MiB);
- a block the simulator still cannot start is the grader's limit: "not graded in the
  simulator", with what the grading process had, a GPU regrade and a review flag; never "your
  function raised" (lab 4's, whose threads wait at barriers);
- a block of a barrier-free kernel (lab 2's) needs no threads: book/simulator/sequential.py runs them
  in turn, so it grades in full where its 1024 threads could not be started.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from grading_runs import master, one_hidden_case
from repo import ROOT as REPO

pytestmark = pytest.mark.extended   # the simulator's threads under memory limits: `make test-all`

ARENA_COUNT = textwrap.dedent(r"""
    import ctypes, ctypes.util, os, re, sys, tempfile, threading
    sys.path.insert(0, sys.argv[2])
    if sys.argv[1] == "capped":
        from autograder.sandbox import limit_malloc_arenas
        assert limit_malloc_arenas(), "mallopt refused"
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    go = threading.Event()

    def work():   # ctypes calls release the GIL: the threads allocate at the same time
        go.wait()
        for _ in range(2000):
            libc.free(libc.malloc(4096))

    threads = [threading.Thread(target=work) for _ in range(64)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join()
    f = tempfile.TemporaryFile()
    libc.fdopen.restype = ctypes.c_void_p
    fp = ctypes.c_void_p(libc.fdopen(os.dup(f.fileno()), b"w"))
    libc.malloc_info(0, fp)
    libc.fflush(fp)
    f.seek(0)
    print(len(re.findall(r"<heap nr=", f.read().decode())))
""")


def arenas(mode: str) -> int:
    p = subprocess.run([sys.executable, "-c", ARENA_COUNT, mode, str(REPO)], capture_output=True,
                       text=True, timeout=120, env={k: v for k, v in os.environ.items()
                                                   if k != "MALLOC_ARENA_MAX"})
    assert p.returncode == 0, p.stderr[-2000:]
    return int(p.stdout.split()[-1])


def test_a_simulated_child_caps_malloc_arenas():
    from autograder.sandbox import ARENAS

    assert arenas("uncapped") > ARENAS   # the control: glibc's own count on this machine
    assert arenas("capped") <= ARENAS


def grade(tmp_path, lab: str, extra_limits: str) -> dict:
    rubric = tmp_path / "rubric.toml"   # one hidden case: the blocks, not how many cases
    rubric.write_text(one_hidden_case(lab, rubric).read_text() + extra_limits)
    out = tmp_path / "graded"
    env = dict(os.environ, BOOK_SIMULATOR="1", PYTHONPATH=str(REPO))
    p = subprocess.run([sys.executable, "-m", "autograder", "grade", lab,
                        str(master(lab)), "--out", str(out), "--rubric",
                        str(rubric), "--quiet"], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    return json.loads((out / lab / "results.json").read_text())


def correctness(r):
    return [t for t in r["tests"] if t["name"] != "performance"
            and not t["name"].startswith("compute-sanitizer")]


def test_a_block_of_256_waiting_threads_grades_under_1100_mib(tmp_path):
    # the [limits] table is the rubric's last: a line appended joins it
    r = grade(tmp_path, "lab4_dual_gemm", "mem_mib = 1100\n")
    tests = correctness(r)
    assert all(t["score"] == t["max_score"] for t in tests), [t["output"][:600] for t in tests]
    assert r["extra_data"].get("status") != "needs a GPU"


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC of the child's own uid needs root")
def test_a_block_the_simulator_cannot_start_is_the_graders_problem(tmp_path):
    # two tasks: the child's uid may run 66 processes and threads, fewer than lab 4's block,
    # whose threads wait at barriers (a barrier-free block needs none: the next test)
    r = grade(tmp_path, "lab4_dual_gemm", "tasks = 2\n")
    tests = correctness(r)
    first = tests[0]["output"]
    assert first.startswith("not graded in the simulator: the grader's simulator could not start"), first
    assert "not an error in your code" in first and "RLIMIT_NPROC 66" in first, first
    assert not any("your function raised" in t["output"] for t in tests)
    assert all(t["score"] == 0 for t in tests)
    assert r["extra_data"]["status"] == "needs a GPU"
    flags = r["extra_data"]["flags"]   # "what [where]"
    assert any(f.startswith("needs a GPU regrade: the simulator could not start a block's threads "
                            "[threads_alive") for f in flags), flags


@pytest.mark.skipif(os.geteuid() != 0, reason="RLIMIT_NPROC of the child's own uid needs root")
def test_a_barrier_free_block_grades_without_threads(tmp_path):
    # lab 2's kernels have no barrier: book/simulator/sequential.py runs a block's 1024 threads in
    # turn on the child's own thread, so 66 tasks are enough (threaded, it could not start them)
    r = grade(tmp_path, "lab2_packed_swiglu", "tasks = 2\n")
    tests = correctness(r)
    assert tests and all(t["score"] == t["max_score"] for t in tests), [t["output"][:600] for t in tests]
    assert r["extra_data"].get("status") != "needs a GPU"
