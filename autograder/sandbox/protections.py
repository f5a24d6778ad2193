"""What a sandboxed child got and, said, what it lacked: the driver's account of its isolation
joined with the grader's (containment, storage, the uid, the count of processes), and every
protection it did not get with why, so that nothing fails silently (a submission's result,
``extra_data.isolation``; the grader's log)."""

from __future__ import annotations

import os

from .containment import containment_support
from .inside.permissions import reachable
from .paths import AUTOGRADER


def protections(child, achieved: dict | None) -> dict:
    """What ``child`` got, for its result (``extra_data.isolation``): the driver's account
    (``achieved``: namespaces, hidden paths, the uid drop, the network) joined with the
    grader's (containment, storage, the count of processes), and ``missing``: every
    protection it did not get, each with why, so that nothing fails silently."""
    iso = dict(achieved or {})
    sup = containment_support()
    iso.update(containment=child.containment, pid_namespace=child.containment == "pidns",
               own_file_system=child.storage_private, uid=child.uid)
    missing = []
    if child.containment != "pidns":
        how = {"cgroup": "its processes are killed as one cgroup",
               "uid": "its processes are found and killed by its uid",
               "none": "the launcher kills the tree it holds"}[child.containment]
        why = sup["why_not_pidns"] or f"containment {child.containment!r} was asked for"
        missing.append(f"PID namespace ({why}): containment '{child.containment}', {how}; it "
                       "can see the machine's other processes in /proc")
    if not child.storage_private:
        missing.append(f"a file system of its own ({child.storage_note}): its working folder is "
                       "on the host's disk, limited per file only")
    if not iso.get("uid_drop"):
        notes = [n for n in iso.get("notes", []) if "privileges" in n]
        missing.append(f"a uid of its own ({'; '.join(notes) or child.uid_note or 'not asked'})")
    if not iso.get("net"):
        missing.append(f"network namespace: {iso.get('network') or 'not made'}")
    if not iso.get("mount"):
        # what a mount namespace would have hidden and its uid may read anyway
        open_ = [p for p in [str(AUTOGRADER), *child.hide_asked] if os.path.exists(p) and not reachable(p)]
        missing.append("mount namespace: /tmp, /dev/shm and the file system are the host's; what "
                       "it may read is what its uid's permissions allow"
                       + (f" (readable by it: {', '.join(open_)})" if open_ else
                          " (the grader's package and folders are closed to it)"))
    if child.pids_cgroup is None and child.mode_untrusted:
        missing.append(f"a pids cgroup ({child.pids_note}): its processes and threads are "
                       "counted by RLIMIT_NPROC of its uid")
    iso["missing"] = missing
    return iso
