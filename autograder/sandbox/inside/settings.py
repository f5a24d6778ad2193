"""What the grader tells a sandboxed child: one typed definition for both sides.

The grader (``Child``) builds a ``DriverSettings`` and writes it as JSON into the child's
folder; the launcher reads its ``launch`` part, the driver the rest. This file depends on the
standard library alone and is part of the child's side (this package, copied whole into
every child), so a field added here is a field both sides know, and a key that only one of
them spells is an error when the settings are read, not a silent default.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

# Threads per simulated kernel launch above which the simulator is not asked to run it: about
# 7,000 threads a second on one core, so 65,536 threads is ~10 s. The driver refuses a larger
# launch and the grader's message names this limit (grade on a GPU), never a hang.
SIM_MAX_THREADS = 65536


@dataclass(frozen=True)
class Limits:
    """What one submission may use. The launcher sets the rlimits (cpu_s, fsize_bytes, nofile;
    mem_bytes as the address space in the simulator); the grader meters the budgets (mem_bytes,
    gpu_mem_bytes: None for its default share of the device) and makes the storage (disk_bytes,
    files: the working folder, /tmp and /dev/shm together) and the pids cgroup (tasks:
    processes and threads; the simulator runs a thread per simulated CUDA thread)."""

    cpu_s: int = 900
    mem_bytes: int = 6 << 30
    gpu_mem_bytes: int | None = None
    fsize_bytes: int = 2 << 30
    nofile: int = 1024
    disk_bytes: int = 4 << 30
    files: int = 65536
    tasks: int = 2048

    @classmethod
    def of(cls, given=None) -> Limits:
        """The defaults, overridden by ``given`` (a mapping of field names); an unknown name is
        an error that lists the known ones."""
        given = dict(given or {})
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise ValueError(f"unknown sandbox limit(s) {', '.join(map(repr, unknown))}: the limits "
                             f"a child takes are {', '.join(known)}")
        return cls(**given)


@dataclass(frozen=True)
class Storage:
    """Where the child may write. ``private``: the working folder is a tmpfs of its own (the
    grader is root), and each (place, subfolder) of ``places`` is bound over ``place`` in the
    child's mount namespace; otherwise a fresh tmpfs of ``size_bytes`` and ``files`` covers
    each place. ``keep``: what the child needs that may lie under a place (put back there).
    ``confine``: a student child may write only beneath its own folders (Landlock) and, with no
    IPC namespace of its own, use no System V IPC (seccomp), so that nothing it writes is seen by
    another child; False leaves only the removal of what its uid left when it ends (as on a
    kernel without Landlock: the tests of that removal)."""

    private: bool
    places: tuple[tuple[str, str], ...]
    keep: tuple[str, ...]
    size_bytes: int
    files: int
    confine: bool = True

    def __post_init__(self):
        _set(self, places=tuple(tuple(p) for p in self.places), keep=tuple(self.keep))


@dataclass(frozen=True)
class LaunchSettings:
    """Read by the launcher before it starts the driver. ``contain``: 'pidns', 'cgroup', 'uid'
    or 'none' (containment.resolve_containment); ``entry``: the child's entry point (its copy
    of ``__main__.py``), which the launcher runs as ``entry driver CONFIG``; ``cgroup``: the containment's cgroup;
    ``pids_cgroup``: a pids cgroup to enter before anything forks (None when it is
    ``cgroup``); ``wrap``: a program that runs the driver as its child (grade --sanitize:
    compute-sanitizer); ``fresh_proc``: mount a /proc of the PID namespace; ``net_around_wrap``:
    the launcher makes the network namespace around the wrapper (the driver then does not)."""

    contain: str
    cgroup: str | None
    grader_pid: int
    pids_cgroup: str | None
    entry: str
    limits: Limits
    fresh_proc: bool
    wrap: tuple[str, ...]
    net_around_wrap: bool

    def __post_init__(self):
        limits = self.limits if isinstance(self.limits, Limits) else Limits(**self.limits)
        _set(self, limits=limits, wrap=tuple(self.wrap))


@dataclass(frozen=True)
class DriverSettings:
    """Everything a child is told. ``mode``: 'student' (cells of a submission) or a trusted
    mode; ``functions``: name -> parameter names the submission must define; ``cmd_fd``,
    ``reply_fd``: the protocol's pipes; ``isolate``: namespaces and hidden paths (``hide``);
    ``drop_uid``: the uid to become (as root; None: stay), with RLIMIT_NPROC ``nproc``;
    ``extra_paths``: the grader's import path minus the repository; ``compile_cc``: the
    compile check's child (Numba's real CUDA target with no GPU, kernels compiled for this
    compute capability, never launched: compile.py), None for every other child."""

    mode: str
    functions: dict
    simulated: bool
    workdir: str
    trusted_dir: str
    extra_paths: tuple[str, ...]
    cmd_fd: int
    reply_fd: int
    isolate: bool
    hide: tuple[str, ...]
    drop_uid: int | None
    nproc: int
    storage: Storage
    launch: LaunchSettings
    compile_cc: tuple[int, int] | None = None

    def __post_init__(self):
        storage = self.storage if isinstance(self.storage, Storage) else Storage(**self.storage)
        launch = self.launch if isinstance(self.launch, LaunchSettings) else LaunchSettings(**self.launch)
        _set(self, storage=storage, launch=launch, extra_paths=tuple(self.extra_paths),
             hide=tuple(self.hide), functions={k: tuple(v) for k, v in self.functions.items()},
             compile_cc=None if self.compile_cc is None else tuple(int(v) for v in self.compile_cc))

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self))

    @classmethod
    def from_json(cls, text: str) -> DriverSettings:
        return cls(**json.loads(text))

    @classmethod
    def load(cls, path: str) -> DriverSettings:
        with open(path) as f:
            return cls.from_json(f.read())


def _set(obj, **values) -> None:
    """Normalise fields of a frozen dataclass in __post_init__ (JSON gives lists and dicts
    where the fields are tuples and dataclasses), so that a round trip compares equal."""
    for name, value in values.items():
        object.__setattr__(obj, name, value)
