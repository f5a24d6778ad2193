"""What the parts of a grading run share: the run's context (lab, cases, limits, log, folders)
and the one factory of its sandboxed children. The judge (judge.py), the timer (timing.py)
and the sanitizer (sanitize.py) each take one ``RunContext``; grade.Run builds it and
composes them. Also the ways every part talks to a student child: ``load`` (started and its
cells loaded: loading.py), ``ask`` (one request, with the simulator's deadline) and
``child_problem`` (a stopped child, said for feedback)."""

from __future__ import annotations

import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from . import loading
from .results import withheld
from .sandbox import Child, ChildError

# Every correctness case is called this many times on the same arrays, each later call with new
# contents in the inputs and `out` poisoned again, and every call judged (issue 41: a split-K
# counter never reset was right on the first call at each shape and wrong on the next; a race
# shows on some runs and not on others). The rubric's [correctness] calls overrides it.
CALLS_SIMULATED = 2
CALLS_GPU = 3


def call_case(case: dict, k: int) -> dict:
    """Call ``k`` (2, 3, ...) of a correctness case: the same shapes, new contents (its own
    seed, never the kernel proof's), judged against its own reference."""
    return dict(case, seed=(int(case["seed"]) * 31 + 1009 * k) % (1 << 30), id=f"{case['id']}_call{k}")


# In the simulator each launch extends a test's deadline by SIM_MARGIN times the simulator's
# usual time for its threads (book.gpu.SIM_THREADS_PER_S: a loaded machine is slower), up to
# SIM_DEADLINE_CAP_S in all.
SIM_MARGIN = 7
SIM_DEADLINE_CAP_S = 600


@dataclass
class ChildFactory:
    """Every sandboxed child of a run is built here, so that each gets the same isolation:
    the namespaces (``isolate``), the uid drop, the paths hidden from it (the run's output
    folder and the folders of the submissions) and, for a student's code, the rubric's
    budgets. ``calibrate_sandbox`` may step ``isolate`` down once, before any submission;
    every later child gets that choice. A student's child drops its uid whatever
    ``drop_uid`` says (sandbox.Child: never as root); ``drop_uid`` is for trusted children."""

    out: Path
    functions: dict
    limits: dict                      # the rubric's [limits]
    simulated: bool
    isolate: bool = True
    drop_uid: bool = True
    submission_dirs: list = field(default_factory=list)

    def hide(self) -> list[str]:
        return [str(Path(self.out).resolve())] + [str(p) for p in self.submission_dirs]

    def budgets(self) -> dict:
        """The rubric's limits as the sandbox takes them."""
        lim = {"cpu_s": int(self.limits.get("cpu_s", 600))}
        if "mem_mib" in self.limits:
            lim["mem_bytes"] = int(self.limits["mem_mib"]) << 20
        if "gpu_mem_mib" in self.limits:  # the GPU memory budget (default: a share of the device)
            lim["gpu_mem_bytes"] = int(self.limits["gpu_mem_mib"]) << 20
        if "disk_mib" in self.limits:   # working folder, /tmp and /dev/shm together
            lim["disk_bytes"] = int(self.limits["disk_mib"]) << 20
        if "files" in self.limits:
            lim["files"] = int(self.limits["files"])
        if "tasks" in self.limits:   # processes and threads of one submission at once
            lim["tasks"] = int(self.limits["tasks"])
        return lim

    def student(self, cells, gpu: int | None, *, simulated: bool | None = None, **wrapper) -> Child:
        """A child that runs a submission's (or the master's) cells, within the budgets.
        ``gpu`` is ignored in the simulator; ``wrapper``: Child's wrap, wrap_env, keep (a
        program the driver runs under: compute-sanitizer) and fault (the tests' hook)."""
        sim = self.simulated if simulated is None else simulated
        return Child(mode="student", functions=self.functions, cells=cells, simulated=sim,
                     gpu=None if sim else gpu, limits=self.budgets(), hide=self.hide(),
                     isolate=self.isolate, drop_uid=self.drop_uid, **wrapper)

    def probe(self, gpu: int | None, *, simulated: bool = False, isolate: bool | None = None,
              drop_uid: bool | None = None, **wrapper) -> Child:
        """A child that runs no student code (its probe kernel only): the calibrations'.
        ``isolate``/``drop_uid`` override the run's for a calibration that tries them."""
        return Child(mode="reference", functions={}, cells=None, simulated=simulated,
                     gpu=None if simulated else gpu, hide=self.hide(),
                     isolate=self.isolate if isolate is None else isolate,
                     drop_uid=self.drop_uid if drop_uid is None else drop_uid, **wrapper)


@dataclass
class RunContext:
    """One grading run, as its parts see it."""

    lab: object                       # the lab's spec (autograder.labs.get)
    rubric: dict
    cases: list                       # the correctness cases, public and hidden, with ids and points
    limits: dict                      # the rubric's [limits]
    perf: dict | None                 # the rubric's [performance], None where not scored
    simulated: bool
    out: Path
    secret: dict                      # the seeds of the hidden and timing cases (DIR/.grader/)
    children: ChildFactory
    log: Callable[..., None]          # one record into measurements.jsonl
    say: Callable[..., None]          # a line on the terminal (not with --quiet)
    replays: object                   # replay_client.ReplayServers: the replay process per GPU
    crowded: Callable[[], bool] = lambda: False   # are other submissions being graded now?
    sim_cases: list | None = None     # on a GPU: the simulator's cases, one per case above (the
    #                                   hazard trace's: judge.Judge.trace_hazards)
    _expected: dict = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def lab_name(self) -> str:
        return self.lab.name

    @property
    def hidden_visibility(self) -> str:
        return self.rubric["correctness"]["hidden_visibility"]

    @property
    def calls_per_case(self) -> int:
        """How many times each correctness case is called (CALLS_SIMULATED, CALLS_GPU)."""
        default = CALLS_SIMULATED if self.simulated else CALLS_GPU
        return max(1, int(self.rubric["correctness"].get("calls", default)))

    def repeat_cases(self, case) -> list:
        """The later calls of a kernel case (call_case), in order."""
        if not self.lab.kernel:
            return []
        return [call_case(case, k) for k in range(2, self.calls_per_case + 1)]

    @property
    def scratch(self) -> Path:
        """Recordings copied out of the children (the grader's own folder)."""
        return self.out / ".grader" / "recordings"

    def rec_dir(self, result, what: str) -> Path:
        """A folder for one of the submission's recordings, in its own folder of recordings,
        which the run removes when the submission is finished (``drop_recordings``)."""
        d = self.scratch / result.id / what
        shutil.rmtree(d, ignore_errors=True)
        return d

    def drop_recordings(self, result) -> None:
        """The submission's recordings, once it is scored: nothing uses them again."""
        shutil.rmtree(self.scratch / result.id, ignore_errors=True)

    def expected(self, case) -> object:
        """The float64 reference of a correctness case (by its id, computed once)."""
        if case["id"] not in self._expected:
            self._expected[case["id"]] = self.lab.expected(case)
        return self._expected[case["id"]]

    def expected_for(self, case, cache: bool = False) -> object:
        """The reference of any case (a replay's fresh inputs, the timing shapes), by its seed
        and shape; ``cache`` keeps it (the timing shapes, asked for by every submission)."""
        key = ("case", case["seed"], self.lab.describe(case))
        if key in self._expected:
            return self._expected[key]
        ref = self.lab.expected(case)
        if cache:
            with self._lock:
                self._expected[key] = ref
        return ref

    def test_message(self, case, guard: bool = True, repeat: bool = False) -> dict:
        """One test for the child; ``guard=False``: arrays without guard zones (under
        compute-sanitizer, whose memcheck sees stores past an allocation's end); ``repeat``:
        the case's later calls too (repeat_cases), each judged."""
        msg = {"cmd": "test", "id": case["id"], "kind": "kernel" if self.lab.kernel else "numeric",
               "function": self.lab.function_of(case), "args": self.lab.args(case, guard)}
        if repeat:
            msg["repeat"] = [self.lab.args(c, guard) for c in self.repeat_cases(case)]
        return msg

    def ask(self, child, timeout: float, **msg) -> dict:
        """One request to a student child (see ``ask``)."""
        return ask(child, timeout, self.simulated, **msg)

    def load(self, cells, gpu: int | None, **kw) -> loading.Outcome:
        """A child started and ``cells`` loaded in it: ``loading.load``, the one way."""
        return loading.load(self, cells, gpu, **kw)


def ask(child, timeout: float, simulated: bool, **msg) -> dict:
    """One request to a student child. In the simulator the child announces each launch
    with its number of threads; the deadline grows with it (the simulator's speed is not
    the student's), up to SIM_DEADLINE_CAP_S."""
    child.send(**msg)
    t0 = time.monotonic()
    deadline, cap = t0 + timeout, t0 + max(timeout, SIM_DEADLINE_CAP_S)
    threads = 0
    while True:
        try:
            ev = child.recv(max(0.05, deadline - time.monotonic()))
        except ChildError as e:
            if e.reason == "timeout":
                what = (f"; a simulated launch of {threads:,} threads was running" if threads else "")
                raise ChildError("timeout", f"no answer within {time.monotonic() - t0:.0f} s{what}")
            raise
        if ev.get("event") == "launch" and simulated:
            threads = int(ev.get("threads", 0))
            from book.gpu import SIM_THREADS_PER_S  # not at import: grade decides GPU or simulator first

            deadline = min(cap, max(deadline, time.monotonic() + timeout)
                           + threads * SIM_MARGIN / SIM_THREADS_PER_S)
            continue
        return ev


def child_problem(e: ChildError, child, during: str, result=None) -> str:
    """A child that stopped (a timeout, its memory, a death), said for the feedback, with the
    last of what it printed. Given the ``result`` of a child whose hidden cases have begun
    (``Result.after_hidden``), only what the grader knows of its own (what it was doing, the
    kind of stop): the detail (seconds, memory, exit status) and the output are the child's
    to choose after it saw the hidden cases."""
    if result is not None and result.after_hidden:
        kind = {"timeout": "stopped: no answer in time", "memory": "stopped: over its memory budget",
                "died": "the process died"}.get(e.reason, e.reason)
        return withheld(f"{kind} while {during}")
    tail = child.output_text()[-1500:] if child else ""
    if e.reason == "timeout":
        msg = f"stopped after {e.detail.split('within ')[-1]} while {during}: an infinite loop, or far too slow"
    elif e.reason == "memory":
        msg = f"stopped while {during}: {e.detail}"
    elif e.reason == "died":
        msg = f"the process died while {during}: {e.detail}"
    else:
        msg = f"{e.reason} while {during}: {e.detail}"
    if tail.strip():
        msg += f"\n\nlast output:\n{tail}"
    return msg
