"""Run one submission in its own process, never in the grader's, and end every process it starts.

The package, by concept:

- ``inside/``: the child's side, a package copied whole into every child and started by its
  entry point (``inside/__main__.py launcher|driver CONFIG``): the launcher (limits,
  containment, its teardown when the grader dies), the driver (isolation, then the session: the
  submission's cells, the grader's commands, the launches recorded). Its standard-library
  modules serve the grader too: ``settings`` (``DriverSettings``, what the grader tells a child:
  one typed definition both sides read, and the simulator's thread limit), ``process`` (the
  process table, killing a tree, cgroup or uid, and removing what a uid left where every uid may
  write: ``remove_left_by``), ``linux`` (the kernel's constants), ``privilege`` (the uid drop,
  capabilities, the grader's Python shared read-only; Landlock: a student child writes only
  beneath its own folder, /tmp and /dev/shm; the session's own root check), ``permissions``
  (what another uid may read or change) and ``seccomp`` (the one BPF assembler: the filters that
  cut the network, and System V IPC, where no namespace can); ``channel``: the protocol's JSON
  lines.
- ``children``: ``Child``, one sandboxed child speaking that protocol (working folder,
  limits, capped output, deadlines, the budgets' watchdog), and the grader's open children
  (``open_children_pids``, ``kill_open_children``); ``trusted``: what a child is given (the
  copy of the trusted code: ``inside/``, autograder/inputs.py and ``book`` without its kernels
  but for the instruction modules graded code may import, ``GRADED_KERNEL_MODULES``:
  ``tensorcore``; the entry point's command line, the scrubbed environment);
  ``protections``: what a child got and, said, what it lacked.
- ``containment``: how a submission's processes are held so that they die with it (a PID
  namespace, else a cgroup killed whole, else (as root, Docker's default limits) the child's
  own uid; else refused unless allowed), and cgroups.
- ``paths``, ``uid``, ``storage``, ``tasks``: what a child sees (every path hidden but what it
  needs; the grader's own processes started with ``python -I``: ``trusted_command``), the uid of
  its own it becomes (student code never runs as root: a uid of its own, or a refusal that names
  the fix), the size-limited file system it writes to (its working folder, /tmp and /dev/shm, in
  a folder its grader holds by an flock while it lives: ``new_folder``; what no living grader
  holds, what killed graders left, the next sweeps, never by pid: ``sweep_stale_storage``;
  never while a grader is giving a child its uid: ``uid_lock``), the
  count of its processes and threads (a pids cgroup).
- ``budgets``: host and GPU memory summed over a submission's processes, watched while it runs.
- ``threads`` (inside/threads.py): a simulated child's room for the simulator's threads under
  its address-space limit (``limit_malloc_arenas``, ``ARENAS``), and the facts reported when a
  block's threads still cannot start (``describe_thread_failure``), whose, said by
  ``own_thread_failure``: the submission's own tasks at its limit, or not its doing.

``python -m autograder grade`` stopped by SIGTERM, SIGINT or SIGHUP kills every open child
itself first (``kill_open_children``); a launcher whose grader died tears its child down
(PR_SET_PDEATHSIG). Other modules import the names below from ``autograder.sandbox``, never
from its submodules.

For the grader:
- ``resolve_containment()`` once at the start of a run: raises ContainmentUnavailable (a
  SystemExit with cause and fix) where student code cannot be contained; ``Child`` raises it too.
- ``Child(..., limits={"mem_bytes": .., "gpu_mem_bytes": ..})``: the budgets (GPU default:
  GPU_BUDGET_FRACTION of the device; the names are ``Limits``' fields). Over budget:
  ChildError("memory", message). ``child.isolation(driver_report)`` (protections.py): what the child got and
  ``missing``, each protection it did not get with why (results' ``extra_data.isolation``).
- ``child.pids()`` (host PIDs now), ``child.pids_seen``, ``child.init_pid()``.
- after ``child.close()``: ``child.survivors()`` ([] when containment held) and, where
  ``gpuwatch.available()``, ``child.gpu_leftovers()`` ([] when none of its processes holds a
  GPU); ``child.report()`` for measurements.jsonl (``left_behind``: what its uid left where
  every uid may write, removed). Nothing a child wrote outlives ``close()``: its folder, and
  what its uid left in /tmp, /dev/shm, ... and System V IPC where its writes were not confined
  (inside/isolation.py ``confine``). Close the child of one run of a submission's code before
  another child runs the same code where they share places (no PID namespace): while both
  live, the second can read what the first shows every process (its command lines in /proc).
- before a timing window: ``gpuwatch.foreign(gpu, open_children_pids())`` ([] when no process
  outside the grader's open children holds that GPU).
"""

from .inside import linux, seccomp
from .budgets import GPU_BUDGET_FRACTION, Budget, default_budgets, gpu_memory, host_memory
from .children import Child, ChildError, kill_open_children, open_children_pids
from .containment import (ContainmentUnavailable, containment_support, refusal_message,
                          resolve_containment)
from .paths import TRUSTED_BOOT, grader_paths, trusted_command
from .inside.channel import CUDA_INIT_FAILED, cuda_init_failure
from .inside.permissions import folder_for_grader, open_for_grader, reachable, writable_by_others
from .inside.privilege import landlock_abi
from .inside.process import (alive, descendants, ipc_objects, kill_tree, kill_uid, pids_in_namespace,
                             pids_of_uid, process_info, remove_left_by, shared_places)
from .inside.settings import SIM_MAX_THREADS, DriverSettings, LaunchSettings, Limits, Storage
from .inside.threads import (ARENAS, describe as describe_thread_failure, limit_malloc_arenas,
                             own_fault as own_thread_failure)
from .storage import (PLACES, held, held_uids, hold, let_go, new_folder, storage_message,
                      storage_use, sweep_stale_storage, uid_lock)
from .tasks import pids_cgroup_base, tasks_message, tasks_refused
from .trusted import (CHILD_MARK, CHILD_PACKAGE, GRADED_KERNEL_MODULES, child_command, copy_trusted, entry_point,
                      scrubbed_env)
from .uid import CHILD_UID_BASE, CHILD_UID_SPAN, NOBODY, can_drop_uid, uid_drop_support, uids_in_use

__all__ = [
    "CHILD_UID_BASE", "CHILD_UID_SPAN", "GPU_BUDGET_FRACTION", "NOBODY", "PLACES",
    "SIM_MAX_THREADS", "ARENAS", "describe_thread_failure", "limit_malloc_arenas", "own_thread_failure", "TRUSTED_BOOT", "CHILD_MARK", "CHILD_PACKAGE", "CUDA_INIT_FAILED", "GRADED_KERNEL_MODULES",
    "Budget", "Child", "child_command", "copy_trusted", "cuda_init_failure", "entry_point",
    "ChildError", "ContainmentUnavailable", "DriverSettings", "LaunchSettings", "Limits", "Storage",
    "alive", "can_drop_uid", "folder_for_grader", "open_for_grader",
    "containment_support", "default_budgets", "descendants", "gpu_memory", "grader_paths",
    "host_memory",
    "kill_open_children", "kill_tree", "kill_uid", "open_children_pids", "pids_cgroup_base",
    "pids_in_namespace", "pids_of_uid", "process_info", "refusal_message", "resolve_containment",
    "scrubbed_env", "storage_message", "storage_use", "sweep_stale_storage", "tasks_message",
    "held", "held_uids", "hold", "ipc_objects", "landlock_abi", "let_go", "new_folder",
    "remove_left_by", "shared_places",
    "tasks_refused", "trusted_command", "uid_drop_support", "uid_lock", "uids_in_use",
    "linux", "seccomp", "reachable",
    "writable_by_others",
]
