"""A child's count of processes and threads. Each child's are counted in a pids cgroup of its
own (pids.max): the whole tree, whatever its uid (root included, where no uid drop is
possible), and one submission that reaches its limit takes nothing from the others. Where no
such cgroup may be made the count rests on RLIMIT_NPROC of the child's own uid (uid.py)."""

from __future__ import annotations

import os

from .containment import new_cgroup, remove_cgroup

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


def new_pids_cgroup(limit: int, name: str) -> tuple[str | None, str]:
    """(a new cgroup ``name`` whose pids.max is ``limit``, '') or (None, why not)."""
    base, why = pids_cgroup_base()
    if base is None:
        return None, why
    try:
        d = new_cgroup(base, name)
    except OSError as e:
        return None, f"cannot make a pids cgroup under {base}: {e.strerror}"
    try:
        with open(os.path.join(d, "pids.max"), "w") as f:
            f.write(str(limit))
    except OSError as e:
        remove_cgroup(d, timeout=0)
        return None, f"cannot set pids.max under {base}: {e.strerror}"
    return d, ""


def tasks_refused(cgroup: str | None) -> int:
    """How many times a fork or a new thread of this child was refused at pids.max."""
    try:
        with open(os.path.join(cgroup, "pids.events")) as f:
            return int(dict(line.split() for line in f).get("max", 0))
    except (OSError, TypeError, ValueError):
        return 0


def tasks_message(limit: int, refused: int | None) -> str:
    """``refused`` None: not said (a number its code chose after the hidden cases began)."""
    count = f"; {refused:,} refused" if refused is not None else ""
    return (f"your code tried to run more than {limit:,} processes and threads at once (the limit "
            f"for one submission{count}): a fork or a new thread past it fails "
            "(\"can't start new thread\", EAGAIN). Start no processes and only the threads you "
            "need. Other submissions have limits of their own and were not affected.")
