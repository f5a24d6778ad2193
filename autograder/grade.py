"""Grade a class: ``python -m autograder grade LAB SUBMISSION... --out DIR``.

Each submission runs in its own sandboxed process (the sandbox package; its child's side is sandbox/inside/). This process,
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
from . import loading
from .context import ChildFactory, RunContext, child_problem
from .export import feedback_markdown, first_error, gradescope_json, write_grades_csv
from .judge import Judge
from .replay_client import ReplayServers
from .results import PENDING, PERFORMANCE, Result, TestRecord, withheld
from .rubric import NOT_MEASURED_NO_GPU, case_points, load_rubric
from .sandbox import ChildError, storage_message, sweep_stale_storage, tasks_message
from .sanitize import Sanitizer
from .submission import SubmissionError, collect, not_submissions, other_lab, read_cells, scan
from .timing import Timer, timing_cases

HERE = Path(__file__).resolve().parent


# --------------------------------------------------------------------------- config
def detect_simulated(force: bool) -> bool:
    if force:
        os.environ["BOOK_SIMULATOR"] = "1"
    from book import gpu  # probes the driver with ctypes; numba.cuda is never imported here

    return bool(gpu.SIMULATED)


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
def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------- the run
class Run:
    """A grading run: the class's submissions graded in two phases by three parts, each
    given the run's one context (context.py): the judge (judge.py: each submission's tests
    and kernel proof), the timer (timing.py: the timing call recorded, then timed with no
    submission alive) and the sanitizer (sanitize.py: on a GPU, unless ``sanitize`` is False,
    one public case again under compute-sanitizer, whose findings cost that case its points).
    Every sandboxed child comes from the context's one ChildFactory."""

    def __init__(self, lab, out: Path, *, rubric_path=None, simulated=False, gpus=1, workers=None,
                 sim_timing=False, isolate=True, quiet=False, sanitize=True):
        self.lab_name = _labs.resolve(lab)
        self.lab = _labs.get(self.lab_name)
        rubric = load_rubric(self.lab_name, rubric_path)
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        os.chmod(self.out, 0o700)   # the class's results: no submission's uid may read them
        self.simulated = simulated
        self.gpus = max(1, int(gpus))
        self.workers = workers or (2 if simulated else 3 * self.gpus)
        self.sim_timing = sim_timing
        self.quiet = quiet
        self.run_id = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
        self.log_lock = threading.Lock()
        self.secret = self._secret()
        limits = rubric.get("limits", {})
        self.children = ChildFactory(out=self.out, functions=self.lab.functions, limits=limits,
                                     simulated=simulated, isolate=isolate)
        self._active, self._active_lock = 0, threading.Lock()
        # the replay processes start on first use, with the timing cases (none for a lab
        # without kernels, which never starts one)
        replays = ReplayServers(self.lab_name, lambda: timing_cases(self.ctx), self.log, self.gpus)
        self.ctx = RunContext(lab=self.lab, rubric=rubric, cases=self._build_cases(rubric),
                              sim_cases=None if simulated else self._build_cases(rubric, True),
                              limits=limits, perf=rubric.get("performance"), simulated=simulated,
                              out=self.out, secret=self.secret, children=self.children,
                              log=self.log, say=self.say, replays=replays,
                              crowded=lambda: self._active > 1)
        self.judge = Judge(self.ctx)
        self.timer = Timer(self.ctx)
        self.sanitizer = Sanitizer(self.ctx, enabled=sanitize)
        self.sandbox_note = None

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

    # -- the cases (parent only)
    def _build_cases(self, rubric, simulated: bool | None = None) -> list:
        """The correctness cases (``simulated``: as the simulator would draw them, whatever
        this run grades on: a GPU run's hazard trace runs those)."""
        rng = np.random.default_rng(self.secret["hidden_seed"])
        rub = rubric["correctness"]
        cases = self.lab.cases(rng, self.simulated if simulated is None else simulated, rub)
        for i, c in enumerate(cases):
            c["id"] = f"t{i}"
            c["points"] = case_points(c, rub)
        return cases

    def calibrate_sandbox(self):
        """Before any submission: can a fully isolated child (namespaces, hidden paths, a uid
        of its own) run a CUDA kernel here? If not, step down to no namespaces, and say so in
        the log: better a weaker sandbox, reported, than a class graded zero. Never to a child
        that keeps root: student code runs as a uid of its own or not at all (sandbox.Child)."""
        isolate = self.children.isolate
        tries = [("full isolation", isolate, True), ("no namespaces", False, True)]
        for what, iso, drop in tries:
            child = self.children.probe(0, isolate=iso, drop_uid=drop)
            try:
                ev = child.recv(120)
                r = child.request(120, cmd="probe")
                if ev.get("event") == "loaded" and r.get("ok"):
                    self.children.isolate, self.children.drop_uid = iso, drop
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
                        hidden_visibility=self.ctx.hidden_visibility)
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
        try:
            got = self.ctx.load(cells, gpu, who=sid)
            child = got.child
            if got.loaded:
                self._loaded(got, result)
                self.judge.run_tests(child, result)
                proof = self.judge.proof_recording(child, result)
                if self.ctx.perf and (not self.simulated or self.sim_timing):
                    self.timer.record(child, result, gpu)
                # the graded child closed (killed, everything it wrote removed) before any
                # child after it loads the submission again: the proof's replay and the hazard
                # trace see nothing of what it did with the hidden cases
                self._ended(child, result, gpu)
                self.judge.prove_kernels(result, cells, gpu, proof)
                self.judge.check_compiles(result, cells, proof)   # the simulator's only
                self.judge.trace_hazards(result, cells)
                self.timer.unless_correct(result)
            else:
                self._not_loaded(got, result)
        except Exception as e:  # the grader's own bug: say so, keep the class going
            result.status = "grader error"
            result.problems["grader"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"
        finally:
            self._ended(child, result, gpu)
        if not result.tests:   # not loaded: nothing ran to sanitize or time
            return self.finish(result, sub_dir, t_start)
        if "load" not in result.problems:   # on a GPU: one public case under the tools
            try:
                self.sanitizer.run(result, cells, gpu)
            except Exception as e:  # the grader's own bug: this feedback is lost, the grade is not
                self.log(kind="sanitizer", id=result.id,
                         error=f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}")
        result.t_start = t_start
        if result.timing is not None:  # phase 2 scores it; kept on disk so a killed run loses nothing
            _atomic_write(sub_dir / "pending.json", json.dumps(result.to_json(), default=str))
            return result
        return self.finish(result, sub_dir, t_start)

    def _not_loaded(self, got, result):
        """A submission whose cells did not load: said as what happened, and whether it may be
        the submission's own (``not_own``: then it is graded again alone)."""
        child = got.child
        if isinstance(got, loading.FailedBeforeCode):
            result.status = "failed before your code ran"
            if got.error is None:   # the child said where it stopped
                result.problems["sandbox"] = got.describe()
                what = f"failed in {got.where()} before any of its code ran"
            else:
                result.problems["sandbox"] = child_problem(
                    got.error, child, "starting Python, Numba and CUDA, before any of your code ran")
                what = "died while the sandbox started, before any of its code ran"
            result.not_own = {"what": what, "before_code": True}
        elif isinstance(got, loading.CrashedLoading):
            result.status = "crashed while loading"
            result.problems["load"] = child_problem(got.error, child, "running your notebook's cells")
            if got.error is not None and got.error.reason == "timeout":
                result.stopped_for_time = {"what": "the notebook's cells"}
            said = "\n".join([result.problems["load"]] + [x.get("message", "") for x in result.cell_errors])
            m = INIT_FAILURE.search(said)
            if m:   # quoted whole: the line that names it
                line = said[said.rfind("\n", 0, m.start()) + 1:].split("\n", 1)[0].strip()[:200]
                result.not_own = {"what": f"failed in CUDA or OS initialisation ({line})",
                                  "before_code": False}
        else:
            result.status = "grader error"
            result.problems["grader"] = got.describe()

    def _ended(self, child, result, gpu):
        """Close the child (once) and keep what it left: its output, memory peak, what it
        wrote where (a full storage is said as its own), the check that nothing of it is left.
        Called before an early finish too, so that those results say it all."""
        if child is None or result.after_exit is not None:
            return
        child.close()
        self._confirm_gone(child, result, gpu)
        result.output = child.output_text()
        if result.public_output_len is not None:   # bytes when the hidden cases began: characters
            head = bytes(child.output[:result.public_output_len]).decode(errors="replace")
            result.public_output_len = min(len(head), len(result.output))
        result.output_bytes = child.output_total
        result.rss_peak_mib = child.rss_peak >> 20
        self.log(kind="left_by", id=result.id, output_bytes=child.output_total,
                 storage=child.storage, tasks_refused=getattr(child, "tasks_refused", 0))
        # what it wrote, how many processes it was refused, what outlived it: counted at its end,
        # after the hidden cases too, so each is a number its code could set from a hidden case
        if child.storage and child.storage.get("full"):   # its own, and said so
            before = result.storage_before_hidden or {}
            unchanged = all(before.get(k) == child.storage.get(k)
                            for k in ("/tmp", "/dev/shm", "working folder", "files"))
            result.problems["storage"] = (withheld(storage_message(child.storage, counts=False))
                                          if result.after_hidden and not unchanged
                                          else storage_message(child.storage))
        if getattr(child, "tasks_refused", 0):
            result.problems["processes"] = (withheld(tasks_message(child.limits["tasks"], None))
                                            if result.after_hidden
                                            else tasks_message(child.limits["tasks"], child.tasks_refused))
        if "containment" in result.problems and result.after_hidden:
            result.problems["containment"] = withheld("processes of this submission outlived it")

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

    def _loaded(self, got, result):
        # what the sandbox gave it and, said, what it could not (sandbox Child.isolation)
        result.isolation = got.child.isolation(got.isolation)
        result.cell_errors = got.cell_errors
        problems = got.problems
        first = first_error(result) if result.cell_errors else None
        wrong = other_lab(result.cells, self.lab_name) if problems else None   # another lab's notebook
        for k, v in problems.items():   # a missing function is the consequence: lead with the cause
            if wrong and v.startswith("no function named"):
                v += (f". This looks like {wrong[0]}'s notebook (it defines `{wrong[1]}`): this "
                      f"assignment is {self.lab_name}; hand in that lab's notebook")
            problems[k] = f"{first[len('ERROR: '):]}\nso: {v}" if first else v
        result.problems.update(problems)

    def finish(self, result: Result, sub_dir: Path, t_start: float) -> Result:
        result.execution_time = time.time() - (result.t_start or t_start)
        if result.regraded and "outcome" not in result.regraded:
            self._regrade_outcome(result)
        perf = self.ctx.perf
        # every case, run or not (a grader error mid-way left 1 test of lab 1's 18, its max 1)
        why = "not run: " + next(iter(result.problems.values()), "no result")
        done = {t.name for t in result.tests}
        result.tests += [t for t in (TestRecord.for_case(case, self.ctx.hidden_visibility, output=why)
                                     for case in self.ctx.cases) if t.name not in done]
        p = result.test(PERFORMANCE)
        if perf and self.simulated and p is not None:  # pending where nothing can be timed
            p.max_score, p.score, p.status = perf["points"], 0, PENDING
            if not p.output.startswith(NOT_MEASURED_NO_GPU):
                p.output = NOT_MEASURED_NO_GPU
        if perf and p is None:
            result.tests.append(self._performance_test("not measured" if done else "not run"))
        result.score = round(sum(t.score for t in result.tests), 2)
        result.max_score = sum(t.max_score for t in result.tests)
        result.replies, result.cells, result.timing = {}, None, None
        _atomic_write(sub_dir / "feedback.md", feedback_markdown(result))
        _atomic_write(sub_dir / "results.json", json.dumps(gradescope_json(result), indent=1))
        (sub_dir / "pending.json").unlink(missing_ok=True)
        self.ctx.drop_recordings(result)
        self.log(kind="result", id=result.id, score=result.score, max_score=result.max_score,
                 status=result.status, flags=[f["what"] for f in result.flags])
        self.say(f"{result.id}: {result.score}/{result.max_score} ({result.status}, "
                 f"{result.execution_time:.1f} s)")
        return result

    def _performance_test(self, output: str) -> TestRecord:
        """The performance test of a submission that was not timed: pending in the simulator,
        where nothing can be timed (its points stay in the maximum, the course's total)."""
        if self.simulated:
            return TestRecord(PERFORMANCE, self.ctx.perf["points"], output=NOT_MEASURED_NO_GPU,
                              status=PENDING)
        return TestRecord(PERFORMANCE, self.ctx.perf["points"], output=output)

    # -- the whole class
    def grade(self, submissions, shard=(0, 1), regrade=False) -> list[dict]:
        subs = collect(submissions, self.out)
        subs = [s for i, s in enumerate(subs) if i % shard[1] == shard[0]]
        self.children.submission_dirs = sorted({str(p.resolve().parent) for _, p in subs})
        self._drop_other_files(subs)
        skipped = not_submissions(submissions, self.out)
        if skipped:   # a student's file the run would otherwise pass over without a word
            self.log(kind="not_submissions", files=[str(p) for p in skipped])
            self.say(f"not graded, not a .ipynb or .py file or a link: {len(skipped)} file(s) in the folders "
                     f"given ({', '.join(p.name for p in skipped[:8])}{', ...' if len(skipped) > 8 else ''}); "
                     "measurements.jsonl lists them")
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
        if todo:   # off (said why, once) where the tool cannot run or --no-sanitize; else its case
            self.sanitizer.prepare()
        if todo and self.ctx.perf and not self.simulated:
            self.timer.prepare(self.gpus)
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
            # with more windows, after the batch (Timer.time_pending)
            near = []
            for i, sid, _p in sorted(todo, key=lambda a: a[0]):
                pj = self.out / sid / "pending.json"
                if pj.exists():
                    result = Result.from_json(json.loads(pj.read_text()))
                    near += self._time_and_finish(sid, result)
            for sid, result in near:
                self._time_and_finish(sid, result)
        finally:
            self.ctx.replays.close()
        write_grades_csv(self.out, self.lab_name)
        return [json.loads((self.out / sid / "results.json").read_text()) for sid, _ in subs
                if (self.out / sid / "results.json").exists()]

    def _drop_other_files(self, subs) -> None:
        """Results in DIR/<id> are a file's only if they graded its content (their sha256): an
        id follows the file's name and the run's other files (``collect``), so a file added or
        changed between two runs into DIR can take a graded id. Those of another content are
        removed, said, and the file graded, never given that grade."""
        for sid, path in subs:
            d = self.out / sid
            try:
                now = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                now = None
            for name in ("results.json", "pending.json"):
                f = d / name
                if not f.exists():
                    continue
                try:
                    doc = json.loads(f.read_text())
                    meta = doc.get("extra_data", doc)
                    was, file = meta.get("sha256"), meta.get("file")
                except (OSError, ValueError, AttributeError):
                    was, file = None, "?"
                if now is not None and was == now:
                    continue
                for stale in ("results.json", "pending.json", "regrade_alone.json"):
                    (d / stale).unlink(missing_ok=True)
                self.log(kind="stale_result", id=sid, file=str(path), sha256=now,
                         was_file=file, was_sha256=was)
                self.say(f"{sid}: {d} held the grade of {file} with other content; "
                         f"graded again for {path}")
                break

    def _time_and_finish(self, sid, result) -> list:
        try:
            self.timer.time_pending(result)
        except Exception as e:  # the grader's own bug: say so, keep the class going
            result.problems["grader"] = f"timing: {type(e).__name__}: {e}"
            result.timing = None
        if result.timing is not None:
            return [(sid, result)]
        self.finish(result, self.out / sid, time.time())
        write_grades_csv(self.out, self.lab_name)
        return []

    def regrade_reason(self, r: Result) -> str | None:
        """Why this result may not be the submission's own (then graded again, alone, once): out
        of GPU memory or of time (deadlines are wall time on shared CPUs) beside others, or a
        failure in CUDA or OS initialisation."""
        if r.regraded:
            return None
        if r.not_own:
            return r.not_own["what"] + (" beside other submissions" if r.not_own.get("beside_others") else "")
        if r.oom and self.workers > 1:
            return f"ran out of GPU memory beside other submissions ({r.oom[:200]})"
        if r.stopped_for_time and r.stopped_for_time.get("beside_others"):
            return f"stopped for time beside other submissions ({r.stopped_for_time['what']})"
        return None

    def _regrade_outcome(self, result: Result) -> None:
        """The regrade alone decides: a failure that repeats alone is the submission's own,
        except one before any of its code ran, which is the grading machine's."""
        why = result.regraded["why"]
        if result.not_own and result.not_own["before_code"]:
            result.status = "grader error"
            outcome = ("it failed the same way alone, before any of your code ran: the grading "
                       "machine's fault, not yours; your instructor must grade it again")
        elif result.not_own or result.oom or result.oom_said() or result.stopped_for_time:
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
        except Exception as e:   # the grader's own bug, before or after grade_one's guard (a
            # file it could not read, a result it could not write): that submission's "grader
            # error", said, never the end of the class's run
            r = Result(id=sid, file=str(p), lab=self.lab_name, run=self.run_id,
                       hidden_visibility=self.ctx.hidden_visibility)
            r.status = "grader error"
            r.problems["grader"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"
            sub_dir = self.out / sid
            sub_dir.mkdir(exist_ok=True)
            r = self.finish(r, sub_dir, time.time())
        finally:
            with self._active_lock:
                others = others or self._active > 1
                self._active -= 1
        if others and not r.oom:  # out of GPU memory anywhere (cells, tests, the timing call)
            r.oom = r.oom_said()
        if r.not_own:
            r.not_own["beside_others"] = others
        if r.stopped_for_time:
            r.stopped_for_time["beside_others"] = others
        write_grades_csv(self.out, self.lab_name)  # after each one: a killed run loses nothing
        return r


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
        try:
            run.ctx.replays.kill()
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
              quiet=args.quiet, sanitize=not getattr(args, "no_sanitize", False))
    stop_on_signals(run)
    results = run.grade(args.submissions, shard=parse_shard(args.shard), regrade=args.regrade)
    total = sum(r["score"] for r in results)
    print(f"wrote {run.out / 'grades.csv'} ({len(results)} graded, mean "
          f"{total / max(1, len(results)):.2f}/{results[0]['extra_data']['max_score'] if results else 0})")
    return 0
