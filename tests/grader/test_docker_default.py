"""Gradescope's container rehearsed under Docker's default limits (issues 28, 41).

Gradescope runs an autograder as root in a Docker container with Docker's defaults: no
CAP_SYS_ADMIN, namespaces refused by seccomp, the cgroup file system read-only, a /dev/shm of
64 MiB and an IPC namespace of the container's own. Here those limits are made real by
`docker_default.py` (capabilities cut to Docker's set, Docker's namespace rules as a seccomp
filter, cgroups remounted read-only in a mount namespace of its own, the class's /dev/shm and
IPC namespace joined) around the real flow: the bundle exported, unpacked into a folder laid
out as /autograder, its setup.sh run, then run_autograder once per submission, one after
another in the SAME folder, /dev/shm and IPC namespace (stricter than Gradescope, whose
containers start afresh: what one submission leaves would reach the next).

Without namespaces or a cgroup the grader contains each submission by a uid of its own (the
launcher and the grader kill every process of that uid), confines its writes to its own folder
(Landlock) and refuses it System V IPC (seccomp); where Landlock is refused (a kernel or a
Docker before it: ``--no-landlock``) it removes what that uid left when the child ends. The
venv is made from a Python every uid may run (the container's python3), as on Gradescope, and
sees the project's installed packages through a .pth file (pip finds every pin installed:
nothing is downloaded).

The class: the lab's master, graded fully (correctness; performance pending, with its points,
as on Gradescope there is no GPU) before and after hostile submissions that read the seed,
forge results and kill the grader, plant code for the grader and the next submission, start
threads without end, carry the hidden cases out through the kernel proof's child, and leave
files and IPC objects behind; none changes a score or learns a hidden case, and nothing of
theirs outlives their run. The same leavers again where Landlock is refused. Then a grader
stopped mid-run (SIGTERM, SIGKILL) leaves no process behind, and what its folder held (the
class's seed) is gone at once (SIGTERM) or once the next run has started (SIGKILL).

What is left is counted for this test's own runs only (another grader on the machine has
children of its own): this process is the subreaper of every process its runs start, and a
submission's process is one below it whose uid is in the children's range.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

from autograder.rubric import course_points
from autograder.sandbox import CHILD_MARK, CHILD_UID_BASE, CHILD_UID_SPAN, descendants, reachable
from grading_runs import master
from repo import FIXTURES, ROOT as REPO

pytestmark = [pytest.mark.slow, pytest.mark.extended]   # a bundle installed and a dozen submissions graded

LAB = "lab2_packed_swiglu"
SEED = 7730412965513
HELPER = Path(__file__).with_name("docker_default.py")
HOSTILE = FIXTURES / "container"
MASTER = master(LAB)
PR_SET_CHILD_SUBREAPER = 36
LEAVERS = ("exfiltrates_cases", "leaves_files")


def _reachable(path: str) -> bool:
    return not reachable(path)


def world_python() -> str | None:
    """A Python of this minor version that every uid may run (as the container's python3 is)."""
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (getattr(sys, "_base_executable", ""), f"/usr/bin/python{ver}",
                f"/usr/local/bin/python{ver}"):
        if not exe or not os.path.exists(exe):
            continue
        r = subprocess.run([exe, "-I", "-c", "import sys, sysconfig; print(sys.version_info[:2] == "
                            f"{tuple(sys.version_info[:2])}, sysconfig.get_paths()['stdlib'])"],
                           capture_output=True, text=True)
        same, _, stdlib = r.stdout.strip().partition(" ")
        if r.returncode == 0 and same == "True" and _reachable(exe) and _reachable(stdlib):
            return exe
    return None


def child_uid(uid: int) -> bool:
    return CHILD_UID_BASE <= uid < CHILD_UID_BASE + CHILD_UID_SPAN


def child_uid_processes(only: str = "") -> dict[int, str]:
    """Live processes of this test's runs (below this process, their subreaper) whose uid is in
    the children's range (and whose command line holds ``only``): {pid: command line}. Another
    grader's children on this machine are not below it."""
    _reap_orphans()
    ours = descendants(os.getpid())
    out = {}
    for pid in ours:
        try:
            status = open(f"/proc/{pid}/status").read()
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
        state = next(line for line in status.splitlines() if line.startswith("State:")).split()[1]
        if child_uid(uid) and state not in ("Z", "X") and only in cmd:
            out[pid] = cmd
    return out


_SPAWNED: set[int] = set()   # the processes this test started itself (their Popen reaps them)


def _reap_orphans() -> None:
    """Reap the orphans this subreaper adopted (what a killed run left, once it ended)."""
    for pid in descendants(os.getpid()) - {os.getpid()} - _SPAWNED:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if fields[0] == "Z" and int(fields[1]) == os.getpid():
                os.waitpid(pid, os.WNOHANG)
        except (OSError, ChildProcessError, ValueError):
            pass


@pytest.fixture(scope="module", autouse=True)
def subreaper():
    """Every orphan of this module's runs is adopted by this process, not the machine's init:
    what a run leaves is found below it, and only what its runs left."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    yield
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0)
    _reap_orphans()


def files_of(uids, places) -> list[str]:
    """Entries in ``places`` (and in the folders below them that every uid may write) owned by
    one of ``uids``."""
    out = []

    def walk(d):
        try:
            entries = list(os.scandir(d))
        except OSError:
            return
        for e in entries:
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if st.st_uid in uids:
                out.append(e.path)
            elif e.is_dir(follow_symlinks=False) and st.st_mode & 0o003 == 0o003:
                walk(e.path)

    for p in places:
        walk(p)
    return out


def class_ipc(image) -> list[dict]:
    """The System V objects in the class's IPC namespace (the container's): [{kind, key, uid,
    cuid, ...}]."""
    out = []
    for kind in ("shm", "sem", "msg"):
        r = subprocess.run(["nsenter", f"--ipc=/proc/{image['ipc'].pid}/ns/ipc", "cat",
                            f"/proc/sysvipc/{kind}"], capture_output=True, text=True, timeout=30)
        head, *rows = r.stdout.splitlines() or [""]
        out += [dict(zip(head.split(), row.split()), kind=kind) for row in rows]
    return out


def env(image, **extra) -> dict:
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    e.update(CUDA_VISIBLE_DEVICES="", BOOK_SIMULATOR="1", PIP_NO_INDEX="1",
             PIP_DISABLE_PIP_VERSION_CHECK="1", AUTOGRADER_ROOT=str(image["root"]),
             PATH=f"{image['root'] / 'source' / 'venv' / 'bin'}{os.pathsep}{os.environ['PATH']}", **extra)
    return e


@pytest.fixture(scope="module")
def image():
    if os.getuid() != 0:
        pytest.skip("needs root: Gradescope runs the autograder as root, and the rehearsal drops "
                    "what Docker drops from root")
    py = world_python()
    project = sysconfig.get_paths()["purelib"]
    if py is None or not _reachable(project):
        pytest.skip(f"needs a Python {sys.version_info.major}.{sys.version_info.minor} and the "
                    f"project's packages ({project}) that every uid may read, as in a container")
    if shutil.which("nsenter") is None or shutil.which("unshare") is None:
        pytest.skip("needs util-linux's unshare and nsenter: the container's IPC namespace")
    root = Path(tempfile.mkdtemp(prefix="agreh-"))   # /autograder
    os.chmod(root, 0o755)
    # the container's own /dev/shm (Docker's default: 64 MiB) and IPC namespace, one for the
    # class as the folder is: what one submission leaves there the next would find
    shm = root / "dev-shm"
    shm.mkdir()
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.mount(b"tmpfs", str(shm).encode(), b"tmpfs", 0, b"size=64m,mode=1777") == 0, \
        os.strerror(ctypes.get_errno())
    ipc = subprocess.Popen(["unshare", "--ipc", "sleep", "infinity"])
    _SPAWNED.add(ipc.pid)
    img = {"root": root, "shm": shm, "ipc": ipc}
    probe = subprocess.run(helper(img, "true"), capture_output=True, text=True)
    if probe.returncode == 77:
        _close_image(img)
        pytest.skip(probe.stderr.strip())
    assert probe.returncode == 0, probe.stderr
    zpath = root.parent / f"{root.name}.zip"
    r = subprocess.run([sys.executable, "-m", "autograder", "export", "gradescope", "lab2", "--out",
                        str(zpath), "--seed", str(SEED)], cwd=REPO, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert r.returncode == 0, r.stdout + r.stderr
    with zipfile.ZipFile(zpath) as z:
        z.extractall(root / "source")
        for i in z.infolist():   # zipfile drops the mode bits Gradescope's unzip keeps
            if (i.external_attr >> 16) & 0o777:
                os.chmod(root / "source" / i.filename, (i.external_attr >> 16) & 0o777)
    zpath.unlink()
    subprocess.run([py, "-m", "venv", str(root / "source" / "venv")], check=True)
    site = next((root / "source" / "venv").glob("lib/python*/site-packages"))
    (site / "project_packages.pth").write_text(project + "\n")
    img["export"] = r.stdout
    setup = subprocess.run(helper(img, "bash", str(root / "source" / "setup.sh")),
                           cwd=root, capture_output=True, text=True, env=env(img), timeout=600)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    img["venv_files"] = sorted(str(p) for p in (root / "source" / "venv").rglob("*"))
    yield img
    _close_image(img)
    for p in Path("/tmp").glob("ag-planted-ran-*"):
        p.unlink()


def helper(image, *cmd, landlock: bool = True) -> list[str]:
    """``cmd`` under Docker's default limits, in the class's container (its /dev/shm and IPC
    namespace); ``landlock=False``: as on a kernel, or a Docker, that refuses Landlock."""
    return [sys.executable, str(HELPER), "--shm", str(image["shm"]), "--ipc", str(image["ipc"].pid),
            *([] if landlock else ["--no-landlock"]), *cmd]


def _close_image(img) -> None:
    img["ipc"].kill()
    img["ipc"].wait()
    ctypes.CDLL(None).umount2(str(img["shm"]).encode(), 2)
    shutil.rmtree(img["root"], ignore_errors=True)


def submit(image, files: dict, *, wait=True, landlock=True):
    """One Gradescope run in the image's folder: its upload, then run_autograder under
    Docker's default limits. (results.json or None, the process, its stdout)."""
    root = image["root"]
    for sub in ("submission", "results"):
        shutil.rmtree(root / sub, ignore_errors=True)
        (root / sub).mkdir()
    for name, data in files.items():
        (root / "submission" / name).write_bytes(data)
    proc = subprocess.Popen(helper(image, str(root / "run_autograder"), landlock=landlock), cwd=root,
                            env=env(image), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _SPAWNED.add(proc.pid)
    if not wait:
        return proc
    out, _ = proc.communicate(timeout=900)
    rj = root / "results" / "results.json"
    return (json.loads(rj.read_text()) if rj.exists() else None), proc, out


def graded_run(image, name: str, path: Path, landlock: bool = True) -> dict:
    """One submission graded, and what of it was left once its run ended: its processes, the
    files of its uids where every uid may write (the host's /tmp and /var/tmp, the class's
    /dev/shm), the System V objects in the class's IPC namespace."""
    doc, proc, out = submit(image, {path.name: path.read_bytes()}, landlock=landlock)
    time.sleep(0.5)
    uids = set(_said_uids(doc))
    return {"doc": doc, "rc": proc.returncode, "stdout": out, "left": child_uid_processes(),
            "results_after": (image["root"] / "results" / "results.json").read_text(),
            "files_left": files_of(uids, ["/tmp", "/var/tmp", str(image["shm"])]),
            "ipc_left": [o for o in class_ipc(image)
                         if child_uid(int(o.get("uid", 0))) or child_uid(int(o.get("cuid", 0)))]}


def _said_uids(doc) -> list[int]:
    """The uids a run's children had: the graded child's (its result says it) and any a
    fixture printed (ME <uid>)."""
    if not doc:
        return []
    uids = [doc["extra_data"].get("isolation", {}).get("uid")]
    uids += [int(ln.split()[1]) for ln in _printed(doc).splitlines()
             if ln.startswith("ME ") and ln.split()[1].isdigit()]
    return [u for u in uids if isinstance(u, int)]


@pytest.fixture(scope="module")
def the_class(image):
    """Every run, in order, in one folder: master, the hostile files, master again."""
    runs = {}
    for name, path in [("master", MASTER), ("reads_seed", HOSTILE / "reads_seed.py"),
                       ("forges_and_kills", HOSTILE / "forges_and_kills.py"),
                       ("plants_code", HOSTILE / "plants_code.py"),
                       ("threads_without_end", HOSTILE / "threads_without_end.py"),
                       *((n, HOSTILE / f"{n}.py") for n in LEAVERS),
                       ("master_again", MASTER)]:
        # nothing of it alive afterwards, not even the forger's daemon
        runs[name] = graded_run(image, name, path)
    return runs


@pytest.fixture(scope="module")
def without_landlock(image, the_class):
    """The leavers again, where Landlock is refused (a kernel before Linux 5.13, a Docker before
    23): their writes are not confined, what their uid left is removed as each child ends."""
    return {name: graded_run(image, name, HOSTILE / f"{name}.py", landlock=False)
            for name in LEAVERS}


def _printed(doc) -> str:
    return doc["extra_data"].get("printed", "")


def test_the_export_prints_the_assignments_total(image):
    pts = course_points(LAB)
    assert pts["total"] == pts["correctness"] + pts["performance"] > pts["correctness"] > 0
    assert f"set the Gradescope assignment's autograder points to {pts['total']:g}" in image["export"]


def test_an_honest_submission_is_graded_fully_with_performance_pending(the_class):
    pts = course_points(LAB)
    for name in ("master", "master_again"):
        run = the_class[name]
        doc = run["doc"]
        assert run["rc"] == 0 and doc is not None, run["stdout"][-3000:]
        assert doc["score"] == pts["correctness"], doc["output"]
        assert sum(t["max_score"] for t in doc["tests"]) == pts["total"]   # the course's total
        [perf] = [t for t in doc["tests"] if t["name"] == "performance"]
        assert (perf["score"], perf["max_score"], perf["status"]) == (0, pts["performance"], "failed")
        assert perf["output"].startswith(f"PENDING: these {pts['performance']:g} points")
        assert all(t["status"] == "passed" for t in doc["tests"] if t is not perf)
        assert f"({pts['performance']:g} of them pending" in doc["output"].splitlines()[0]
    # the same grade before and after the hostile submissions, test by test
    key = lambda d: [(t["name"], t["score"], t["output"]) for t in d["tests"]]  # noqa: E731
    assert key(the_class["master"]["doc"]) == key(the_class["master_again"]["doc"])


def test_the_container_gave_no_namespace_and_the_report_says_what_was_missing(the_class):
    iso = the_class["master"]["doc"]["extra_data"]["isolation"]
    assert iso["containment"] == "uid" and iso["uid_drop"] is True
    assert CHILD_UID_BASE <= iso["uid"] < CHILD_UID_BASE + CHILD_UID_SPAN
    assert not iso["pid_namespace"] and not iso["own_file_system"] and not iso["mount"]
    assert iso["network"].startswith("cut by a seccomp filter"), iso["network"]
    missing = " | ".join(iso["missing"])
    for what in ("PID namespace (unshare(CLONE_NEWPID): Operation not permitted)",
                 "a file system of its own", "a pids cgroup", "mount namespace"):
        assert what in missing, missing
    # what no mount namespace hides, permissions do: the grader's package and its output
    # folder are closed to the child's uid; its own upload is all it may read of the bundle
    assert "/source/autograder" not in missing and "/graded" not in missing, missing
    assert "(readable by it: " in missing and "/submission" in missing, missing


def test_run_autograders_stdout_says_what_it_did(the_class):
    out = the_class["master"]["stdout"]
    pts = course_points(LAB)
    for said in (f"run_autograder: {LAB}, {pts['total']:g} points",
                 "closed to the submission's uid: ", "source/gradescope.json 600",
                 "source/autograder 700",
                 f"uploaded: {LAB}.ipynb", f"grading submission/{LAB}.ipynb",
                 "sandbox: containment uid", "without PID namespace",
                 f"{pts['correctness']:g}/{pts['total']:g} (graded)"):
        assert said in out, out[-3000:]
    assert str(SEED) not in out


def test_the_seed_the_package_and_the_network_are_out_of_reach(the_class):
    run = the_class["reads_seed"]
    doc = run["doc"]
    printed = _printed(doc)
    assert doc["score"] == 0 and "READ-DENIED" in printed, printed
    assert "READ-OK" not in printed, printed
    assert "NET-DENIED PermissionError" in printed, printed
    for r in the_class.values():   # nobody learns the seed, nor the hidden cases drawn from it
        assert str(SEED) not in json.dumps(r["doc"]) and str(SEED) not in r["stdout"]


def test_forged_results_and_a_killed_grader_change_nothing(the_class):
    run = the_class["forges_and_kills"]
    doc = run["doc"]
    printed = _printed(doc)
    assert run["rc"] == 0 and doc["score"] == 0 and "FORGED" not in run["results_after"]
    assert "FORGE-DENIED" in printed and "KILLED 0 of" in printed, printed
    for r in the_class.values():   # no process of any submission outlived its run
        assert r["left"] == {}, r["left"]


def test_planted_code_never_runs(the_class, image):
    printed = _printed(the_class["plants_code"]["doc"])
    assert the_class["plants_code"]["doc"]["score"] == 0
    assert "PLANT-DENIED" in printed and not [ln for ln in printed.splitlines()
                                              if ln.startswith("PLANT-OK") and "/tmp/" not in ln], printed
    assert not list(Path("/tmp").glob("ag-planted-ran-*")), "planted code ran"
    venv = sorted(str(p) for p in (image["root"] / "source" / "venv").rglob("*"))
    assert venv == image["venv_files"]


def test_threads_without_end_stop_at_the_uids_own_limit(the_class):
    """No pids cgroup here: RLIMIT_NPROC of the child's own uid counts its processes and
    threads (the rubric's `tasks`, 2048, and a margin), and it is that submission's alone."""
    from autograder.sandbox import Limits

    doc = the_class["threads_without_end"]["doc"]
    line = next(ln for ln in _printed(doc).splitlines() if ln.startswith("THREADS"))
    started = int(line.split()[1])
    assert "then: can't start new thread" in line and 1000 < started <= Limits().tasks + 64, line
    assert doc["score"] == 0 and the_class["threads_without_end"]["left"] == {}


def hidden_needles() -> list[str]:
    """What would give the class's hidden cases away: each case's seed, each input's seed, and
    the shapes of its arrays, as the grader draws them from the bundle's seed."""
    import numpy as np

    from autograder import labs
    from autograder.rubric import load_rubric

    lab = labs.get(LAB)
    cases = lab.cases(np.random.default_rng(SEED), True, load_rubric(LAB, None)["correctness"])
    out = []
    for c in cases:
        if c["visibility"] != "hidden":
            continue
        out.append(str(c["seed"]))
        for a in lab.args(c):
            out.append(json.dumps(a["spec"]["shape"] if a["role"] == "in" else a["shape"]))
            if a["role"] == "in":
                out.append(str(a["spec"]["seed"]))
    assert len(out) >= 6, out
    return out


def before_the_due_date(doc) -> str:
    """What Gradescope shows the student before the due date: the result's output and every
    test shown at once (a test's visibility, else the result's); never ``extra_data``, nor a
    hidden case's own test, which is shown after the due date."""
    shown = [doc.get("output", "")]
    for t in doc["tests"]:
        if t.get("visibility", doc.get("visibility", "visible")) == "visible":
            shown += [t["name"], t.get("output", "")]
    return "\n".join(shown)


def test_hidden_cases_never_reach_the_student(the_class):
    """The exfiltrator: its function read every test's inputs off the stack and tried to write
    them where every uid may write; its writes are confined to its own folder, so the kernel
    proof's child (another uid) found nothing to carry out: nothing it is shown before the due
    date names a hidden shape or seed, and nothing of the proof's child's error is anywhere."""
    run = the_class["exfiltrates_cases"]
    doc, printed = run["doc"], _printed(run["doc"])
    assert "PROBE-DENIED /tmp/" in printed and "PROBE-WROTE" not in printed, printed
    public = [t for t in doc["tests"] if t["name"].startswith("public")]
    assert public and all(t["score"] == t["max_score"] for t in public), doc["output"]
    said = before_the_due_date(doc)
    assert not [n for n in hidden_needles() if n in said], said[:3000]
    assert "EXFILTRATED" not in json.dumps(doc)
    iso = doc["extra_data"]["isolation"]
    assert iso["writes"].startswith("only beneath ") and iso["outlives"] == [], iso


def test_nothing_a_submission_leaves_outlives_its_run(the_class):
    """The leaver's writes where every uid may write are refused (Landlock), and so is System V
    IPC (seccomp: no IPC namespace of its own); no run of the class left a file of its uids in
    /tmp, /var/tmp or the container's /dev/shm, nor an IPC object in the container's."""
    run = the_class["leaves_files"]
    printed = _printed(run["doc"])
    for what in ("/tmp files: errno 13", "/tmp data: errno 13", "/var/tmp data: errno 13",
                 "/dev/shm data: errno 13", "shm segment: errno 1", "message queue: errno 1"):
        assert f"LEFT-DENIED {what}" in printed, printed
    assert "LEFT-OK" not in printed, printed
    iso = run["doc"]["extra_data"]["isolation"]
    assert iso["ipc_objects"].startswith("refused (seccomp)") and iso["outlives"] == [], iso
    for name, r in the_class.items():
        assert r["files_left"] == [] and r["ipc_left"] == [], (name, r["files_left"], r["ipc_left"])


def test_without_landlock_what_a_submission_left_is_removed_when_it_ends(without_landlock):
    """Where Landlock is refused the leaver writes 20,000 files and 8 MiB to /tmp, fills the
    container's /dev/shm and writes /var/tmp: all of it, its uid's, is removed when its child
    ends; System V IPC is still refused. Its report says that its writes were not confined and
    what was done instead."""
    run = without_landlock["leaves_files"]
    printed = _printed(run["doc"])
    assert "LEFT-OK /tmp files: 20000" in printed and "LEFT-OK /tmp data: 8 MiB" in printed, printed
    full = next(ln for ln in printed.splitlines() if "/dev/shm data" in ln)
    assert full.startswith("LEFT-OK") and "then errno 28" in full, full   # the container's 64 MiB
    assert "LEFT-DENIED shm segment: errno 1" in printed, printed
    assert run["files_left"] == [] and run["ipc_left"] == [], (run["files_left"], run["ipc_left"])
    assert run["left"] == {}
    iso = run["doc"]["extra_data"]["isolation"]
    assert iso["writes"].startswith("not confined: the kernel has no Landlock"), iso["writes"]
    missing = " | ".join(iso["missing"])
    assert "are removed by its uid when it ends" in missing, missing


def test_without_landlock_hidden_cases_never_reach_the_student(without_landlock):
    """Where Landlock is refused the exfiltrator's writes land in /tmp, and the kernel proof's
    child, started while the graded child still lives, reads them and its kernel raises them:
    the judge shows nothing of what that child said (its own words only: judge.graders_words),
    so nothing the student is shown names a hidden case; what it wrote is gone once it ends."""
    run = without_landlock["exfiltrates_cases"]
    doc = run["doc"]
    assert "PROBE-WROTE /tmp/" in _printed(doc)   # its writes were not confined
    assert run["files_left"] == [], run["files_left"]   # and were removed when it ended
    said = before_the_due_date(doc)
    assert not [n for n in hidden_needles() if n in said], said[:3000]


def _stop_mid_run(image, sig):
    """A run of the sleeper (its cells take minutes, it leaves a daemon) stopped by ``sig`` once
    its child runs: the runner's folder and its `grade`'s children's folders, and what the
    runner said."""
    proc = submit(image, {"sleeps.py": (HOSTILE / "sleeps.py").read_bytes()}, wait=False)
    deadline = time.monotonic() + 120
    while len(child_uid_processes(CHILD_MARK)) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)   # the driver and the daemon it left
    assert len(child_uid_processes(CHILD_MARK)) >= 2, "the submission never started"
    runner = next(int(d) for d in os.listdir("/proc") if d.isdigit() and _is_runner(d, image))
    graders = {runner} | {p for p in descendants(runner) if b"grade" in _cmd(p)}
    tmp = Path(tempfile.gettempdir())
    folders = {p for g in graders for p in tmp.glob(f"ag-{g}-*")}
    assert any("gradescope-" in f.name for f in folders) and len(folders) >= 2, folders
    os.kill(runner, sig)
    proc.wait(timeout=60)
    said = proc.stdout.read()[-3000:]
    deadline = time.monotonic() + 20
    while child_uid_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert child_uid_processes() == {}, said
    return folders, said


def test_a_grader_stopped_by_sigterm_leaves_nothing_behind(image, the_class):
    """SIGTERM of run_autograder's Python mid-run (Gradescope's time limit): it stops its
    `grade`, which kills its children whole and removes their folders, and removes its own
    folder (the class's seed in it): nothing is left, at once."""
    folders, said = _stop_mid_run(image, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while any(f.exists() for f in folders) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = {str(f): sorted(os.listdir(f)) for f in folders if f.exists()}
    assert not left and "stopped by SIGTERM" in said, (left, said)


def test_a_killed_grader_leaves_nothing_behind(image, the_class):
    """SIGKILL of run_autograder's Python mid-run (its `grade` gets SIGTERM and kills its
    children whole, removing their folders): no process of the submission is left, and the
    run's own folder (the class's seed in it) is gone once the next run has started (no lock
    holds it any more)."""
    folders, _said = _stop_mid_run(image, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(f.exists() and "gradescope-" not in f.name for f in folders) and \
            time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [f for f in folders if f.exists() and "gradescope-" not in f.name], folders
    doc, p, out = submit(image, {"m.ipynb": MASTER.read_bytes()})   # the next run sweeps
    assert doc["score"] == course_points(LAB)["correctness"], out[-2000:]
    assert not any(f.exists() for f in folders), folders
    assert "removed what killed graders left" in out


def _cmd(pid: int) -> bytes:
    try:
        return open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        return b""


def _is_runner(pid: str, image) -> bool:
    cmd = _cmd(int(pid)).split(b"\0")
    return b"autograder.gradescope" in cmd and str(image["root"] / "source").encode() in cmd
