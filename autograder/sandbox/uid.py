"""The uid a child runs as. As root, each child gets a uid of its own (the driver drops to it
before any student code): a per-user limit (RLIMIT_NPROC counts every process and thread of
a uid, whatever its namespace) that one submission exhausts is then exhausted for it alone,
not for every child running as `nobody`."""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

from .paths import grader_paths

NOBODY = 65534
CHILD_UID_BASE, CHILD_UID_SPAN = 0x50000000, 1 << 24   # a range no account uses


def world_readable(path: str) -> bool:
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
    """Whether a child may become an unprivileged uid and still run the grader's interpreter."""
    paths = {sys.base_prefix, sys.prefix, os.path.dirname(os.__file__), *grader_paths()}
    return all(world_readable(p) for p in paths if os.path.exists(p))


def new_child_uid(taken) -> int:
    """A uid from the children's range that no open child holds."""
    while True:
        uid = CHILD_UID_BASE + secrets.randbelow(CHILD_UID_SPAN)
        if uid not in taken:
            return uid
