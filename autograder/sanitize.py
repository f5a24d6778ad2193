"""The grader's side of compute-sanitizer, in one place: whether it can run here, its command
line inside the sandbox, where its report is written, the case it runs, its findings made into
hazards (autograder/hazards.py), ``check(fn, sanitize=True)``'s route (``sanitize``) and
``grade``'s (``Sanitizer``, one part of a grading run, on by default on a GPU). The tool itself
(finding it, running it, parsing its reports) is the library's: :mod:`book.sanitizer`.

In ``grade`` a finding costs the sanitized case its points (issue 41): a race on shared memory
(racecheck), a barrier not every thread reaches (synccheck), a read outside an array (memcheck),
each said in the words every grader uses (``autograder.hazards``). Only the tool's report file
counts, which the grader owns: nothing the submission prints can cost or gain a point.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from . import hazards as _hazards
from .context import RunContext
from .hazards import Hazard
from .judge import hazard_words, verdict
from .rerun import StudentSource, child_env, command, run_job, student_source, write_job
from .results import TestRecord
from .sandbox import ChildError
from .submission import read_cells

__all__ = ["sanitize", "sanitizer_unavailable", "sandbox_findings", "findings_sentences",
           "wrapper_argv", "wrapper_keep", "ToolLog", "Sanitizer", "run_public_tests",
           "SANITIZE_TEST", "GRADE_TOOLS", "hazards_from_reports", "fallback_case",
           "case_by_paths", "case_bytes", "case_arrays"]

# compute-sanitizer's time on one student's code is book.sanitizer.TIMEOUT_S: each tool's in
# check() (a process per tool), the three tools' together in grade (a slow or spinning
# submission costs no more). Read when used: importing book decides GPU or simulator.
NOT_AVAILABLE = "not available on this machine"
SANITIZE_TEST = "compute-sanitizer: racecheck, synccheck and memcheck on one public case"
DONE_MARKER = "AG-SANITIZE-DONE"   # printed by the child when the public tests finished
# grade's tools, in the order they run (one child each: the tool watches one process, and a
# process runs under one tool); a tool the budget leaves no time for checks nothing, costs nothing
GRADE_TOOLS = ("racecheck", "memcheck", "synccheck")
TURNED_OFF = ("not run: compute-sanitizer was turned off for this grading run (--no-sanitize); "
              "nothing was taken for it")


# ------------------------------------------------------------------------------ the case
def case_bytes(lab, case) -> int:
    """Bytes of every array of ``case`` (inputs and output, no guard zones)."""
    import numpy as np

    total = 0
    for a in lab.args(case, guard=False):
        if a["role"] in ("in", "out"):
            shape, dtype = (a["shape"], a["dtype"]) if a["role"] == "out" else \
                (a["spec"]["shape"], a["spec"].get("dtype", "float32"))
            total += int(np.prod(shape)) * np.dtype(dtype).itemsize
    return total


def fallback_case(lab, public: list) -> dict:
    """The public case compute-sanitizer runs where the master's paths are not known: the
    largest (its arrays' bytes), which takes the most of a kernel's loops and blocks."""
    return max(public, key=lambda c: case_bytes(lab, c))


def case_by_paths(lab, public: list, taken: dict) -> dict:
    """The smallest public case that takes the most of the lab's declared paths (``taken``:
    case name -> the paths the master took there, ``lab.paths_taken``)."""
    return min(public, key=lambda c: (-len(taken.get(c["name"], ())), case_bytes(lab, c)))


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
    a fresh process under each tool (rerun.py; ``python -m autograder.sanitize JOB`` is that
    process, and runs ``run_public_tests``). Exactly one line containing "not available on this machine" where
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
        job = write_job(tmp, lab, src, timeout_s)
        try:
            res = tool.run(command("autograder.sanitize", job),
                           timeout=timeout_s, env=child_env(False), cwd=tmp)
        except tool.Unavailable as e:
            return [str(e) if NOT_AVAILABLE in str(e) else
                    f"compute-sanitizer is {NOT_AVAILABLE}: {e}"]
        return findings_sentences(res, src, tmp / "student.py")


def run_public_tests(lab, fn, job=None) -> int:
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

    def report(self, child=None) -> str:
        """What compute-sanitizer wrote into its log (``--log-file``: all of its text output),
        and nothing else: the child's own output is the submission's to print, and a line it
        printed that looks like the tool's ("========= Invalid __global__ read", "No
        CUDA-capable device") must neither cost a point nor turn the check off. (``child`` is
        accepted and ignored, for callers that pass it.)"""
        try:
            with open(self.path, "rb") as f:
                log = f.read(self.MAX_BYTES).decode(errors="replace")
        except OSError:
            log = ""
        if log.strip() and "=========" not in log:   # a log written without the prefix
            log = "\n".join("========= " + ln for ln in log.splitlines())
        return log


# ------------------------------------------------------------------------------ findings -> hazards
def _where(f) -> str:
    """A finding's place in the student's words: "cell N, line M" (the driver compiles cell N
    as ``<cell N>``, sandbox_findings' ``cellN.py``), else the file's name and line."""
    if not f.file or not f.line:
        return ""
    name = Path(f.file).name
    m = re.fullmatch(r"cell(\d+)\.py", name)
    return f"cell {m.group(1)}, line {f.line}" if m else f"{name}, line {f.line}"


def _line_words(file, line) -> str:
    if not file or not line:
        return "a line without line information"
    m = re.fullmatch(r"cell(\d+)\.py", Path(file).name)
    return f"cell {m.group(1)}, line {line}" if m else f"{Path(file).name}, line {line}"


def _array_of(f, arrays: dict):
    """(name, flat index of the access, elements) of the array a memcheck finding's address
    ran past: the allocation nearest to it (which the report names, with its size), matched to
    the case's arrays by their exact sizes (the sanitized case's arrays are exact allocations,
    ``guard=False``). A size two arrays share (``wg`` and ``wu``), or no array's (a scratch
    array of the submission's own), names none: (None, None, None)."""
    if f.nearest is None or f.address is None:
        return None, None, None
    base, size = f.nearest
    named = [n for n, (nbytes, _isz) in arrays.items() if nbytes == size]
    if len(named) != 1:
        return None, None, None
    name = named[0]
    nbytes, isz = arrays[name]
    return name, (f.address - base) // isz, nbytes // isz


def _memcheck_hazard(f, arrays: dict, total: int) -> Hazard | None:
    """A memcheck finding as a hazard: a read outside an array (read_past) where the report
    says a read of global, shared or local memory out of bounds; None for anything else (a
    write past an allocation, a misaligned access: the graded run's guard zones and its CUDA
    error judge those; they are kept as a note)."""
    if f.kind != "read":
        return None
    name, index, n = _array_of(f, arrays) if f.space == "global" else (None, None, None)
    who = f"read of {f.size} bytes by block {f.block}, thread {f.thread} ({_line_words(f.file, f.line)})"
    if name is not None:
        past = (f"{index - n + 1} element(s) past the end" if index >= n else
                f"{-index} element(s) before the start")
        detail = f"{who}: {past} (`{name}` has {n} elements, flat indices 0 to {n - 1})"
        array = name
    elif f.space == "global" and f.nearest:
        detail = (f"{who}: outside an allocation of {f.nearest[1]:,} bytes, the size of none "
                  "of this case's arrays or of two of them")
        array = f"a device array of {f.nearest[1]:,} bytes"
    else:
        detail = who
        array = f"{f.space} memory" if f.space in ("shared", "local") else "an array"
    if total > 1:
        detail += f"; memcheck counted {total} such accesses"
    return Hazard("read_past", array, index, detail[:300], _where(f), "memcheck")


def _racecheck_hazard(found: list, total: int) -> Hazard:
    """racecheck's hazards as one race on shared memory, said by one of them: a hazard between
    two warps first (racecheck's "Error"), else one between two threads of a warp ("Warning:
    (Warp Level Programming)")."""
    f = min(found, key=lambda x: (x.warp_level, x.line is None))
    pair = " and ".join(f"{k} by thread {t} ({_line_words(fl, ln)})"
                        for k, t, fl, ln in f.accesses) or f.detail
    detail = f"{pair} of block {f.block} with no cuda.syncthreads() between"
    if f.warp_level:   # racecheck's "Warp Level Programming" warning
        detail += " (two threads of one warp: its threads need not run in step)"
    if total > 1:
        detail += f"; racecheck counted {total} such hazards"
    return Hazard("race_shared", "shared memory", None, detail[:300], _where(f), "racecheck")


def _synccheck_hazard(found: list, total: int) -> Hazard:
    f = found[0]
    what = re.sub(r"^Barrier error detected\.\s*", "", f.what).rstrip(".") or f.what
    detail = (f"synccheck: \"{what}\" at the barrier of block {f.block} reached by thread "
              f"{f.thread}")
    if total > 1:
        detail += f"; synccheck counted {total} such errors"
    return Hazard("barrier", "", None, detail[:300], _where(f), "synccheck")


def _total(tool: str, text: str, shown: int) -> int:
    """How many the tool counted in all (its summary: memcheck's and synccheck's errors,
    racecheck's errors and warnings), at least those shown."""
    if tool == "racecheck":
        m = re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?", text)
        n = int(m.group(1)) + int(m.group(2)) if m else 0
    else:
        m = re.search(r"ERROR SUMMARY: (\d+) errors?", text)
        n = int(m.group(1)) if m else 0
    return max(shown, n)


def hazards_from_reports(texts: dict, arrays: dict) -> tuple[list[Hazard], list[str]]:
    """compute-sanitizer's reports of one case (``texts``: {tool: the report the grader's log
    file holds}) as hazards that cost the case its points, and notes that cost nothing (a
    report line this parser has no pattern for, errors counted but not printed, a write past an
    allocation): those are for a person to read, since the grader cannot say what they are.
    ``arrays``: {name: (bytes, item size)} of the case's arrays, exact allocations. A CUDA API
    error the tool prints (Numba's cuGetProcAddress probes) is neither."""
    from book import sanitizer

    found, notes = [], []
    for tool, text in texts.items():
        if not text:
            continue
        text = _CELL.sub(lambda m: f"cell{m.group(1)}.py", text)
        fs = sanitizer.parse(tool, text)
        known = [f for f in fs if f.kind is not None]
        total = _total(tool, text, len(known))
        if tool == "racecheck" and known:
            found.append(_racecheck_hazard(known, total))
        elif tool == "synccheck" and known:
            found.append(_synccheck_hazard(known, total))
        elif tool == "memcheck":   # one hazard per array, said by its access nearest to it
            best = {}
            for f in known:
                h = _memcheck_hazard(f, arrays, total)
                if h is None:
                    notes.append(re.sub(r"cell(\d+)\.py, line", r"cell \1, line", f.sentence()))
                    continue
                n = arrays.get(h.array, (0, 1))[0] // arrays.get(h.array, (0, 1))[1]
                far = (h.index - n if h.index >= n else -h.index) if h.index is not None else 0
                if h.array not in best or far < best[h.array][0]:
                    best[h.array] = (far, h)
            found += [h for _far, h in best.values()]
        for f in fs:
            if f.kind is None:   # printed as an error or warning, in no form this parser knows
                notes.append(f.sentence())
        more = sanitizer.unshown(tool, text, fs)
        if more and not known:   # counted, none shown: the grader cannot say what they are
            notes.append(more)
    return found, list(dict.fromkeys(notes))[:8]


def case_arrays(lab, case) -> dict:
    """{name: (bytes, item size)} of the arrays the child builds for ``case`` without guard
    zones (the allocations memcheck's report names by base and size)."""
    import numpy as np

    out = {}
    for a in lab.args(case, guard=False):
        if a["role"] in ("in", "out"):
            shape, dtype = (a["shape"], a["dtype"]) if a["role"] == "out" else \
                (a["spec"]["shape"], a["spec"].get("dtype", "float32"))
            isz = np.dtype(dtype).itemsize
            out[a["name"]] = (int(np.prod(shape)) * isz, isz)
    return out


# ------------------------------------------------------------------------------ grade
class Sanitizer:
    """One part of a grading run, on by default on a GPU (``--no-sanitize`` turns it off, said
    in the log and in each submission's feedback): ONE public case of each submission again
    (``case``: the smallest that takes the most of the lab's declared paths when the lab's
    master runs it here; the largest public case where the lab declares none), in a fresh
    sandboxed child per tool run under compute-sanitizer (racecheck, memcheck, synccheck: a
    process runs under one tool), with the same containment, budgets, hidden paths and uid as
    every other child (the run's ChildFactory; the network namespace is made around the tool,
    which must share it: see autograder/sandbox), its arrays exact allocations
    (``guard=False``: memcheck sees a read just past one, with ``--padding`` after each).

    A finding costs that case its points (its TestRecord: score 0, its output the hazard's
    words, ``judge.hazard_words``); a 0-point test says which case was checked by which tool
    and what was found or not checked. What the tool could not check costs nothing: a tool that
    cannot run on this machine (said once, before any submission), a tool the 300 s budget left
    no time for, a case that did not finish under the tool (then a review flag). Only the
    tool's log file, in a folder of the grader's, is read: never the child's output."""

    LOAD_FACTOR = 3     # loading and compiling under the tool (debug line info) is slower
    TEST_FACTOR = 10    # racecheck watches every shared-memory access

    def __init__(self, ctx: RunContext, enabled: bool):
        self.ctx = ctx
        self.enabled = enabled
        self.turned_off = not enabled   # by the run's caller (--no-sanitize), not by the machine
        self.case = None                # the public case sanitized (prepare)

    def unavailable(self) -> str | None:
        """None when compute-sanitizer can run here, else the one line that says it is not
        available on this machine."""
        why = sanitizer_unavailable()
        if why is None and not self.ctx.lab.kernel:
            why = f"{self.ctx.lab_name} has no kernels, nothing for compute-sanitizer to check"
        return why

    def public(self) -> list:
        return [c for c in self.ctx.cases if c["visibility"] == "public"]

    def prepare(self, gpu: int = 0) -> bool:
        """Once per run, before any submission: turned off (logged and said once, grading goes
        on unchanged) where the tool is not available or cannot run in the grader's sandbox;
        otherwise the case it runs is chosen (``choose_case``)."""
        ctx = self.ctx
        if self.turned_off:
            ctx.log(kind="sanitizer", enabled=False, reason="turned off for this run (--no-sanitize)")
            if not ctx.simulated and ctx.lab.kernel:
                ctx.say("compute-sanitizer: turned off (--no-sanitize): each submission's "
                        "feedback says its case was not checked")
            return False
        why = self.unavailable()
        ctx.log(kind="sanitizer", available=why is None, reason=why)
        if why:
            ctx.say(why)
            self.enabled = False
            return False
        if not ctx.simulated and self.calibrate(gpu):
            self.case = self.choose_case(gpu)
        return self.enabled

    def choose_case(self, gpu: int = 0) -> dict:
        """The public case the tools run: the smallest that takes the most of the lab's
        declared paths (``lab.paths``, e.g. lab 6's split-K) when the lab's master
        (solutions/LAB.ipynb, trusted) runs each public case in a sandboxed child on this GPU;
        the largest public case where the lab declares no paths or the master's launches
        cannot be read (said in the log)."""
        ctx, lab, public = self.ctx, self.ctx.lab, self.public()
        taken, why = {}, None
        if not getattr(lab, "paths", ()):
            why = "the lab declares no paths"
        else:
            try:
                taken = self._master_paths(gpu, public)
            except Exception as e:   # ChildError, no master: the grader's problem, not a class's
                why = (f"the master's launches could not be read ({type(e).__name__}: "
                       f"{getattr(e, 'detail', e)})")[:300]
        case = case_by_paths(lab, public, taken) if taken and not why else fallback_case(lab, public)
        ctx.log(kind="sanitizer", case=case["name"], paths=taken or None,
                chosen_by="the master's paths" if taken and not why else f"the largest: {why}")
        ctx.say(f"compute-sanitizer: racecheck, synccheck and memcheck on {case['name']}")
        return case

    def _master_paths(self, gpu: int, public: list) -> dict:
        from .timing import REPO

        ctx = self.ctx
        cells = read_cells(REPO / "solutions" / f"{ctx.lab_name}.ipynb")
        got = ctx.load(cells, gpu, who="(master, paths)")
        child, taken = got.child, {}
        try:
            if not got.loaded:
                raise ChildError("load", f"the master did not load: {got.describe()[:200]}")
            for case in public:
                r = ctx.ask(child, ctx.limits.get("test_s", 60) * 2,
                            **ctx.test_message(case, guard=False))
                shapes = r.get("launch_shapes")
                if not r.get("ok") or not isinstance(shapes, list) or not shapes:
                    raise ChildError("call", f"{case['name']}: no launches recorded "
                                     f"({r.get('error') or 'no launch_shapes'})")
                taken[case["name"]] = ctx.lab.paths_taken(case, shapes)
        finally:
            if child is not None:
                child.close()
        return taken

    def calibrate(self, gpu: int = 0) -> bool:
        """Can a child started by compute-sanitizer run a kernel in the grader's sandbox, with
        exactly the isolation the graded children got (calibrate_sandbox's choice)? The
        sanitizer children run each submission's code again, so they never get less: no
        step down to a weaker sandbox (as root with the grader's folders in view, one
        student's code could rewrite another's results). If the tool cannot run there,
        it is off for this run and the log and the terminal say why; grading is unchanged."""
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
                text = log.report()
        ok = ok and "ERROR SUMMARY" in text
        ctx.log(kind="sanitizer", calibrate="the grader's sandbox", ok=ok, report=text[-3000:],
                isolation={"isolate": ctx.children.isolate, "drop_uid": ctx.children.drop_uid},
                output=None if ok or child is None else child.output_text()[-2000:])
        if ok:
            ctx.say("compute-sanitizer runs in the grader's sandbox")
            return True
        tool = text.strip()[-300:]
        self.enabled = False
        why = ("compute-sanitizer could not run a kernel in the grader's sandbox: "
               + "; ".join(x for x in (error, f"the tool said {tool!r}" if tool else "") if x))[:1500]
        ctx.log(kind="sanitizer", available=False, reason=why)
        ctx.say(f"compute-sanitizer: {why}")
        return False

    def run(self, result, cells, gpu):
        """The sanitized case of one submission under each tool; a finding costs that case
        its points. Turned off by the run's caller: on a GPU the feedback says the case was
        not checked; unavailable on this machine: nothing per submission (said once)."""
        ctx = self.ctx
        if not self.enabled:
            if self.turned_off and not ctx.simulated and ctx.lab.kernel:
                result.tests.append(TestRecord(SANITIZE_TEST, 0, output=TURNED_OFF))
            return
        # not at import: grade decides GPU or simulator first
        from book.sanitizer import TIMEOUT_S as budget_s, refusal_reason

        case = self.case or fallback_case(ctx.lab, self.public())
        test = result.test(case["name"])
        reply = getattr(result, "replies", {}).get(case["id"])
        if test is None or reply is None:   # a hang, a crash, no function: no better under a tool
            note = (f"not run: the public test {case['name']} gave no answer in the graded run "
                    "(see its output), and compute-sanitizer would run it several times slower")
            result.tests.append(TestRecord(SANITIZE_TEST, 0, output=note))
            ctx.log(kind="sanitizer", id=result.id, skipped=note)
            return
        texts, unchecked = {}, []
        end = time.monotonic() + budget_s
        load_s = ctx.limits.get("load_s", 120) * self.LOAD_FACTOR
        test_s = ctx.limits.get("test_s", 60) * self.TEST_FACTOR
        for tool in GRADE_TOOLS:
            if end - time.monotonic() < 10:
                unchecked.append(f"{tool}: not run: this submission's {budget_s:.0f} s under "
                                 "compute-sanitizer were spent")
                continue
            t0 = time.monotonic()
            texts[tool], answered, problem = self._one_tool(tool, case, cells, gpu, result,
                                                           end, load_s, test_s)
            refused = refusal_reason(texts[tool])
            if refused:   # the tool's own words, in its own log: this machine, not the student
                unchecked.append(f"{tool}: compute-sanitizer is {NOT_AVAILABLE}: it refused to "
                                 f"run in the sandbox ({refused})")
                texts.pop(tool)
            elif problem:
                unchecked.append(f"{tool}: {problem}")
            ctx.log(kind="sanitizer", id=result.id, tool=tool, case=case["name"],
                    answered=answered, seconds=round(time.monotonic() - t0, 1),
                    report=texts.get(tool, "")[-6000:])
        found, notes = hazards_from_reports(texts, case_arrays(ctx.lab, case))
        ctx.log(kind="sanitizer", id=result.id, case=case["name"],
                hazards=[h.to_json() for h in found], notes=notes, unchecked=unchecked)
        self._apply(result, case, test, found, notes, unchecked)

    def _one_tool(self, tool, case, cells, gpu, result, end, load_s, test_s):
        """One child under ``tool`` running ``case`` once: (the tool's report, whether the case
        answered, what stopped it: "" when nothing did)."""
        ctx = self.ctx
        child, answered, problem = None, False, ""
        with ToolLog() as log:
            try:
                def left(cap):   # this submission's sanitizer budget bounds every wait
                    return max(1.0, min(cap, end - time.monotonic()))

                # (simulated only in tests, with a stand-in wrapper: prepare() turns the
                # sanitizer off in a simulator run)
                got = ctx.load(cells, gpu, who=f"{result.id} ({tool})", load_s=lambda: left(load_s),
                               **_wrapper(tool, str(log.path)))
                child = got.child
                if not got.loaded:
                    raise getattr(got, "error", None) or ChildError("load", got.describe()[:200])
                # exact allocations: memcheck sees a read or a store past an array's end, not
                # past a guard zone's (the graded run judged those)
                r = ctx.ask(child, left(test_s), **ctx.test_message(case, guard=False))
                answered = True
                ctx.log(kind="sanitizer", id=result.id, tool=tool, case=case["name"],
                        values=verdict(ctx, case, r, child, guard=False)[0] if r.get("ok") else
                        f"raised {r.get('error')}")
                child.send(cmd="exit")
                try:   # the tool writes its summary as the driver exits
                    child.proc.wait(timeout=60)
                except Exception:
                    pass
            except (ChildError, OSError) as e:
                problem = (f"the case did not finish under compute-sanitizer "
                           f"({getattr(e, 'reason', type(e).__name__)}: "
                           f"{getattr(e, 'detail', e)})")[:500]
            finally:
                if child is not None:
                    child.close()   # the tool has exited: its log is whole
                text = log.report()
        return text, answered, problem

    def _apply(self, result, case, test, found, notes, unchecked):
        """The findings into the result: the case's points and words, the 0-point test, flags."""
        name = case["name"]
        if found:
            test.score = 0
            if "\nThe values of the first call: " in test.output:   # already said as hazards
                test.output = _hazards.messages(found).lstrip("\n") + "\n" + test.output
            else:
                test.output = hazard_words(found, test.output)
            for h in found:
                result.flags.append({"level": "info", "what": f"compute-sanitizer: {_hazards.message(h)}"[:400],
                                     "where": f"public case {name} under compute-sanitizer"})
        for n in notes + unchecked:   # what the grader could not say or check: a person reads it
            result.flags.append({"level": "review", "what": f"compute-sanitizer: {n}"[:400],
                                 "where": f"public case {name} under compute-sanitizer"})
        if found:
            said = (f"found in public case {name}: " + "; ".join(
                f"{_hazards.KINDS[h.kind][0]} ({_hazards.FOUND_BY[h.found_by]})" for h in found)
                + "; that case's points were taken (see its test)")
        else:
            said = f"no findings in public case {name}"
        ran = [t for t in GRADE_TOOLS if not any(u.startswith(t + ":") for u in unchecked)]
        lines = [said + (f" (checked by {', '.join(ran)})" if ran else " (nothing was checked)")]
        lines += [f"not checked, nothing taken for it: {u}" for u in unchecked]
        lines += [f"for review, nothing taken for it: {n}" for n in notes]
        result.tests.append(TestRecord(SANITIZE_TEST, 0, status="failed" if found else "passed",
                                       output="\n".join(lines)))


if __name__ == "__main__":   # the re-run process under compute-sanitizer (``sanitize``)
    sys.exit(run_job(sys.argv[1], run_public_tests))
