"""Every process a submission starts dies with it, and no submission holds more memory than
its budget (autograder/sandbox/, autograder/gpuwatch.py; issue 12).

Real processes, killed for real: the submissions below start a fresh interpreter in a new
session, a double-forked setsid sleeper, helper processes that hold memory. What is left
afterwards is read from /proc by this test, not from the sandbox's own bookkeeping: a process
belongs to a submission here if its working directory is the submission's sandbox folder
(every process it starts inherits it; the fixtures do not move). On a machine with NVML (the
H100) the GPU tests also run: the driver's NVML PID matches the sandbox's host PIDs, nothing
of a submission holds the GPU after it, and the GPU memory budget stops the fixture that
takes all free device memory.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from repo import FIXTURES, ROOT as REPO

THREATS = FIXTURES / "threats"
sys.path.insert(0, str(REPO))

from autograder import gpuwatch  # noqa: E402
from autograder.sandbox import Child, ChildError, can_drop_uid  # noqa: E402
from autograder.submission import read_cells  # noqa: E402

LAB2 = {"swiglu_interleaved": ["x", "out"]}
MiB = 1 << 20


def _containment() -> dict:
    try:
        from autograder.sandbox import containment_support
    except ImportError:  # a sandbox without containment (main before issue 12): run, and fail
        return {"best": "unknown", "why_not_pidns": "", "why_not_cgroup": ""}
    return containment_support()


# a machine where neither exists refuses student code (test_refuses_... shows the message)
needs_containment = pytest.mark.skipif(
    _containment()["best"] == "none",
    reason=f"no PID namespace ({_containment()['why_not_pidns']}) and no cgroup "
           f"({_containment()['why_not_cgroup']}) here: the sandbox refuses student code")


def in_folder(folder: str) -> dict[int, dict]:
    """Live processes (not zombies) whose working directory is in ``folder``: pid -> info."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{d}/cwd")
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if cwd.startswith(folder) and fields[0] not in ("Z", "X"):
            out[int(d)] = {"state": fields[0], "session": _session(d, fields)}
    return out


def _session(pid: str, fields) -> tuple:
    """Session id as seen in each PID namespace of the process (stat's field shows 0 for a
    session led from inside a namespace the reader cannot see)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSsid:"):
                    return tuple(int(x) for x in line.split()[1:])
    except OSError:
        pass
    return (int(fields[4]),)


def start(cells, *, simulated=True, gpu=None, limits=None, **kw):
    """A student child with its cells loaded (the protocol's ready -> load -> loaded)."""
    child = Child(mode="student", functions=LAB2, cells=cells, simulated=simulated, gpu=gpu,
                  limits=limits, **kw)
    return child


def load(child, timeout=60.0):
    ev = child.recv(timeout)
    if ev.get("event") == "ready":
        ev = child.request(timeout, cmd="load")
    while ev.get("event") not in ("loaded", "fatal"):
        ev = child.recv(timeout)
    return ev


def closed_and_gone(child, folder: str, grace: float = 3.0) -> dict[int, dict]:
    child.close()
    deadline = time.monotonic() + grace
    left = in_folder(folder)
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        left = in_folder(folder)
    return left


def kill_leftovers(folder: str) -> None:
    for pid in in_folder(folder):   # what this test started and the sandbox failed to end
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


# --------------------------------------------------------------------------- escapes
DOUBLE_FORK_AT_CALL = '''
import os, time, subprocess, sys
from numba import cuda

def _escape():
    if os.fork() == 0:                 # double fork, new session, then a fresh interpreter
        os.setsid()
        if os.fork() == 0:
            os.closerange(3, 65536)
            os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(120)"])
        os._exit(0)
    os.wait()
    subprocess.Popen(["/bin/sh", "-c", "setsid sleep 120 & sleep 120"], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

_escape()

def swiglu_interleaved(x, out):
    pass
'''


@needs_containment
@pytest.mark.parametrize("contain", ["auto", "cgroup"])
@pytest.mark.parametrize("which", ["escape_session fixture", "double fork and setsid at load"])
def test_nothing_a_submission_starts_outlives_it(which, contain):
    if contain == "cgroup":
        from autograder.sandbox import containment_support
        sup = containment_support()
        if not sup["cgroup"]:
            pytest.skip(f"no cgroup v2 to test the fallback with: {sup['why_not_cgroup']}")
    if which.startswith("escape_session"):
        cells = read_cells(THREATS / "escape_session.py")
    else:
        cells = [{"index": 1, "source": DOUBLE_FORK_AT_CALL}]
    child = start(cells, contain=contain) if contain != "auto" else start(cells)
    folder = str(child.workdir)
    try:
        ev = load(child)
        assert ev.get("event") == "loaded" and not ev.get("cell_errors"), ev
        time.sleep(0.5)
        during = in_folder(folder)
        sessions = {p["session"] for p in during.values()}
        # the escape really happened: at least two processes beside the driver (and the
        # launcher, where there is one), in a session of their own
        assert len(during) >= 3 and len(sessions) >= 2, during
        left = closed_and_gone(child, folder)
        assert left == {}, f"processes of the submission outlived it: {left}"
        assert child.survivors() == []
    finally:
        kill_leftovers(folder)
        shutil.rmtree(folder, ignore_errors=True)


@needs_containment
def test_submission_pids_are_its_namespace():
    """The host PIDs the sandbox names are exactly the submission's processes."""
    child = start(read_cells(THREATS / "escape_session.py"))
    folder = str(child.workdir)
    try:
        load(child)
        time.sleep(0.5)
        named = child.pids()
        seen = set(in_folder(folder))
        assert seen and seen <= named | {child.proc.pid}, (seen, named)
        assert all(p in seen or not os.path.exists(f"/proc/{p}") for p in named)
        assert child.containment in ("pidns", "cgroup")
    finally:
        child.close()
        kill_leftovers(folder)


# --------------------------------------------------------------------------- budgets
HOLD_IN_HELPERS = '''
import subprocess, sys, time
HOLD = "b = bytearray(250 << 20)\\nfor i in range(0, len(b), 4096): b[i] = 1\\nimport time; time.sleep(120)"
procs = [subprocess.Popen([sys.executable, "-c", HOLD]) for _ in range(2)]
time.sleep(40)

def swiglu_interleaved(x, out):
    pass
'''


@needs_containment
def test_host_memory_budget_counts_every_process_and_stops_the_submission():
    """Two helper interpreters hold 250 MiB each while the driver stays small: the budget
    (400 MiB) is over only when summed over the submission's processes. Stopped during its
    load, with the budget, the amount over it and what to do; none of its processes left."""
    child = start([{"index": 1, "source": HOLD_IN_HELPERS}], limits={"mem_bytes": 400 * MiB})
    folder = str(child.workdir)
    t0 = time.monotonic()
    try:
        with pytest.raises(ChildError) as err:
            load(child, timeout=60)
        assert time.monotonic() - t0 < 30, "the budget was not enforced during the load"
        assert err.value.reason == "memory", (err.value.reason, err.value.detail)
        assert "host memory budget exceeded" in err.value.detail
        assert "MiB over its budget of 400 MiB" in err.value.detail
        assert "do not start other processes" in err.value.detail
        left = closed_and_gone(child, folder)
        assert left == {}, left
    finally:
        child.close()
        kill_leftovers(folder)


@needs_containment
def test_within_budget_is_left_alone():
    child = start([{"index": 1, "source": "def swiglu_interleaved(x, out):\n    pass\n"}],
                  limits={"mem_bytes": 1024 * MiB})
    try:
        assert load(child).get("event") == "loaded"
        time.sleep(1.0)
        assert child.breach is None and 0 < child.rss_peak < 1024 * MiB
    finally:
        child.close()


# --------------------------------------------------------------------------- refusal
def test_refuses_without_containment_and_says_how_to_fix(tmp_path):
    """As an unprivileged user with no writable cgroup, a student child is refused with the
    cause and the fix; the instructor's flag lets grading go on, without containment."""
    py = "/usr/bin/python3"
    if os.getuid() != 0 or not os.path.exists(py):
        pytest.skip("needs root (to become uid nobody) and a system python3 nobody can run")
    d = Path(tempfile.mkdtemp(prefix="agrefuse-"))
    shutil.copytree(REPO / "autograder" / "sandbox", d / "sandbox",   # the package, alone
                    ignore=shutil.ignore_patterns("__pycache__"))
    for p in [d, *d.rglob("*")]:
        os.chmod(p, 0o755)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sandbox\n"
            "try:\n"
            "    print('MODE', sandbox.resolve_containment()[0])\n"
            "except SystemExit as e:\n"
            "    print('REFUSED', e)\n")
    try:
        def run(**env):
            r = subprocess.run([py, "-I", "-c", code, str(d)], user=65534, group=65534, cwd=d,
                               env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True,
                               timeout=60)
            return r.stdout + r.stderr
        out = run()
        if "MODE pidns" in out or "MODE cgroup" in out:
            pytest.skip(f"this machine lets an unprivileged user contain processes: {out}")
        assert "REFUSED refusing to grade student code" in out, out
        assert "No PID namespace" in out and "unshare(CLONE_NEWPID)" in out
        assert "run the grader as root" in out and "AUTOGRADER_ALLOW_UNCONTAINED=1" in out
        assert "MODE none" in run(AUTOGRADER_ALLOW_UNCONTAINED="1")
    finally:
        shutil.rmtree(d, ignore_errors=True)


# --------------------------------------------------------------------------- the GPU (NVML)
def needs_nvml(test):   # a GPU test (`make test-gpu`), and NVML must answer there
    return pytest.mark.gpu(pytest.mark.skipif(not gpuwatch.available(),
                                              reason=gpuwatch.unavailable_reason()[:200])(test))


@needs_nvml
def test_nvml_names_the_submissions_processes_and_none_is_left():
    child = start([{"index": 1, "source": "def swiglu_interleaved(x, out):\n    pass\n"}],
                  simulated=False, gpu=0)
    try:
        load(child, timeout=120)
        assert child.request(120, cmd="probe").get("ok")
        mine = child.pids()
        procs = gpuwatch.processes(0, max_age=0)
        assert gpuwatch.unresolved(procs) == [], f"NVML PIDs not visible here: {gpuwatch.describe(procs)}"
        held = gpuwatch.held_by(mine, 0, max_age=0)
        assert [p.pid for p in held] == [child.init_pid()], (gpuwatch.describe(procs), mine)
        assert gpuwatch.foreign(0, mine) == []
        assert held[0].used_bytes is None or held[0].used_bytes > 0
    finally:
        child.close()
    time.sleep(1.0)
    assert child.gpu_leftovers() == [] and child.survivors() == []
    assert gpuwatch.processes(0, max_age=0) == []


@needs_nvml
def test_escaped_gpu_process_dies_with_its_submission():
    child = start(read_cells(THREATS / "escape_session.py"), simulated=False, gpu=0)
    folder = str(child.workdir)
    try:
        load(child, timeout=120)
        assert child.request(120, cmd="probe").get("ok")
        assert len(in_folder(folder)) >= 4
        left = closed_and_gone(child, folder)
        assert left == {}, left
        time.sleep(3.0)   # the escapee would start its GPU work now that the driver is gone
        assert gpuwatch.processes(0, max_age=0) == [], gpuwatch.describe(gpuwatch.processes(0))
    finally:
        kill_leftovers(folder)


@needs_nvml
def test_gpu_memory_budget_stops_the_memory_grab():
    free0, total = gpuwatch.memory(0)
    budget = 4 << 30
    child = start(read_cells(THREATS / "gpu_memory_grab.py"), simulated=False, gpu=0,
                  limits={"gpu_mem_bytes": budget})
    folder = str(child.workdir)
    try:
        t0 = time.monotonic()
        with pytest.raises(ChildError) as err:
            load(child, timeout=120)
        assert time.monotonic() - t0 < 60
        assert err.value.reason == "memory"
        assert "GPU memory budget exceeded" in err.value.detail
        assert f"over its budget of {budget >> 20} MiB" in err.value.detail
        assert "do not reserve GPU memory at import time" in err.value.detail
    finally:
        child.close()
        kill_leftovers(folder)
    time.sleep(1.0)
    free1, _ = gpuwatch.memory(0)
    assert free1 > free0 - (1 << 30), "the GPU memory was not given back"


def test_without_nvml_the_watch_says_so_and_never_reports_a_clean_gpu():
    """On a machine with no NVIDIA driver, NVML is unavailable with its reason, and asking
    for the GPU's processes raises that reason instead of answering 'none'."""
    if gpuwatch.available():
        procs = gpuwatch.processes(max_age=0)
        assert all(p.used_bytes is None or p.used_bytes >= 0 for p in procs)
        assert gpuwatch.unavailable_reason() == "" and "driver" in gpuwatch.backend()
        return
    why = gpuwatch.unavailable_reason()
    assert "NVML is not available" in why and "libnvidia-ml.so.1" in why
    with pytest.raises(RuntimeError, match="NVML is not available"):
        gpuwatch.processes(0)
    with pytest.raises(RuntimeError, match="NVML is not available"):
        gpuwatch.foreign(0, set())


# --------------------------------------------------------------------------- a killed grader
# A stand-in for compute-sanitizer (grade --sanitize's wrapper): it starts a subreaper-like
# helper that leaves the session and ignores SIGTERM/SIGHUP (as the tool's
# TreeLauncherSubreaper outlived a SIGTERM of the grader on the H100), runs the driver, and
# after it hangs ignoring SIGTERM (a tool that never exits).
STAND_IN = """#!/bin/sh
{py} -c "import os, signal, time
os.setsid()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
time.sleep(600)" {token} &
"$@" &
trap '' TERM HUP
wait
sleep 600
"""

# the grader: a sandboxed child under the stand-in, loaded; then it waits to be killed
GRADER = """import sys, time
sys.path.insert(0, {repo!r})
import book  # noqa: F401
from autograder.sandbox import Child
child = Child(mode="student", functions={{"swiglu_interleaved": ["x", "out"]}},
              cells=[{{"index": 1, "source": "def swiglu_interleaved(x, out):\\n    pass"}}],
              simulated=True, wrap=[{script!r}], keep=[{wrapdir!r}], contain={contain!r},
              allow_uncontained=True)
ev = child.recv(120)
if ev.get("event") == "ready":
    ev = child.request(120, cmd="load")
print("AG-GRADER", ev.get("event"), child.workdir, flush=True)
time.sleep(600)
"""


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _alive_with(needles) -> dict[int, str]:
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                with open(f"/proc/{d}/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            cmd = _cmdline(int(d))
            if state not in ("Z", "X") and any(n in cmd for n in needles):
                out[int(d)] = cmd
    return out


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("contain", ["auto", "cgroup", "none"])
def test_a_killed_grader_leaves_no_process_of_a_wrapped_child(tmp_path, contain, sig):
    """grade --sanitize on the H100, killed by `timeout` (SIGTERM): compute-sanitizer and its
    subreaper outlived the grader. Here the grader (a process holding a Child under a stand-in
    wrapper whose helper leaves the session and ignores SIGTERM) is killed by SIGTERM (no
    handler: it dies at once, as a grader killed in any library call would) or SIGKILL, in
    every containment mode; nothing of the child may be left."""
    sup = _containment()
    if contain == "cgroup" and not sup.get("cgroup"):
        pytest.skip(f"no cgroup v2 here: {sup.get('why_not_cgroup')}")
    if contain == "auto" and sup.get("best") == "none":
        pytest.skip("no containment here: the 'none' case covers this machine")
    token = f"ag-stray-{os.getpid()}-{tmp_path.name}"
    wrapdir = tmp_path / "wrap"
    wrapdir.mkdir()
    script = wrapdir / "stand-in-sanitizer"
    script.write_text(STAND_IN.format(py=sys.executable, token=token))
    script.chmod(0o755)
    for p in (tmp_path, wrapdir, script):
        p.chmod(p.stat().st_mode | 0o055)
    prog = tmp_path / "grader.py"
    prog.write_text(GRADER.format(repo=str(REPO), script=str(script), wrapdir=str(wrapdir),
                                  contain=contain))
    env = dict(os.environ, BOOK_SIMULATOR="1")
    grader = subprocess.Popen([sys.executable, str(prog)], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=env, text=True)
    folder = None
    try:
        said = []
        for line in grader.stdout:   # book's announcement first, then the grader's line
            said.append(line)
            if line.startswith("AG-GRADER"):
                break
        assert said and said[-1].startswith("AG-GRADER loaded "), "".join(said)[-3000:]
        folder = said[-1].split()[2]
        needles = [token, str(script), folder]
        deadline = time.monotonic() + 10
        while len(_alive_with(needles)) < 3 and time.monotonic() < deadline:
            time.sleep(0.1)
        before = _alive_with(needles)
        # the stray helper, the stand-in and the driver (and launcher/init) are running
        assert any(token in c for c in before.values()), before
        assert len(before) >= 3, before
        grader.send_signal(sig)
        grader.wait(timeout=30)
        deadline = time.monotonic() + 5
        left = _alive_with(needles)
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = _alive_with(needles)
        assert left == {}, f"processes of the wrapped child outlived the grader: {left}"
    finally:
        if grader.poll() is None:
            grader.kill()
            grader.wait()
        for pid in _alive_with([token, str(script)] + ([folder] if folder else [])):
            try:
                os.kill(pid, signal.SIGKILL)   # what this test started and was left behind
            except OSError:
                pass
        if folder:
            shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------- under a wrapper
# compute-sanitizer finds the program it watches through a Unix socket in the abstract
# namespace, which belongs to the network namespace: on the H100 a driver that made its own
# network namespace was never found ("No attachable process found"), and in a PID namespace
# that shows the host's /proc, cuInit failed under the tool
# (records/sanitizer/sandbox_diag_h100.json). So under a wrapper the launcher makes the network
# namespace around the wrapper and always mounts a fresh /proc. Real namespaces here; the
# stand-in wrapper says which network namespace it is in, and so does the submission.
NS_WRAPPER = '#!/bin/sh\necho "AG-WRAPPER net=$(readlink /proc/self/ns/net)"\n"$@"\n'
NS_CELL = ('import os\n'
           'print("AG-STUDENT net=" + os.readlink("/proc/self/ns/net"),\n'
           '      "own_proc=" + str(int(os.readlink("/proc/self")) == os.getpid()), flush=True)\n'
           'def swiglu_interleaved(x, out):\n    pass\n')


def _said(text: str, who: str) -> dict:
    line = next((ln for ln in text.splitlines() if ln.startswith(f"AG-{who} ")), None)
    assert line is not None, f"no AG-{who} line in the child's output:\n{text[-2000:]}"
    return dict(kv.split("=", 1) for kv in line.split()[1:])


@needs_containment
@pytest.mark.parametrize("isolate,wrapped", [(True, True), (False, True), (True, False)],
                         ids=["isolated+wrapped", "not-isolated+wrapped", "isolated+plain"])
def test_a_wrapped_submission_shares_the_wrappers_network_namespace_and_no_other(
        tmp_path, isolate, wrapped):
    """Isolated and wrapped: the submission is in the wrapper's network namespace, which is
    not the grader's, and keeps its mount namespace, hidden paths and uid drop. Not isolated:
    the grader's namespace (nothing was asked), but a /proc of its own PID namespace still.
    Isolated and not wrapped: a network namespace of its own, as before."""
    wrapdir = tmp_path / "wrap"
    wrapdir.mkdir()
    script = wrapdir / "stand-in-sanitizer"
    script.write_text(NS_WRAPPER)
    script.chmod(0o755)
    for p in (tmp_path, wrapdir, script):
        p.chmod(p.stat().st_mode | 0o055)
    child = Child(mode="student", functions=LAB2, cells=[{"index": 1, "source": NS_CELL}],
                  simulated=True, isolate=isolate,
                  wrap=[str(script)] if wrapped else None, keep=[str(wrapdir)])
    try:
        ev = child.recv(120)
        if ev.get("event") == "ready":
            ev = child.request(120, cmd="load")
        assert ev.get("event") == "loaded", (ev, child.output_text()[-2000:])
        child.send(cmd="exit")
        child.proc.wait(timeout=60)
        out = child.output_text()
    finally:
        child.close()
    grader_net = os.readlink("/proc/self/ns/net")
    student = _said(out, "STUDENT")
    assert student["own_proc"] == "True"
    iso = ev.get("isolation") or {}
    if wrapped:
        assert _said(out, "WRAPPER")["net"] == student["net"]
    if isolate:
        assert student["net"] != grader_net
        assert iso.get("net") and iso.get("mount") and iso.get("hidden", 0) > 0, iso
        assert iso.get("uid_drop") == (os.getuid() == 0 and can_drop_uid()), iso
        assert ("network namespace made by the launcher around compute-sanitizer" in
                iso.get("notes", [])) == wrapped, iso
    else:
        assert student["net"] == grader_net
