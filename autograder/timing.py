"""The grader's side of replay: copying a recording out of a sandboxed child, and the handle
on the trusted replay process of one GPU (autograder/replay.py).

The recording is read from the child's folder without following links, regular files only,
each size-capped; it is copied into a folder of the grader's own before anything uses it.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_RECORDING_BYTES = 3 << 30


class RecordingError(Exception):
    """The child's recording is missing, malformed or too large (message for feedback)."""


def copy_recording(child_workdir: Path, name: str, dest: Path) -> Path:
    src = Path(child_workdir) / Path(str(name)).name
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        raise RecordingError(f"the recording of your launches is missing ({e.strerror})")
    total = 0
    try:
        for entry in os.listdir(fd):
            if "/" in entry or entry.startswith("."):
                continue
            f = os.open(entry, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=fd)
            try:
                st = os.fstat(f)
                if not stat.S_ISREG(st.st_mode):
                    continue
                total += st.st_size
                if total > MAX_RECORDING_BYTES:
                    raise RecordingError("the recording of your launches is larger than 3 GiB")
                with os.fdopen(f, "rb", closefd=False) as fin, open(dest / entry, "wb") as fout:
                    shutil.copyfileobj(fin, fout, 1 << 20)
            finally:
                os.close(f)
    finally:
        os.close(fd)
    try:
        rec = json.loads((dest / "launches.json").read_text())
        if not isinstance(rec.get("launches"), list):
            raise ValueError("no list of launches")
    except (OSError, ValueError) as e:
        raise RecordingError(f"the recording of your launches is unreadable ({e})")
    return dest


def recording_summary(folder: Path) -> dict:
    rec = json.loads((Path(folder) / "launches.json").read_text())
    return {"launches": len(rec["launches"]), "kernels": sorted({L.get("entry") or L.get("code", ["", "", "?"])[2]
                                                                  for L in rec["launches"]})[:8],
            "grids": [[L["grid"], L["block"]] for L in rec["launches"][:8]],
            "scratch_bytes": sum(int(s["size"]) for s in rec["scratch"]), "error": rec.get("error")}


class ReplayServer:
    """One trusted replay process per GPU, started on first use and again after a CUDA error or
    a hang (the process group is killed; its inputs are rebuilt)."""

    def __init__(self, gpu: int, lab: str, cases: list, log):
        self.gpu, self.lab, self.cases, self.log = gpu, lab, cases, log
        self.proc = None
        self.device = None
        self.pid = None

    def start(self, timeout=600):
        env = dict(os.environ)
        env["CUDA_VISIBLE_DEVICES"] = str(self.gpu)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        self._err = tempfile.TemporaryFile(mode="w+")   # a file: a chatty library never blocks it
        self.proc = subprocess.Popen([sys.executable, "-m", "autograder.replay"], cwd=REPO, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     start_new_session=True, text=True, bufsize=1)
        self.pid = self.proc.pid
        r = self.request(timeout, cmd="setup", lab=self.lab, cases=self.cases, nvml_gpu=self.gpu)
        if not r.get("ok"):
            raise RuntimeError(f"the replay process could not set up: {r.get('message')}")
        self.device = r.get("device")
        self.log(kind="replay_server", gpu=self.gpu, pid=self.pid, device=self.device,
                 seconds=r.get("seconds"))

    def request(self, timeout: float, **msg) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            if msg.get("cmd") == "setup":
                raise RuntimeError("the replay process is not running")
            self.start()
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            self.kill()
            return {"ok": False, "error": "died", "message": "the replay process died", "fatal": True}
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return {"ok": False, "error": "timeout", "fatal": True,
                        "message": f"the replayed launches did not finish within {timeout:.0f} s"}
            r, _, _ = select.select([fd], [], [], min(left, 1.0))
            if r:
                line = fd.readline()
                if not line:
                    err = self._stderr_tail()
                    self.kill()
                    return {"ok": False, "error": "died", "fatal": True,
                            "message": f"the replay process died: {err}"}
                out = json.loads(line)
                if out.get("fatal"):
                    self.kill()
                return out

    def _stderr_tail(self) -> str:
        try:
            self.proc.wait(timeout=5)
            self._err.seek(0)
            return self._err.read()[-1500:]
        except Exception:  # noqa: BLE001
            return ""

    def kill(self):
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"cmd": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                pass
        self.kill()
