"""The protocol between the grader and its child: JSON lines on the two private pipes the
grader gives the child (``DriverSettings.cmd_fd``: its commands; ``reply_fd``: the child's
events and replies). Standard library only: the driver opens it before anything else.

The child's events: ``ready`` (Python, Numba, the course library and the CUDA context are up,
no student code has run), ``loaded`` (the cells ran), ``launch`` (a simulated launch and its
threads, so the grader's deadline grows with it), ``reply`` (one command answered) and
``fatal`` (the child stops; ``stage`` says where, before any of the submission's code when it
is ``sandbox``, ``import`` or ``cuda_init``).
"""

from __future__ import annotations

import json
import os

CUDA_INIT_FAILED = "CUDA initialisation failed before any of your code ran"


class Channel:
    """The child's end of the protocol."""

    def __init__(self, cmd_fd: int, reply_fd: int):
        self._reply = os.fdopen(reply_fd, "w", buffering=1)
        self._cmds = os.fdopen(cmd_fd, "r")

    def reply(self, **kw) -> None:
        self._reply.write(json.dumps(kw, default=str) + "\n")
        self._reply.flush()

    def fatal(self, stage: str, error: str, status: int = 3) -> None:
        """Say why the child stops, and stop it (no cleanup: the grader kills what is left)."""
        self.reply(event="fatal", stage=stage, error=error)
        os._exit(status)

    def command(self) -> dict | None:
        """The next command; None when the grader closed its end."""
        line = self._cmds.readline()
        return json.loads(line) if line else None

    def commands(self):
        """The commands, one after another, until the grader closes its end."""
        for line in self._cmds:
            yield json.loads(line)


def cuda_init_failure(e: BaseException) -> dict:
    """The ``fatal`` event of a child whose CUDA context could not be made, before any of the
    submission's code ran (the driver, cuInit and the primary context: what failed on the
    H100 beside a disk filler). The grader grades such a submission again, alone."""
    return {"event": "fatal", "stage": "cuda_init",
            "error": f"{CUDA_INIT_FAILED}: {type(e).__name__}: {e}"[:1500]}
