"""Gradescope's container rehearsed under Docker's default limits (issue 28).

Gradescope runs an autograder as root in a Docker container with Docker's defaults: no
CAP_SYS_ADMIN, namespaces refused by seccomp, the cgroup file system read-only. Here those
limits are made real by `docker_default.py` (capabilities cut to Docker's set, Docker's
namespace rules as a seccomp filter, cgroups remounted read-only in a mount namespace of its
own) around the real flow: the bundle exported, unpacked into a folder laid out as
/autograder, its setup.sh run, then run_autograder once per submission, one after another in
the SAME folder (stricter than Gradescope, whose containers start afresh: what one submission
plants would reach the next).

Without namespaces or a cgroup the grader contains each submission by a uid of its own (the
launcher and the grader kill every process of that uid). The venv is made from a Python every
uid may run (the container's python3), as on Gradescope, and sees the project's installed
packages through a .pth file (pip finds every pin installed: nothing is downloaded).

The class: the lab's master, graded fully (correctness; performance pending, with its points,
as on Gradescope there is no GPU) before and after four hostile submissions that read the
seed, forge results and kill the grader, plant code for the grader and the next submission,
and start threads without end; none changes a score or learns a hidden case. Then a grader killed mid-run
(SIGKILL) leaves no process behind, and what its folder held (the class's seed) is gone after
the next run.
"""

from __future__ import annotations

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
from autograder.sandbox import CHILD_UID_BASE, CHILD_UID_SPAN, reachable
from repo import FIXTURES, ROOT as REPO

pytestmark = pytest.mark.slow   # a bundle installed and six submissions graded

LAB = "lab2_packed_swiglu"
SEED = 7730412965513
HELPER = Path(__file__).with_name("docker_default.py")
HOSTILE = FIXTURES / "container"
MASTER = REPO / "solutions" / f"{LAB}.ipynb"


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


def child_uid_processes(only: str = "") -> dict[int, str]:
    """Live processes whose uid is in the children's range (and whose command line holds
    ``only``): {pid: command line}."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            status = open(f"/proc/{d}/status").read()
            cmd = open(f"/proc/{d}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
        state = next(line for line in status.splitlines() if line.startswith("State:")).split()[1]
        if CHILD_UID_BASE <= uid < CHILD_UID_BASE + CHILD_UID_SPAN and state not in ("Z", "X") \
                and only in cmd:
            out[int(d)] = cmd
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
    probe = subprocess.run([sys.executable, str(HELPER), "true"], capture_output=True, text=True)
    if probe.returncode == 77:
        pytest.skip(probe.stderr.strip())
    assert probe.returncode == 0, probe.stderr
    root = Path(tempfile.mkdtemp(prefix="agreh-"))   # /autograder
    os.chmod(root, 0o755)
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
    img = {"root": root, "export": r.stdout}
    setup = subprocess.run([sys.executable, str(HELPER), "bash", str(root / "source" / "setup.sh")],
                           cwd=root, capture_output=True, text=True, env=env(img), timeout=600)
    assert setup.returncode == 0, setup.stdout + setup.stderr
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    img["venv_files"] = sorted(str(p) for p in (root / "source" / "venv").rglob("*"))
    yield img
    shutil.rmtree(root, ignore_errors=True)
    for p in Path("/tmp").glob("ag-planted-ran-*"):
        p.unlink()


def submit(image, files: dict, *, wait=True):
    """One Gradescope run in the image's folder: its upload, then run_autograder under
    Docker's default limits. (results.json or None, the process, its stdout)."""
    root = image["root"]
    for sub in ("submission", "results"):
        shutil.rmtree(root / sub, ignore_errors=True)
        (root / sub).mkdir()
    for name, data in files.items():
        (root / "submission" / name).write_bytes(data)
    proc = subprocess.Popen([sys.executable, str(HELPER), str(root / "run_autograder")], cwd=root,
                            env=env(image), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not wait:
        return proc
    out, _ = proc.communicate(timeout=600)
    rj = root / "results" / "results.json"
    return (json.loads(rj.read_text()) if rj.exists() else None), proc, out


@pytest.fixture(scope="module")
def the_class(image):
    """Every run, in order, in one folder: master, four hostile files, master again."""
    runs = {}
    for name, path in [("master", MASTER), ("reads_seed", HOSTILE / "reads_seed.py"),
                       ("forges_and_kills", HOSTILE / "forges_and_kills.py"),
                       ("plants_code", HOSTILE / "plants_code.py"),
                       ("threads_without_end", HOSTILE / "threads_without_end.py"),
                       ("master_again", MASTER)]:
        doc, proc, out = submit(image, {path.name: path.read_bytes()})
        time.sleep(0.5)
        # nothing of it alive afterwards, not even the forger's daemon
        runs[name] = {"doc": doc, "rc": proc.returncode, "stdout": out,
                      "left": child_uid_processes(),
                      "results_after": (image["root"] / "results" / "results.json").read_text()}
    return runs


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


def test_a_killed_grader_leaves_nothing_behind(image, the_class):
    """SIGKILL of run_autograder's Python mid-run (its `grade` gets SIGTERM and kills its
    children whole; the launchers remove their folders): no process of the submission is left,
    and the run's own folder (the class's seed in it) is gone once the next run has started."""
    proc = submit(image, {"sleeps.py": (HOSTILE / "sleeps.py").read_bytes()}, wait=False)
    deadline = time.monotonic() + 120
    while len(child_uid_processes("agdriver.py")) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)   # the driver and the daemon it left
    assert len(child_uid_processes("agdriver.py")) >= 2, "the submission never started"
    runner = next(int(d) for d in os.listdir("/proc") if d.isdigit() and _is_runner(d, image))
    folders = {p for p in Path(tempfile.gettempdir()).glob(f"ag-{runner}-gradescope-*")}
    assert folders
    os.kill(runner, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 20
    while child_uid_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert child_uid_processes() == {}
    doc, p, out = submit(image, {"m.ipynb": MASTER.read_bytes()})   # the next run sweeps
    assert doc["score"] == course_points(LAB)["correctness"], out[-2000:]
    assert not any(f.exists() for f in folders), folders
    assert "removed what killed graders left" in out


def _is_runner(pid: str, image) -> bool:
    try:
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return False
    return b"autograder.gradescope" in cmd and str(image["root"] / "source").encode() in cmd
