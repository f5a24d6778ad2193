"""The trusted replay process of each GPU (autograder/replay.py), seen from the grader: started
on first use, asked one JSON line at a time with a deadline, killed and started again after a
CUDA error or a hang. The judge's kernel proof and the timer share the run's processes, each
used under its GPU's lock."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from .sandbox import trusted_command

REPO = Path(__file__).resolve().parent.parent


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
        self._err = tempfile.TemporaryFile(mode="w+")   # a file: a chatty library never blocks it
        # `python -I`: the repository and the instructor's PYTHONPATH (carried wheels), given
        # explicitly; nothing else from the environment, the user's site or the folder
        path = [str(REPO), *env.get("PYTHONPATH", "").split(os.pathsep)]
        self.proc = subprocess.Popen(trusted_command("autograder.replay", path=path), cwd=REPO, env=env,
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
        except Exception:
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
            except Exception:
                pass
        self.kill()


class ReplayServers:
    """The run's replay processes, one per GPU, each started on first use and used under its
    GPU's lock (the judge's kernel proof and the timer share them)."""

    def __init__(self, lab: str, cases, log, gpus: int):
        # ``cases``: () -> the timing shape's input sets, asked for when a process first starts
        # (a lab without kernels has none, and never starts one)
        self.lab, self.cases, self.log = lab, cases, log
        self.servers: dict[int, ReplayServer] = {}
        self.locks = [threading.Lock() for _ in range(max(1, gpus))]

    def lock(self, gpu: int) -> threading.Lock:
        return self.locks[gpu]

    def get(self, gpu: int) -> ReplayServer:
        """The trusted replay process of one GPU (autograder/replay.py), started on first use."""
        if gpu not in self.servers:
            srv = ReplayServer(gpu, self.lab, self.cases(), self.log)
            srv.start()
            self.servers[gpu] = srv
        return self.servers[gpu]

    def close(self):
        for srv in self.servers.values():
            srv.close()

    def kill(self):
        """At once (a signal stops the grader): no goodbye to the processes."""
        for srv in list(self.servers.values()):
            try:
                srv.kill()
            except Exception:
                pass
