"""Judging one submission: its tests, each compared with the float64 reference (lab.check),
and the kernel proof (the recorded launches replayed on fresh inputs without calling the
student's function). A part of grade.Run (it shares the run's lab, cases, log and sandbox
settings)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .sandbox import Child, ChildError
from .timing import RecordingError, copy_recording, recording_summary

# In the simulator each launch extends a test's deadline by this much per simulated thread
# (the simulator runs a few thousand threads a second), up to SIM_DEADLINE_CAP_S in all.
SIM_S_PER_THREAD = 1e-3
SIM_DEADLINE_CAP_S = 600
NOT_REPRODUCED = ("the kernels your function launched, replayed by the grader on fresh inputs without "
                  "calling your function, did not compute the answer. Correctness points need the work "
                  "done by kernels: a result computed on the host and copied into `out` earns nothing")

# A proof the simulator could not carry out (a kernel made inside the function, a parameter it
# cannot record, a replay that did not finish): no verdict, no points taken, the submission
# marked for a GPU regrade. Never the NOT_REPRODUCED accusation, which needs a finished replay.
NEEDS_GPU_TO_VERIFY = ("needs a GPU to verify: the simulator could not replay the kernels your "
                       "function launched, so the grader could not check that they compute the "
                       "answer. No points are taken for this; an instructor will grade it again on "
                       "a GPU")
MECHANISM_REASONS = ("ReplayError: the kernel `", "ReplayError: the launches could not be recorded")
PROOF_WITHHELD_FLAG = "kernel proof not carried out in the simulator: needs a GPU to verify"


def too_large_message(what: str) -> str:
    return (f"not run in the simulator: {what} is too large to simulate (Numba's CUDA simulator runs a "
            "few thousand threads a second; the grader simulates at most 65,536 threads per launch). "
            "This says nothing about your code: grade this submission on a GPU (or size the grid "
            "to the data when you test in the simulator)")


class Judging:
    """The judging part of a grading run (mixed into grade.Run)."""

    def _child_problem(self, e: ChildError, child, during: str) -> str:
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

    def ask(self, child, timeout: float, **msg) -> dict:
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
            if ev.get("event") == "launch" and self.simulated:
                threads = int(ev.get("threads", 0))
                deadline = min(cap, max(deadline, time.monotonic() + timeout) + threads * SIM_S_PER_THREAD)
                continue
            return ev

    def run_tests(self, child, result):
        dead = None
        result.replies = {}
        for case in self.cases:
            hidden = case["visibility"] == "hidden"
            if hidden and result.public_output_len is None:
                time.sleep(0.05)  # let the output drain catch up with what the public cases printed
                result.public_output_len = len(child.output)
            t = {"name": case["name"], "max_score": case["points"], "score": 0, "hidden": hidden,
                 "visibility": self.hidden_visibility if hidden else "visible"}
            result.tests.append(t)
            fn = self.lab.function_of(case)
            if fn in result.problems:
                t["output"] = result.problems[fn]
                continue
            if dead:
                t["output"] = f"not run: {dead}"
                continue
            try:
                r = self.ask(child, self.limits.get("test_s", 60), **self.test_message(case))
            except ChildError as e:
                t["output"] = self._child_problem(e, child, f"running test '{case['name']}'")
                dead = f"an earlier test ('{case['name']}') stopped the process"
                continue
            if r.get("too_large"):
                t["output"] = too_large_message(r["too_large"])
                result.status = "needs a GPU"
                result.problems["simulator"] = t["output"]
                result.flags.append({"level": "review", "what": "needs a GPU regrade: too large to simulate",
                                     "where": r["too_large"][:200]})
                dead = "the simulator cannot run this submission's launches (see above)"
                continue
            ok, msg = self.judge(case, r, child)
            if not ok and "OUT_OF_MEMORY" in msg.upper().replace(" ", "_") and self._active > 1:
                result.oom = f"test '{case['name']}': {msg[:300]}"
            t["output"] = msg
            t["score"] = case["points"] if ok else 0
            result.replies[case["id"]] = (case, r, ok)
            if r.get("cuda_error"):
                dead = (f"a CUDA error in test '{case['name']}' (e.g. an illegal memory access) "
                        "leaves the GPU context unusable for the rest of this submission")
            self.log(kind="test", id=result.id, test=case["name"], ok=ok, hidden=hidden,
                     seconds=r.get("seconds"), launches=r.get("launches"), message=msg[:2000])

    def judge(self, case, r, child):
        lab = self.lab
        if not r.get("ok"):
            return False, f"your function raised {r.get('error')}:\n{r.get('message', '')}"
        if not lab.kernel:
            return lab.check(r.get("value"), case, self.expected(case))
        notes = []
        if r.get("launches", 1) == 0:
            return False, ("your function launched no CUDA kernel: the lab asks for the work to be "
                           "done by a Numba CUDA kernel on the GPU")
        try:
            got = child.read_npy(r["files"][lab.output])
        except (KeyError, OSError, ValueError) as e:
            return False, f"the grader could not read your output back ({e})"
        ok, msg = lab.check(got, case, self.expected(case))
        if r.get("returned") and r["returned"] != "the output array":
            notes.append(f"your function returned a new {r['returned']}; the grader reads the "
                         f"`{lab.output}` array it passed in, so write your result there")
        if r.get("modified_inputs"):
            ok = False
            notes.append(f"your function changed its input(s) {', '.join(r['modified_inputs'])}: "
                         "inputs must be left as they were (the next layer reads them)")
        return ok, msg + ("".join("\n" + n for n in notes))

    # -- correctness needs kernels: replay the recorded launches on fresh inputs
    def prove_kernels(self, child, result, cells, gpu):
        """The launches recorded during the largest passing kernel test are replayed on fresh
        inputs of the same shape (another seed), without calling the student's function: on a
        GPU by the trusted replay process, in the simulator by a fresh sandboxed child that
        only launches the recorded kernels. If they do not reproduce the answer, every
        correctness point is withdrawn."""
        if not self.lab.kernel:
            return
        passed = [(c, r) for c, r, ok in result.replies.values() if ok]
        if not passed:
            return
        case, r = max(passed, key=lambda cr: self.lab.out_size(cr[0]))
        fresh = dict(case, seed=int(case["seed"]) * 7 + 123457, id=case["id"] + "_replay")
        proof = {"case": case["name"]}
        try:
            folder = copy_recording(child.workdir, r.get("recording", ""), self._rec_dir(result, "proof"))
            proof.update(recording_summary(folder))
            if self.simulated:
                ok, msg = self._replay_sim(folder, fresh, cells)
            else:
                with self.server_locks[gpu]:
                    rr = self.server(gpu).request(self.limits.get("test_s", 60) * 4, cmd="check",
                                                  dir=str(folder), case=fresh)
                ok, msg = bool(rr.get("reproduced")), rr.get("message", "")
                if not rr.get("ok"):
                    ok, msg = False, f"{rr.get('error')}: {rr.get('message', '')}"
        except (RecordingError, ChildError) as e:
            ok, msg = False, str(getattr(e, "detail", "") or e)
        proof.update(reproduced=ok, message=msg[:1000])
        if ok is None:
            proof["verdict"] = "withheld: needs a GPU to verify"
        result.kernel_proof = proof
        self.log(kind="kernel_proof", id=result.id, **proof)
        if ok:
            return
        if ok is None:   # no verdict: points stand, the instructor regrades on a GPU
            # on a hidden case only the replay's own reasons, which name no shape or value
            shown = case["visibility"] != "hidden" or msg.startswith(MECHANISM_REASONS)
            why = f" ({msg.strip()[:600]})" if shown else ""
            result.status = "needs a GPU"
            result.problems["kernels"] = NEEDS_GPU_TO_VERIFY + why
            result.flags.append({"level": "review", "what": PROOF_WITHHELD_FLAG,
                                 "where": "kernel proof"})
            return
        note = NOT_REPRODUCED + ("" if case["visibility"] == "hidden" else f" ({msg.strip()[:600]})")
        for t in result.tests:
            if t["score"] > 0 and t["name"] != "performance":
                t["score"] = 0
                t["output"] = t.get("output", "") + "\n" + note
        result.problems["kernels"] = note

    def _rec_dir(self, result, what):
        d = self.scratch / f"{result.id}-{what}"
        shutil.rmtree(d, ignore_errors=True)
        return d

    def _replay_sim(self, folder, case, cells):
        """A fresh sandboxed child loads the notebook (its kernels), then launches only the
        recorded kernels on inputs it generates from the fresh case: never the function.
        (True, msg) reproduced; (False, msg) the replay ran every launch and the answer was
        wrong (or nothing was launched); (None, msg) the replay could not be carried out."""
        child = Child(mode="student", functions=self.functions(), cells=cells, simulated=True,
                      limits=self._child_limits(), hide=self._hide_paths(), isolate=self.isolate,
                      drop_uid=self.drop_uid)
        try:
            dest = child.workdir / "recording"
            shutil.copytree(folder, dest)
            for q in [dest, *dest.iterdir()]:
                os.chmod(q, 0o755 if q.is_dir() else 0o644)
            ev = child.recv(self.limits.get("load_s", 120))
            if ev.get("event") == "ready":
                ev = self.ask(child, self.limits.get("load_s", 120), cmd="load")
            if ev.get("event") != "loaded":
                return None, f"the notebook could not be loaded again for the replay: {str(ev)[:300]}"
            r = self.ask(child, self.limits.get("test_s", 60), cmd="replay", recording_dir=str(dest),
                         args=self.kernel_args(case))
            if not r.get("ok"):
                what = f"{r.get('error')}: {r.get('message', '')}"
                if r.get("message", "").endswith("launched no CUDA kernel"):
                    return False, what
                return None, ("a recorded kernel raised while the simulator replayed it: " + what
                              if not r.get("unverifiable") and not r.get("too_large") else what)
            got = child.read_npy(r["file"])
        except ChildError as e:
            return None, self._child_problem(e, child, "replaying your kernels")
        finally:
            child.close()
        return self.lab.check(got, case, self._expected_for(case))

    def _expected_for(self, case, cache=False):
        key = ("case", case["seed"], self.lab.describe(case))
        if key in self._expected:
            return self._expected[key]
        ref = self.lab.expected(case)
        if cache:
            with self.log_lock:
                self._expected[key] = ref
        return ref

    # -- performance: the recorded launches, replayed and timed by the trusted process


class ToolLog:
    """Where compute-sanitizer writes its report for one child: a folder of the grader's own
    (0700, made before the child, so the sandbox hides it), never the submission's working
    directory. The tool runs outside the driver's mount namespace with the grader's uid: a
    report path the submission can reach would let it swap the file for a symlink, and the
    grader would read whatever that points at (another submission's results, the hidden
    cases' seed) into this submission's feedback. Use as a context manager."""

    MAX_BYTES = 1 << 20   # --print-limit caps the tool's reports; a larger file is cut here

    def __enter__(self):
        import tempfile

        self.folder = Path(tempfile.mkdtemp(prefix="ag-sanitizer-"))
        self.path = self.folder / "sanitizer.log"
        return self

    def __exit__(self, *exc):
        shutil.rmtree(self.folder, ignore_errors=True)

    def report(self, child) -> str:
        """What compute-sanitizer wrote: its log, and the child's output too (where a version
        of the tool prints some lines, its summary say, to the terminal anyway); a finding in
        both is one finding (book.sanitizer.explain drops repeats)."""
        try:
            with open(self.path, "rb") as f:
                log = f.read(self.MAX_BYTES).decode(errors="replace")
        except OSError:
            log = ""
        if log.strip() and "=========" not in log:   # a log written without the prefix
            log = "\n".join("========= " + ln for ln in log.splitlines())
        out = child.output_text() if child is not None else ""
        return log + "\n" + "\n".join(ln for ln in out.splitlines() if ln.startswith("========="))


class Sanitizing:
    """``grade --sanitize`` (mixed into grade.Run): the public tests of a submission again, in
    a fresh sandboxed child run under compute-sanitizer (memcheck, then racecheck), with the
    same containment, budgets, hidden paths and uid as every other child (the network namespace
    is made around the tool, which must share it: sandbox._net_around_wrapper). What it finds goes into
    the submission's feedback (a 0-point test and review flags): feedback only, never points,
    because a hazard report is evidence for a person to read, not a wrong answer."""

    SANITIZE_LOAD_FACTOR = 3     # loading and compiling under the tool (debug line info) is slower
    SANITIZE_TEST_FACTOR = 10    # racecheck watches every shared-memory access
    SANITIZE_BUDGET_S = 300      # both tools, one submission: a slow or spinning one costs no more

    def sanitizer_check(self) -> str | None:
        """Once per run: None when compute-sanitizer can run here, else the one line that says
        it is not available on this machine (logged and printed; grading goes on unchanged)."""
        from .feedback import sanitizer_unavailable

        why = sanitizer_unavailable()
        if why is None and not self.lab.kernel:
            why = f"--sanitize: {self.lab_name} has no kernels, nothing for compute-sanitizer to check"
        self.log(kind="sanitizer", available=why is None, reason=why)
        if why:
            self.say(f"--sanitize: {why}")
        return why

    def calibrate_sanitizer(self, gpu: int = 0) -> bool:
        """Once per run, before any submission (as calibrate_sandbox does for the plain child):
        can a child started by compute-sanitizer run a kernel in the grader's sandbox, with
        exactly the isolation the graded children got (calibrate_sandbox's choice)? The
        sanitizer children run each submission's code again, so they never get less: no
        step down to a weaker sandbox (as root with the grader's folders in view, one
        student's code could rewrite another's results). If the tool cannot run there,
        --sanitize is off for this run and the log and the terminal say why; grading is
        unchanged."""
        from .feedback import wrapper_argv, wrapper_keep

        child, text, ok, error = None, "", False, ""
        with ToolLog() as log:
            try:
                child = Child(mode="reference", functions={}, cells=None,
                              simulated=self.simulated, gpu=None if self.simulated else gpu,
                              isolate=self.isolate, drop_uid=self.drop_uid,
                              hide=self._hide_paths(), wrap=wrapper_argv("memcheck", str(log.path)),
                              wrap_env={"NUMBA_CUDA_DEBUGINFO": "1"}, keep=wrapper_keep())
                ev = child.recv(120)
                r = child.request(120, cmd="probe") if ev.get("event") == "loaded" else ev
                child.send(cmd="exit")
                child.proc.wait(timeout=60)
                ok = bool(r.get("ok"))
                if not ok:
                    error = f"the probe kernel did not run ({str(r)[:300]})"
            except Exception as e:  # ChildError (the launcher's fatal says why), a hang, the tool refusing
                error = f"{getattr(e, 'reason', type(e).__name__)}: {getattr(e, 'detail', e)}"[:600]
            finally:
                if child is not None:
                    child.close()
                text = log.report(child)
        ok = ok and "ERROR SUMMARY" in text
        self.log(kind="sanitizer", calibrate="the grader's sandbox", ok=ok, report=text[-3000:],
                 isolation={"isolate": self.isolate, "drop_uid": self.drop_uid},
                 output=None if ok or child is None else child.output_text()[-2000:])
        if ok:
            self.say("--sanitize: compute-sanitizer runs in the grader's sandbox")
            return True
        tool = text.strip()[-300:]
        self.sanitize = False
        why = ("compute-sanitizer could not run a kernel in the grader's sandbox: "
               + "; ".join(x for x in (error, f"the tool said {tool!r}" if tool else "") if x))[:1500]
        self.log(kind="sanitizer", available=False, reason=why)
        self.say(f"--sanitize: {why}")
        return False

    def run_sanitizer(self, result, cells, gpu):
        from .feedback import SANITIZE_TEST, sandbox_findings, wrapper_argv, wrapper_keep

        texts, problems = {}, []
        public = [c for c in self.cases if c["visibility"] == "public"]
        unfinished = [c["name"] for c in public if c["id"] not in getattr(result, "replies", {})]
        if unfinished:   # a hang, a crash, no function: no better under a tool ten times slower
            note = (f"not run: the public test(s) {', '.join(unfinished)} gave no answer in the "
                    "graded run (see their output), and compute-sanitizer would run them about "
                    "ten times slower")
            result.tests.append({"name": SANITIZE_TEST, "score": 0, "max_score": 0,
                                 "visibility": "visible", "output": note})
            self.log(kind="sanitizer", id=result.id, skipped=note)
            return
        end = time.monotonic() + self.SANITIZE_BUDGET_S
        load_s = self.limits.get("load_s", 120) * self.SANITIZE_LOAD_FACTOR
        test_s = self.limits.get("test_s", 60) * self.SANITIZE_TEST_FACTOR
        for tool in ("memcheck", "racecheck"):
            child, passed = None, []
            if end - time.monotonic() < 10:
                problems.append(f"{tool}: not run: this submission's {self.SANITIZE_BUDGET_S} s "
                                "under compute-sanitizer were spent")
                continue
            with ToolLog() as log:
                try:
                    # (simulated only in tests, with a stand-in wrapper: sanitizer_check() turns
                    # --sanitize off in a simulator run)
                    child = Child(mode="student", functions=self.functions(), cells=cells,
                                  simulated=self.simulated, gpu=None if self.simulated else gpu,
                                  limits=self._child_limits(),
                                  hide=self._hide_paths(), isolate=self.isolate,
                                  drop_uid=self.drop_uid, wrap=wrapper_argv(tool, str(log.path)),
                                  wrap_env={"NUMBA_CUDA_DEBUGINFO": "1"}, keep=wrapper_keep())
                    def left(cap):   # this submission's sanitizer budget bounds every wait
                        return max(1.0, min(cap, end - time.monotonic()))

                    ev = child.recv(left(load_s))
                    if ev.get("event") == "ready":
                        ev = self.ask(child, left(load_s), cmd="load")
                    if ev.get("event") != "loaded":
                        raise ChildError("load", f"unexpected answer {str(ev)[:200]}")
                    for case in public:
                        r = self.ask(child, left(test_s), **self.test_message(case))
                        passed.append(self.judge(case, r, child)[0])
                    child.send(cmd="exit")
                    try:   # the tool writes its summary as the driver exits
                        child.proc.wait(timeout=60)
                    except Exception:
                        pass
                except (ChildError, OSError) as e:
                    problems.append(f"{tool}: the public tests did not finish under compute-sanitizer "
                                    f"({getattr(e, 'reason', type(e).__name__)}: "
                                    f"{getattr(e, 'detail', e)})"[:500])
                finally:
                    if child is not None:
                        child.close()   # the tool has exited: its log is whole
                        texts[tool] = log.report(child)
            self.log(kind="sanitizer", id=result.id, tool=tool, tests_passed=passed,
                     report=texts.get(tool, "")[-6000:])
        from book.sanitizer import _refused

        refused = next((w for w in map(_refused, texts.values()) if w), None)
        findings = ([f"compute-sanitizer is not available on this machine: it refused to run "
                     f"in the sandbox ({refused})"] if refused else
                    sandbox_findings(texts) + problems)
        for f in findings:
            result.flags.append({"level": "info", "what": f"compute-sanitizer: {f}",
                                 "where": "public tests under compute-sanitizer"})
        result.tests.append({"name": SANITIZE_TEST, "score": 0, "max_score": 0,
                             "visibility": "visible", "status": "failed" if findings else "passed",
                             "output": "\n".join(findings) if findings else
                             "no findings: memcheck and racecheck saw nothing wrong in the "
                             "public tests"})
