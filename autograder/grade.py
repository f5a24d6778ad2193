"""Grade a class: ``python -m autograder grade LAB SUBMISSION... --out DIR``.

Each submission runs in its own sandboxed process (sandbox.py + driver.py). This process,
the trusted one, owns the rubric, the hidden cases (drawn from a secret seed kept in
DIR/.grader/), the float64 references, the comparison and the clock. See README.md for the
threat model.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import secrets
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from . import labs as _labs
from .export import feedback_markdown, first_error, gradescope_json, write_grades_csv
from .judge import Judging, Sanitizing
from .results import Result
from .rubric import NOT_MEASURED_NO_GPU, load_rubric
from .sandbox import Child, ChildError, storage_message, sweep_stale_storage, tasks_message
from .submission import SubmissionError, read_cells, scan
from .timing import Timing

HERE = Path(__file__).resolve().parent


# --------------------------------------------------------------------------- config
def detect_simulated(force: bool) -> bool:
    if force:
        os.environ["BOOK_SIMULATOR"] = "1"
    from book import gpu  # probes the driver with ctypes; numba.cuda is never imported here

    return bool(gpu.SIMULATED)


def _sanitize(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("._") or "submission"
    return s[:80]


def collect(paths) -> list[tuple[str, Path]]:
    """(id, path) per submission; folders are searched for .ipynb and .py files. The id is the
    file name without suffix; duplicates (every Colab download has the lab's name) take the
    parent folder's name, then a number."""
    files = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files += sorted(q for q in p.rglob("*") if q.suffix in (".ipynb", ".py") and q.is_file()
                            and ".ipynb_checkpoints" not in q.parts)
        else:
            files.append(p)
    stems = {}
    for f in files:
        stems.setdefault(f.stem, []).append(f)
    out, seen = [], set()
    for f in files:
        sid = _sanitize(f.stem if len(stems[f.stem]) == 1 else f"{f.parent.name}_{f.stem}")
        base, k = sid, 2
        while sid in seen:
            sid, k = f"{base}-{k}", k + 1
        seen.add(sid)
        out.append((sid, f))
    return out


def parse_shard(shard: str | None):
    if not shard:
        return 0, 1
    m = re.fullmatch(r"(\d+)/(\d+)", shard)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise SystemExit(f"--shard wants I/N with 0 <= I < N (e.g. 0/4), got {shard!r}")
    return int(m.group(1)), int(m.group(2))


# A child that fails here failed in CUDA or OS initialisation, not in the student's logic: graded
# again alone before it is scored (what killed the lab's master on the H100 in issue 18)
INIT_FAILURE = re.compile(r"CUDA_ERROR_(OPERATING_SYSTEM|NOT_INITIALIZED|NO_DEVICE|SYSTEM_NOT_READY|"
                          r"SYSTEM_DRIVER_MISMATCH)|cuInit|get_primary_context|CudaSupportError|"
                          r"can't start new thread|Resource temporarily unavailable")
FAULT_ENV = "AUTOGRADER_INJECT_FAULT"   # the test hook: "cuda_init:ID[,ID...]", grader's env only
FAULTS = ("cuda_init", "cuda_init_always")


def injected_faults(spec: str) -> dict:
    """{submission id: fault} from AUTOGRADER_INJECT_FAULT (tests only; ';' between kinds):
    ``cuda_init`` fails the submission's first child only (the regrade runs clean),
    ``cuda_init_always`` every one of its children."""
    out = {}
    for part in filter(None, (p.strip() for p in spec.split(";"))):
        kind, _, ids = part.partition(":")
        if kind not in FAULTS:
            raise SystemExit(f"{FAULT_ENV}: unknown fault {kind!r} (known: {', '.join(FAULTS)})")
        out.update({i: kind for i in ids.split(",") if i})
    return out


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------- the run
class Run(Judging, Sanitizing, Timing):
    """A grading run: the cases, the sandboxed children, and the two phases (judge.py grades
    each submission's tests and kernel proof, and with ``sanitize`` runs its public tests
    under compute-sanitizer for feedback; timing.py times the recordings)."""

    def __init__(self, lab, out: Path, *, rubric_path=None, simulated=False, gpus=1, workers=None,
                 sim_timing=False, isolate=True, quiet=False, sanitize=False):
        self.lab_name = _labs.resolve(lab)
        self.lab = _labs.get(self.lab_name)
        self.rubric = load_rubric(self.lab_name, rubric_path)
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.simulated = simulated
        self.gpus = max(1, int(gpus))
        self.workers = workers or (2 if simulated else 3 * self.gpus)
        self.sim_timing = sim_timing
        self.isolate = isolate
        self.quiet = quiet
        self.sanitize = sanitize
        self.run_id = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
        self.log_lock = threading.Lock()
        self.secret = self._secret()
        self.limits = self.rubric.get("limits", {})
        self.perf = self.rubric.get("performance")
        self._build_cases()
        self.reference = {}
        self.masters = {}   # gpu -> the lab's master recorded and timed there (timing.record_master)
        self.drop_uid = True
        self.sandbox_note = None
        self.servers = {}
        self._active, self._active_lock = 0, threading.Lock()
        self.server_locks = [threading.Lock() for _ in range(self.gpus)]
        self.hidden_visibility = self.rubric["correctness"]["hidden_visibility"]
        self.scratch = self.out / ".grader" / "recordings"
        self.faults = injected_faults(os.environ.get(FAULT_ENV, ""))

    def say(self, *a):
        if not self.quiet:
            print(*a, flush=True)

    def _secret(self) -> dict:
        """Seeds of the hidden cases: drawn once per output folder, so re-runs and shards of a
        class grade against the same hidden cases; never shown to a submission."""
        d = self.out / ".grader"
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o700)
        p = d / "secret.json"
        if p.exists():
            return json.loads(p.read_text())
        s = {"hidden_seed": secrets.randbits(62), "timing_seed": secrets.randbits(30)}
        env_seed = os.environ.get("AUTOGRADER_SEED")  # instructors pin a class-wide seed this way
        if env_seed:
            s = {"hidden_seed": int(env_seed), "timing_seed": int(env_seed) % (1 << 30)}
        _atomic_write(p, json.dumps(s))
        return s

    def log(self, **rec):
        rec = {"run": self.run_id, "lab": self.lab_name, "time": time.time(), **rec}
        with self.log_lock:
            with open(self.out / "measurements.jsonl", "a") as f:
                f.write(json.dumps(rec, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())

    # -- cases and references (parent only)
    def _build_cases(self):
        rng = np.random.default_rng(self.secret["hidden_seed"])
        rub = self.rubric["correctness"]
        self.cases = self.lab.cases(rng, self.simulated, rub)
        for i, c in enumerate(self.cases):
            c["id"] = f"t{i}"
            c["points"] = rub["public_points"] if c["visibility"] == "public" else rub["hidden_points"]
        self._expected = {}

    def expected(self, case):
        if case["id"] not in self._expected:
            self._expected[case["id"]] = self.lab.expected(case)
        return self._expected[case["id"]]

    def functions(self):
        return self.lab.functions

    def test_message(self, case):
        return {"cmd": "test", "id": case["id"], "kind": "kernel" if self.lab.kernel else "numeric",
                "function": self.lab.function_of(case), "args": self.kernel_args(case)}

    def kernel_args(self, case):
        return self.lab.args(case)

    def calibrate_sandbox(self):
        """Before any submission: can a fully isolated child (namespaces, hidden paths, uid
        nobody) run a CUDA kernel here? If not, step down (keep the namespaces, keep the uid),
        and say so in the log: better a weaker sandbox, reported, than a class graded zero."""
        tries = [("full isolation", self.isolate, True), ("isolation without the uid drop", self.isolate, False),
                 ("no isolation", False, False)]
        for what, iso, drop in tries:
            child = Child(mode="reference", functions={}, cells=None, simulated=False, gpu=0,
                          isolate=iso, drop_uid=drop, hide=self._hide_paths())
            try:
                ev = child.recv(120)
                r = child.request(120, cmd="probe")
                if ev.get("event") == "loaded" and r.get("ok"):
                    self.isolate, self.drop_uid = iso, drop
                    self.sandbox_note = f"{what}: {ev.get('isolation')}, uid {r.get('uid')}"
                    self.log(kind="sandbox", ok=True, mode=what, isolation=ev.get("isolation"), uid=r.get("uid"))
                    self.say(f"sandbox: {self.sandbox_note}")
                    return
                self.log(kind="sandbox", ok=False, mode=what, reply=r)
            except ChildError as e:
                self.log(kind="sandbox", ok=False, mode=what, error=f"{e.reason}: {e.detail}",
                         output=child.output_text()[-2000:])
            finally:
                child.close()
        raise SystemExit("no sandbox configuration could run a CUDA kernel: see measurements.jsonl")

    # -- one submission
    def grade_one(self, index: int, sid: str, path: Path, regraded: str | None = None) -> Result:
        gpu = index % self.gpus
        t_start = time.time()
        sub_dir = self.out / sid
        sub_dir.mkdir(exist_ok=True)
        result = Result(id=sid, file=str(path), lab=self.lab_name, run=self.run_id,
                        hidden_visibility=self.hidden_visibility)
        if regraded:
            result.regraded = {"why": regraded}
        try:
            result.sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            pass
        try:
            cells = read_cells(path)
        except SubmissionError as e:
            result.status = "unreadable"
            result.problems["submission"] = str(e)
            return self.finish(result, sub_dir, t_start)
        result.flags = scan(cells)
        result.cells = cells
        child = None
        started = False   # has any of the submission's code run yet?
        fault = self.faults.get(sid)
        if fault == "cuda_init":
            self.faults.pop(sid, None)
        if fault:
            self.log(kind="fault_injected", id=sid, fault=fault)
        try:
            child = Child(mode="student", functions=self.functions(), cells=cells,
                          simulated=self.simulated, gpu=gpu if not self.simulated else None,
                          limits=self._child_limits(), hide=self._hide_paths(),
                          isolate=self.isolate, drop_uid=self.drop_uid,
                          fault=fault and fault.removesuffix("_always"))
            try:
                ev = child.recv(self.limits.get("load_s", 120))  # Python, numba, book: no student code yet
                if ev.get("event") == "fatal":   # the driver stopped before any of the submission's code
                    result.status = "failed before your code ran"
                    result.problems["sandbox"] = ev.get("error") or "the sandbox failed to start"
                    result.not_own = {"what": f"failed in {_stage(ev.get('stage'))} before any of its code ran",
                                      "before_code": True}
                    self._ended(child, result, gpu)
                    return self.finish(result, sub_dir, t_start)
                if ev.get("event") == "ready":
                    started = True
                    # timing happens later, from the recording, with no submission alive
                    ev = self.ask(child, self.limits.get("load_s", 120), cmd="load")
                    self._loaded(ev, result)
                    if ev.get("event") == "loaded":
                        self.run_tests(child, result)
                        self.prove_kernels(child, result, cells, gpu)
            except ChildError as e:
                if not started:
                    result.status = "failed before your code ran"
                    result.problems["sandbox"] = self._child_problem(
                        e, child, "starting Python, Numba and CUDA, before any of your code ran")
                    result.not_own = {"what": "died while the sandbox started, before any of its code ran",
                                      "before_code": True}
                    self._ended(child, result, gpu)
                    return self.finish(result, sub_dir, t_start)
                result.status = "crashed while loading"
                result.problems["load"] = self._child_problem(e, child, "running your notebook's cells")
                said = "\n".join([result.problems["load"]] + [x.get("message", "") for x in result.cell_errors])
                m = INIT_FAILURE.search(said)
                if m:   # quoted whole: the line that names it
                    line = said[said.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0].strip()[:200]
                    result.not_own = {"what": f"failed in CUDA or OS initialisation ({line})",
                                      "before_code": False}
                self._ended(child, result, gpu)
                return self.finish(result, sub_dir, t_start)
            if ev.get("event") != "loaded":
                result.status = "grader error"
                result.problems["grader"] = ev.get("error") or f"unexpected answer {str(ev)[:200]}"
                return self.finish(result, sub_dir, t_start)
            if self.perf and (not self.simulated or self.sim_timing):
                self.run_timing(child, result, gpu)
        except Exception as e:  # the grader's own bug: say so, keep the class going
            result.status = "grader error"
            result.problems["grader"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"
        finally:
            self._ended(child, result, gpu)
        if self.sanitize and result.tests and "load" not in result.problems:
            try:
                self.run_sanitizer(result, cells, gpu)
            except Exception as e:  # the grader's own bug: this feedback is lost, the grade is not
                self.log(kind="sanitizer", id=result.id,
                         error=f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}")
        result.t_start = t_start
        if result.timing is not None:  # phase 2 scores it; kept on disk so a killed run loses nothing
            _atomic_write(sub_dir / "pending.json", json.dumps(result.to_json(), default=str))
            return result
        return self.finish(result, sub_dir, t_start)

    def _ended(self, child, result, gpu):
        """Close the child (once) and keep what it left: its output, memory peak, what it
        wrote where (a full storage is said as its own), the check that nothing of it is left.
        Called before an early finish too, so that those results say it all."""
        if child is None or result.after_exit is not None:
            return
        child.close()
        self._confirm_gone(child, result, gpu)
        result.output = child.output_text()
        if result.public_output_len is not None:
            result.public_output_len = min(result.public_output_len, len(result.output))
        result.output_bytes = child.output_total
        result.rss_peak_mib = child.rss_peak >> 20
        if child.storage and child.storage.get("full"):   # its own, and said so
            result.problems["storage"] = storage_message(child.storage)
        if getattr(child, "tasks_refused", 0):
            result.problems["processes"] = tasks_message(child.limits["tasks"], child.tasks_refused)

    def _confirm_gone(self, child, result, gpu):
        """After a submission: nothing of it alive (/proc, the sandbox's survivors()) and, on a
        GPU, nothing of it holding the GPU (NVML, gpuwatch). Logged; a breach is named."""
        after = {}
        try:
            after["survivors"] = [str(x) for x in child.survivors()]
        except AttributeError:
            after["survivors"] = "not checked: this sandbox has no survivors()"
        if not self.simulated:
            from . import gpuwatch

            if gpuwatch.available():
                t0 = time.monotonic()  # a killed process's context takes a moment to leave NVML's list
                while True:
                    left = [str(x) for x in child.gpu_leftovers()]
                    if not left or time.monotonic() - t0 > 5:
                        break
                    time.sleep(0.25)
                after["gpu_leftovers"] = left
                after["gpu_check_s"] = round(time.monotonic() - t0, 2)
            else:
                after["gpu_leftovers"] = f"not checked: {gpuwatch.unavailable_reason()}"
        try:
            after["sandbox"] = child.report()
        except AttributeError:
            pass
        result.after_exit = after
        self.log(kind="after_exit", id=result.id, gpu=gpu, **after)
        left = [x for k in ("survivors", "gpu_leftovers") if isinstance(after.get(k), list) for x in after[k]]
        if left:
            result.problems["containment"] = ("processes of this submission outlived it: "
                                                 + "; ".join(left)[:600])

    def _loaded(self, ev, result):
        result.isolation = ev.get("isolation")
        result.cell_errors = ev.get("cell_errors", [])
        problems = ev.get("problems", {})
        first = first_error(result) if result.cell_errors else None
        for k, v in problems.items():   # a missing function is the consequence: lead with the cause
            problems[k] = f"{first[len('ERROR: '):]}\nso: {v}" if first else v
        result.problems.update(problems)

    def _child_limits(self):
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

    def _hide_paths(self):
        return [str(self.out.resolve())] + [str(p) for p in getattr(self, "submission_dirs", [])]

    def finish(self, result: Result, sub_dir: Path, t_start: float) -> Result:
        result.execution_time = time.time() - (result.t_start or t_start)
        if result.regraded and "outcome" not in result.regraded:
            self._regrade_outcome(result)
        if result.status == "unreadable" or not result.tests:
            for case in self.cases:
                hidden = case["visibility"] == "hidden"
                result.tests.append({"name": case["name"], "max_score": case["points"], "score": 0,
                                        "hidden": hidden,
                                        "visibility": self.hidden_visibility if hidden else "visible",
                                        "output": "not run: "
                                        + next(iter(result.problems.values()), "no result")})
            if self.perf:
                result.tests.append({"name": "performance", "score": 0, "visibility": "visible",
                                        "max_score": 0 if self.simulated else self.perf["points"],
                                        "output": NOT_MEASURED_NO_GPU if self.simulated else "not run"})
        if self.perf and self.simulated:  # nothing to earn where nothing can be timed
            for t in result.tests:
                if t["name"] == "performance":
                    t["max_score"], t["score"] = 0, 0
                    if not t.get("output", "").startswith(NOT_MEASURED_NO_GPU):
                        t["output"] = NOT_MEASURED_NO_GPU
        if self.perf and not any(t["name"] == "performance" for t in result.tests):
            result.tests.append({"name": "performance", "max_score": 0 if self.simulated else self.perf["points"], "score": 0,
                                    "visibility": "visible",
                                    "output": NOT_MEASURED_NO_GPU if self.simulated else "not measured"})
        result.score = round(sum(t["score"] for t in result.tests), 2)
        result.max_score = sum(t["max_score"] for t in result.tests)
        result.replies, result.cells, result.timing = {}, None, None
        _atomic_write(sub_dir / "feedback.md", feedback_markdown(result, self))
        _atomic_write(sub_dir / "results.json", json.dumps(gradescope_json(result), indent=1))
        (sub_dir / "pending.json").unlink(missing_ok=True)
        self.log(kind="result", id=result.id, score=result.score, max_score=result.max_score,
                 status=result.status, flags=[f["what"] for f in result.flags])
        self.say(f"{result.id}: {result.score}/{result.max_score} ({result.status}, "
                 f"{result.execution_time:.1f} s)")
        return result

    # -- the whole class
    def grade(self, submissions, shard=(0, 1), regrade=False) -> list[dict]:
        subs = collect(submissions)
        subs = [s for i, s in enumerate(subs) if i % shard[1] == shard[0]]
        self.submission_dirs = sorted({str(p.resolve().parent) for _, p in subs})
        # (a run killed before its regrades alone left a marker: those are graded again)
        todo = [(i, sid, p) for i, (sid, p) in enumerate(subs)
                if regrade or not (self.out / sid / "results.json").exists()
                or (self.out / sid / "regrade_alone.json").exists()]
        skipped = len(subs) - len(todo)
        self.say(f"{self.lab_name}: {len(subs)} submission(s), {skipped} already graded in {self.out} "
                 f"(skipped), {'simulator' if self.simulated else f'{self.gpus} GPU(s)'}")
        self.log(kind="run", simulated=self.simulated, gpus=self.gpus, submissions=len(subs),
                 todo=len(todo), shard=list(shard), python=sys.version.split()[0])
        swept = sweep_stale_storage()
        if swept:
            self.log(kind="sandbox", swept_stale_storage=swept)
        if todo and not self.simulated:
            self.calibrate_sandbox()
        if todo and self.sanitize and self.sanitizer_check():
            self.sanitize = False   # said once in the log and on the terminal; grading goes on
        if todo and self.sanitize and not self.simulated:
            self.calibrate_sanitizer()   # turns --sanitize off (said why) if nothing works
        if todo and self.perf and not self.simulated:
            for g in range(self.gpus):
                try:
                    self.reference[g] = self.measure_reference(g)
                except Exception as e:  # correctness is still graded; performance says why not
                    self.reference_error = f"{type(e).__name__}: {e}"[:500]
                    self.log(kind="reference", gpu=g, error=self.reference_error)
                    self.say(f"[gpu {g}] reference FAILED: {self.reference_error}")
                if self.perf.get("basis", "master") == "master":
                    try:  # what every submission's performance is a fraction of, on this GPU
                        self.masters[g] = self.record_master(g)
                    except Exception as e:  # performance says the grader could not, never blames
                        self.master_error = f"{type(e).__name__}: {e} {getattr(e, 'detail', '')}"[:500]
                        self.log(kind="master", gpu=g, error=self.master_error)
                        self.say(f"[gpu {g}] the lab's master could not be timed: {self.master_error}; "
                                 f"performance is not scored on this GPU (it needs {self.master_path()}, "
                                 "or basis = \"reference\" in the rubric)")
        pending = [a for a in todo if (self.out / a[1] / "pending.json").exists() and not regrade]
        fresh = [a for a in todo if a not in pending]
        try:
            with ThreadPoolExecutor(max_workers=self.workers) as ex:
                done = list(ex.map(lambda a: self._safe_grade(*a), fresh))
            # a failure that may not be the submission's is graded again, alone, before it counts
            again = [(a, self.regrade_reason(r)) for a, r in zip(fresh, done)]
            for a, why in again:   # the marker lives until the regrade alone is done
                marker = self.out / a[1] / "regrade_alone.json"
                if why:
                    _atomic_write(marker, json.dumps({"why": why}))
                else:
                    marker.unlink(missing_ok=True)
            again = [(a, why) for a, why in again if why]
            for a, why in again:
                self.log(kind="regrade_alone", id=a[1], reason=why)
                self.say(f"{a[1]}: {why}: graded again, alone")
                self._safe_grade(*a, regraded=why)
                (self.out / a[1] / "regrade_alone.json").unlink(missing_ok=True)
            # phase 2: every recording timed while no submission's process is alive; a fraction
            # near a scoring line comes back unscored (result.timing kept) and is timed again,
            # with more windows, after the batch (timing.time_pending)
            near = []
            for i, sid, _p in sorted(todo, key=lambda a: a[0]):
                pj = self.out / sid / "pending.json"
                if pj.exists():
                    result = Result.from_json(json.loads(pj.read_text()))
                    near += self._time_and_finish(sid, result)
            for sid, result in near:
                self._time_and_finish(sid, result)
        finally:
            for srv in self.servers.values():
                srv.close()
        write_grades_csv(self.out, self.lab_name)
        return [json.loads((self.out / sid / "results.json").read_text()) for sid, _ in subs
                if (self.out / sid / "results.json").exists()]

    def _time_and_finish(self, sid, result) -> list:
        try:
            self.time_pending(result)
        except Exception as e:  # the grader's own bug: say so, keep the class going
            result.problems["grader"] = f"timing: {type(e).__name__}: {e}"
            result.timing = None
        if result.timing is not None:
            return [(sid, result)]
        self.finish(result, self.out / sid, time.time())
        write_grades_csv(self.out, self.lab_name)
        return []

    def regrade_reason(self, r: Result) -> str | None:
        """Why this result may not be the submission's own (then it is graded again, alone, once):
        out of GPU memory beside others, or a failure in CUDA or OS initialisation."""
        if r.regraded:
            return None
        if r.not_own:
            return r.not_own["what"] + (" beside other submissions" if r.not_own.get("beside_others") else "")
        if r.oom and self.workers > 1:
            return f"ran out of GPU memory beside other submissions ({r.oom[:200]})"
        return None

    def _regrade_outcome(self, result: Result) -> None:
        """The regrade alone decides: a failure that repeats alone is the submission's own,
        except one before any of its code ran, which is the grading machine's."""
        why = result.regraded["why"]
        if result.not_own and result.not_own["before_code"]:
            result.status = "grader error"
            outcome = ("it failed the same way alone, before any of your code ran: the grading "
                       "machine's fault, not yours; your instructor must grade it again")
        elif result.not_own or result.oom or oom_said(result):
            outcome = "it failed the same way alone, so this failure is the submission's own"
        else:
            outcome = "alone it ran normally; this is its grade"
        result.regraded["outcome"] = outcome
        result.regraded["note"] = f"{why}; regraded alone: {outcome}"
        self.log(kind="regrade_outcome", id=result.id, reason=why, outcome=outcome,
                 repeated=not outcome.startswith("alone it ran"), status=result.status)

    def _safe_grade(self, i, sid, p, regraded=None):
        with self._active_lock:
            self._active += 1
            others = self._active > 1
        try:
            r = self.grade_one(i, sid, p, regraded)
        finally:
            with self._active_lock:
                others = others or self._active > 1
                self._active -= 1
        if others and not r.oom:  # out of GPU memory anywhere (cells, tests, the timing call)
            r.oom = oom_said(r)
        if r.not_own:
            r.not_own["beside_others"] = others
        write_grades_csv(self.out, self.lab_name)  # after each one: a killed run loses nothing
        return r


def oom_said(r: Result) -> str | None:
    """The first thing said about this result that names CUDA's out-of-memory error."""
    said = [str(v) for v in r.problems.values()] + [e.get("message", "") for e in r.cell_errors] \
        + [t.get("output", "") for t in r.tests]
    hit = next((x for x in said if "OUT_OF_MEMORY" in x.upper().replace(" ", "_")), None)
    return hit[:300] if hit else None


def _stage(stage) -> str:
    return {"cuda_init": "CUDA initialisation", "import": "importing the course library"}.get(
        stage, "the sandbox's start")


def stop_on_signals(run) -> None:
    """SIGTERM, SIGINT or SIGHUP (``timeout``, Ctrl-C, a closed terminal) stop the run here,
    in the main thread: every open child is killed whole, the stop is logged, and the grader
    dies by that signal. Nothing graded is lost: each result was written (results.json,
    pending.json, grades.csv) as it was finished; a re-run grades only what is missing."""
    import signal

    from .sandbox import kill_open_children

    def stop(signum, _frame):
        name = signal.Signals(signum).name
        killed = kill_open_children(f"the grader was stopped by {name}")
        for srv in list(getattr(run, "servers", {}).values()):
            try:
                srv.kill()
            except Exception:
                pass
        try:
            run.log(kind="stopped", signal=name, children_killed=killed)
        except Exception:
            pass
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)


def main(args) -> int:
    lab = _labs.resolve(args.lab)
    simulated = detect_simulated(args.simulator)
    run = Run(lab, Path(args.out), rubric_path=args.rubric, simulated=simulated, gpus=args.gpus,
              workers=args.workers, sim_timing=args.sim_timing, isolate=not args.no_isolation,
              quiet=args.quiet, sanitize=getattr(args, "sanitize", False))
    stop_on_signals(run)
    results = run.grade(args.submissions, shard=parse_shard(args.shard), regrade=args.regrade)
    total = sum(r["score"] for r in results)
    print(f"wrote {run.out / 'grades.csv'} ({len(results)} graded, mean "
          f"{total / max(1, len(results)):.2f}/{results[0]['extra_data']['max_score'] if results else 0})")
    return 0
