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

import json
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
@pytest.mark.parametrize("contain", ["auto", "cgroup", "uid"])
@pytest.mark.parametrize("which", ["escape_session fixture", "double fork and setsid at load"])
def test_nothing_a_submission_starts_outlives_it(which, contain):
    """In every containment: a PID namespace, a cgroup, and (Docker's default limits: neither
    exists) the child's own uid, whose every process the grader kills."""
    if contain in ("cgroup", "uid"):
        from autograder.sandbox import containment_support
        sup = containment_support()
        if not sup[contain]:
            pytest.skip(f"no {contain} containment to test the fallback with: {sup[f'why_not_{contain}']}")
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
    try:
        with pytest.raises(ChildError) as err:   # during the load (its helpers sleep 120 s)
            load(child, timeout=60)
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
              cells=[{{"index": 1, "source": {cell!r}}}],
              simulated=True, wrap=[{script!r}], keep=[{wrapdir!r}], contain={contain!r},
              allow_uncontained=True)
ev = child.recv(120)
if ev.get("event") == "ready":
    ev = child.request(120, cmd="load")
print("AG-GRADER", ev.get("event"), child.workdir, flush=True)
time.sleep(600)
"""


# what the killed grader's child leaves where every uid may write (under a wrapper its writes are
# not confined: /tmp and /dev/shm are the host's): files and a System V segment
LEAVES = """import ctypes, os
for place in ("/tmp", "/dev/shm"):
    with open(place + "/{token}-file", "w") as f:
        f.write("left")
ctypes.CDLL(None).shmget({key}, 4096, 0o1666)
def swiglu_interleaved(x, out):
    pass
"""


def _key(token: str) -> int:
    """A System V key of this test's own (from its token)."""
    import zlib

    return 0x40000000 | (zlib.crc32(token.encode()) & 0x3FFFFFFF)


def _sysv_keys(keys) -> list[str]:
    """Rows of /proc/sysvipc/* whose key is one of ``keys``."""
    out = []
    for kind in ("shm", "sem", "msg"):
        with open(f"/proc/sysvipc/{kind}") as f:
            out += [f"{kind} {row}" for row in f.read().splitlines()[1:] if int(row.split()[0]) in keys]
    return out


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
@pytest.mark.parametrize("contain", ["auto", "cgroup", "uid", "none"])
def test_a_killed_grader_leaves_no_process_of_a_wrapped_child(tmp_path, contain, sig):
    """grade --sanitize on the H100, killed by `timeout` (SIGTERM): compute-sanitizer and its
    subreaper outlived the grader. Here the grader (a process holding a Child under a stand-in
    wrapper whose helper leaves the session and ignores SIGTERM) is killed by SIGTERM (no
    handler: it dies at once, as a grader killed in any library call would) or SIGKILL, in
    every containment mode; nothing of the child may be left."""
    sup = _containment()
    if contain in ("cgroup", "uid") and not sup.get(contain):
        pytest.skip(f"no {contain} containment here: {sup.get(f'why_not_{contain}')}")
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
                                  contain=contain, cell=LEAVES.format(token=token, key=_key(token))))
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
        # and what the grader would have removed: the child's folder (its own file system,
        # as root) and its cgroups, all named after the dead grader (the launcher's teardown)
        from autograder.sandbox import pids_cgroup_base
        deadline = time.monotonic() + 5
        while os.path.exists(folder) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(folder), "the killed grader's child folder was left behind"
        bases = {pids_cgroup_base()[0], sup.get("cgroup")} - {None}
        cgroups = [n for b in bases for n in os.listdir(b) if n.startswith(f"ag-{grader.pid}-")]
        assert cgroups == [], cgroups
        # and what its uid left where every uid may write (under a wrapper /tmp and /dev/shm
        # are the host's): the launcher removed it by that uid
        if os.getuid() == 0:
            assert not [p for p in (f"/tmp/{token}-file", f"/dev/shm/{token}-file") if os.path.exists(p)]
            assert not _sysv_keys({_key(token)}), "its System V segment outlived the killed grader"
    finally:
        if grader.poll() is None:
            grader.kill()
            grader.wait()
        for p in (f"/tmp/{token}-file", f"/dev/shm/{token}-file"):
            Path(p).unlink(missing_ok=True)
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
    finally:
        child.close()   # joins the thread that drains its output: read the output after it
    out = child.output_text()
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


# --------------------------------------------------------------------------- never as root
# Student code never runs as root (issue 28): as root the grader gives every student child a
# uid of its own, with the grader's Python shared read-only (even where it lies under a folder
# other uids cannot enter, like pyenv's under /root 0700: a mount namespace opens the way),
# and the driver checks before it loads a line of the submission.
AS_WHOM = ('import os, glob, sys\n'
           'print("AG-STUDENT", "uids=" + ",".join(map(str, os.getresuid())), flush=True)\n'
           'for site in sorted({p for p in sys.path if p.endswith("site-packages")}):\n'
           '    try:\n'
           '        open(os.path.join(site, "zz_planted.pth"), "w").write("import os\\n")\n'
           '        print("AG-PLANTED", site, flush=True)\n'
           '    except OSError as e:\n'
           '        print("AG-REFUSED", site, e.errno, flush=True)\n'
           'def swiglu_interleaved(x, out):\n    pass\n')


@pytest.mark.skipif(os.getuid() != 0, reason="as root only: a non-root grader's children are no root")
@pytest.mark.parametrize("isolate", [True, False], ids=["isolated", "no-isolation"])
def test_a_student_child_of_a_root_grader_is_never_root(isolate):
    """With isolation and without it (`--no-isolation` skips namespaces and hidden paths, never
    the uid drop): the child's uids are its own, the grader's site-packages are read-only to it
    (a .pth planted there would run in the grader's next process), and its report says so."""
    from autograder.sandbox import CHILD_UID_BASE, CHILD_UID_SPAN, uid_drop_support

    if not uid_drop_support(_containment().get("mountns", False))[0]:
        pytest.skip(f"no uid drop here: {uid_drop_support(False)[1]}")
    child = start([{"index": 1, "source": AS_WHOM}], isolate=isolate)
    try:
        ev = load(child)
        assert ev.get("event") == "loaded" and not ev.get("cell_errors"), ev
        child.send(cmd="exit")
        child.proc.wait(timeout=60)
        iso = child.isolation(ev.get("isolation"))
    finally:
        child.close()   # joins the thread that drains its output: read the output after it
    out = child.output_text()
    uids = {int(u) for u in _said(out, "STUDENT")["uids"].split(",")}
    assert len(uids) == 1 and CHILD_UID_BASE <= uids.pop() < CHILD_UID_BASE + CHILD_UID_SPAN
    assert "AG-PLANTED" not in out and "AG-REFUSED" in out, out
    assert iso["uid_drop"] is True and iso["uid"] == child.uid
    assert not [m for m in iso["missing"] if m.startswith("a uid of its own")], iso["missing"]


def test_the_driver_refuses_to_run_student_code_that_could_act_as_root(tmp_path):
    """The driver's own check, before any line of a submission: started as a student child
    with no uid to drop to (the grader never starts one so), as root it stops with a fatal
    event and runs nothing; not as root it goes on. The real launcher and driver, copied as
    into a child, their settings and pipes as the grader makes them."""
    from autograder.sandbox import (DriverSettings, LaunchSettings, Limits, Storage, child_command,
                                    copy_trusted, entry_point)

    trusted = tmp_path / "trusted"
    copy_trusted(trusted)
    marker = tmp_path / "ran"
    (tmp_path / "cells.json").write_text(json.dumps([{"index": 1, "source": f"open({str(marker)!r}, 'w')"}]))
    cmd_r, cmd_w = os.pipe()
    rep_r, rep_w = os.pipe()
    from autograder.sandbox import grader_paths
    cfg = DriverSettings(
        mode="student", functions={}, simulated=True, workdir=str(tmp_path), trusted_dir=str(trusted),
        extra_paths=grader_paths(), cmd_fd=cmd_r, reply_fd=rep_w, isolate=False, hide=(),
        drop_uid=None, nproc=4096,
        storage=Storage(private=False, places=(), keep=(), size_bytes=1 << 30, files=1000),
        launch=LaunchSettings(contain="none", cgroup=None, grader_pid=os.getpid(), pids_cgroup=None,
                              entry=str(entry_point(trusted)), limits=Limits(), fresh_proc=False,
                              wrap=(), net_around_wrap=False))
    (tmp_path / "config.json").write_text(cfg.to_json())
    p = subprocess.Popen(child_command(trusted, "launcher", tmp_path / "config.json"),
                         cwd=tmp_path, pass_fds=(cmd_r, rep_w),
                         env={"PATH": "/usr/bin:/bin", "NUMBA_ENABLE_CUDASIM": "1",
                              "BOOK_SIMULATOR": "1", "HOME": str(tmp_path)},
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    os.close(cmd_r)
    os.close(rep_w)
    with os.fdopen(cmd_w, "w") as cmd, os.fdopen(rep_r) as rep:
        first = json.loads(rep.readline() or "{}")
        if first.get("event") == "ready":
            cmd.write(json.dumps({"cmd": "load"}) + "\n")
            cmd.flush()
            loaded = json.loads(rep.readline() or "{}")
            cmd.write(json.dumps({"cmd": "exit"}) + "\n")
            cmd.flush()
        p.wait(timeout=120)
    if os.getuid() == 0:
        assert first.get("event") == "fatal", (first, p.stdout.read()[-2000:])
        assert "refused to run student code as root" in first["error"], first
        assert not marker.exists()
    else:
        assert first.get("event") == "ready" and loaded.get("event") == "loaded", (first, loaded)
        assert marker.exists()


def test_the_network_filter_refuses_every_socket_but_a_unix_one():
    """Where no network namespace can be made (Docker's default seccomp profile refuses
    unshare), the driver cuts the network with a seccomp filter: no socket of the internet's
    families or netlink, in the process, its threads and what it starts; Unix sockets (which
    CUDA and Python use) still work. Real filter, real sockets."""
    from autograder.sandbox import seccomp

    if seccomp.supported():
        pytest.skip(seccomp.supported())
    code = ("import socket, subprocess, sys, threading\n"
            f"sys.path.insert(0, {str(REPO)!r})\n"
            "from autograder.sandbox import seccomp\n"
            "assert seccomp.deny_network() == ''\n"
            "def tries():\n"
            "    out = []\n"
            "    for fam, kind in ((socket.AF_INET, socket.SOCK_STREAM), (socket.AF_INET6, socket.SOCK_DGRAM),\n"
            "                      (socket.AF_NETLINK, socket.SOCK_RAW), (socket.AF_UNIX, socket.SOCK_STREAM)):\n"
            "        try:\n"
            "            socket.socket(fam, kind).close(); out.append('ok')\n"
            "        except OSError as e:\n"
            "            out.append(e.errno)\n"
            "    return out\n"
            "got = [tries()]\n"
            "t = threading.Thread(target=lambda: got.append(tries())); t.start(); t.join()\n"
            "sub = subprocess.run([sys.executable, '-c', 'import socket; socket.socket()'], capture_output=True, text=True)\n"
            "print(got, 'PermissionError' in sub.stderr)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    import errno as E
    assert r.stdout.strip() == str([[E.EACCES, E.EACCES, E.EACCES, "ok"]] * 2) + " True", r.stdout



def test_a_root_grader_that_cannot_give_a_uid_refuses_and_says_why():
    """Under Docker's default limits (tests/grader/docker_default.py: no mount namespace to
    share the grader's Python in) with a Python other uids cannot reach (pyenv's, under /root
    0700), no child can be given a uid of its own: student code is refused, naming the folder
    and the fix, even with AUTOGRADER_ALLOW_UNCONTAINED=1 (it would have run as root)."""
    from autograder.sandbox import reachable

    closed = reachable(sys.base_prefix)
    if not closed:
        pytest.skip(f"the grader's Python ({sys.base_prefix}) is open to every uid here")
    code = ("import book\n"
            "from autograder.sandbox import Child, ContainmentUnavailable\n"
            "try:\n"
            "    Child(mode='student', functions={}, cells=[], simulated=True)\n"
            "    print('STARTED')\n"
            "except ContainmentUnavailable as e:\n"
            "    print('REFUSED', e)\n")
    helper = Path(__file__).with_name("docker_default.py")
    r = subprocess.run([sys.executable, str(helper), sys.executable, "-c", code], cwd=REPO,
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(REPO), BOOK_SIMULATOR="1",
                                AUTOGRADER_ALLOW_UNCONTAINED="1"))
    if r.returncode == 77:
        pytest.skip(r.stderr.strip())
    assert "REFUSED refusing to run student code as root" in r.stdout, r.stdout + r.stderr
    assert f"is closed to other users at {closed}" in r.stdout and "Fix: make the interpreter" in r.stdout


# --------------------------------------------------------------------------- what outlives a child
# Hidden cases stay hidden (issue 41): a child whose /tmp, /dev/shm or System V IPC are shared
# with other children (no mount or IPC namespace, as under Docker's default limits; /tmp under
# compute-sanitizer) wrote the hidden cases there, and the kernel proof's child read them back.
# Its writes are now confined to its own folders (Landlock) and it gets no System V IPC
# (seccomp); where either cannot be done, what its uid left is removed when it ends.
WRITES_EVERYWHERE = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
TOKEN = {token!r}
said = {{}}
def attempt(name, fn):
    try:
        said[name] = fn()
    except OSError as e:
        said[name] = e.errno
def write(path):
    with open(path, "w") as f:
        f.write("hidden")
    os.chmod(path, 0o666)
    return "ok"
def many(place):
    os.makedirs(place + "/" + TOKEN + "-dir", exist_ok=True)
    for i in range(500):
        write(place + "/" + TOKEN + "-dir/" + str(i))
    return "ok"
for place in ("/tmp", "/dev/shm", "/var/tmp"):
    attempt(place, lambda: write(place + "/" + TOKEN))
attempt("/tmp many", lambda: many("/tmp"))
attempt("own folder", lambda: write(TOKEN))
for kind, call, args in (("shm", libc.shmget, (4096,)), ("sem", libc.semget, (1,)), ("msg", libc.msgget, ())):
    rc = call({key} + len(said), *args, 0o1666)
    said[kind] = "ok" if rc >= 0 else ctypes.get_errno()
print("AG-WROTE", sorted(said.items()), flush=True)
def swiglu_interleaved(x, out):
    pass
'''
EVERYWHERE = ("/tmp", "/dev/shm", "/var/tmp", "/tmp many")


def _wrote(child, wait_s: float = 20.0) -> dict:
    """What the cell printed on its AG-WROTE line: the child's output is drained by a thread
    of the grader's, so the line can arrive a moment after the child said it had loaded (seen
    on the 2-core CI machine under load)."""
    import time

    deadline = time.monotonic() + wait_s
    while True:
        line = next((ln for ln in child.output_text().splitlines() if ln.startswith("AG-WROTE ")), None)
        if line is not None or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert line is not None, child.output_text()[-2000:]
    return dict(eval(line[len("AG-WROTE "):]))   # the test's own print: a list of pairs


def _of_uid(uid: int) -> list[str]:
    """Entries of ``uid`` in the places every uid may write (and below them)."""
    from autograder.sandbox import shared_places

    out = []
    for place in shared_places():
        for dirpath, dirs, files in os.walk(place):
            for name in dirs + files:
                p = os.path.join(dirpath, name)
                try:
                    if os.lstat(p).st_uid == uid:
                        out.append(p)
                except OSError:
                    pass
            dirs[:] = [d for d in dirs if os.lstat(os.path.join(dirpath, d)).st_mode & 0o003 == 0o003]
    return out


needs_root_uid = pytest.mark.skipif(os.getuid() != 0, reason="a uid of the child's own needs a root grader")


def _landlock() -> str:
    from autograder.sandbox import landlock_abi

    return landlock_abi()[1]


@needs_root_uid
@pytest.mark.parametrize("how", ["no namespaces, not confined", "under a wrapper"])
def test_what_a_childs_uid_left_where_every_uid_may_write_is_removed_when_it_ends(tmp_path, how):
    """A child that shares /tmp, /dev/shm, /var/tmp and System V IPC with the machine (no
    namespaces, its writes not confined: a kernel without Landlock; or under compute-sanitizer's
    stand-in, where /tmp stays the host's) writes files, a folder of 500, and System V shared
    memory, a semaphore set and a message queue, mode 666: once it is closed none of it is left,
    and its report says what was removed."""
    from autograder.sandbox import ipc_objects

    token = f"ag-left-{os.getpid()}-{tmp_path.name}"
    cell = WRITES_EVERYWHERE.format(token=token, key=_key(token))
    if how.startswith("no namespaces"):
        kw = {"isolate": False, "contain": "uid", "confine": False}
    else:   # a stand-in for compute-sanitizer: it runs the driver as its child
        wrapdir = tmp_path / "wrap"
        wrapdir.mkdir()
        script = wrapdir / "stand-in-sanitizer"
        script.write_text('#!/bin/sh\n"$@"\n')
        for p in (tmp_path, wrapdir, script):
            p.chmod(0o755)
        kw = {"wrap": [str(script)], "keep": [str(wrapdir)]}
    child = start([{"index": 1, "source": cell}], **kw)
    try:
        ev = load(child)
        assert ev.get("event") == "loaded" and not ev.get("cell_errors"), (ev, child.output_text()[-2000:])
        time.sleep(0.3)
        wrote = _wrote(child)
        uid = child.uid
        assert all(wrote[p] == "ok" for p in ("/tmp", "/dev/shm", "/var/tmp", "/tmp many")), wrote
        assert wrote["shm"] == wrote["sem"] == wrote["msg"] == "ok" or how == "under a wrapper", wrote
        assert _of_uid(uid), "the child wrote nothing where every uid may write"
        iso = child.isolation(ev.get("isolation"))
    finally:
        child.close()
    assert _of_uid(uid) == [], _of_uid(uid)
    assert ipc_objects([uid]) == []
    left = child.report()["left_behind"]
    assert sum(v for k, v in left["files"].items() if k != "failed") >= 4 and not left["files"]["failed"], left
    assert not left["ipc"]["failed"], left
    missing = " | ".join(iso["missing"])
    assert "are removed by its uid when it ends" in missing, missing


@needs_root_uid
@pytest.mark.skipif(bool(_landlock()), reason=f"no Landlock here: {_landlock()}")
@pytest.mark.parametrize("how", ["namespaces", "no namespaces"])
def test_a_childs_writes_are_confined_to_its_own_folders(tmp_path, how):
    """With namespaces (its own /tmp and /dev/shm; /var/tmp is the host's) and without (all
    three the host's, and System V IPC too): it may write its own folders only, never a place
    another child could read; with no IPC namespace of its own it gets no System V object.
    Its report says so, and that nothing of it outlives it."""
    token = f"ag-confined-{os.getpid()}-{tmp_path.name}"
    cell = WRITES_EVERYWHERE.format(token=token, key=_key(token))
    kw = {} if how == "namespaces" else {"isolate": False, "contain": "uid"}
    child = start([{"index": 1, "source": cell}], **kw)
    try:
        ev = load(child)
        assert ev.get("event") == "loaded" and not ev.get("cell_errors"), (ev, child.output_text()[-2000:])
        wrote = _wrote(child)
        iso = child.isolation(ev.get("isolation"))
        uid = child.uid
    finally:
        child.close()
    import errno as E

    assert wrote["own folder"] == "ok" and wrote["/var/tmp"] == E.EACCES, wrote
    if how == "namespaces":   # its own /tmp and /dev/shm, and IPC namespace
        assert wrote["/tmp"] == wrote["/dev/shm"] == "ok" and wrote["shm"] == "ok", wrote
        assert iso["ipc_objects"] == "an IPC namespace of its own", iso
    else:
        assert wrote["/tmp"] == wrote["/dev/shm"] == wrote["/tmp many"] == E.EACCES, wrote
        assert wrote["shm"] == wrote["sem"] == wrote["msg"] == E.EPERM, wrote
        assert iso["ipc_objects"].startswith("refused (seccomp)"), iso
    assert iso["writes"].startswith("only beneath ") and "(Landlock)" in iso["writes"], iso
    assert iso["outlives"] == [] and not [m for m in iso["missing"] if "removed by its uid" in m], iso
    assert _of_uid(uid) == []


# --------------------------------------------------------------------------- graders side by side
# Two graders in different PID namespaces on one /tmp (two containers sharing it, a CI runner):
# a grader took the other's folders for those of a dead grader (its PID was not in /proc there)
# and removed them; a `grade` run died in Child.close. Folders are now held by a lock their
# grader holds while it lives.
GRADER_A = """import sys
sys.path.insert(0, {repo!r})
import book  # noqa: F401
from autograder.sandbox import Child
child = Child(mode="student", functions={{"swiglu_interleaved": ["x", "out"]}},
              cells=[{{"index": 1, "source": "def swiglu_interleaved(x, out):\\n    pass"}}],
              simulated=True)
ev = child.recv(120)
ev = child.request(120, cmd="load") if ev.get("event") == "ready" else ev
print("AG-A", ev.get("event"), child.workdir, flush=True)
sys.stdin.readline()   # while the other grader sweeps
print("AG-A ping", child.request(60, cmd="ping").get("ok"), child.workdir.exists(), flush=True)
child.close()
print("AG-A closed", flush=True)
"""
DEAD_C = """import sys, time
sys.path.insert(0, {repo!r})
from autograder.sandbox import new_folder
print("AG-C", new_folder(), flush=True)
time.sleep(600)
"""
SWEEPER_B = """import sys
sys.path.insert(0, {repo!r})
import book  # noqa: F401
from autograder.sandbox import Child, sweep_stale_storage
print("AG-B swept", sweep_stale_storage(), flush=True)
child = Child(mode="student", functions={{}}, cells=[], simulated=True)
child.close()
print("AG-B closed", flush=True)
"""


def _in_pid_namespace(code: str, first: str = "", **kw) -> subprocess.Popen:
    """``code`` run by Python as PID 2 of a PID namespace of its own (its shell is PID 1; not
    PID 1 itself, which every namespace has), or later where ``first`` runs before it, with a
    /proc of that namespace; the namespace dies with the process returned."""
    return subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc",
                             "sh", "-c", f'{first}"{sys.executable}" -c "$0"; echo ended', code],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, BOOK_SIMULATOR="1"), **kw)


def _line(proc, prefix: str) -> str:
    said = []
    for line in proc.stdout:
        said.append(line)
        if line.startswith(prefix):
            return line.strip()
    raise AssertionError(f"no {prefix!r} line:\n" + "".join(said)[-3000:])


@pytest.mark.skipif(os.getuid() != 0 or shutil.which("unshare") is None,
                    reason="PID namespaces of their own need root and util-linux's unshare")
def test_two_graders_in_different_pid_namespaces_keep_each_others_folders():
    """Grader A (PID 2 of its namespace) holds a child; grader C (PID 2 of another) made a
    folder and was killed; grader B (PID 3 of a third, with no PID 2) sweeps and grades beside
    them: C's folder is removed (no grader holds it), A's is not (its lock held, its own
    tmpfs mounted in A's mount namespace only), and A's child still answers and closes."""
    a = _in_pid_namespace(GRADER_A.format(repo=str(REPO)), stdin=subprocess.PIPE)
    c = _in_pid_namespace(DEAD_C.format(repo=str(REPO)))
    try:
        said = _line(a, "AG-A ")
        assert said.split()[1] == "loaded", said
        folder_a = Path(said.split()[2])
        folder_c = Path(_line(c, "AG-C ").split()[1])
        assert folder_a.name.startswith("ag-2-") and folder_c.name.startswith("ag-2-")
        c.kill()   # the whole namespace: its PID 1 goes, the kernel kills the rest
        c.wait(timeout=30)
        # B is PID 3 of its namespace, where no PID 2 is: by PIDs it took A's and C's folders
        # for a dead grader's, both
        b = _in_pid_namespace(SWEEPER_B.format(repo=str(REPO)), first="/bin/true; ")
        out_b, _ = b.communicate(timeout=300)
        assert "AG-B closed" in out_b, out_b[-3000:]
        swept = next(ln for ln in out_b.splitlines() if ln.startswith("AG-B swept"))
        assert str(folder_c) in swept and str(folder_a) not in swept, swept
        assert folder_a.exists() and not folder_c.exists()
        a.stdin.write("go\n")
        a.stdin.flush()
        assert _line(a, "AG-A ping") == "AG-A ping True True"
        assert _line(a, "AG-A closed")
        a.wait(timeout=60)
        assert not folder_a.exists()
    finally:
        for p in (a, c):
            if p.poll() is None:
                p.kill()
                p.wait()


CLAIMER = """import os, shutil, sys, tempfile
sys.path.insert(0, {repo!r})
from autograder.sandbox import let_go, new_folder, uid_lock
with uid_lock(exclusive=False):   # as a Child gives its child a uid
    print("AG-A claimed", flush=True)
    sys.stdin.readline()
    folder = new_folder()
    os.chown(folder, {uid}, {uid})
scratch = os.path.join(tempfile.gettempdir(), "ag-test-scratch-{uid}")
open(scratch, "w").close()   # what its child, with no mount namespace, writes to /tmp
os.chown(scratch, {uid}, {uid})
print("AG-A ready", folder, scratch, flush=True)
sys.stdin.readline()
let_go(folder)
shutil.rmtree(folder)
os.unlink(scratch)
"""
# a sweep that stops after it has read what is held, until the test says go
SLOW_SWEEPER = """import os, sys, time
sys.path.insert(0, {repo!r})
import autograder.sandbox.storage as storage   # its own name for remove_left_by, paused
remove = storage.remove_left_by
def paused(*a, **kw):
    print("AG-B read", flush=True)
    while not os.path.exists({go!r}):
        time.sleep(0.05)
    return remove(*a, **kw)
storage.remove_left_by = paused
print("AG-B swept", storage.sweep_stale_storage(), flush=True)
"""


@pytest.mark.skipif(os.getuid() != 0, reason="child uids are given and swept by a root grader only")
def test_a_sweep_never_takes_a_child_given_its_uid_while_it_read(tmp_path):
    """Grader A gives a child a uid (its folder made, held and chowned; the child's file in
    /tmp) while grader B sweeps what uids no grader holds left. B read the held uids and the
    graders' folders before A's folder existed and removed after: it took A's folder and the
    child's file for a dead grader's (CI, 2026-11-29: a control run's trusted copy vanished
    while it was copied). The claim and the sweep exclude each other (storage.uid_lock)."""
    from queue import Empty, Queue
    from threading import Thread

    from autograder.sandbox import CHILD_UID_BASE, CHILD_UID_SPAN, uids_in_use

    uid = next(u for u in range(CHILD_UID_BASE + CHILD_UID_SPAN - 1, CHILD_UID_BASE, -1)
               if u not in uids_in_use())
    go = tmp_path / "go"
    a = subprocess.Popen([sys.executable, "-c", CLAIMER.format(repo=str(REPO), uid=uid)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    b = None
    try:
        assert _line(a, "AG-A claimed")
        b = subprocess.Popen([sys.executable, "-c", SLOW_SWEEPER.format(repo=str(REPO), go=str(go))],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        said: Queue = Queue()
        reader = Thread(target=lambda: [said.put(ln) for ln in b.stdout], daemon=True)
        reader.start()
        early = []
        try:   # unlocked, B reads within this while A is still choosing (it did, in CI)
            while True:
                early.append(said.get(timeout=3))
        except Empty:
            pass
        assert not any(ln.startswith("AG-B read") for ln in early), early
        a.stdin.write("go\n")
        a.stdin.flush()
        _, _, folder, scratch = _line(a, "AG-A ready").split()
        go.touch()
        b.wait(timeout=120)
        reader.join(timeout=30)
        out = "".join(early)
        while not said.empty():
            out += said.get()
        assert "AG-B swept" in out, out
        assert os.path.isdir(folder) and os.path.exists(scratch), out
        a.stdin.write("end\n")
        a.stdin.flush()
        a.wait(timeout=60)
        assert not os.path.exists(folder)
    finally:
        for p in (a, b):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()


@pytest.mark.skipif(os.getuid() != 0, reason="child uids are given and swept by a root grader only")
def test_a_sweep_does_not_wait_for_ever_on_a_grader_stopped_mid_claim():
    """A grader stopped while it gives a child its uid holds the claim; the next grader's sweep
    waits SWEEP_WAIT_S for it, then leaves the uids' files to a later sweep and says so (it
    grades on: a sweep is cleaning up, not a condition of grading)."""
    a = subprocess.Popen([sys.executable, "-c", CLAIMER.format(repo=str(REPO), uid=0)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True)
    try:
        assert _line(a, "AG-A claimed")
        code = (f"import sys, time\nsys.path.insert(0, {str(REPO)!r})\n"
                "import autograder.sandbox.storage as storage\n"
                "storage.SWEEP_WAIT_S = 1.0\n"
                "t = time.monotonic()\n"
                "gone = storage.sweep_stale_storage()\n"
                "print(round(time.monotonic() - t), gone)\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        said = r.stdout.strip().splitlines()[-1]
        assert "the next sweep will" in said and int(said.split()[0]) < 30, said
    finally:
        a.kill()
        a.wait()
