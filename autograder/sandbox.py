"""Run one submission in its own process, never in the grader's, and end every process it starts.

The parent side of the sandbox: a fresh temporary working directory, a scrubbed
environment, resource limits (CPU time, file size, open files, core dumps; address space
in the simulator, where CUDA's huge virtual reservations are not in play), output drained
into capped buffers (a flood of printing costs nothing), and a JSON-lines protocol on two
private pipes with a deadline on every answer. Namespaces, hidden paths and the privilege
drop happen inside the child, in the trusted prologue of driver.py, before any student code.

Containment: every process a submission starts dies with it. This file, run as a script
(the trusted launcher), makes a PID namespace whose init is the driver; killing the init
kills every process in the namespace, whatever session, process group or parent it has
moved to, and no process in it can see or signal another submission's processes. Where a
PID namespace cannot be made the launcher puts the submission in a cgroup (v2) killed as a
whole; where neither exists a student submission is refused, with the cause and the fix,
unless the instructor says to go on without (``allow_uncontained`` or
AUTOGRADER_ALLOW_UNCONTAINED=1); then the launcher stays as the subreaper of the tree and kills
everything below it when the driver ends.

A killed grader leaves nothing either: the launcher gets SIGTERM when the grader dies
(PR_SET_PDEATHSIG; SIGTERM, SIGKILL or a crash alike) and kills its tree whole (the
namespace's init, the cgroup, or every process below it) before it exits; under a wrapper
(grade --sanitize: compute-sanitizer, which starts a subreaper of its own) the namespace's init
also dies with the launcher. ``python -m autograder grade`` stopped by SIGTERM, SIGINT or
SIGHUP kills every open child itself first (``kill_open_children``).

Budgets: a watchdog thread per child meters what the submission's processes hold, summed
over all of them (host memory from /proc; GPU memory from NVML, see gpuwatch.py), and stops
the submission the moment one is over budget, saying which, by how much and what to do.

For the grader:
- ``resolve_containment()`` once at the start of a run: raises ContainmentUnavailable (a
  SystemExit with cause and fix) where student code cannot be contained; ``Child`` raises it too.
- ``Child(..., limits={"mem_bytes": .., "gpu_mem_bytes": ..})``: the budgets (GPU default:
  GPU_BUDGET_FRACTION of the device). Over budget: ChildError("memory", message).
- ``child.pids()`` (host PIDs now), ``child.pids_seen``, ``child.init_pid()``.
- after ``child.close()``: ``child.survivors()`` ([] when containment held) and, where
  ``gpuwatch.available()``, ``child.gpu_leftovers()`` ([] when none of its processes holds a
  GPU); ``child.report()`` for measurements.jsonl.
- before a timing window: ``gpuwatch.foreign(gpu, open_children_pids())`` ([] when no process
  outside the grader's open children holds that GPU).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUTPUT_CAP = 64 * 1024          # bytes of stdout+stderr kept per submission (head)
NOBODY = 65534
# Each child gets a uid of its own from this range (as root): a per-user limit (RLIMIT_NPROC
# counts every process and thread of a uid, whatever its namespace) that one submission
# exhausts is then exhausted for it alone, not for every child running as `nobody`.
CHILD_UID_BASE, CHILD_UID_SPAN = 0x50000000, 1 << 24


class ChildError(Exception):
    """The child died, hung or broke the protocol; ``reason`` says which, for feedback."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


#: Modules of ``book.kernels`` that graded code may import: instructions, not solutions
#: (``tensorcore``: the inline-PTX ``mma.sync``/``ldmatrix``/``cp.async`` intrinsics and their
#: simulator versions, which a tensor-core lab builds on). Only these are copied into the
#: child's ``book/kernels/``; the driver's import blocker lets through what it finds there.
GRADED_KERNEL_MODULES = ("tensorcore",)


def _copy_trusted(dst: Path) -> None:
    """The driver, the input generator and the book library minus its kernels (but for
    GRADED_KERNEL_MODULES), data and widgets."""
    dst.mkdir(parents=True)
    shutil.copy(HERE / "driver.py", dst / "agdriver.py")
    shutil.copy(HERE / "sandbox.py", dst / "agsandbox.py")   # the launcher (its __main__)
    shutil.copy(HERE / "inputs.py", dst / "aginputs.py")
    book = REPO / "book"
    shutil.copytree(book, dst / "book", ignore=shutil.ignore_patterns(
        "kernels", "widgets", "data", "__pycache__", "*.json", "*.js", "*.css"))
    kernels = dst / "book" / "kernels"
    kernels.mkdir()
    (kernels / "__init__.py").write_text(
        '"""The instruction modules graded code may import (autograder/sandbox.py '
        'GRADED_KERNEL_MODULES); the course\'s kernels are not here."""\n')
    for name in GRADED_KERNEL_MODULES:
        shutil.copy(book / "kernels" / f"{name}.py", kernels / f"{name}.py")


# Top-level directories the child may see whole: the OS, its libraries and the GPU driver
# (/usr/local/nvidia, /usr/local/cuda live under /usr). Everything else (/root, /home, /work,
# /tmp, /opt, /srv, /content on Colab, ...) is hidden except the paths the child needs.
SYSTEM_DIRS = {"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "dev", "proc",
               "sys", "run", "var"}
MAX_HIDDEN = 4000


def _needed_paths(workdir: Path, keep=()) -> list[Path]:
    """What the child must read: its working directory, the interpreter and its packages
    (and ``keep``: a wrapper's installation, e.g. compute-sanitizer's)."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.__file__).parent, workdir,
             Path(sys.executable).parent, *map(Path, _extra_paths()), *map(Path, keep)}
    # both spellings: the path as the child will use it (through any symlink) and its target
    return sorted({q for p in paths if p.exists() for q in (Path(os.path.abspath(p)), p.resolve())})


def _hide_list(extra_hide, workdir: Path, keep=()) -> list[str]:
    """Every path outside SYSTEM_DIRS that is neither needed by the child nor a folder holding
    something needed, plus the caller's extra paths. A whitelist, not a list of known secrets:
    another checkout of the course, other submissions, the grader's output folder and the
    instructor's home directory are hidden wherever they lie."""
    keep = _needed_paths(workdir.resolve(), keep)
    out: list[str] = []

    def walk(folder: Path) -> None:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return
        for entry in entries:
            if len(out) >= MAX_HIDDEN:
                return
            if entry.is_symlink():
                continue  # its target is hidden (or kept) where it lives
            if folder == Path("/") and entry.name in SYSTEM_DIRS:
                continue
            if any(entry == k or entry in k.parents for k in keep):
                if not any(entry == k for k in keep):
                    walk(entry)  # holds something needed: hide its other entries
                continue
            out.append(str(entry))

    walk(Path("/"))
    for p in extra_hide:
        rp = Path(p).resolve()
        w = workdir.resolve()
        if rp.exists() and rp != w and rp not in w.parents and str(rp) not in out:
            out.append(str(rp))
    return out


def _extra_paths() -> list[str]:
    """sys.path of the grader minus the repository (so numpy/numba resolve as in the grader)."""
    repo = str(REPO)
    return [p for p in sys.path if p and os.path.isdir(p) and os.path.realpath(p) != os.path.realpath(repo)
            and not os.path.realpath(p).startswith(os.path.realpath(repo) + os.sep + "autograder")]


def _world_readable(path: str) -> bool:
    """Could an unprivileged uid read the interpreter here? (/root/.pyenv, say, it cannot)."""
    p = Path(path).resolve()
    for d in [p, *p.parents]:
        try:
            mode = d.stat().st_mode
        except OSError:
            return False
        if not mode & 0o001:
            return False
    return bool(p.stat().st_mode & 0o004)


def can_drop_uid() -> bool:
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.__file__), *_extra_paths()}
    return all(_world_readable(p) for p in paths if os.path.exists(p))


def scrubbed_env(workdir: Path, simulated: bool, gpu: int | None) -> dict:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        "NUMBA_CACHE_DIR": str(workdir / ".numba"),
        "NUMBA_NUM_THREADS": "1",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",   # CUDA's device i is NVML's device i (gpuwatch)
    }
    if simulated:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
        env["BOOK_SIMULATOR"] = "1"
    if gpu is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(gpu)
    for k in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "NUMBA_CUDA_DRIVER"):
        if k in os.environ and not simulated:
            env[k] = os.environ[k]
    return env


# --------------------------------------------------------------------------- containment
CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET = 0x00020000, 0x20000000, 0x40000000
PR_SET_CHILD_SUBREAPER = 36
ALLOW_ENV = "AUTOGRADER_ALLOW_UNCONTAINED"
_support: dict | None = None
_support_lock = threading.Lock()


class ContainmentUnavailable(SystemExit):
    """No way to make every process of a submission die with it: grading students here
    would let one of them leave a process behind that slows or robs the next ones. Raised
    (it stops the grading run) with the cause and the fix."""


def _probe_pidns() -> str:
    """'' when this process may make a PID namespace and fork into it, else why not."""
    code = ("import ctypes, os, sys\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            f"if libc.unshare({CLONE_NEWPID}) != 0:\n"
            "    sys.exit('unshare(CLONE_NEWPID): ' + os.strerror(ctypes.get_errno()))\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os._exit(0 if os.getpid() == 1 else 3)\n"
            "_, st = os.waitpid(pid, 0)\n"
            "sys.exit(0 if os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0 else 'fork into the namespace failed')\n")
    try:
        r = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"probe failed: {e}"
    return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["unknown error"])[-1]


def _cgroup2_dir() -> tuple[str | None, str]:
    """This process's cgroup-v2 directory if a child cgroup can be made and killed there."""
    try:
        rel = next(line.split("::", 1)[1].strip() for line in open("/proc/self/cgroup")
                   if line.startswith("0::"))
        mounts = [line.split() for line in open("/proc/self/mountinfo")]
    except (OSError, StopIteration):
        return None, "no cgroup v2 hierarchy for this process"
    for m in mounts:
        fstype = m[m.index("-") + 1] if "-" in m else ""
        if fstype == "cgroup2":
            d = os.path.join(m[4], rel.lstrip("/"))
            if not os.path.isdir(d):
                continue
            if not os.access(d, os.W_OK):
                return None, f"the cgroup {d} is not writable by uid {os.getuid()}"
            probe = os.path.join(d, f"ag-probe-{os.getpid()}")
            try:
                os.mkdir(probe)
            except OSError as e:
                return None, f"cannot make a cgroup under {d}: {e.strerror}"
            try:
                if not (os.path.exists(os.path.join(probe, "cgroup.kill"))
                        or os.path.exists(os.path.join(probe, "cgroup.freeze"))):
                    return None, f"cgroups under {d} have neither cgroup.kill nor cgroup.freeze (kernel too old)"
            finally:
                os.rmdir(probe)
            return d, ""
    return None, "no cgroup v2 file system is mounted"


def containment_support(refresh: bool = False) -> dict:
    """What this machine allows, probed once: {'pidns': bool, 'cgroup': dir or None,
    'why_not_pidns': str, 'why_not_cgroup': str, 'best': 'pidns'|'cgroup'|'none'}."""
    global _support
    with _support_lock:
        if _support is None or refresh:
            why_pid = _probe_pidns()
            cg, why_cg = _cgroup2_dir()
            _support = {"pidns": not why_pid, "why_not_pidns": why_pid, "cgroup": cg,
                        "why_not_cgroup": why_cg,
                        "best": "pidns" if not why_pid else ("cgroup" if cg else "none")}
        return dict(_support)


def refusal_message(support: dict) -> str:
    return ("refusing to grade student code: a process it starts could outlive its grading "
            "(a new session, a double fork or a spawned interpreter escape a process-group kill) "
            "and slow or rob the submissions graded after it. No PID namespace: "
            f"{support['why_not_pidns']}; no cgroup to kill as a whole: {support['why_not_cgroup']}. "
            "Fix: run the grader as root (or in a container with CAP_SYS_ADMIN, e.g. "
            "`docker run --cap-add SYS_ADMIN`), or give it a writable cgroup-v2 directory (e.g. "
            "`systemd-run --user --scope -p Delegate=yes python -m autograder grade ...`). To grade "
            f"anyway, knowing that, set {ALLOW_ENV}=1.")


def resolve_containment(contain: str = "auto", allow_uncontained: bool | None = None,
                        untrusted: bool = True) -> tuple[str, str]:
    """(mode, note). ``contain``: 'auto' (the strongest available), 'pidns', 'cgroup' or
    'none'. Untrusted code without containment raises ContainmentUnavailable unless allowed."""
    if allow_uncontained is None:
        allow_uncontained = os.environ.get(ALLOW_ENV, "") not in ("", "0")
    if contain == "none":
        return "none", "containment switched off by the caller"
    sup = containment_support()
    if contain == "auto":
        contain = sup["best"]
    elif not sup[contain]:
        raise ContainmentUnavailable(f"containment {contain!r} was asked for but is not available: "
                                     + sup["why_not_pidns" if contain == "pidns" else "why_not_cgroup"])
    if contain != "none":
        return contain, ""
    if untrusted and not allow_uncontained:
        raise ContainmentUnavailable(refusal_message(sup))
    return "none", ("no containment: processes the submission starts can outlive it ("
                    + sup["why_not_pidns"] + "; " + sup["why_not_cgroup"] + ")")


_cg_seq = [0]


def _new_cgroup(base: str) -> str:
    _cg_seq[0] += 1
    d = os.path.join(base, f"ag-{os.getpid()}-{_cg_seq[0]}-{time.monotonic_ns() % 10**9}")
    os.mkdir(d)
    return d


# --------------------------------------------------------------------------- process table
def _pid_ns(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None


def _all_pids() -> list[int]:
    return [int(d) for d in os.listdir("/proc") if d.isdigit()]


def _ppid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """Running or sleeping, not a zombie waiting to be reaped."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def pids_in_namespace(inode: int) -> set[int]:
    """Host PIDs of every process whose PID namespace is ``inode``."""
    return {p for p in _all_pids() if _pid_ns(p) == inode}


def descendants(root: int) -> set[int]:
    """``root`` and every process below it in the process tree (host PIDs)."""
    children: dict[int, list[int]] = {}
    for p in _all_pids():
        pp = _ppid(p)
        if pp is not None:
            children.setdefault(pp, []).append(p)
    out, todo = set(), [root]
    while todo:
        p = todo.pop()
        if p not in out:
            out.add(p)
            todo += children.get(p, [])
    return out


def process_info(pid: int) -> dict:
    info = {"pid": pid, "cmdline": "", "uid": None}
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            info["cmdline"] = f.read(300).replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    info["uid"] = int(line.split()[1])
    except OSError:
        pass
    return info


# --------------------------------------------------------------------------- budgets
def host_memory(pids) -> int:
    """Resident host memory of these processes, summed. One process: its RSS. Several: their
    proportional set sizes (a page shared by a fork counts once, split between them)."""
    pids = list(pids)
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for p in pids:
        got = None
        if len(pids) > 1:
            try:
                with open(f"/proc/{p}/smaps_rollup") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            got = int(line.split()[1]) * 1024
                            break
            except OSError:
                pass
        if got is None:
            try:
                with open(f"/proc/{p}/statm") as f:
                    got = int(f.read().split()[1]) * page
            except (OSError, IndexError, ValueError):
                got = 0
        total += got
    return total


def gpu_memory(pids) -> int:
    """Device memory held by these processes on any GPU, from NVML (gpuwatch)."""
    from autograder import gpuwatch

    return gpuwatch.used_by(pids)


class Budget:
    """A limit on what a submission's processes hold together. ``meter(pids) -> bytes``;
    the watchdog stops the submission the first time the sum is over ``limit``."""

    def __init__(self, name: str, limit: int, meter, advice: str, held: str = ""):
        self.name, self.limit, self.meter, self.advice = name, int(limit), meter, advice
        self.held = held    # how the meter counts, for the message ("resident", "(NVML)")
        self.peak = 0

    def over(self, pids) -> str | None:
        used = self.meter(pids)
        self.peak = max(self.peak, used)
        if used <= self.limit:
            return None
        return (f"{self.name} budget exceeded: the submission's {len(pids)} process(es) held "
                f"{used / 2**20:.0f} MiB{' ' + self.held if self.held else ''}, "
                f"{(used - self.limit) / 2**20:.0f} MiB over its budget of "
                f"{self.limit / 2**20:.0f} MiB. {self.advice}")


HOST_ADVICE = ("Allocate only the arrays your function needs, free large temporaries, and do not "
               "start other processes: every process your code starts counts against this budget.")
GPU_ADVICE = ("Allocate device arrays only for what your kernel needs, inside your function, and "
              "let them go when it returns; do not reserve GPU memory at import time. The other "
              "submissions graded on this GPU at the same time need the rest.")


def default_budgets(limits: dict, gpu: int | None, simulated: bool) -> list[Budget]:
    """Host memory always (limits['mem_bytes']); GPU memory where NVML answers and the child
    has a GPU (limits['gpu_mem_bytes'], default GPU_BUDGET_FRACTION of the device)."""
    budgets = [Budget("host memory", limits["mem_bytes"], host_memory, HOST_ADVICE, "resident")]
    if gpu is not None and not simulated:
        from autograder import gpuwatch

        if gpuwatch.available():
            cap = limits.get("gpu_mem_bytes")
            if cap is None:
                try:
                    cap = int(gpuwatch.memory(gpu)[1] * GPU_BUDGET_FRACTION)
                except Exception:  # NVML does not know this index: no GPU budget (report() shows)
                    return budgets
            budgets.append(Budget("GPU memory", cap, gpu_memory, GPU_ADVICE, "of device memory (NVML)"))
    return budgets


# --------------------------------------------------------------------------- storage
# Where a child may write: its working folder, /tmp and /dev/shm. As root the working folder
# is a tmpfs of its own (size and inode limits), mounted here where the grader reads it, and
# the driver binds its subfolders over /tmp and /dev/shm inside the child's mount namespace:
# the three share one limit, a full one is that submission's alone, and the grader can say
# what was written where, even after the child died.
PLACES = (("/tmp", ".tmp"), ("/dev/shm", ".shm"))
_swept: list = []
MNT_DETACH = 2


def _libc():
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def _mount_storage(path: Path, size: int, inodes: int) -> str:
    """'' when a tmpfs of ``size`` bytes and ``inodes`` files now backs ``path``, else why not."""
    import ctypes

    if os.getuid() != 0:
        return "the grader is not root: it cannot give a child a file system of its own"
    MS_NOSUID, MS_NODEV = 2, 4
    opts = f"size={size},nr_inodes={inodes},mode=0700".encode()
    libc = _libc()
    if libc.mount(b"tmpfs", str(path).encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts) != 0:
        return f"mount(tmpfs) failed: {os.strerror(ctypes.get_errno())}"
    return ""


def _unmount(path: Path) -> None:
    _libc().umount2(str(path).encode(), MNT_DETACH)


def sweep_stale_storage() -> list[str]:
    """Unmount the file systems of children whose grader is gone (killed before it could close
    them: they hold memory while mounted). A child's folder is named ag-<grader pid>-...; a
    living grader's are left alone. The folders unmounted."""
    if os.getuid() != 0:
        return []
    try:
        mounts = [line.split() for line in open("/proc/self/mountinfo")]
    except OSError:
        return []
    gone = []
    base = pids_cgroup_base()[0]   # and their pids cgroups (ag-<grader pid>-...)
    for name in os.listdir(base) if base else []:
        owner = name.split("-")[1] if name.startswith("ag-") and name.count("-") >= 2 else ""
        if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            _rmdir_cgroup(os.path.join(base, name), timeout=0)
    tmp = os.path.realpath(tempfile.gettempdir())
    for m in mounts:
        d = m[4]
        name = os.path.basename(d)
        if os.path.dirname(d) != tmp or not name.startswith("ag-") or name.count("-") < 2:
            continue
        owner = name.split("-")[1]
        if owner.isdigit() and int(owner) != os.getpid() and not os.path.exists(f"/proc/{owner}"):
            _unmount(Path(d))
            shutil.rmtree(d, ignore_errors=True)
            gone.append(d)
    return gone


def storage_use(workdir: Path) -> dict:
    """Bytes written to each place (allocated blocks, links not followed) and the files in all."""
    use = {"/tmp": 0, "/dev/shm": 0, "working folder": 0, "files": 0}
    sub = {name: place for place, name in PLACES}

    def walk(d: str, place: str) -> None:
        try:
            it = os.scandir(d)
        except OSError:
            return
        with it:
            for e in it:
                where = sub.get(e.name, place) if d == str(workdir) else place
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                use["files"] += 1
                if e.is_dir(follow_symlinks=False):
                    walk(e.path, where)
                else:
                    use[where] += st.st_blocks * 512

    walk(str(workdir), "working folder")
    return use


def storage_message(s: dict) -> str:
    """What a child that filled its storage is told: what it wrote where, and the limits."""
    mib = lambda b: f"{b / 2**20:.0f} MiB"  # noqa: E731
    wrote = ", ".join(f"{mib(s[p])} to {p}" for p in ("/tmp", "/dev/shm", "working folder") if s[p] >= 2**20)
    return (f"your code filled the space it may write to: it wrote {wrote or 'less than 1 MiB'} "
            f"({s['files']:,} files and folders); the limit is {mib(s['limit_bytes'])} and "
            f"{s['limit_files']:,} files for the working folder, /tmp and /dev/shm together. A write "
            "past it fails with 'No space left on device' (errno 28). Write only the files you "
            "need and delete temporaries: nothing in this lab needs files. Other submissions have "
            "space of their own and were not affected.")


# --------------------------------------------------------------------------- process count
# Each child's processes and threads are counted in a pids cgroup of its own (pids.max): the
# whole tree, whatever its uid (root included, where no uid drop is possible), and one
# submission that reaches its limit takes nothing from the others.
_pids_base: list = []


def pids_cgroup_base() -> tuple[str | None, str]:
    """(directory under which this process may make pids-limited cgroups, '') or (None, why not)."""
    if _pids_base:
        return _pids_base[0]
    got: tuple[str | None, str] = (None, "no pids cgroup controller this grader may use")
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
        mounts = [line.split() for line in open("/proc/self/mountinfo")]
    except OSError:
        lines, mounts = [], []
    v1 = next((x.split(":", 2)[2] for x in lines if x.split(":")[1:2] and "pids" in x.split(":")[1].split(",")), None)
    for m in mounts:
        fstype = m[m.index("-") + 1] if "-" in m else ""
        if v1 is not None and fstype == "cgroup" and "pids" in m[-1].split(","):
            d = os.path.join(m[4], v1.lstrip("/"))
            if os.access(d, os.W_OK):
                got = (d, "")
                break
        if fstype == "cgroup2":
            rel = next((x.split("::", 1)[1] for x in lines if x.startswith("0::")), None)
            d = os.path.join(m[4], (rel or "").lstrip("/"))
            try:
                if rel is not None and "pids" in open(os.path.join(d, "cgroup.subtree_control")).read().split() \
                        and os.access(d, os.W_OK):
                    got = (d, "")
                    break
            except OSError:
                pass
    _pids_base.append(got)
    return got


def _pids_cgroup(limit: int) -> tuple[str | None, str]:
    base, why = pids_cgroup_base()
    if base is None:
        return None, why
    try:
        d = _new_cgroup(base)
    except OSError as e:
        return None, f"cannot make a pids cgroup under {base}: {e.strerror}"
    try:
        with open(os.path.join(d, "pids.max"), "w") as f:
            f.write(str(limit))
    except OSError as e:
        os.rmdir(d)
        return None, f"cannot set pids.max under {base}: {e.strerror}"
    return d, ""


def _rmdir_cgroup(path: str, timeout: float = 3.0) -> None:
    """Remove an emptied cgroup; its last tasks may take a moment to leave it (EBUSY)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)


def tasks_refused(cgroup: str | None) -> int:
    """How many times a fork or a new thread of this child was refused at pids.max."""
    try:
        with open(os.path.join(cgroup, "pids.events")) as f:
            return int(dict(line.split() for line in f).get("max", 0))
    except (OSError, TypeError, ValueError):
        return 0


def tasks_message(limit: int, refused: int) -> str:
    return (f"your code tried to run more than {limit:,} processes and threads at once (the limit "
            f"for one submission; {refused:,} refused): a fork or a new thread past it fails "
            "(\"can't start new thread\", EAGAIN). Start no processes and only the threads you "
            "need. Other submissions have limits of their own and were not affected.")


def _child_uid(taken) -> int:
    import secrets

    while True:
        uid = CHILD_UID_BASE + secrets.randbelow(CHILD_UID_SPAN)
        if uid not in taken:
            return uid


GPU_BUDGET_FRACTION = 0.25   # default per submission: 3 workers per GPU and the reference fit
WATCH_S = 0.2
_open_children: "weakref.WeakSet[Child]" = weakref.WeakSet()


def open_children_pids() -> set[int]:
    """Host PIDs of every child of this grader not yet closed. Before a timing window,
    ``gpuwatch.foreign(gpu, open_children_pids())`` lists the processes on the GPU that no
    open submission accounts for (an escapee, another user's job): NVML lists every process
    holding a context, so the grader's other children, idle under its GPU lock, must count
    as known, and the timed one among them."""
    out: set[int] = set()
    for c in list(_open_children):
        try:
            out |= c.pids()
        except OSError:
            pass
    return out


def kill_open_children(why: str) -> int:
    """Kill every child of this grader not yet closed, each as a whole (its namespace, cgroup
    or tree); the number killed. For a grader stopped by a signal: its launchers would tear
    their trees down anyway once it is gone (PR_SET_PDEATHSIG), this does it first and at once."""
    n = 0
    for c in list(_open_children):
        try:
            c.kill(why)
            n += 1
        except Exception:   # one that cannot be killed must not spare the others
            pass
    for c in list(_open_children):   # and what the kernel would not free by itself
        try:
            c.release()
        except Exception:
            pass
    return n


class Child:
    """One sandboxed child process speaking the driver's protocol.

    ``limits``: cpu_s, mem_bytes (host memory budget, summed over the submission's processes),
    gpu_mem_bytes (GPU memory budget, the same, through NVML), fsize_bytes, nofile.
    ``contain``: 'auto' | 'pidns' | 'cgroup' | 'none' (see resolve_containment); a student
    child with no containment available raises ContainmentUnavailable unless
    ``allow_uncontained`` (or AUTOGRADER_ALLOW_UNCONTAINED=1). ``budgets`` replaces the
    default budgets (a list of Budget)."""

    def __init__(self, *, mode: str, functions: dict, cells: list | None, simulated: bool,
                 gpu: int | None = None, limits: dict | None = None, hide=(), isolate: bool = True,
                 drop_uid: bool = True, contain: str = "auto", allow_uncontained: bool | None = None,
                 budgets: list | None = None, wrap: list | None = None, wrap_env: dict | None = None,
                 keep=(), fault: str | None = None):
        # tasks: processes and threads (the simulator runs a thread per simulated CUDA thread)
        self.limits = {"cpu_s": 900, "mem_bytes": 6 << 30, "fsize_bytes": 2 << 30, "nofile": 1024,
                       "disk_bytes": 4 << 30, "files": 65536, "tasks": 2048}
        self.limits.update(limits or {})
        self.simulated = simulated
        self.gpu = gpu
        untrusted = mode == "student"
        self.containment, self.containment_note = resolve_containment(
            contain, allow_uncontained if isolate else True, untrusted)
        self.budgets = budgets if budgets is not None else default_budgets(self.limits, gpu, simulated)
        if not _swept:   # once per grader: what graders killed before us left mounted
            _swept.append(sweep_stale_storage())
        self.workdir = Path(tempfile.mkdtemp(prefix=f"ag-{os.getpid()}-"))   # (sweep_stale_storage)
        # its own size-limited file system (as root), holding /tmp and /dev/shm too (PLACES)
        self.storage_note = (_mount_storage(self.workdir, self.limits["disk_bytes"], self.limits["files"])
                             if isolate else "isolation disabled by the grader's options")
        self.storage_private = not self.storage_note
        self.storage: dict | None = None
        if self.storage_private:
            for _place, name in PLACES:
                (self.workdir / name).mkdir()
        trusted = self.workdir / "trusted"
        _copy_trusted(trusted)
        if cells is not None:
            (self.workdir / "cells.json").write_text(json.dumps(cells))
        self.cgroup = _new_cgroup(containment_support()["cgroup"]) if self.containment == "cgroup" else None
        self.pids_cgroup, self.pids_note = _pids_cgroup(self.limits["tasks"]) if untrusted else (None, "")
        if self.pids_cgroup and self.cgroup and os.path.exists(os.path.join(self.pids_cgroup, "cgroup.controllers")):
            # one cgroup-v2 home per process: the containment's, with the limit set there
            os.rmdir(self.pids_cgroup)
            self.pids_cgroup = None
            try:
                with open(os.path.join(self.cgroup, "pids.max"), "w") as f:
                    f.write(str(self.limits["tasks"]))
                self.pids_cgroup = self.cgroup
            except OSError as e:
                self.pids_note = f"cannot set pids.max on the containment cgroup: {e.strerror}"
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        root = os.getuid() == 0
        self.uid = (_child_uid({c.uid for c in list(_open_children)})
                    if (root and drop_uid and isolate and can_drop_uid()) else None)
        cfg = {
            "mode": mode, "functions": functions, "simulated": simulated,
            "workdir": str(self.workdir), "trusted_dir": str(trusted), "repo_root": str(REPO),
            "extra_paths": _extra_paths(), "cmd_fd": cmd_r, "reply_fd": rep_w,
            "isolate": isolate, "hide": _hide_list(hide, self.workdir, keep) if isolate else [],
            # RLIMIT_NPROC of the child's own uid: a little above the pids cgroup's limit, which
            # counts exactly and says so; where there is no such cgroup, this one binds
            "drop_uid": self.uid, "nproc": self.limits["tasks"] + 64,
            # under a wrapper (compute-sanitizer, outside the driver's mount namespace) /tmp and
            # /dev/shm stay the host's: the tool and its target may meet there
            "storage": {"private": self.storage_private, "places": [] if wrap else [list(p) for p in PLACES],
                        # what the child needs (its folder, the interpreter) put back where it lay
                        "keep": [str(p) for p in _needed_paths(self.workdir, keep)],
                        "size_bytes": self.limits["disk_bytes"], "files": self.limits["files"]},
            "fault": fault,   # the grader's test hook (AUTOGRADER_INJECT_FAULT), never the submission's
            # read by the launcher (this file run as a script) before it starts the driver
            "launch": {"contain": self.containment, "cgroup": self.cgroup, "grader_pid": os.getpid(),
                       "pids_cgroup": self.pids_cgroup if self.pids_cgroup != self.cgroup else None,
                       "driver": str(trusted / "agdriver.py"), "limits": self.limits,
                       # under a wrapper a fresh /proc always: in a PID namespace that shows
                       # the host's /proc, cuInit fails under compute-sanitizer (H100:
                       # CUDA_ERROR_OPERATING_SYSTEM, records/sanitizer/sandbox_diag_h100.json)
                       "fresh_proc": bool(isolate or wrap), "wrap": list(wrap or []),
                       "net_around_wrap": bool(isolate and wrap)},
        }
        (self.workdir / "config.json").write_text(json.dumps(cfg))
        if cfg["drop_uid"] is not None:
            for p in [self.workdir, *self.workdir.rglob("*")]:
                os.chown(p, self.uid, self.uid, follow_symlinks=False)
            os.chmod(self.workdir, 0o700)
        env = scrubbed_env(self.workdir, simulated, gpu)
        env.update(wrap_env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(trusted / "agsandbox.py"), str(self.workdir / "config.json")],
            cwd=self.workdir, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(cmd_r, rep_w), start_new_session=True)
        self._set_limits()
        os.close(cmd_r)
        os.close(rep_w)
        self._cmd = os.fdopen(cmd_w, "w", buffering=1)
        self._rep = rep_r
        self._buf = b""
        self.output = bytearray()
        self.output_total = 0
        self.killed_for = None
        self.breach: str | None = None
        self.pidns_inode: int | None = None
        self._init_pid: int | None = None
        self._init_fd: int | None = None
        self._ns_fd: int | None = None
        self.pids_seen: set[int] = {self.proc.pid}
        self._survivors: list[dict] | None = None
        self._gpu_leftovers: list | None = None
        self._closed = threading.Event()
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()
        self._watch = threading.Thread(target=self._watchdog, daemon=True)
        self._watch.start()
        _open_children.add(self)

    def _set_limits(self):
        """Also set from outside with prlimit(2) on the launcher, in case it had not yet
        (it sets them itself before it starts the driver)."""
        import resource

        lim, pid = self.limits, self.proc.pid
        try:
            resource.prlimit(pid, resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 5))
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (lim["fsize_bytes"],) * 2)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (lim["nofile"],) * 2)
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
            if self.simulated:  # CUDA reserves terabytes of virtual space: no address limit there
                resource.prlimit(pid, resource.RLIMIT_AS, (lim["mem_bytes"],) * 2)
        except (ProcessLookupError, OSError):
            pass  # died already: the protocol says so

    # -- which processes are this submission's
    def init_pid(self) -> int | None:
        """Host PID of the launcher's child: the namespace's init (pidns), the driver or its
        wrapper (cgroup, none: there the launcher stays as the tree's subreaper)."""
        if self._init_pid is None:
            try:
                with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                kids = [p for p in _all_pids() if _ppid(p) == self.proc.pid]
            if kids:
                self._init_pid = kids[0]
                # a pidfd signals this process and no other, even once its PID is reused
                try:
                    self._init_fd = os.pidfd_open(kids[0])
                except (AttributeError, OSError):
                    self._init_fd = None
                if self.containment == "pidns":
                    # holding the namespace open keeps its inode ours: a namespace made later
                    # for another submission cannot take the number while we match by it
                    try:
                        fd = os.open(f"/proc/{kids[0]}/ns/pid", os.O_RDONLY)
                    except OSError:
                        fd = None
                    if fd is not None:
                        ino = os.fstat(fd).st_ino
                        if ino != _pid_ns(os.getpid()):
                            self._ns_fd, self.pidns_inode = fd, ino
                        else:
                            os.close(fd)
        return self._init_pid

    def pids(self) -> set[int]:
        """Host PIDs of the submission's live processes (launcher included): match them to
        NVML's process list (gpuwatch) or to anything else that reports PIDs. After close():
        empty (what was left then is in survivors())."""
        if self._survivors is not None:
            return set()
        self.init_pid()
        if self.containment == "cgroup" and self.cgroup:
            try:
                with open(os.path.join(self.cgroup, "cgroup.procs")) as f:
                    got = {int(x) for x in f.read().split()}
            except (OSError, ValueError):
                got = set()
        elif self.containment == "pidns" and self.pidns_inode is not None:
            got = pids_in_namespace(self.pidns_inode)
        else:
            got = set()
        if self.proc.poll() is None:
            got.add(self.proc.pid)
        if self.containment == "none" and self.proc.poll() is None:   # (a reaped PID may be reused)
            got |= {p for p in descendants(self.proc.pid) if _alive(p)}
        got = {p for p in got if _alive(p)}
        self.pids_seen |= got
        return got

    # -- the watchdog: budgets, all the time (not only while a reply is awaited)
    def _watchdog(self):
        while not self._closed.wait(WATCH_S):
            if self.proc.poll() is not None and self.containment != "pidns":
                pass  # the launcher is gone; a cgroup or tree may still hold processes
            try:
                pids = self.pids()
            except OSError:
                continue
            if not pids:
                if self.proc.poll() is not None:
                    return
                continue
            for b in self.budgets:
                try:
                    why = b.over(pids)
                except Exception:  # a meter that fails (NVML hiccup) must not stop grading
                    why = None
                if why and self.breach is None:
                    self.breach = why
                    self.kill("memory")
                    return

    @property
    def rss_peak(self) -> int:
        return next((b.peak for b in self.budgets if b.name == "host memory"), 0)

    @property
    def gpu_mem_peak(self) -> int:
        return next((b.peak for b in self.budgets if b.name == "GPU memory"), 0)

    # -- output: keep the head, count the rest
    def _drain_output(self):
        f = self.proc.stdout
        while True:
            chunk = f.read1(65536) if hasattr(f, "read1") else f.read(65536)
            if not chunk:
                break
            self.output_total += len(chunk)
            room = OUTPUT_CAP - len(self.output)
            if room > 0:
                self.output += chunk[:room]

    def output_text(self) -> str:
        text = self.output.decode(errors="replace")
        if self.output_total > len(self.output):
            text += (f"\n[... output cut: {self.output_total - len(self.output)} more bytes "
                     f"({self.output_total} in all); the grader keeps the first {OUTPUT_CAP} bytes]")
        return text

    # -- protocol
    def _dead(self) -> ChildError:
        if self.breach:
            self.proc.wait(timeout=5) if self.proc.poll() is None else None
            return ChildError("memory", self.breach)
        return ChildError("died", self._death_reason())

    def send(self, **msg):
        if self.breach:
            raise self._dead()
        try:
            self._cmd.write(json.dumps(msg) + "\n")
            self._cmd.flush()
        except (BrokenPipeError, OSError):
            raise self._dead()

    def recv(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if self.breach:
                raise self._dead()
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill("timeout")
                raise ChildError("timeout", f"no answer within {timeout:.0f} s")
            r, _, _ = select.select([self._rep], [], [], min(left, 0.2))
            if r:
                chunk = os.read(self._rep, 1 << 20)
                if not chunk:
                    try:
                        self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                    raise self._dead()
                self._buf += chunk
                if len(self._buf) > 8 << 20:
                    self.kill("protocol")
                    raise ChildError("protocol", "the process wrote garbage on the grader's channel")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
            if not isinstance(msg, dict):
                raise ValueError("not an object")
            return msg
        except ValueError:
            self.kill("protocol")
            raise ChildError("protocol", "the process wrote garbage on the grader's channel")

    def request(self, timeout: float, **msg) -> dict:
        self.send(**msg)
        return self.recv(timeout)

    def _death_reason(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if rc < 0:
            sig = signal.Signals(-rc).name
            why = {"SIGXCPU": "CPU time limit reached", "SIGXFSZ": "file size limit reached",
                   "SIGSEGV": "segmentation fault", "SIGKILL": "killed",
                   "SIGABRT": "aborted"}.get(sig, sig)
            return f"the process died: {why} ({sig})"
        return f"the process exited with status {rc}"

    def kill(self, why: str = "") -> None:
        """Kill the submission as a whole: its PID namespace (by killing its init), or its
        cgroup, and the launcher's process group."""
        if self.killed_for is None:
            self.killed_for = why
        if self.containment == "none" and self.proc.poll() is None:
            # the launcher is the subreaper of the whole tree: kill all of it below the
            # launcher while the launcher still holds the orphans
            _kill_tree(self.proc.pid, timeout=2.0)
        if self.containment == "cgroup" and self.cgroup:
            _kill_cgroup(self.cgroup)
        init = self.init_pid()   # the init of the namespace: the kernel kills the rest
        try:
            if self._init_fd is not None:
                signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
            elif init and self.proc.poll() is None:   # its parent not reaped: the PID is still its
                os.kill(init, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except OSError:
            pass

    def read_npy(self, name: str, max_bytes: int = 4 << 30):
        """Load an array the child wrote, refusing links, FIFOs and oversized files."""
        import numpy as np

        path = self.workdir / Path(name).name
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            import stat
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                raise ValueError(f"{name} is not a regular file of sane size")
            with os.fdopen(fd, "rb", closefd=False) as f:
                return np.load(f, allow_pickle=False)
        finally:
            os.close(fd)


    def close(self) -> None:
        """Ask the driver to exit, then kill everything of the submission and confirm (in
        /proc) that nothing of it is left; what is left is killed again by PID and kept in
        ``survivors()`` for the grader's log."""
        if self._survivors is not None:
            return
        try:
            self.send(cmd="exit")
        except ChildError:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        try:
            self.pids()   # last look before the kill (records every PID it had)
        except OSError:
            pass
        self.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._closed.set()
        _open_children.discard(self)
        left = self._leftovers(timeout=3.0)
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._survivors = [process_info(p) for p in left]
        self._drain.join(timeout=2)
        self._watch.join(timeout=2)
        try:
            self._cmd.close()
        except OSError:
            pass
        try:
            os.close(self._rep)
        except OSError:
            pass
        self.tasks_refused = tasks_refused(self.pids_cgroup)
        for cg in {self.cgroup, self.pids_cgroup} - {None}:
            _rmdir_cgroup(cg)
        for fd in (self._init_fd, self._ns_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self.storage_private:   # what it wrote where, read before the folder goes
            self.storage = storage_use(self.workdir)
            st = os.statvfs(self.workdir)
            self.storage.update(limit_bytes=self.limits["disk_bytes"], limit_files=self.limits["files"],
                                full=st.f_bavail * st.f_frsize < (1 << 20) or st.f_favail < 16)
            # emptied while mounted: the namespaces of children started meanwhile hold copies of
            # this mount, and its pages are freed only with its files
            shutil.rmtree(self.workdir, ignore_errors=True)
            _unmount(self.workdir)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def release(self, timeout: float = 1.0) -> None:
        """After a kill by a stopped grader: its file system and cgroups, which outlive every
        process (the next run would sweep them, sweep_stale_storage)."""
        if self.storage_private:
            shutil.rmtree(self.workdir, ignore_errors=True)
            _unmount(self.workdir)
            shutil.rmtree(self.workdir, ignore_errors=True)
        for cg in {self.cgroup, self.pids_cgroup} - {None}:
            _rmdir_cgroup(cg, timeout)

    def _leftovers(self, timeout: float) -> list[int]:
        """Processes of the submission still alive after the kill (the kernel takes a moment
        to tear a namespace down): by namespace, cgroup, process tree, and any PID ever seen."""
        deadline = time.monotonic() + timeout
        while True:
            left = {p for p in self.pids_seen if _alive(p) and self._still_ours(p)}
            if self.containment == "none":   # orphans leave the tree: look for our directory
                left |= {p for p in _all_pids() if _alive(p) and self._still_ours(p)}
            try:
                left |= self.pids()
            except OSError:
                pass
            left.discard(os.getpid())
            if not left or time.monotonic() > deadline:
                return sorted(left)
            time.sleep(0.05)

    def _still_ours(self, pid: int) -> bool:
        """A PID seen earlier may have been reused by an unrelated process since."""
        if self.pidns_inode is not None:
            return _pid_ns(pid) == self.pidns_inode
        if self.cgroup:
            try:
                with open(f"/proc/{pid}/cgroup") as f:
                    return any(line.rstrip().endswith(os.path.basename(self.cgroup)) for line in f)
            except OSError:
                return False
        try:
            return os.readlink(f"/proc/{pid}/cwd").startswith(str(self.workdir))
        except OSError:  # not ours to read (another uid): not ours
            return False

    def survivors(self) -> list[dict]:
        """After close(): the processes of this submission that were still alive after the
        kill ({pid, cmdline, uid}); [] when containment held. Before close(): []."""
        return list(self._survivors or [])

    def gpu_leftovers(self) -> list:
        """After close(): NVML's compute processes (gpuwatch.GpuProcess) whose PID was one of
        this submission's; [] when none holds a GPU. Raises RuntimeError without NVML (call
        gpuwatch.available() first and say that the check was not made)."""
        from autograder import gpuwatch

        return gpuwatch.held_by(self.pids_seen, max_age=0)

    def report(self) -> dict:
        """What the sandbox knows about this submission, for measurements.jsonl."""
        return {"containment": self.containment, "containment_note": self.containment_note,
                "pid_namespace": self.pidns_inode, "pids_seen": len(self.pids_seen),
                "survivors": self.survivors(), "breach": self.breach, "uid": self.uid,
                "tasks": {"limit": self.limits["tasks"], "refused": getattr(self, "tasks_refused", 0)}
                if self.pids_cgroup else self.pids_note,
                "storage": self.storage if self.storage_private else self.storage_note,
                "budgets": {b.name: {"limit_mib": b.limit >> 20, "peak_mib": b.peak >> 20}
                            for b in self.budgets}}


def _kill_cgroup(path: str) -> None:
    try:
        with open(os.path.join(path, "cgroup.kill"), "w") as f:
            f.write("1")
        return
    except OSError:
        pass
    try:  # older kernels: freeze, kill every member, thaw
        with open(os.path.join(path, "cgroup.freeze"), "w") as f:
            f.write("1")
        for _ in range(10):
            with open(os.path.join(path, "cgroup.procs")) as f:
                procs = [int(x) for x in f.read().split()]
            if not procs:
                break
            for p in procs:
                try:
                    os.kill(p, signal.SIGKILL)
                except OSError:
                    pass
        with open(os.path.join(path, "cgroup.freeze"), "w") as f:
            f.write("0")
    except OSError:
        pass


# --------------------------------------------------------------------------- the launcher
def _launch(cfg_path: str) -> None:
    """Run in the child as ``python -I -B agsandbox.py config.json`` (this file, copied):
    limits first, then the containment, then the driver. In a PID namespace the driver is
    the namespace's init: when it dies (killed by the grader, or through PR_SET_PDEATHSIG
    when this launcher dies) the kernel kills every process in the namespace."""
    import ctypes
    import resource

    cfg = json.load(open(cfg_path))
    launch = cfg["launch"]
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG: die with the grader
    if os.getppid() != launch["grader_pid"]:
        os._exit(5)
    if launch.get("pids_cgroup"):   # its count of processes and threads, before anything forks
        try:
            with open(os.path.join(launch["pids_cgroup"], "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass   # the grader's report() then shows no refusals; the uid's RLIMIT_NPROC remains
    lim = launch["limits"]
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim["fsize_bytes"],) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim["nofile"],) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if cfg.get("simulated"):
            resource.setrlimit(resource.RLIMIT_AS, (lim["mem_bytes"],) * 2)
    except (OSError, ValueError):
        pass
    # ``wrap``: a program that runs the driver as its child (grade --sanitize: compute-sanitizer)
    wrap = launch.get("wrap") or []
    driver = [*wrap, sys.executable, "-I", "-B", launch["driver"], cfg_path]
    exe = wrap[0] if wrap else sys.executable

    def fatal(why: str) -> None:
        with os.fdopen(cfg["reply_fd"], "w") as f:
            f.write(json.dumps({"event": "fatal", "error": why}) + "\n")
        os._exit(4)

    mode = launch["contain"]
    if mode == "none":
        # no namespace, no cgroup: this launcher stays, as the subreaper of everything below
        # it (an orphan that left the session is re-parented here, not to the host's init),
        # so that its teardown can find and kill the whole tree
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    if mode == "cgroup":
        try:
            with open(os.path.join(launch["cgroup"], "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            fatal(f"the sandbox could not enter its cgroup {launch['cgroup']}: {e}")
    elif mode == "pidns" and libc.unshare(CLONE_NEWPID) != 0:
        fatal(f"the sandbox could not make a PID namespace: unshare(CLONE_NEWPID) failed "
              f"({os.strerror(ctypes.get_errno())})")
    alive_r, alive_w = os.pipe()   # closed by the kernel when this launcher dies, however
    pid = os.fork()
    if pid == 0:
        try:
            os.close(alive_w)
            if mode == "pidns" and launch.get("fresh_proc"):
                _fresh_proc(libc)
            if wrap and launch.get("net_around_wrap"):
                _net_around_wrapper(libc, fatal)
            if wrap and mode == "pidns":
                # the driver must not be the child of PID 1 (it takes that for "orphaned" and
                # exits), so the namespace's init stays this process and the wrapper is its child
                _init_for(libc, exe, driver, alive_r)
            os.execv(exe, driver)
        finally:
            os._exit(127)
    os.close(alive_r)
    # From here this launcher answers for the tree: if the grader dies (SIGTERM from
    # `timeout`, a SIGKILL, a crash) the kernel sends it SIGTERM (PR_SET_PDEATHSIG), and
    # it kills the tree whole before it goes. Without this a wrapper's tree (compute-
    # sanitizer and the subreaper it starts) outlived a killed grader on the H100: the
    # namespace's init had no parent-death signal, a cgroup nobody kills stays full.
    def teardown(signum, _frame):
        _teardown(mode, pid, launch.get("cgroup"))
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, teardown)
    libc.prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG, now with the teardown as its handler
    if os.getppid() != launch["grader_pid"]:   # the grader died before the line above
        teardown(signal.SIGTERM, None)
    for fd in (cfg["cmd_fd"], cfg["reply_fd"]):
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            got, status = os.waitpid(-1 if mode == "none" else pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(0)
        if got == pid:
            break   # (mode none: re-parented orphans are reaped here too)
    if mode == "none":   # the driver is gone: so is everything it left behind
        _kill_tree(os.getpid())
    if os.WIFSIGNALED(status):   # die the same way, so the grader's message names the signal
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _teardown(mode: str, pid: int, cgroup: str | None) -> None:
    """The launcher's last act when the grader is gone: kill the tree it answers for."""
    if mode == "pidns":   # the namespace's init: the kernel kills every process in it
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    elif mode == "none":
        _kill_tree(os.getpid())
    if mode == "cgroup" and cgroup:
        _kill_cgroup(cgroup)   # this launcher is in it too: last
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def _kill_tree(root: int, timeout: float = 5.0) -> None:
    """SIGKILL every process below ``root`` (not ``root``), again until none is left: a
    process whose parent is killed is re-parented to ``root`` when ``root`` is a subreaper
    (PR_SET_CHILD_SUBREAPER), so a new session or a double fork does not hide it. Reaps what
    it can when ``root`` is this process."""
    deadline = time.monotonic() + timeout
    while True:
        below = {p for p in descendants(root) if p != root and _alive(p)}
        for p in below:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass
        if root == os.getpid():
            while True:
                try:
                    if os.waitpid(-1, os.WNOHANG)[0] == 0:
                        break
                except ChildProcessError:
                    break
        if not below or time.monotonic() > deadline:
            return
        time.sleep(0.02)


def _init_for(libc, exe: str, argv: list, alive_r: int | None = None) -> None:
    """PID 1 of the namespace: start ``argv``, reap every orphan, exit as it exits. It dies
    with the launcher (PR_SET_PDEATHSIG), and with it every process in the namespace."""
    libc.prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG: a fork does not inherit the launcher's
    if alive_r is not None:   # the launcher died before the line above: its pipe is at EOF
        if select.select([alive_r], [], [], 0)[0]:
            os._exit(1)
        os.close(alive_r)
    pid = os.fork()
    if pid == 0:
        os.execv(exe, argv)
    while True:
        try:
            got, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
        if got == pid:
            os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _net_around_wrapper(libc, fatal) -> None:
    """A wrapped driver's network namespace, made here around the wrapper, not by the driver.
    compute-sanitizer reaches the program it watches over a Unix socket in the abstract
    namespace (NV_SANITIZER_INJECTION_TRANSPORT_TYPE=uds), which belongs to the network
    namespace: a driver that made its own could not be found by the tool ("No attachable
    process found" on the H100; tool and target in one new namespace attach,
    records/sanitizer/sandbox_diag_h100.json). The driver, which reads the same config flag
    (``net_around_wrap``; this launcher stops the child where it cannot make the namespace),
    then makes only its mount namespace; the submission is cut off from the network either
    way."""
    import ctypes

    if libc.unshare(CLONE_NEWNET) != 0:
        fatal("grade --sanitize: compute-sanitizer and the submission must share a network "
              "namespace (the tool finds its target through a Unix socket that lives in it), "
              f"and the sandbox could not make one around the tool: unshare(CLONE_NEWNET) "
              f"failed ({os.strerror(ctypes.get_errno())}). Run the grader as root, or "
              "grade without --sanitize")


def _fresh_proc(libc) -> None:
    """In the namespace's own mount namespace, a /proc that shows only the namespace: the
    submission cannot read another submission's command line, working directory or memory
    maps through /proc. Best effort: without it the PID namespace still contains everything."""
    MS_REC, MS_PRIVATE, MS_NOSUID, MS_NODEV, MS_NOEXEC = 16384, 1 << 18, 2, 4, 8
    if libc.unshare(CLONE_NEWNS) != 0:
        return
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)


if __name__ == "__main__":
    _launch(sys.argv[1])
