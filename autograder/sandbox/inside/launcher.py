"""The trusted launcher: the first process of every sandboxed child, before the driver.

Started by the child's entry point (``__main__.py launcher config.json``, in the copy of this
package in the child's folder); it imports only the standard library and this package's
standard-library modules. Limits first, then the containment, then the driver (the same entry
point, ``driver config.json``). In a PID namespace the driver is the namespace's init: when it dies (killed by the
grader, or through PR_SET_PDEATHSIG when this launcher dies) the kernel kills every process
in the namespace. In a cgroup the cgroup is killed whole. By uid (no namespace, no cgroup:
Docker's default limits) and with no containment (allowed by the instructor only) this
launcher stays as the subreaper of the tree and kills everything below it when the driver
ends, and by uid every process of the child's uid, wherever it went. If the grader dies
this launcher gets SIGTERM, kills its tree, and removes what the grader would have: the
child's folder (its file system, where it has one of its own), its cgroups, and what the
child's uid left where every uid may write (files in /tmp, /dev/shm, ...; System V IPC).
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import shutil
import signal
import sys

from .isolation import fresh_proc, net_around_wrapper
from .linux import CLONE_NEWPID, MNT_DETACH, PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG
from .process import kill_cgroup, kill_tree, kill_uid, remove_left_by
from .settings import DriverSettings


def launch(cfg_path: str) -> None:
    """Start the driver in the containment the grader chose, then answer for its tree."""
    cfg = DriverSettings.load(cfg_path)
    spec = cfg.launch
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # die with the grader
    if os.getppid() != spec.grader_pid:
        os._exit(5)
    if spec.pids_cgroup:   # its count of processes and threads, before anything forks
        try:
            with open(os.path.join(spec.pids_cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass   # the grader's report() then shows no refusals; the uid's RLIMIT_NPROC remains
    lim = spec.limits
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (lim.cpu_s, lim.cpu_s + 5))
        resource.setrlimit(resource.RLIMIT_FSIZE, (lim.fsize_bytes,) * 2)
        resource.setrlimit(resource.RLIMIT_NOFILE, (lim.nofile,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if cfg.simulated:
            resource.setrlimit(resource.RLIMIT_AS, (lim.mem_bytes,) * 2)
    except (OSError, ValueError):
        pass
    # ``wrap``: a program that runs the driver as its child (grade --sanitize: compute-sanitizer)
    wrap = list(spec.wrap)
    driver = [*wrap, sys.executable, "-I", "-B", spec.entry, "driver", cfg_path]
    exe = wrap[0] if wrap else sys.executable

    def fatal(why: str) -> None:
        with os.fdopen(cfg.reply_fd, "w") as f:
            f.write(json.dumps({"event": "fatal", "error": why}) + "\n")
        os._exit(4)

    mode = spec.contain
    if mode in ("none", "uid"):
        # no namespace, no cgroup: this launcher stays, as the subreaper of everything below
        # it (an orphan that left the session is re-parented here, not to the host's init),
        # so that its teardown can find and kill the whole tree
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1)
    if mode == "cgroup":
        try:
            with open(os.path.join(spec.cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError as e:
            fatal(f"the sandbox could not enter its cgroup {spec.cgroup}: {e}")
    elif mode == "pidns" and libc.unshare(CLONE_NEWPID) != 0:
        fatal(f"the sandbox could not make a PID namespace: unshare(CLONE_NEWPID) failed "
              f"({os.strerror(ctypes.get_errno())})")
    alive_r, alive_w = os.pipe()   # closed by the kernel when this launcher dies, however
    pid = os.fork()
    if pid == 0:
        try:
            os.close(alive_w)
            if mode == "pidns" and spec.fresh_proc:
                fresh_proc(libc)
            if wrap and spec.net_around_wrap:
                net_around_wrapper(libc, fatal)
            if wrap and mode == "pidns":
                # the driver must not be the child of PID 1 (it takes that for "orphaned" and
                # exits), so the namespace's init stays this process and the wrapper is its child
                _init_for(libc, exe, driver, alive_r)
            os.execv(exe, driver)
        finally:
            os._exit(127)
    os.close(alive_r)
    # From here this launcher answers for the tree: if the grader dies (SIGTERM from
    # `timeout`, a SIGKILL, a crash) the kernel sends it SIGTERM (PR_SET_PDEATHSIG), and
    # it kills the tree whole before it goes. Without this a wrapper's tree (compute-
    # sanitizer and the subreaper it starts) outlived a killed grader on the H100: the
    # namespace's init had no parent-death signal, a cgroup nobody kills stays full.
    def teardown(signum, _frame):
        _teardown(cfg, pid, libc)
        os._exit(128 + signum)

    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, teardown)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)   # now with the teardown as its handler
    if os.getppid() != spec.grader_pid:   # the grader died before the line above
        teardown(signal.SIGTERM, None)
    for fd in (cfg.cmd_fd, cfg.reply_fd):
        try:
            os.close(fd)
        except OSError:
            pass
    while True:
        try:
            got, status = os.waitpid(-1 if mode in ("none", "uid") else pid, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(0)
        if got == pid:
            break   # (modes none, uid: re-parented orphans are reaped here too)
    if mode in ("none", "uid"):   # the driver is gone: so is everything it left behind
        kill_tree(os.getpid())
    if cfg.drop_uid is not None:   # and every process of its uid, wherever it went
        kill_uid(cfg.drop_uid)
    if os.WIFSIGNALED(status):   # die the same way, so the grader's message names the signal
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _teardown(cfg, pid: int, libc) -> None:
    """The launcher's last act when the grader is gone: kill the tree it answers for, then
    remove what the grader would have removed (nothing of a killed grader is left: the
    child's folder, its own file system, its cgroups)."""
    spec = cfg.launch
    mode = spec.contain
    cgroups = [c for c in (spec.cgroup, spec.pids_cgroup) if c]
    for cg in cgroups:   # out of them first: a cgroup kill must not end this launcher too soon
        _leave(cg)
    if mode == "pidns":   # the namespace's init: the kernel kills every process in it
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    elif mode in ("none", "uid"):
        kill_tree(os.getpid())
    if mode == "cgroup" and spec.cgroup:
        kill_cgroup(spec.cgroup)
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass
    if cfg.drop_uid is not None:
        kill_uid(cfg.drop_uid)
    work = cfg.workdir
    shutil.rmtree(work, ignore_errors=True)   # emptied first: a tmpfs frees its pages with its files
    if cfg.storage.private:
        libc.umount2(work.encode(), MNT_DETACH)
        shutil.rmtree(work, ignore_errors=True)
    if cfg.drop_uid is not None:   # what its uid left where every uid may write (/tmp, IPC)
        try:
            remove_left_by([cfg.drop_uid], skip=[work])
        except OSError:
            pass
    for cg in cgroups:
        for _ in range(100):   # its last tasks take a moment to leave it (EBUSY)
            try:
                os.rmdir(cg)
                break
            except FileNotFoundError:
                break
            except OSError:
                select.select([], [], [], 0.02)


def _leave(cgroup: str) -> None:
    """Move this process to the parent of ``cgroup``."""
    try:
        with open(os.path.join(os.path.dirname(cgroup), "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))
    except OSError:
        pass


def _init_for(libc, exe: str, argv: list, alive_r: int | None = None) -> None:
    """PID 1 of the namespace: start ``argv``, reap every orphan, exit as it exits. It dies
    with the launcher (PR_SET_PDEATHSIG), and with it every process in the namespace."""
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)   # a fork does not inherit the launcher's
    if alive_r is not None:   # the launcher died before the line above: its pipe is at EOF
        if select.select([alive_r], [], [], 0)[0]:
            os._exit(1)
        os.close(alive_r)
    pid = os.fork()
    if pid == 0:
        os.execv(exe, argv)
    while True:
        try:
            got, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            os._exit(1)
        if got == pid:
            os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)
