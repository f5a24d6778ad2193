"""One sandboxed child: a submission (or the grader's trusted code) in a process of its own.

The parent side of the sandbox: a fresh temporary working directory (as root, a size-limited
file system of its own: storage.py), a scrubbed environment, resource limits (CPU time, file
size, open files, core dumps; address space in the simulator, where CUDA's huge virtual
reservations are not in play), output drained into capped buffers (a flood of printing costs
nothing), and a JSON-lines protocol on two private pipes with a deadline on every answer. The
child runs a copy of the trusted code (trusted.py) and starts as the launcher
(inside/launcher.py), which applies the containment and starts the driver
(inside/driver.py); namespaces, hidden paths and the privilege drop happen in the driver's
trusted prologue (inside/isolation.py), before any student code. What the child is told is
one typed ``DriverSettings`` (inside/settings.py). A watchdog thread per child meters the budgets
(budgets.py) all the time, not only while an answer is awaited.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
import weakref
from pathlib import Path

from .budgets import default_budgets
from .containment import (ContainmentUnavailable, containment_support, new_cgroup, remove_cgroup,
                          resolve_containment, root_refusal)
from .inside.process import (all_pids, alive, descendants, kill_cgroup, kill_tree, kill_uid, parent_pid,
                             pid_namespace, pids_in_namespace, pids_of_uid, process_info,
                             remove_left_by, uid_of)
from .inside.settings import DriverSettings, LaunchSettings, Limits, Storage
from .paths import grader_paths, hide_list, needed_paths
from .protections import protections
from .storage import (PLACES, held_uids, hold, let_go, mount_storage, new_folder, storage_use,
                      sweep_stale_storage, uid_lock, unmount)
from .tasks import new_pids_cgroup, tasks_refused
from .trusted import child_command, copy_trusted, entry_point, scrubbed_env
from .uid import new_child_uid

OUTPUT_CAP = 64 * 1024          # bytes of stdout+stderr kept per submission (head)

class ChildError(Exception):
    """The child died, hung or broke the protocol; ``reason`` says which, for feedback."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


_swept: list = []   # once per grader: what graders killed before it left (sweep_stale_storage)
WATCH_S = 0.2
_open_children: "weakref.WeakSet[Child]" = weakref.WeakSet()


def open_children_pids() -> set[int]:
    """Host PIDs of every child of this grader not yet closed. Before a timing window,
    ``gpuwatch.foreign(gpu, open_children_pids())`` lists the processes on the GPU that no
    open submission accounts for (an escapee, another user's job): NVML lists every process
    holding a context, so the grader's other children, idle under its GPU lock, must count
    as known, and the timed one among them."""
    out: set[int] = set()
    for c in list(_open_children):
        try:
            out |= c.pids()
        except OSError:
            pass
    return out


def kill_open_children(why: str) -> int:
    """Kill every child of this grader not yet closed, each as a whole (its namespace, cgroup
    or tree); the number killed. For a grader stopped by a signal: its launchers would tear
    their trees down anyway once it is gone (PR_SET_PDEATHSIG), this does it first and at once."""
    n = 0
    for c in list(_open_children):
        try:
            c.kill(why)
            n += 1
        except Exception:   # one that cannot be killed must not spare the others
            pass
    for c in list(_open_children):   # and what the kernel would not free by itself
        try:
            c.release()
        except Exception:
            pass
    return n


class Child:
    """One sandboxed child process speaking the driver's protocol.

    ``limits``: a mapping of ``settings.Limits``' fields (the rest keep their defaults): cpu_s,
    mem_bytes (host memory budget, summed over the submission's processes), gpu_mem_bytes (GPU
    memory budget, the same, through NVML), fsize_bytes, nofile, disk_bytes, files, tasks; an
    unknown name is a ValueError.
    ``contain``: 'auto' | 'pidns' | 'cgroup' | 'uid' | 'none' (see resolve_containment); a
    student child with no containment available raises ContainmentUnavailable unless
    ``allow_uncontained`` (or AUTOGRADER_ALLOW_UNCONTAINED=1). A student child never runs as
    root: a root grader gives it a uid of its own (whatever ``drop_uid`` says; it decides for
    trusted children) or raises ContainmentUnavailable, with no override.
    ``budgets`` replaces the default budgets (a list of Budget).
    ``confine`` (default): a student child writes only beneath its own folders and, with no IPC
    namespace of its own, makes no System V IPC object (inside/isolation.py ``confine``); False
    leaves only the removal of what its uid left, when it ends (a kernel without Landlock).
    ``compile_cc`` (with ``simulated`` False): the compile check's child, Numba's real CUDA
    target with no GPU, compiling kernels for that capability (inside/compile.py)."""

    def __init__(self, *, mode: str, functions: dict, cells: list | None, simulated: bool,
                 gpu: int | None = None, limits: dict | None = None, hide=(), isolate: bool = True,
                 drop_uid: bool = True, contain: str = "auto", allow_uncontained: bool | None = None,
                 budgets: list | None = None, wrap: list | None = None, wrap_env: dict | None = None,
                 keep=(), confine: bool = True, compile_cc: tuple | None = None):
        typed = Limits.of(limits)   # the defaults (settings.Limits) and what the caller changed
        self.hide_asked = [str(p) for p in hide]
        self.limits = dataclasses.asdict(typed)   # a dict, as the grader reads it (child.limits["tasks"])
        self.simulated = simulated
        self.gpu = gpu
        untrusted = mode == "student"
        self.mode_untrusted = untrusted
        self.containment, self.containment_note = resolve_containment(
            contain, allow_uncontained if isolate else True, untrusted)
        root = os.getuid() == 0
        support = containment_support()
        if root and untrusted and not support["uid"]:   # never as root: no override
            raise ContainmentUnavailable(root_refusal(support))
        self.budgets = budgets if budgets is not None else default_budgets(self.limits, gpu, simulated)
        if not _swept:   # once per grader: what graders killed before us left mounted
            _swept.append(sweep_stale_storage())
        # a uid of its own (as root): never one another child holds, here or under another
        # grader beside this one (its folder, held, belongs to its uid: storage.held_uids);
        # no grader's sweep runs until the folder is held and the uid's (storage.uid_lock)
        with uid_lock(exclusive=False):
            self.uid = (new_child_uid({c.uid for c in list(_open_children)} | held_uids())
                        if root and (untrusted or (drop_uid and support["uid"])) else None)
            # ag-<grader pid>-..., held by this grader until close (storage.new_folder)
            self.workdir = new_folder()
            if self.uid is not None:   # its uid's, as seen from any mount namespace
                os.chown(self.workdir, self.uid, self.uid)
        self.uid_note = ("" if self.uid is not None else
                         "a trusted child: it runs as the grader" if root else support["why_not_uid"])
        self.left_behind: dict | None = None
        # its own size-limited file system (as root), holding /tmp and /dev/shm too (PLACES)
        self.storage_note = (mount_storage(self.workdir, typed.disk_bytes, typed.files)
                             if isolate else "isolation disabled by the grader's options")
        self.storage_private = not self.storage_note
        self.storage: dict | None = None
        if self.storage_private:
            hold(self.workdir)   # the tmpfs's root too, for a grader in this mount namespace
            for _place, name in PLACES:
                (self.workdir / name).mkdir()
        trusted = self.workdir / "trusted"
        copy_trusted(trusted)
        if cells is not None:
            (self.workdir / "cells.json").write_text(json.dumps(cells))
        # its cgroups, named after its folder (held by this grader: storage.sweep_stale_storage)
        self.cgroup = (new_cgroup(containment_support()["cgroup"], f"{self.workdir.name}-c")
                       if self.containment == "cgroup" else None)
        self.pids_cgroup, self.pids_note = (new_pids_cgroup(typed.tasks, f"{self.workdir.name}-p")
                                            if untrusted else (None, ""))
        if self.pids_cgroup and self.cgroup and os.path.exists(os.path.join(self.pids_cgroup, "cgroup.controllers")):
            # one cgroup-v2 home per process: the containment's, with the limit set there
            remove_cgroup(self.pids_cgroup, timeout=0)
            self.pids_cgroup = None
            try:
                with open(os.path.join(self.cgroup, "pids.max"), "w") as f:
                    f.write(str(typed.tasks))
                self.pids_cgroup = self.cgroup
            except OSError as e:
                self.pids_note = f"cannot set pids.max on the containment cgroup: {e.strerror}"
        cmd_r, cmd_w = os.pipe()
        rep_r, rep_w = os.pipe()
        settings = DriverSettings(
            mode=mode, functions=functions, simulated=simulated, compile_cc=compile_cc,
            workdir=str(self.workdir), trusted_dir=str(trusted),
            extra_paths=grader_paths(), cmd_fd=cmd_r, reply_fd=rep_w,
            isolate=isolate, hide=hide_list(hide, self.workdir, keep) if isolate else (),
            # RLIMIT_NPROC of the child's own uid: a little above the pids cgroup's limit, which
            # counts exactly and says so; where there is no such cgroup, this one binds
            drop_uid=self.uid, nproc=typed.tasks + 64,
            # under a wrapper (compute-sanitizer, outside the driver's mount namespace) /tmp and
            # /dev/shm stay the host's: the tool and its target may meet there
            storage=Storage(private=self.storage_private, places=() if wrap else PLACES,
                            # what the child needs (its folder, the interpreter) put back where it lay
                            keep=[str(p) for p in needed_paths(self.workdir, keep)],
                            size_bytes=typed.disk_bytes, files=typed.files, confine=confine),
            # read by the launcher before it starts the driver
            launch=LaunchSettings(
                contain=self.containment, cgroup=self.cgroup, grader_pid=os.getpid(),
                pids_cgroup=self.pids_cgroup if self.pids_cgroup != self.cgroup else None,
                entry=str(entry_point(trusted)), limits=typed,
                # under a wrapper a fresh /proc always: in a PID namespace that shows the
                # host's /proc, cuInit fails under compute-sanitizer (H100:
                # CUDA_ERROR_OPERATING_SYSTEM, records/sanitizer/sandbox_diag_h100.json)
                fresh_proc=bool(isolate or wrap), wrap=wrap or (),
                net_around_wrap=bool(isolate and wrap)),
        )
        (self.workdir / "config.json").write_text(settings.to_json())
        if self.uid is not None:
            for p in [self.workdir, *self.workdir.rglob("*")]:
                os.chown(p, self.uid, self.uid, follow_symlinks=False)
            os.chmod(self.workdir, 0o700)
        env = scrubbed_env(self.workdir, simulated, gpu)
        env.update(wrap_env or {})
        self.proc = subprocess.Popen(
            child_command(trusted, "launcher", self.workdir / "config.json"),
            cwd=self.workdir, env=env,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            pass_fds=(cmd_r, rep_w), start_new_session=True)
        self._set_limits()
        os.close(cmd_r)
        os.close(rep_w)
        self._cmd = os.fdopen(cmd_w, "w", buffering=1)
        self._rep = rep_r
        self._buf = b""
        self.output = bytearray()
        self.output_total = 0
        self.killed_for = None
        self.breach: str | None = None
        self.pidns_inode: int | None = None
        self._init_pid: int | None = None
        self._init_fd: int | None = None
        self._ns_fd: int | None = None
        self.pids_seen: set[int] = {self.proc.pid}
        self._survivors: list[dict] | None = None
        self._closed = threading.Event()
        self._drain = threading.Thread(target=self._drain_output, daemon=True)
        self._drain.start()
        self._watch = threading.Thread(target=self._watchdog, daemon=True)
        self._watch.start()
        _open_children.add(self)

    def _set_limits(self):
        """Also set from outside with prlimit(2) on the launcher, in case it had not yet
        (it sets them itself before it starts the driver)."""
        import resource

        lim, pid = self.limits, self.proc.pid
        try:
            resource.prlimit(pid, resource.RLIMIT_CPU, (lim["cpu_s"], lim["cpu_s"] + 5))
            resource.prlimit(pid, resource.RLIMIT_FSIZE, (lim["fsize_bytes"],) * 2)
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (lim["nofile"],) * 2)
            resource.prlimit(pid, resource.RLIMIT_CORE, (0, 0))
            if self.simulated:  # CUDA reserves terabytes of virtual space: no address limit there
                resource.prlimit(pid, resource.RLIMIT_AS, (lim["mem_bytes"],) * 2)
        except (ProcessLookupError, OSError):
            pass  # died already: the protocol says so

    # -- which processes are this submission's
    def init_pid(self) -> int | None:
        """Host PID of the launcher's child: the namespace's init (pidns), the driver or its
        wrapper (cgroup, none: there the launcher stays as the tree's subreaper)."""
        if self._init_pid is None:
            try:
                with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                kids = [p for p in all_pids() if parent_pid(p) == self.proc.pid]
            if kids:
                self._init_pid = kids[0]
                # a pidfd signals this process and no other, even once its PID is reused
                try:
                    self._init_fd = os.pidfd_open(kids[0])
                except (AttributeError, OSError):
                    self._init_fd = None
                if self.containment == "pidns":
                    # holding the namespace open keeps its inode ours: a namespace made later
                    # for another submission cannot take the number while we match by it
                    try:
                        fd = os.open(f"/proc/{kids[0]}/ns/pid", os.O_RDONLY)
                    except OSError:
                        fd = None
                    if fd is not None:
                        ino = os.fstat(fd).st_ino
                        if ino != pid_namespace(os.getpid()):
                            self._ns_fd, self.pidns_inode = fd, ino
                        else:
                            os.close(fd)
        return self._init_pid

    def pids(self) -> set[int]:
        """Host PIDs of the submission's live processes (launcher included): match them to
        NVML's process list (gpuwatch) or to anything else that reports PIDs. After close():
        empty (what was left then is in survivors())."""
        if self._survivors is not None:
            return set()
        self.init_pid()
        if self.containment == "cgroup" and self.cgroup:
            try:
                with open(os.path.join(self.cgroup, "cgroup.procs")) as f:
                    got = {int(x) for x in f.read().split()}
            except (OSError, ValueError):
                got = set()
        elif self.containment == "pidns" and self.pidns_inode is not None:
            got = pids_in_namespace(self.pidns_inode)
        elif self.containment == "uid":   # every process of its uid is its (the launcher's not)
            got = pids_of_uid(self.uid)
        else:
            got = set()
        if self.proc.poll() is None:
            got.add(self.proc.pid)
        if self.containment in ("none", "uid") and self.proc.poll() is None:   # (a reaped PID may be reused)
            got |= {p for p in descendants(self.proc.pid) if alive(p)}
        got = {p for p in got if alive(p)}
        self.pids_seen |= got
        return got

    # -- the watchdog: budgets, all the time (not only while a reply is awaited)
    def _watchdog(self):
        while not self._closed.wait(WATCH_S):
            if self.proc.poll() is not None and self.containment != "pidns":
                pass  # the launcher is gone; a cgroup or tree may still hold processes
            try:
                pids = self.pids()
            except OSError:
                continue
            if not pids:
                if self.proc.poll() is not None:
                    return
                continue
            for b in self.budgets:
                try:
                    why = b.over(pids)
                except Exception:  # a meter that fails (NVML hiccup) must not stop grading
                    why = None
                if why and self.breach is None:
                    self.breach = why
                    self.kill("memory")
                    return

    @property
    def rss_peak(self) -> int:
        return next((b.peak for b in self.budgets if b.name == "host memory"), 0)

    # -- output: keep the head, count the rest
    def _drain_output(self):
        f = self.proc.stdout
        while True:
            chunk = f.read1(65536) if hasattr(f, "read1") else f.read(65536)
            if not chunk:
                break
            self.output_total += len(chunk)
            room = OUTPUT_CAP - len(self.output)
            if room > 0:
                self.output += chunk[:room]

    def output_text(self) -> str:
        text = self.output.decode(errors="replace")
        if self.output_total > len(self.output):
            text += (f"\n[... output cut: {self.output_total - len(self.output)} more bytes "
                     f"({self.output_total} in all); the grader keeps the first {OUTPUT_CAP} bytes]")
        return text

    # -- protocol
    def _dead(self) -> ChildError:
        if self.breach:
            self.proc.wait(timeout=5) if self.proc.poll() is None else None
            return ChildError("memory", self.breach)
        return ChildError("died", self._death_reason())

    def send(self, **msg):
        if self.breach:
            raise self._dead()
        try:
            self._cmd.write(json.dumps(msg) + "\n")
            self._cmd.flush()
        except (BrokenPipeError, OSError):
            raise self._dead()

    def recv(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buf:
            if self.breach:
                raise self._dead()
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill("timeout")
                raise ChildError("timeout", f"no answer within {timeout:.0f} s")
            r, _, _ = select.select([self._rep], [], [], min(left, 0.2))
            if r:
                chunk = os.read(self._rep, 1 << 20)
                if not chunk:
                    try:
                        self.proc.wait(timeout=5)
                    except subprocess.TimeoutExpired:
                        pass
                    raise self._dead()
                self._buf += chunk
                if len(self._buf) > 8 << 20:
                    self.kill("protocol")
                    raise ChildError("protocol", "the process wrote garbage on the grader's channel")
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
            if not isinstance(msg, dict):
                raise ValueError("not an object")
            return msg
        except (ValueError, RecursionError):   # (JSON nested too deep: the grader's own error, else)
            self.kill("protocol")
            raise ChildError("protocol", "the process wrote garbage on the grader's channel")

    def request(self, timeout: float, **msg) -> dict:
        self.send(**msg)
        return self.recv(timeout)

    def _death_reason(self) -> str:
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return "stopped answering"
        if rc < 0:
            sig = signal.Signals(-rc).name
            why = {"SIGXCPU": "CPU time limit reached", "SIGXFSZ": "file size limit reached",
                   "SIGSEGV": "segmentation fault", "SIGKILL": "killed",
                   "SIGABRT": "aborted"}.get(sig, sig)
            return f"the process died: {why} ({sig})"
        return f"the process exited with status {rc}"

    def kill(self, why: str = "") -> None:
        """Kill the submission as a whole: its PID namespace (by killing its init), or its
        cgroup, and the launcher's process group."""
        if self.killed_for is None:
            self.killed_for = why
        if self.containment in ("none", "uid") and self.proc.poll() is None:
            # the launcher is the subreaper of the whole tree: kill all of it below the
            # launcher while the launcher still holds the orphans
            kill_tree(self.proc.pid, timeout=2.0)
        if self.uid is not None:   # every process of its uid, whatever tree it left
            kill_uid(self.uid, timeout=2.0)
        if self.containment == "cgroup" and self.cgroup:
            kill_cgroup(self.cgroup)
        init = self.init_pid()   # the init of the namespace: the kernel kills the rest
        try:
            if self._init_fd is not None:
                signal.pidfd_send_signal(self._init_fd, signal.SIGKILL)
            elif init and self.proc.poll() is None:   # its parent not reaped: the PID is still its
                os.kill(init, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.kill()
        except OSError:
            pass

    def read_npy(self, name: str, max_bytes: int = 4 << 30):
        """Load an array the child wrote, refusing links, FIFOs and oversized files."""
        import numpy as np

        path = self.workdir / Path(name).name
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        try:
            st = os.fstat(fd)
            import stat
            if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
                raise ValueError(f"{name} is not a regular file of sane size")
            with os.fdopen(fd, "rb", closefd=False) as f:
                return np.load(f, allow_pickle=False)
        finally:
            os.close(fd)


    def close(self) -> None:
        """Ask the driver to exit, then kill everything of the submission and confirm (in
        /proc) that nothing of it is left; what is left is killed again by PID and kept in
        ``survivors()`` for the grader's log."""
        if self._survivors is not None:
            return
        try:
            self.send(cmd="exit")
        except ChildError:
            pass
        try:
            self.proc.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        try:
            self.pids()   # last look before the kill (records every PID it had)
        except OSError:
            pass
        self.kill()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self._closed.set()
        left = self._leftovers(timeout=3.0)
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._survivors = [process_info(p) for p in left]
        self._drain.join(timeout=2)
        self._watch.join(timeout=2)
        try:
            self._cmd.close()
        except OSError:
            pass
        try:
            os.close(self._rep)
        except OSError:
            pass
        self.tasks_refused = tasks_refused(self.pids_cgroup)
        for cg in {self.cgroup, self.pids_cgroup} - {None}:
            remove_cgroup(cg)
        for fd in (self._init_fd, self._ns_fd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        if self.storage_private:   # what it wrote where, read before the folder goes
            try:
                self.storage = storage_use(self.workdir)
                st = os.statvfs(self.workdir)
                self.storage.update(limit_bytes=self.limits["disk_bytes"],
                                    limit_files=self.limits["files"],
                                    full=st.f_bavail * st.f_frsize < (1 << 20) or st.f_favail < 16)
            except OSError as e:   # gone already (a grader's sweep): said, never a crash here
                self.storage = {"error": f"its folder could not be read: {e}"}
        self._remove_folder()
        self._remove_left_behind()
        # open until here: a grader stopped meanwhile (kill_open_children, in its main thread)
        # still finds it and removes what this close had not yet removed before it dies
        _open_children.discard(self)

    def _remove_folder(self) -> None:
        """Its working folder, and its own file system where it had one: emptied while mounted
        (the namespaces of children started meanwhile hold copies of the mount, and its pages
        are freed only with its files), then unmounted; then no longer held."""
        shutil.rmtree(self.workdir, ignore_errors=True)
        if self.storage_private:
            unmount(self.workdir)
            shutil.rmtree(self.workdir, ignore_errors=True)
        let_go(self.workdir)

    def _remove_left_behind(self) -> None:
        """What its uid left in the places every uid shares (files in /tmp, /var/tmp, /dev/shm,
        ...; System V IPC objects): where its writes were confined there is nothing, elsewhere
        (Docker's default limits without Landlock; under compute-sanitizer) this removes it, so
        that the next child (the kernel proof's, another submission's) never reads it."""
        if self.uid is None or self.left_behind is not None:
            return
        try:
            self.left_behind = remove_left_by([self.uid], skip=[self.workdir])
        except OSError as e:
            self.left_behind = {"error": str(e)}

    def release(self, timeout: float = 1.0) -> None:
        """After a kill by a stopped grader: what outlives every process (the next run would
        sweep it, sweep_stale_storage): its folder (its own file system too), its cgroups, and
        what its uid left in the places every uid shares."""
        for cg in {self.cgroup, self.pids_cgroup} - {None}:
            remove_cgroup(cg, timeout)
        self._remove_folder()
        self._remove_left_behind()

    def _leftovers(self, timeout: float) -> list[int]:
        """Processes of the submission still alive after the kill (the kernel takes a moment
        to tear a namespace down): by namespace, cgroup, process tree, and any PID ever seen."""
        deadline = time.monotonic() + timeout
        while True:
            left = {p for p in self.pids_seen if alive(p) and self._still_ours(p)}
            if self.containment == "none":   # orphans leave the tree: look for our directory
                left |= {p for p in all_pids() if alive(p) and self._still_ours(p)}
            if self.uid is not None:   # and every process of its uid, in any mode
                left |= pids_of_uid(self.uid)
            try:
                left |= self.pids()
            except OSError:
                pass
            left.discard(os.getpid())
            if not left or time.monotonic() > deadline:
                return sorted(left)
            time.sleep(0.05)

    def _still_ours(self, pid: int) -> bool:
        """A PID seen earlier may have been reused by an unrelated process since."""
        if self.uid is not None and uid_of(pid) == self.uid:
            return True
        if self.pidns_inode is not None:
            return pid_namespace(pid) == self.pidns_inode
        if self.cgroup:
            try:
                with open(f"/proc/{pid}/cgroup") as f:
                    return any(line.rstrip().endswith(os.path.basename(self.cgroup)) for line in f)
            except OSError:
                return False
        try:
            return os.readlink(f"/proc/{pid}/cwd").startswith(str(self.workdir))
        except OSError:  # not ours to read (another uid): not ours
            return False

    def survivors(self) -> list[dict]:
        """After close(): the processes of this submission that were still alive after the
        kill ({pid, cmdline, uid}); [] when containment held. Before close(): []."""
        return list(self._survivors or [])

    def gpu_leftovers(self) -> list:
        """After close(): NVML's compute processes (gpuwatch.GpuProcess) whose PID was one of
        this submission's; [] when none holds a GPU. Raises RuntimeError without NVML (call
        gpuwatch.available() first and say that the check was not made)."""
        from autograder import gpuwatch

        return gpuwatch.held_by(self.pids_seen, max_age=0)

    def isolation(self, achieved: dict | None) -> dict:
        """What this child got, for its result (``extra_data.isolation``), and ``missing``:
        every protection it did not get, each with why (protections.py)."""
        return protections(self, achieved)

    def report(self) -> dict:
        """What the sandbox knows about this submission, for measurements.jsonl."""
        return {"containment": self.containment, "containment_note": self.containment_note,
                "pid_namespace": self.pidns_inode, "pids_seen": len(self.pids_seen),
                "survivors": self.survivors(), "breach": self.breach, "uid": self.uid,
                "tasks": {"limit": self.limits["tasks"], "refused": getattr(self, "tasks_refused", 0)}
                if self.pids_cgroup else self.pids_note,
                "storage": self.storage if self.storage_private else self.storage_note,
                "left_behind": self.left_behind,
                "budgets": {b.name: {"limit_mib": b.limit >> 20, "peak_mib": b.peak >> 20}
                            for b in self.budgets}}
