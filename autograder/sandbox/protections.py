"""What a sandboxed child got and, said, what it lacked: the driver's account of its isolation
joined with the grader's (containment, storage, the uid, the count of processes), every protection it did
not get with why, so that nothing fails silently, and what of it can outlive it (a
submission's result, ``extra_data.isolation``; the grader's log)."""

from __future__ import annotations

import os
import tempfile

from .containment import containment_support
from .inside.permissions import reachable
from .inside.process import shared_places
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
    outlives, shared = left_behind(child, iso)
    iso["outlives"] = outlives
    if shared:
        missing.append(shared)
    iso["missing"] = missing
    return iso


def left_behind(child, iso: dict) -> tuple[list[str], str]:
    """What of a child can outlive it (``outlives``: [] when nothing can), and, where its writes
    were not confined to its own folders, the line for ``missing``: what another child running
    at the same time could read before it is removed."""
    if not child.mode_untrusted:
        return [], ""
    outlives, said = [], []
    private = set(iso.get("private_storage") or [])
    places = [p for p in shared_places([tempfile.gettempdir()]) if p not in private]
    writes = str(iso.get("writes", ""))
    if not writes.startswith("only beneath") or "/dev/shm" in writes and "/dev/shm" not in private:
        where = ", ".join(places) or "nowhere here"
        if child.uid is not None:
            said.append(f"files it writes where every uid may write ({where}) are removed by its "
                        "uid when it ends")
            outlives.append("what it writes into an existing file others may write (mode 666), "
                            "and in places other uids may write beyond those")
        else:
            outlives.append(f"files it writes where every uid may write ({where}): it runs as the "
                            "grader's uid, by which nothing of it can be told apart")
        why = writes.split(": ", 1)[-1] if ": " in writes else writes
        said[:0] = [f"writes confined to its own folders ({why or 'not reported'})"]
    ipc = str(iso.get("ipc_objects", "") or ("an IPC namespace of its own" if iso.get("ipc") else ""))
    if not (ipc.startswith("an IPC namespace") or ipc.startswith("refused")):
        if child.uid is not None:
            said.append("its System V IPC objects (shared memory, semaphores, message queues) are "
                        "removed by its uid when it ends")
        else:
            outlives.append("System V IPC objects it makes: the machine's IPC namespace, as the "
                            "grader's uid")
        said.append(f"no IPC namespace of its own ({ipc or 'not reported'})")
    if not said:
        return outlives, ""
    return outlives, ("; ".join(said) + ": until then another child running beside it (the "
                      "kernel proof's, another submission's) could read them")
