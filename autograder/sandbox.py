"""Run one submission in its own process, never in the grader's.

The parent side of the sandbox: a fresh temporary working directory, a scrubbed
environment, resource limits (CPU time, file size, open files, core dumps; address space
in the simulator, where CUDA's huge virtual reservations are not in play; a resident-memory
watchdog everywhere), its own process group (a hang or a fork is killed as a group), output
drained into capped buffers (a flood of printing costs nothing), and a JSON-lines protocol
on two private pipes with a deadline on every answer. Namespaces, hidden paths and the
privilege drop happen inside the child, in the trusted prologue of driver.py, before any
student code runs.
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
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUTPUT_CAP = 64 * 1024          # bytes of stdout+stderr kept per submission (head)
NOBODY = 65534


class ChildError(Exception):
    """The child died, hung or broke the protocol; ``reason`` says which, for feedback."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _copy_trusted(dst: Path) -> None:
    """The driver, the input generator and the book library minus its kernels, data and widgets."""
    dst.mkdir(parents=True)
    shutil.copy(HERE / "driver.py", dst / "agdriver.py")
    shutil.copy(HERE / "inputs.py", dst / "aginputs.py")
    book = REPO / "book"
    shutil.copytree(book, dst / "book", ignore=shutil.ignore_patterns(
        "kernels", "widgets", "data", "__pycache__", "*.json", "*.js", "*.css"))


# Top-level directories the child may see whole: the OS, its libraries and the GPU driver
# (/usr/local/nvidia, /usr/local/cuda live under /usr). Everything else (/root, /home, /work,
# /tmp, /opt, /srv, /content on Colab, ...) is hidden except the paths the child needs.
SYSTEM_DIRS = {"usr", "lib", "lib32", "lib64", "libx32", "bin", "sbin", "etc", "dev", "proc",
               "sys", "run", "var"}
MAX_HIDDEN = 4000


def _needed_paths(workdir: Path) -> list[Path]:
    """What the child must read: its working directory, the interpreter and its packages."""
    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(os.__file__).parent, workdir,
             Path(sys.executable).parent, *map(Path, _extra_paths())}
    # both spellings: the path as the child will use it (through any symlink) and its target
    return sorted({q for p in paths if p.exists() for q in (Path(os.path.abspath(p)), p.resolve())})


def _hide_list(extra_hide, workdir: Path) -> list[str]:
    """Every path outside SYSTEM_DIRS that is neither needed by the child nor a folder holding
    something needed, plus the caller's extra paths. A whitelist, not a list of known secrets:
    another checkout of the course, other submissions, the grader's output folder and the
    instructor's home directory are hidden wherever they lie."""
    keep = _needed_paths(workdir.resolve())
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


class Child:
    """One sandboxed child process speaking the driver's protocol."""

    def __init__(self, *, mode: str, functions: dict, cells: list | None, simulated: bool,
                 gpu: int | None = None, limits: dict | None = None, hide=(), isolate: bool = True,
                 drop_uid: bool = True):
        self.limits = {"cpu_s": 900, "mem_bytes": 6 << 30, "fsize_bytes": 2 << 30, "nofile": 1024}
        self.limits.update(limits or {})
        self.simulated = simulated
        self.workdir = Path(tempfile.mkdtemp(prefix="ag-"))
        trusted = self.workdir / "trusted"
        _copy_trusted(trusted)
        if cells is not None:
            (self.workdir / "cells.json").write_text(json.dumps(cells))
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        root = os.getuid() == 0
        cfg = {
            "mode": mode, "functions": functions, "simulated": simulated,
            "workdir": str(self.workdir), "trusted_dir": str(trusted), "repo_root": str(REPO),
            "extra_paths": _extra_paths(), "cmd_fd": cmd_r, "reply_fd": rep_w,
            "isolate": isolate, "hide": _hide_list(hide, self.workdir) if isolate else [],
            "drop_uid": NOBODY if (root and drop_uid and isolate and can_drop_uid()) else None, "nproc": 512,
        }
        (self.workdir / "config.json").write_text(json.dumps(cfg))
        if cfg["drop_uid"] is not None:
            for p in [self.workdir, *self.workdir.rglob("*")]:
                os.chown(p, NOBODY, NOBODY, follow_symlinks=False)
            os.chmod(self.workdir, 0o700)
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-B", str(trusted / "agdriver.py"), str(self.workdir / "config.json")],
            cwd=self.workdir, env=scrubbed_env(self.workdir, simulated, gpu),
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
        self.rss_peak = 0
        self.killed_for = None
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()

    def _set_limits(self):
        """Limits set from outside with prlimit(2) (preexec_fn is unsafe in a threaded
        grader); the child spends its first second importing, long before student code."""
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

    def _rss(self) -> int:
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    # -- protocol
    def send(self, **msg):
        try:
            self._cmd.write(json.dumps(msg) + "\n")
            self._cmd.flush()
        except (BrokenPipeError, OSError):
            raise ChildError("died", self._death_reason())

    def recv(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill("timeout")
                raise ChildError("timeout", f"no answer within {timeout:.0f} s")
            r, _, _ = select.select([self._rep], [], [], min(left, 0.2))
            rss = self._rss()
            self.rss_peak = max(self.rss_peak, rss)
            if rss > self.limits["mem_bytes"]:
                self.kill("memory")
                raise ChildError("memory", f"resident memory {rss >> 20} MiB over the limit "
                                           f"{self.limits['mem_bytes'] >> 20} MiB")
            if r:
                chunk = os.read(self._rep, 1 << 20)
                if not chunk:
                    self.proc.wait(timeout=5)
                    raise ChildError("died", self._death_reason())
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
        if self.killed_for is None:
            self.killed_for = why
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
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
        try:
            self.send(cmd="exit")
        except ChildError:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._drain.join(timeout=2)
        for f in (self._cmd,):
            try:
                f.close()
            except OSError:
                pass
        try:
            os.close(self._rep)
        except OSError:
            pass
        shutil.rmtree(self.workdir, ignore_errors=True)
