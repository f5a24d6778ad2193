"""The grader's side of compute-sanitizer, in one place: whether it can run here, its command
line inside the sandbox, where its report is written, the sentences made from its findings,
``check(fn, sanitize=True)``'s route (``sanitize``) and ``grade --sanitize``'s (``Sanitizer``,
one part of a grading run). The tool itself (finding it, running it, parsing its reports) is
the library's: :mod:`book.sanitizer`.

What it finds is feedback only, never points: a hazard report is evidence for a person to
read, not a wrong answer.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .context import RunContext
from .feedback import NOT_AVAILABLE, StudentSource, child_env, student_source, write_job
from .judge import verdict
from .results import TestRecord
from .sandbox import ChildError

__all__ = ["sanitize", "sanitizer_unavailable", "sandbox_findings", "findings_sentences",
           "wrapper_argv", "wrapper_keep", "ToolLog", "Sanitizer", "run_public_tests",
           "SANITIZE_TEST"]

# compute-sanitizer's time on one student's code is book.sanitizer.TIMEOUT_S: each tool's in
# check() (a process per tool), both tools' together in grade --sanitize (a slow or spinning
# submission costs no more). Read when used: importing book decides GPU or simulator.
SANITIZE_TEST = "compute-sanitizer: memcheck and racecheck (feedback, no points)"
DONE_MARKER = "AG-SANITIZE-DONE"   # printed by the child when the public tests finished


# ------------------------------------------------------------------------------ here or not
def sanitizer_unavailable() -> str | None:
    """The one line saying why compute-sanitizer cannot run here, or None when it can."""
    import book  # noqa: F401
    from book import gpu
    from book import sanitizer as tool

    if gpu.SIMULATED:
        return (f"compute-sanitizer is {NOT_AVAILABLE}: this session runs Numba's CUDA "
                "simulator (no GPU), and the tool watches kernels on a GPU; the values were "
                "still checked")
    if tool.find() is None:
        return (f"compute-sanitizer is {NOT_AVAILABLE}: it comes with the CUDA toolkit and was "
                "not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; the values were "
                "still checked")
    return None


# ------------------------------------------------------------------------------ check()
def sanitize(lab, fn=None, *, source=None, cells=None, timeout_s: float | None = None) -> list[str]:
    """compute-sanitizer's findings (memcheck, racecheck) on the lab's public tests, as
    sentences pointing at the student's own lines; [] when it found nothing.

    The student's code (``fn``'s notebook history or file, or ``source``/``cells``) re-runs in
    a fresh process under each tool (autograder.feedback's re-run, whose child calls
    ``run_public_tests``). Exactly one line containing "not available on this machine" where
    compute-sanitizer cannot run here (no GPU, the simulator, no toolkit). ``timeout_s``: each
    tool's, ``book.sanitizer.TIMEOUT_S`` unless given.
    """
    from . import labs as _labs

    lab = lab if isinstance(lab, _labs.LabSpec) else _labs.get(lab)
    unavailable = sanitizer_unavailable()
    if unavailable:
        return [unavailable]
    if not lab.kernel:
        return [f"{lab.name} has no kernels: nothing for compute-sanitizer to check"]
    try:
        src = student_source(fn, source=source, cells=cells)
    except ValueError as e:
        return [f"compute-sanitizer not run: {e}"]
    from book import sanitizer as tool

    timeout_s = tool.TIMEOUT_S if timeout_s is None else timeout_s
    with tempfile.TemporaryDirectory(prefix="ag-sanitize-") as tmp:
        tmp = Path(tmp)
        job = write_job(tmp, lab, src, "sanitize", timeout_s)
        try:
            res = tool.run([sys.executable, "-m", "autograder.feedback", str(job)],
                           timeout=timeout_s, env=child_env(False), cwd=tmp)
        except tool.Unavailable as e:
            return [str(e) if NOT_AVAILABLE in str(e) else
                    f"compute-sanitizer is {NOT_AVAILABLE}: {e}"]
        return findings_sentences(res, src, tmp / "student.py")


def run_public_tests(lab, fn) -> int:
    """In the re-run child under the tool: the public tests, as check() runs them (values
    compared, so a race that changes them is seen as both); the marker tells the parent the
    tests finished."""
    t0 = time.monotonic()
    for case in lab.public_cases:
        # exact allocations: memcheck reports a store past an allocation, not past a guard zone
        got, note = lab.call_here(fn, case, guard=False)
        ok, msg = lab.check(got, case)
        print(("PASS " if ok and not note else "FAIL ") + f"{case['name']}: {msg}{note}",
              flush=True)
    print(f"{DONE_MARKER} in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


def findings_sentences(res: dict, src: StudentSource, student_file, limit: int = 6) -> list[str]:
    """book.sanitizer.explain's sentences on the student's file, with its line numbers turned
    into the student's own (cell and line); a note when the tests did not run at all."""
    from book import sanitizer as tool

    name = Path(student_file).name
    out = []
    for s in tool.explain(res, own_files=[student_file], limit=limit):
        s = s.replace(f"at {name}, line ", "at line ")
        out.append(re.sub(r"\bline (\d+)", lambda m: src.where(int(m.group(1))), s))
    for which, r in res.items():   # a run that never reached the tests proves nothing
        text = r.get("output", "")
        if DONE_MARKER not in text:
            tail = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("=")]
            why = tail[-1][:300] if tail else f"exit status {r.get('returncode')}"
            out.append(f"{which}: the public tests did not finish under compute-sanitizer "
                       f"({why})")
    return out


# ------------------------------------------------------------------------------ the sandbox
def wrapper_argv(tool: str, log_file: str) -> list[str]:
    """compute-sanitizer's command line for ``grade --sanitize``: the flags of
    ``book.sanitizer.run`` (``book.sanitizer.command``), with the report written to
    ``log_file`` (the submission's own prints share its stdout)."""
    from book import sanitizer

    exe = sanitizer.find()
    if exe is None:
        raise FileNotFoundError("compute-sanitizer")
    return [exe, *sanitizer.command(tool), "--log-file", log_file]


def wrapper_keep() -> list[str]:
    """Folders the sandbox must leave visible for compute-sanitizer to run inside it: its
    own (through any symlink) and the installation above it (its libraries, its tools)."""
    from book import sanitizer

    exe = sanitizer.find()
    if exe is None:
        return []
    out = set()
    for p in (Path(exe), Path(exe).resolve()):
        out |= {str(p.parent), str(p.parent.parent)}
    return sorted(out)


def _wrapper(tool: str, log_file: str) -> dict:
    """The Child arguments that run the driver under one tool (with line information)."""
    return {"wrap": wrapper_argv(tool, log_file), "wrap_env": {"NUMBA_CUDA_DEBUGINFO": "1"},
            "keep": wrapper_keep()}


_CELL = re.compile(r"<cell (\d+)>")


def sandbox_findings(texts: dict, limit: int = 6) -> list[str]:
    """Sentences from compute-sanitizer's reports of a submission graded in the sandbox.

    ``texts``: {tool: report text}. The driver compiles cell N as ``<cell N>``; the report
    names that file, and the sentence says "cell N, line M". Every kernel in that process is
    the student's (the driver launches none of its own), so findings without line information
    are kept too, not filtered out as someone else's.
    """
    from book import sanitizer

    res = {}
    for tool, text in texts.items():
        if text and "=========" not in text:   # a log file may be written without the prefix
            text = "\n".join("========= " + ln for ln in text.splitlines())
        text = _CELL.sub(lambda m: f"cell{m.group(1)}.py", text or "")
        res[tool] = {"findings": sanitizer.parse(tool, text), "output": text}
    return [re.sub(r"cell(\d+)\.py, line", r"cell \1, line", s)
            for s in sanitizer.explain(res, limit=limit)]


class ToolLog:
    """Where compute-sanitizer writes its report for one child: a folder of the grader's own
    (0700, made before the child, so the sandbox hides it), never the submission's working
    directory. The tool runs outside the driver's mount namespace with the grader's uid: a
    report path the submission can reach would let it swap the file for a symlink, and the
    grader would read whatever that points at (another submission's results, the hidden
    cases' seed) into this submission's feedback. Use as a context manager."""

    MAX_BYTES = 1 << 20   # --print-limit caps the tool's reports; a larger file is cut here

    def __enter__(self):
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


# ------------------------------------------------------------------------------ grade --sanitize
class Sanitizer:
    """``grade --sanitize``, one part of a grading run: the public tests of a submission
    again, in a fresh sandboxed child run under compute-sanitizer (memcheck, then racecheck),
    with the same containment, budgets, hidden paths and uid as every other child (the run's
    ChildFactory; the network namespace is made around the tool, which must share it: see
    autograder/sandbox). What it finds goes into the submission's feedback (a 0-point test and
    review flags). ``enabled`` turns off, said once, where the tool cannot run."""

    LOAD_FACTOR = 3     # loading and compiling under the tool (debug line info) is slower
    TEST_FACTOR = 10    # racecheck watches every shared-memory access

    def __init__(self, ctx: RunContext, enabled: bool):
        self.ctx = ctx
        self.enabled = enabled

    def unavailable(self) -> str | None:
        """None when compute-sanitizer can run here, else the one line that says it is not
        available on this machine."""
        why = sanitizer_unavailable()
        if why is None and not self.ctx.lab.kernel:
            why = f"--sanitize: {self.ctx.lab_name} has no kernels, nothing for compute-sanitizer to check"
        return why

    def prepare(self, gpu: int = 0) -> bool:
        """Once per run, before any submission: turned off (logged and said, grading goes on
        unchanged) where the tool is not available or cannot run in the grader's sandbox."""
        why = self.unavailable()
        self.ctx.log(kind="sanitizer", available=why is None, reason=why)
        if why:
            self.ctx.say(f"--sanitize: {why}")
            self.enabled = False
        elif not self.ctx.simulated:
            self.calibrate(gpu)
        return self.enabled

    def calibrate(self, gpu: int = 0) -> bool:
        """Can a child started by compute-sanitizer run a kernel in the grader's sandbox, with
        exactly the isolation the graded children got (calibrate_sandbox's choice)? The
        sanitizer children run each submission's code again, so they never get less: no
        step down to a weaker sandbox (as root with the grader's folders in view, one
        student's code could rewrite another's results). If the tool cannot run there,
        --sanitize is off for this run and the log and the terminal say why; grading is
        unchanged."""
        ctx = self.ctx
        child, text, ok, error = None, "", False, ""
        with ToolLog() as log:
            try:
                child = ctx.children.probe(gpu, simulated=ctx.simulated,
                                           **_wrapper("memcheck", str(log.path)))
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
        ctx.log(kind="sanitizer", calibrate="the grader's sandbox", ok=ok, report=text[-3000:],
                isolation={"isolate": ctx.children.isolate, "drop_uid": ctx.children.drop_uid},
                output=None if ok or child is None else child.output_text()[-2000:])
        if ok:
            ctx.say("--sanitize: compute-sanitizer runs in the grader's sandbox")
            return True
        tool = text.strip()[-300:]
        self.enabled = False
        why = ("compute-sanitizer could not run a kernel in the grader's sandbox: "
               + "; ".join(x for x in (error, f"the tool said {tool!r}" if tool else "") if x))[:1500]
        ctx.log(kind="sanitizer", available=False, reason=why)
        ctx.say(f"--sanitize: {why}")
        return False

    def run(self, result, cells, gpu):
        """The submission's public tests under each tool; its findings as a 0-point test and
        review flags of ``result``."""
        # not at import: grade decides GPU or simulator first
        from book.sanitizer import TIMEOUT_S as budget_s, refusal_reason

        ctx = self.ctx
        texts, problems = {}, []
        public = [c for c in ctx.cases if c["visibility"] == "public"]
        unfinished = [c["name"] for c in public if c["id"] not in getattr(result, "replies", {})]
        if unfinished:   # a hang, a crash, no function: no better under a tool ten times slower
            note = (f"not run: the public test(s) {', '.join(unfinished)} gave no answer in the "
                    "graded run (see their output), and compute-sanitizer would run them about "
                    "ten times slower")
            result.tests.append(TestRecord(SANITIZE_TEST, 0, output=note))
            ctx.log(kind="sanitizer", id=result.id, skipped=note)
            return
        end = time.monotonic() + budget_s
        load_s = ctx.limits.get("load_s", 120) * self.LOAD_FACTOR
        test_s = ctx.limits.get("test_s", 60) * self.TEST_FACTOR
        for tool in ("memcheck", "racecheck"):
            child, passed = None, []
            if end - time.monotonic() < 10:
                problems.append(f"{tool}: not run: this submission's {budget_s:.0f} s "
                                "under compute-sanitizer were spent")
                continue
            with ToolLog() as log:
                try:
                    # (simulated only in tests, with a stand-in wrapper: prepare() turns
                    # --sanitize off in a simulator run)
                    child = ctx.children.student(cells, gpu, **_wrapper(tool, str(log.path)))

                    def left(cap):   # this submission's sanitizer budget bounds every wait
                        return max(1.0, min(cap, end - time.monotonic()))

                    ev = child.recv(left(load_s))
                    if ev.get("event") == "ready":
                        ev = ctx.ask(child, left(load_s), cmd="load")
                    if ev.get("event") != "loaded":
                        raise ChildError("load", f"unexpected answer {str(ev)[:200]}")
                    for case in public:
                        # exact allocations: memcheck sees a store past an allocation's
                        # end, not past a guard zone's (the graded run found those)
                        r = ctx.ask(child, left(test_s), **ctx.test_message(case, guard=False))
                        passed.append(verdict(ctx, case, r, child, guard=False)[0])
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
            ctx.log(kind="sanitizer", id=result.id, tool=tool, tests_passed=passed,
                    report=texts.get(tool, "")[-6000:])
        refused = next((w for w in map(refusal_reason, texts.values()) if w), None)
        findings = ([f"compute-sanitizer is {NOT_AVAILABLE}: it refused to run "
                     f"in the sandbox ({refused})"] if refused else
                    sandbox_findings(texts) + problems)
        for f in findings:
            result.flags.append({"level": "info", "what": f"compute-sanitizer: {f}",
                                 "where": "public tests under compute-sanitizer"})
        result.tests.append(TestRecord(
            SANITIZE_TEST, 0, status="failed" if findings else "passed",
            output="\n".join(findings) if findings else
            "no findings: memcheck and racecheck saw nothing wrong in the public tests"))
