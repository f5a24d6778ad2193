"""Seccomp filters: system calls refused by the kernel, for a process and everything it starts.

Where a child gets no network namespace (Docker's default seccomp profile refuses unshare(2)
without CAP_SYS_ADMIN, and Gradescope runs autograders in such a container) its network is cut
here instead: ``deny_network()`` makes every socket but a Unix one fail with EACCES (and
io_uring, which can open sockets without the socket(2) call, fail with EPERM). Where it gets no
IPC namespace, ``deny_ipc()`` refuses it System V IPC and POSIX message queues (objects that
outlive their maker, in a namespace every process of the machine shares). A filter needs no
privilege (it sets no_new_privs) and nothing the filtered process does can lift it.

``Rule`` and ``install`` are the one assembler of classic-BPF filters in the course: the
sandbox's network cut, and the rehearsal of Docker's default limits
(tests/grader/docker_default.py), which refuses namespaces as Docker's profile does.

Standard library only: part of the child's side (this package, copied whole into every child).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass

# linux/audit.h: the architecture a system call was made for (a 64-bit process may still make
# 32-bit calls through int 0x80 on x86_64: a filter refuses every call of a foreign architecture)
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000   # x86_64's x32 ABI: refused whole on x86_64

# System call numbers (arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h
# for aarch64), of the calls the filters below name.
SYSCALLS = {
    "x86_64": {"socket": 41, "socketpair": 53, "clone": 56, "pivot_root": 155, "mount": 165,
               "umount2": 166, "unshare": 272, "setns": 308, "io_uring_setup": 425,
               "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
               "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
               "clone3": 435, "mount_setattr": 442,
               "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65,
               "semctl": 66, "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70,
               "msgctl": 71, "mq_open": 240, "mq_unlink": 241, "mq_timedsend": 242,
               "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
               "landlock_create_ruleset": 444, "landlock_add_rule": 445,
               "landlock_restrict_self": 446},
    "aarch64": {"socket": 198, "socketpair": 199, "clone": 220, "pivot_root": 41, "mount": 40,
                "umount2": 39, "unshare": 97, "setns": 268, "io_uring_setup": 425,
                "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
                "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
                "clone3": 435, "mount_setattr": 442,
                "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197, "semget": 190,
                "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189,
                "msgrcv": 188, "msgctl": 187, "mq_open": 180, "mq_unlink": 181,
                "mq_timedsend": 182, "mq_timedreceive": 183, "mq_notify": 184,
                "mq_getsetattr": 185, "landlock_create_ruleset": 444, "landlock_add_rule": 445,
                "landlock_restrict_self": 446},
}

AF_UNIX = 1
# clone(2)'s namespace flags: CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET, the
# mask Docker's default profile tests (moby profiles/seccomp/default.json, clone's rule)
CLONE_NAMESPACES = 0x7E020000

# linux/filter.h, linux/seccomp.h, linux/prctl.h
_LD_W_ABS, _JEQ_K, _AND_K, _RET_K = 0x20, 0x15, 0x54, 0x06
_JGE_K = 0x35
RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
_SECCOMP_NR = {"x86_64": 317, "aarch64": 277}
# offsets in struct seccomp_data: nr, arch, then the six arguments (their low 32 bits first)
_NR, _ARCH, _ARGS = 0, 4, 16


def errno_ret(code: int) -> int:
    """The filter's answer that makes the call fail with ``code`` (an errno)."""
    return _RET_ERRNO | (code & 0xFFFF)


@dataclass(frozen=True)
class Rule:
    """Answer ``action`` to the system call ``name`` when ``(args[arg] & mask) == value``
    (``equal``) or ``!=`` (not ``equal``); with ``arg`` None, always. Only an argument's low 32
    bits are compared (flags and families fit there)."""

    name: str
    action: int
    arg: int | None = None
    mask: int = 0xFFFFFFFF
    value: int = 0
    equal: bool = True


def machine() -> str:
    m = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def supported() -> str:
    """'' when filters can be built for this machine, else why not."""
    if machine() not in AUDIT_ARCH:
        return f"no seccomp filter is defined for the {machine()} architecture"
    return ""


def program(rules, foreign: int = errno_ret(errno.EPERM)) -> bytes:
    """The classic-BPF program of ``rules`` (first match wins; anything else is allowed);
    a call of another architecture (or x86_64's x32 ABI) gets ``foreign``."""
    arch = machine()
    nrs = SYSCALLS[arch]
    ins: list[tuple[int, int, int, int]] = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, AUDIT_ARCH[arch]),
        (_RET_K, 0, 0, foreign),
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if arch == "x86_64":
        ins += [(_JGE_K, 0, 1, X32_SYSCALL_BIT), (_RET_K, 0, 0, foreign)]
    for r in rules:
        nr = nrs[r.name]
        if r.arg is None:
            ins += [(_JEQ_K, 0, 1, nr), (_RET_K, 0, 0, r.action)]
            continue
        # not this call: skip the 5 below; else test the argument, answer, or reload nr
        ins += [(_JEQ_K, 0, 5, nr),
                (_LD_W_ABS, 0, 0, _ARGS + 8 * r.arg),
                (_AND_K, 0, 0, r.mask & 0xFFFFFFFF),
                (_JEQ_K, 0, 1, r.value) if r.equal else (_JEQ_K, 1, 0, r.value),
                (_RET_K, 0, 0, r.action),
                (_LD_W_ABS, 0, 0, _NR)]
    ins.append((_RET_K, 0, 0, RET_ALLOW))
    return b"".join(struct.pack("HBBI", *i) for i in ins)


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(rules, no_new_privs: bool = True) -> str:
    """Apply ``rules`` to this process, all its threads and everything it starts from now on.
    With ``no_new_privs`` (set first) no privilege is needed and a setuid program cannot shed
    the filter; without it the caller must hold CAP_SYS_ADMIN. '' when it holds, else why not."""
    why = supported()
    if why:
        return why
    code = program(rules)
    buf = ctypes.create_string_buffer(code, len(code))
    prog = _Prog(len(code) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    if no_new_privs and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return f"prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}"
    libc.syscall.restype = ctypes.c_long
    if libc.syscall(_SECCOMP_NR[machine()], SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC,
                    ctypes.byref(prog)) == 0:
        return ""
    first = os.strerror(ctypes.get_errno())
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0:
        return ""   # (this thread only: callers install before they start threads)
    return f"seccomp(SECCOMP_SET_MODE_FILTER) failed: {first}"


def network_rules() -> list[Rule]:
    """No socket but a Unix one (the network, and netlink, are out of reach; the CUDA driver
    and Python's own machinery need only Unix sockets), and no io_uring."""
    no = errno_ret(errno.EACCES)
    return [Rule("socket", no, arg=0, value=AF_UNIX, equal=False),
            Rule("socketpair", no, arg=0, value=AF_UNIX, equal=False),
            *(Rule(n, errno_ret(errno.EPERM))
              for n in ("io_uring_setup", "io_uring_enter", "io_uring_register"))]


#: System V IPC and POSIX message queues: objects that outlive the process that made them, in
#: the IPC namespace it shares with every other process of the machine where it has none of its
#: own (the kernel proof's child, the next submission could read them)
IPC_CALLS = ("shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop",
             "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink", "mq_timedsend",
             "mq_timedreceive", "mq_notify", "mq_getsetattr")


def ipc_rules() -> list[Rule]:
    """No System V shared memory, semaphore or message queue, no POSIX message queue (EPERM):
    for a child with no IPC namespace of its own. No lab needs them; POSIX shared memory and
    semaphores are files in /dev/shm, which the child's write confinement covers."""
    return [Rule(n, errno_ret(errno.EPERM)) for n in IPC_CALLS]


def deny_ipc() -> str:
    """Refuse this process (and everything it starts) the IPC objects of ``ipc_rules``; ''
    when done, else why not."""
    return install(ipc_rules())


def deny_network() -> str:
    """Cut this process (and everything it starts) off the network; '' when done, else why
    not. For a child that got no network namespace of its own."""
    return install(network_rules())
