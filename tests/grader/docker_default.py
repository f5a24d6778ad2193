"""Run a command under Docker's default limits, for real, without Docker (issue 28).

    python tests/grader/docker_default.py [--shm DIR] [--ipc PID] [--no-landlock] COMMAND [ARG...]

What a process of a container started with `docker run` and no options may not do, done to
this process (as root, before it becomes COMMAND) by the kernel's own means:

- capabilities: the bounding set cut to Docker's default set (moby oci/caps/defaults.go:
  CHOWN, DAC_OVERRIDE, FSETID, FOWNER, MKNOD, NET_RAW, SETGID, SETUID, SETFCAP, SETPCAP,
  NET_BIND_SERVICE, SYS_CHROOT, KILL, AUDIT_WRITE): root keeps its uid, loses CAP_SYS_ADMIN,
  so it can mount nothing and make no namespace but a user namespace;
- seccomp: Docker's default profile (moby profiles/seccomp/default.json) refuses, without
  CAP_SYS_ADMIN, unshare, setns, mount, umount2, pivot_root and the new mount API with EPERM,
  a clone that asks for any new namespace (its flags & 0x7E020000) with EPERM, and clone3
  with ENOSYS (so glibc falls back to clone); these rules are installed here, so the user
  namespace is refused too;
- cgroups: the cgroup file system is read-only (a private mount namespace in which every
  cgroup mount is remounted read-only, as Docker mounts it in a container).

What a container has of its own, given by the caller so that it outlives one command (a
class's submissions graded one after another in one container, issue 41):

- ``--shm DIR``: DIR (a tmpfs of 64 MiB, Docker's default ``--shm-size``) bound over /dev/shm;
- ``--ipc PID``: the IPC namespace of process PID joined (a container's own: System V objects
  one command leaves are there for the next, as in one container);
- ``--no-landlock``: Landlock refused (ENOSYS), as on a kernel before Linux 5.13 or under a
  Docker whose profile predates it (Docker 23 allowed it).

no_new_privs is not set (Docker does not set it by default). The filter is built by the
sandbox's one BPF assembler (autograder/sandbox/inside/seccomp.py). Exit status 77 with the reason
when this machine cannot do it (not root, no mount namespace, no seccomp filter for its
architecture): the test that runs it then skips, saying why.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # tests/: repo.py
from repo import ROOT

sys.path.insert(0, str(ROOT))
from autograder.sandbox import linux, seccomp

DOCKER_CAPS = {0, 1, 3, 4, 5, 6, 7, 8, 10, 13, 18, 27, 29, 31}   # the names above, by number
CAP_SYS_ADMIN, PR_CAPBSET_DROP, PR_CAPBSET_READ = 21, 24, 23
SKIP = 77
MOUNT_CALLS = ("unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount",
               "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")


LANDLOCK_CALLS = ("landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self")


def docker_rules(landlock: bool = True) -> list:
    eperm = seccomp.errno_ret(errno.EPERM)
    return [*(seccomp.Rule(n, eperm) for n in MOUNT_CALLS),
            seccomp.Rule("clone", eperm, arg=0, mask=seccomp.CLONE_NAMESPACES, value=0, equal=False),
            seccomp.Rule("clone3", seccomp.errno_ret(errno.ENOSYS)),
            *([] if landlock else [seccomp.Rule(n, seccomp.errno_ret(errno.ENOSYS))
                                   for n in LANDLOCK_CALLS])]


def cgroup_mounts() -> list[str]:
    """Mount points of the cgroup file systems (and the tmpfs that holds them, cgroup v1)."""
    out = []
    for line in open("/proc/self/mountinfo"):
        f = line.split()
        fstype = f[f.index("-") + 1]
        if fstype in ("cgroup", "cgroup2") or (f[4] == "/sys/fs/cgroup" and fstype == "tmpfs"):
            out.append(f[4])
    return out


def main(argv) -> int:
    shm, ipc, landlock = None, None, True
    while argv and argv[0].startswith("--"):
        opt = argv.pop(0)
        if opt == "--no-landlock":
            landlock = False
        elif opt in ("--shm", "--ipc") and argv:
            shm, ipc = (argv.pop(0), ipc) if opt == "--shm" else (shm, argv.pop(0))
        else:
            print(f"docker_default: unknown option {opt}\n{__doc__}", file=sys.stderr)
            return 2
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    if os.getuid() != 0:
        print(f"docker_default: needs root (it drops what Docker drops), uid {os.getuid()}", file=sys.stderr)
        return SKIP
    why = seccomp.supported()
    if why:
        print(f"docker_default: {why}", file=sys.stderr)
        return SKIP
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(linux.CLONE_NEWNS) != 0 or \
            libc.mount(b"none", b"/", None, linux.MS_REC | linux.MS_PRIVATE, None) != 0:
        print(f"docker_default: no private mount namespace ({os.strerror(ctypes.get_errno())})", file=sys.stderr)
        return SKIP
    if ipc is not None:   # the container's IPC namespace
        fd = os.open(f"/proc/{int(ipc)}/ns/ipc", os.O_RDONLY)
        if libc.setns(fd, linux.CLONE_NEWIPC) != 0:
            print(f"docker_default: could not join the IPC namespace of {ipc} "
                  f"({os.strerror(ctypes.get_errno())})", file=sys.stderr)
            return SKIP
        os.close(fd)
    if shm is not None and libc.mount(shm.encode(), b"/dev/shm", None, linux.MS_BIND, None) != 0:
        print(f"docker_default: could not bind {shm} over /dev/shm ({os.strerror(ctypes.get_errno())})",
              file=sys.stderr)
        return SKIP
    for m in cgroup_mounts():   # read-only, as in a container
        if libc.mount(None, m.encode(), None, linux.MS_REMOUNT | linux.MS_BIND | linux.MS_RDONLY,
                      None) != 0:
            print(f"docker_default: could not make {m} read-only ({os.strerror(ctypes.get_errno())})",
                  file=sys.stderr)
            return SKIP
    why = seccomp.install(docker_rules(landlock), no_new_privs=False)   # (with CAP_SYS_ADMIN, still held here)
    if why:
        print(f"docker_default: {why}", file=sys.stderr)
        return SKIP
    for cap in range(64):
        if cap in DOCKER_CAPS:
            continue
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == errno.EINVAL:
                break   # past the last capability this kernel knows
            print(f"docker_default: could not drop capability {cap}", file=sys.stderr)
            return SKIP
    # root's permitted and effective sets become the bounding set at execve
    os.execvp(argv[0], argv)
    return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
