"""The child's own namespaces and mounts, made before any student code: what the sandbox hides
and cuts off, and the privilege it gives up.

- ``isolate`` (the driver's first act): new network, mount and IPC namespaces where the OS
  allows (a seccomp filter cuts the network where no namespace can be made), the repository,
  the grader's output folder and the other submissions hidden behind empty tmpfs mounts,
  /tmp and /dev/shm of its own (``private_storage``), then ``privileges``: the grader's
  Python shared read-only and, as root, a uid of its own with a process limit, or in a user
  namespace, no capability left.
- ``fresh_proc`` and ``net_around_wrapper`` (the launcher's, before it starts the driver): a
  /proc of the PID namespace, and the network namespace made around compute-sanitizer.

The PID namespace, the cgroup and the uid that hold the child's processes together are the
launcher's (launcher.py) and the grader's (containment.py); this module is what the child
sees.
"""

from __future__ import annotations

import ctypes
import os

from .linux import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWUSER, MS_BIND, MS_NODEV,
                    MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC)
from .privilege import (confine_writes, device_files, drop_capabilities, drop_to, no_new_privs,
                        share_read_only)
from .seccomp import deny_ipc, deny_network


def isolate(cfg, fatal) -> dict:
    """The driver's first act: namespaces, hidden paths, private storage, the privilege drop.
    Returns what was achieved (for the log); ``fatal(why)`` stops the child."""
    got = {"net": False, "mount": False, "uid_drop": False, "hidden": 0, "notes": []}
    libc = ctypes.CDLL(None, use_errno=True)
    if not cfg.isolate:
        got["notes"].append("isolation disabled by the grader's options")
        return confine(cfg, privileges(cfg, got, libc, userns=False), libc)
    uid, gid = os.getuid(), os.getgid()
    userns = False
    # under compute-sanitizer (grade --sanitize) the launcher made the network namespace around
    # the tool, which finds this process through a socket in it (the sandbox's launcher,
    # _net_around_wrapper; it stops the child if it cannot, so the flag says it was made)
    net_made = cfg.launch.net_around_wrap
    if net_made:
        got["net"] = True
        got["notes"].append("network namespace made by the launcher around compute-sanitizer")
    NET = 0 if net_made else CLONE_NEWNET
    # an IPC namespace of its own: System V shared memory, semaphores and message queues (and
    # their system-wide counts) are not shared with other submissions
    if libc.unshare(CLONE_NEWNS | NET | CLONE_NEWIPC) == 0:
        got["net"] = got["mount"] = got["ipc"] = True
    elif libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | NET | CLONE_NEWIPC) == 0:
        userns = got["ipc"] = True
        try:   # its own uid inside, not 0: it is no root there either (privileges())
            for path, text in (("/proc/self/setgroups", "deny"), ("/proc/self/uid_map", f"{uid} {uid} 1"),
                               ("/proc/self/gid_map", f"{gid} {gid} 1")):
                with open(path, "w") as f:
                    f.write(text)
            got["net"] = got["mount"] = True
        except OSError as e:
            got["notes"].append(f"user namespace maps failed: {e}")
            got["net"] = True
    elif net_made:
        pass
    elif libc.unshare(CLONE_NEWNET) == 0:
        got["net"] = True
    if got["net"]:
        got["network"] = "a network namespace of its own (no interface but loopback)"
    else:   # no namespace (Docker's default seccomp profile refuses it): a filter cuts it
        why = deny_network()
        got["network"] = ("cut by a seccomp filter (no socket but a Unix one), no network "
                          "namespace: unshare(2) refused" if not why else
                          f"NOT CUT: unshare(2) refused and no seccomp filter ({why}): the "
                          "submission could reach the network")
        got["notes"].append(f"network: {got['network']}")
    if got["mount"]:
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            got["notes"].append("could not make mounts private; paths not hidden")
        else:
            for p in cfg.hide:
                pb = p.encode()
                if os.path.isdir(p) and not os.path.islink(p):
                    rc = libc.mount(b"tmpfs", pb, b"tmpfs", MS_RDONLY, b"size=16k,mode=0555")
                elif os.path.isfile(p):
                    rc = libc.mount(b"/dev/null", pb, None, MS_BIND, None)
                else:
                    continue
                if rc == 0:
                    got["hidden"] += 1
                else:
                    got["notes"].append(f"could not hide {p} (errno {ctypes.get_errno()})")
            private_storage(libc, cfg, got, fatal)
    else:
        got["notes"].append("no mount namespace: the repository and other submissions are not "
                            "hidden from this submission (run the grader as root or enable user "
                            "namespaces)")
    return confine(cfg, privileges(cfg, got, libc, userns), libc)


def confine(cfg, got, libc) -> dict:
    """The last step, as the uid the submission runs as: nothing it writes may outlive it where
    another child could read it. Writes only beneath its own folders (its working folder and
    its private /tmp and /dev/shm; Landlock), so no file lands in a place every uid shares
    (/tmp, /dev/shm without a mount namespace; /var/tmp, /run/lock always); and where it has no
    IPC namespace of its own, no System V IPC or POSIX message queue (seccomp). Where either
    cannot be done the grader removes what its uid left when it ends (process.remove_left_by),
    and ``got`` says which (``writes``, ``ipc_objects``). Not under a wrapper (compute-sanitizer
    and its target meet in /tmp), not for the grader's own children (``storage.confine``)."""
    if cfg.mode != "student":
        return got
    if not cfg.storage.confine or cfg.launch.wrap:
        why = ("not asked" if not cfg.storage.confine else
               "under a wrapper (compute-sanitizer), which shares /tmp with it")
        got["writes"] = f"not confined ({why})"
        got["ipc_objects"] = ("an IPC namespace of its own" if got.get("ipc") else
                              f"not refused ({why})")
        return got
    private = list(got.get("private_storage", []))
    folders = [os.path.realpath(cfg.workdir), *private]
    shared = []
    if not cfg.simulated and "/dev/shm" not in private:
        shared.append("/dev/shm")   # the CUDA driver's: what is left there is removed by uid
    no_new_privs(libc)   # (Landlock needs it, or CAP_SYS_ADMIN, which the child has not)
    why_writes = confine_writes(folders + shared, device_files(gpu=not cfg.simulated))
    got["writes"] = (f"only beneath {', '.join(folders + shared)} (Landlock)" if not why_writes
                     else f"not confined: {why_writes}")
    if why_writes:
        got["notes"].append(f"writes: {got['writes']}")
    why_ipc = ""
    if got.get("ipc"):
        got["ipc_objects"] = "an IPC namespace of its own"
    else:
        why_ipc = deny_ipc()
        got["ipc_objects"] = ("refused (seccomp): no IPC namespace of its own" if not why_ipc else
                              f"NOT refused: no IPC namespace of its own and no seccomp filter "
                              f"({why_ipc})")
    # nothing it can write is seen by another child (what it writes to a shared /dev/shm on a
    # GPU is removed by its uid when it ends)
    got["confined"] = not why_writes and not why_ipc and not shared
    return got


def privileges(cfg, got, libc, userns):
    """The last step before any student code: in a user namespace, give up every capability;
    as root, share the grader's Python read-only (in a mount namespace: made here if the
    isolation made none) and become the uid the grader chose, with its process limit. What
    was done goes into ``got``; main() refuses to run a submission that could still act as
    root."""
    if userns:   # the child is the grader's uid: its Python must be read-only to it here
        if got["mount"]:
            got["notes"] += share_read_only(libc, cfg.storage.keep, cfg.workdir, cover=False)
        why = drop_capabilities()
        if why:
            got["notes"].append(f"could not drop privileges in the user namespace: still {why}")
        return got
    if os.getuid() != 0 or cfg.drop_uid is None:
        return got
    if not got["mount"] and libc.unshare(CLONE_NEWNS) == 0 and \
            libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) == 0:
        got["mount_for_sharing"] = True   # (isolate off: nothing hidden, the Python shared)
    if got["mount"] or got.get("mount_for_sharing"):
        got["notes"] += share_read_only(libc, cfg.storage.keep, cfg.workdir)
    why = drop_to(cfg.drop_uid, cfg.nproc)
    got["uid_drop"] = not why
    if why:
        got["notes"].append(f"could not drop privileges: {why}")
    return got


def private_storage(libc, cfg, got, fatal):
    """/tmp and /dev/shm of this child's own, size-limited. As root the grader made the working
    folder a tmpfs of its own (autograder/sandbox/storage.py, PLACES): its subfolders are bound
    over /tmp and /dev/shm (one limit for the three, readable by the grader). Otherwise (a user namespace) a fresh
    tmpfs of the same limits over each, private but unseen by the grader; the working folder
    then stays on the host's disk, limited per file only, and the notes say so."""
    st = cfg.storage
    work = cfg.workdir
    places = [place for place, _name in st.places]
    # what the child needs under /tmp or /dev/shm (its working folder; an interpreter installed
    # under /tmp), held open to be put back after the place is covered
    keep = {}
    for p in {os.path.realpath(work), *map(os.path.abspath, st.keep)}:
        if any(p.startswith(place + "/") for place in places) and os.path.exists(p):
            keep[p] = os.open(p, os.O_PATH)
    done = []
    for place, name in st.places:
        if not os.path.isdir(place):
            continue
        if st.private:
            rc = libc.mount(os.path.join(os.path.realpath(work), name).encode(), place.encode(), None, MS_BIND, None)
        else:
            opts = f"size={st.size_bytes},nr_inodes={st.files},mode=1777"
            rc = libc.mount(b"tmpfs", place.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, opts.encode())
        if rc != 0:
            got["notes"].append(f"{place} is shared with the host: mount failed (errno {ctypes.get_errno()})")
            continue
        done.append(place)
        for p, fd in sorted(keep.items()):   # parents first
            if not p.startswith(place + "/"):
                continue
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(p, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(p), exist_ok=True)
                open(p, "a").close()
            if libc.mount(f"/proc/self/fd/{fd}".encode(), p.encode(), None, MS_BIND, None) != 0:
                fatal(f"the sandbox could not keep {p} under its own {place} "
                      f"(errno {ctypes.get_errno()})")
    for fd in keep.values():
        os.close(fd)
    got["private_storage"] = done
    if not st.private:
        got["notes"].append("the working folder is on the host's disk, limited only per file "
                            "(the grader is not root)")


def net_around_wrapper(libc, fatal) -> None:
    """Run by the launcher: a wrapped driver's network namespace, made around the wrapper, not by
    the driver.
    compute-sanitizer reaches the program it watches over a Unix socket in the abstract
    namespace (NV_SANITIZER_INJECTION_TRANSPORT_TYPE=uds), which belongs to the network
    namespace: a driver that made its own could not be found by the tool ("No attachable
    process found" on the H100; tool and target in one new namespace attach,
    records/sanitizer/sandbox_diag_h100.json). The driver, which reads the same setting
    (``launch.net_around_wrap``; this launcher stops the child where it cannot make the
    namespace), then makes only its mount namespace; the submission is cut off from the
    network either way."""
    if libc.unshare(CLONE_NEWNET) != 0:
        fatal("grade --sanitize: compute-sanitizer and the submission must share a network "
              "namespace (the tool finds its target through a Unix socket that lives in it), "
              f"and the sandbox could not make one around the tool: unshare(CLONE_NEWNET) "
              f"failed ({os.strerror(ctypes.get_errno())}). Run the grader as root, or "
              "grade without --sanitize")


def fresh_proc(libc) -> None:
    """Run by the launcher in a new PID namespace: in its own mount namespace, a /proc that
    shows only the namespace: the
    submission cannot read another submission's command line, working directory or memory
    maps through /proc. Best effort: without it the PID namespace still contains everything."""
    if libc.unshare(CLONE_NEWNS) != 0:
        return
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return
    libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
