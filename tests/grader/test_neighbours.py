"""A failure that is not the submission's is never scored as its own (issue 18, item 1).

One grading run in the simulator, through the instructor's CLI, of hostile submissions beside
honest ones (tests/fixtures/neighbours/): one that fills every place it may write, one that
starts thousands of threads, one whose own threads hold its limit when the simulator needs a
block's (its fork bomb, said as its own: issue 41), and a copy of the lab's master whose CUDA
initialisation is made to fail once by the tests' fault injection (tests/grader/faults.py), as
the master's did on the H100 beside a disk filler. The honest ones must get their normal score,
the hostile ones be told what they did and where the limit is, and the injected failure end in
a regrade alone and full marks. Then real processes (autograder/sandbox's Child) show that what
one child writes to /tmp, /dev/shm and System V shared memory no other child sees, and that what
killed graders left is swept by the locks their folders no longer hold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grading_runs import REPO, env, fast_rubric, full_marks, grade_cmd, master, results

sys.path.insert(0, str(REPO))
from autograder.sandbox import NOBODY, Child, can_drop_uid, pids_cgroup_base
from repo import FIXTURES

pytestmark = pytest.mark.extended   # graders side by side on one machine: `make test-all`

# a tmpfs of the child's own as its working folder needs a root grader; without one /tmp and
# /dev/shm are still the child's own (user namespace), and the isolation notes say the rest
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="the working folder's own tmpfs needs a root grader")
needs_pids_cgroup = pytest.mark.skipif(pids_cgroup_base()[0] is None,
                                       reason=f"no pids cgroup here: {pids_cgroup_base()[1]}")

NEIGHBOURS = FIXTURES / "neighbours"
MASTER = master("lab2")
RUBRIC = fast_rubric(hidden_cases=1, load_s=90, test_s=30, limits=(
    "disk_mib = 64       # working folder, /tmp and /dev/shm together\n"
    "files = 2000\n"))


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    base = tmp_path_factory.mktemp("neighbours")
    for left in ("/tmp/agtest-fill", "/dev/shm/agtest-fill"):   # a run of an older grader left it
        shutil.rmtree(left, ignore_errors=True)
    (base / "rubric.toml").write_text(RUBRIC)
    subs = base / "subs"
    subs.mkdir()
    shutil.copy(MASTER, subs / "injected_master.ipynb")
    shutil.copy(MASTER, subs / "broken_machine.ipynb")
    out = base / "out"
    # the injected one first: it fails at once, while the others are starting beside it
    cmd = grade_cmd("lab2", [subs / "injected_master.ipynb", NEIGHBOURS / "many_threads.py",
                             NEIGHBOURS / "fills_storage.py", MASTER, subs / "broken_machine.ipynb",
                             NEIGHBOURS / "fakes_init_failure.py", NEIGHBOURS / "holds_threads.py"],
                    out,
                    "--rubric", str(base / "rubric.toml"), "--workers", "3")
    # the grader run through the fault injection: `python faults.py SPEC grade ...`
    injected = [cmd[0], str(Path(__file__).parent / "faults.py"),
                "cuda_init:injected_master;cuda_init_always:broken_machine", *cmd[3:]]
    r = subprocess.run(injected, cwd=REPO, env=env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = [json.loads(line) for line in open(out / "measurements.jsonl")]
    return out, log, cmd


@pytest.mark.slow
def test_a_run_killed_before_its_regrades_grades_them_on_the_next(graded):
    """The regrade markers are gone once the regrades ran; a marker left by a run killed before
    them makes the next run (the same command) grade that submission again."""
    out, log, cmd = graded
    assert not list(out.glob("*/regrade_alone.json"))
    (out / "lab2_packed_swiglu" / "regrade_alone.json").write_text('{"why": "killed"}')
    r = subprocess.run(cmd, cwd=REPO, env=env(), capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    again = [json.loads(line) for line in open(out / "measurements.jsonl")][len(log):]
    assert [x["id"] for x in again if x["kind"] == "result"] == ["lab2_packed_swiglu"], again
    assert not (out / "lab2_packed_swiglu" / "regrade_alone.json").exists()


@pytest.mark.slow
def test_honest_neighbour_keeps_its_score(graded):
    out, _, _ = graded
    r = results(out, "lab2_packed_swiglu")
    assert full_marks(r), r["output"] + "\n".join(t["output"] for t in r["tests"])


@pytest.mark.slow
def test_injected_cuda_initialisation_failure_ends_in_a_regrade_not_a_zero(graded):
    out, log, _ = graded
    sid = "injected_master"
    assert [x for x in log if x["kind"] == "fault_injected" and x["id"] == sid]
    regrades = [x for x in log if x["kind"] == "regrade_alone" and x["id"] == sid]
    assert len(regrades) == 1 and "CUDA initialisation" in regrades[0]["reason"], regrades
    firsts = [x for x in log if x["kind"] == "result" and x["id"] == sid]
    assert len(firsts) == 2 and firsts[0]["status"] == "failed before your code ran", firsts
    outcome = [x for x in log if x["kind"] == "regrade_outcome" and x["id"] == sid]
    assert outcome and outcome[0]["repeated"] is False, outcome
    r = results(out, sid)
    assert full_marks(r), r["output"]
    fb = (out / sid / "feedback.md").read_text()
    assert "failed in CUDA initialisation before any of its code ran beside other submissions; " \
           "regraded alone: alone it ran normally" in fb, fb[:1500]
    assert "GRADED AGAIN" in r["output"] and r["extra_data"]["regraded"]["outcome"]
    # the hostile neighbours' failures are their own: never regraded. An honest copy of the
    # master may be, where a neighbour's threads starved its start (a loaded CI machine): the
    # regrade alone is what keeps its grade its own (test_honest_neighbour_keeps_its_score)
    regraded = {x["id"] for x in log if x["kind"] == "regrade_alone"}
    assert {sid, "broken_machine", "fakes_init_failure"} <= regraded, regraded
    assert not regraded & {"many_threads", "fills_storage", "holds_threads"}, regraded
    assert regraded <= {sid, "broken_machine", "fakes_init_failure", "lab2_packed_swiglu"}, regraded


@pytest.mark.slow
def test_a_faked_initialisation_failure_buys_one_regrade_and_no_points(graded):
    out, log, _ = graded
    sid = "fakes_init_failure"
    regrades = [x for x in log if x["kind"] == "regrade_alone" and x["id"] == sid]
    assert len(regrades) == 1 and "CUDA_ERROR_OPERATING_SYSTEM" in regrades[0]["reason"], regrades
    outcome = [x for x in log if x["kind"] == "regrade_outcome" and x["id"] == sid]
    assert outcome and outcome[0]["repeated"] is True and outcome[0]["status"] == "crashed while loading"
    r = results(out, sid)
    assert r["score"] == 0 and "this failure is the submission's own" in r["output"], r["output"]


@pytest.mark.slow
def test_a_failure_before_any_code_that_repeats_alone_is_the_machines(graded):
    """Failing in CUDA initialisation alone too, before any of its code ran: never the
    student's fault. Marked for the instructor (grader error), and said so."""
    out, log, _ = graded
    outcome = [x for x in log if x["kind"] == "regrade_outcome" and x["id"] == "broken_machine"]
    assert outcome and outcome[0]["repeated"] is True and outcome[0]["status"] == "grader error", outcome
    r = results(out, "broken_machine")
    assert r["extra_data"]["status"] == "grader error"
    assert "the grading machine's fault, not yours" in r["output"], r["output"]
    assert "CUDA initialisation failed before any of your code ran" in r["output"], r["output"]


@pytest.mark.slow
@needs_root
def test_a_full_disk_is_that_submissions_alone_and_said_so(graded):
    out, log, _ = graded
    r = results(out, "fills_storage")
    said = r["output"]
    assert "your code filled the space it may write to: it wrote" in said, said
    assert " MiB to /tmp" in said and "the limit is 64 MiB and 2,000 files" in said, said
    mib_tmp = int(said.split(" MiB to /tmp")[0].rsplit(" ", 1)[1])
    assert 50 <= mib_tmp <= 64, said
    # the host's /tmp and /dev/shm never saw it
    assert not Path("/tmp/agtest-fill").exists() and not Path("/dev/shm/agtest-fill").exists()
    report = next(x for x in log if x["kind"] == "after_exit" and x["id"] == "fills_storage")
    assert report["sandbox"]["storage"]["full"] is True


@pytest.mark.slow
@needs_pids_cgroup
def test_too_many_threads_is_that_submissions_alone_and_said_so(graded):
    out, log, _ = graded
    r = results(out, "many_threads")
    assert "tried to run more than 2,048 processes and threads at once" in r["output"], r["output"]
    report = next(x for x in log if x["kind"] == "after_exit" and x["id"] == "many_threads")
    assert report["sandbox"]["tasks"]["refused"] >= 1
    # its own kernel still ran once it let its threads go: nothing but the message is lost
    assert sum(t["score"] for t in r["tests"]) > 0


@pytest.mark.slow
@pytest.mark.skipif(os.getuid() != 0 and pids_cgroup_base()[0] is None,
                    reason="its tasks are counted apart from the grader's by a pids cgroup or a uid "
                           "of its own (a root grader); here neither exists")
def test_its_own_fork_bomb_is_said_as_its_own(graded):
    """A submission whose own threads, still running, hold its limit of tasks when the
    simulator needs a block's threads: its doing, said so with its count and the limit; its
    points lost, no GPU regrade, no review flag (a block refused while it had started nothing
    is the grader's: tests/grader/test_sim_threads.py)."""
    out, log, _ = graded
    r = results(out, "holds_threads")
    first = next(t for t in r["tests"] if t["name"] != "performance")
    said = first["output"]
    assert said.startswith("not graded: the simulator could not start the threads of a block"), said
    assert "because your code's own processes and threads" in said and "your code's doing" in said, said
    assert "processes and threads that one submission may run at once" in said, said
    assert "not graded again on a GPU" in said and "grader's limit" not in said, said
    assert r["score"] == 0 and r["extra_data"].get("status") != "needs a GPU", r["extra_data"]
    assert not [f for f in r["extra_data"].get("flags", []) if "needs a GPU regrade" in f]
    failure = next(x for x in log if x["kind"] == "test" and x["id"] == "holds_threads"
                   and x.get("thread_failure"))
    assert failure["own"] is True and failure["thread_failure"]["own_tasks"] > 1000, failure


# --------------------------------------------------------------------------- real processes

WRITER = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
open("/tmp/agtest-writer", "w").write("secret")
open("/dev/shm/agtest-writer", "w").write("secret")
SEG = libc.shmget(0x5eed, 1 << 20, 0o1666)      # IPC_CREAT | 0666: a System V segment
assert SEG >= 0, os.strerror(ctypes.get_errno())
def swiglu_interleaved(x, out):
    pass
'''
READER = '''
import os
SEEN = {"tmp": sorted(os.listdir("/tmp")), "shm": sorted(os.listdir("/dev/shm")),
        "sysv": open("/proc/sysvipc/shm").read().splitlines()[1:]}
open("seen.json", "w").write(__import__("json").dumps(SEEN))
def swiglu_interleaved(x, out):
    pass
'''


def _load(child):
    ev = child.recv(90)
    assert ev.get("event") == "ready", ev
    ev = child.request(90, cmd="load")
    assert ev.get("event") == "loaded" and not ev.get("cell_errors"), ev
    return ev


def test_tmp_shm_and_sysv_of_one_child_are_not_anothers():
    """The reader starts first (so nothing of the writer's existed when its sandbox was made),
    then the writer writes /tmp, /dev/shm and a System V segment and stays alive, then the
    reader looks: it sees none of it, and both have /tmp and /dev/shm of their own."""
    fns = {"swiglu_interleaved": ["x", "out"]}
    for left in ("/tmp/agtest-writer", "/dev/shm/agtest-writer"):   # an older grader's leftovers
        Path(left).unlink(missing_ok=True)
    reader = Child(mode="student", functions=fns, cells=[{"index": 1, "source": READER}], simulated=True)
    writer = Child(mode="student", functions=fns, cells=[{"index": 1, "source": WRITER}], simulated=True)
    try:
        assert reader.recv(90).get("event") == "ready"
        iso = _load(writer)["isolation"]
        ev = reader.request(90, cmd="load")
        assert ev.get("event") == "loaded" and not ev.get("cell_errors"), ev
        time.sleep(0.2)
        seen = json.loads((reader.workdir / "seen.json").read_text())
        assert "agtest-writer" not in seen["tmp"] and "agtest-writer" not in seen["shm"], seen
        assert not [s for s in seen["sysv"] if s.split()[0] == str(0x5EED)], seen["sysv"]
        assert not Path("/tmp/agtest-writer").exists() and not Path("/dev/shm/agtest-writer").exists()
        assert iso.get("ipc") and iso.get("private_storage") == ["/tmp", "/dev/shm"], iso
    finally:
        writer.close()
        reader.close()
    for c in (writer, reader):   # and their file systems are gone with them
        assert not c.workdir.exists()


UID = """
import os
open("uid.txt", "w").write(str(os.getuid()))
def swiglu_interleaved(x, out):
    pass
"""


@pytest.mark.skipif(os.getuid() != 0 or not can_drop_uid(),
                    reason="needs root and an interpreter other uids can read (the GPU machine's)")
def test_each_child_has_a_uid_of_its_own():
    """A per-user limit (RLIMIT_NPROC counts every process and thread of a uid) that one
    submission exhausts must not be exhausted for the others: no two children share a uid,
    and none is `nobody`, which other software on the machine may use."""
    fns = {"swiglu_interleaved": ["x", "out"]}
    kids = [Child(mode="student", functions=fns, cells=[{"index": 1, "source": UID}], simulated=True)
            for _ in range(2)]
    try:
        for c in kids:
            _load(c)
        uids = [int((c.workdir / "uid.txt").read_text()) for c in kids]
    finally:
        for c in kids:
            c.close()
    assert len(set(uids)) == 2 and NOBODY not in uids and 0 not in uids, uids


@needs_root
def test_what_a_killed_grader_left_mounted_is_swept(tmp_path):
    """A grader killed by SIGKILL cannot unmount its children's file systems nor remove their
    pids cgroups; the next grader does: what no living grader holds (a lock on the folder, or
    on the cgroup and the folder it is named after). A living grader's (this one's, held) are
    left alone, whatever its PID."""
    import ctypes

    from autograder.sandbox import hold, let_go, new_folder, sweep_stale_storage

    dead = subprocess.Popen(["true"])
    dead.wait()   # a PID that no process has now
    stale = Path(tempfile_dir()) / f"ag-{dead.pid}-stale"
    live = new_folder()
    libc = ctypes.CDLL(None, use_errno=True)
    stale.mkdir()
    for d in (stale, live):
        assert libc.mount(b"tmpfs", str(d).encode(), b"tmpfs", 0, b"size=1m") == 0
    hold(live)   # (the grader holds the tmpfs's root too)
    cg = pids_cgroup_base()[0]
    cgroups = {}
    if cg:
        cgroups = {"legacy": Path(cg) / f"ag-{dead.pid}-1-1", "stale": Path(cg) / f"{stale.name}-p",
                   "live": Path(cg) / f"{live.name}-p"}
        for c in cgroups.values():
            c.mkdir()
    try:
        swept = sweep_stale_storage()
        assert str(stale) in swept and not stale.exists()
        assert live.is_mount() and str(live) not in swept   # a living grader's (this one's)
        if cg:   # by the old name, its PID gone; by the new, its folder not held
            assert not cgroups["legacy"].exists() and not cgroups["stale"].exists()
            assert cgroups["live"].exists()
    finally:
        for c in cgroups.values():
            if c.exists():
                c.rmdir()
        libc.umount2(str(live).encode(), 2)
        live.rmdir()
        let_go(live)


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()
