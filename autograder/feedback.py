"""Feedback that shows the problem: the student's access pattern and compute-sanitizer.

Two questions a lab's ``check()`` (and ``grade --sanitize``) asks beyond "are the values
right?":

- :func:`access_advice`: does the student's kernel waste bandwidth? The host function runs
  once on the lab's first (small) public case under :mod:`book.tracer` in Numba's CUDA
  simulator, and a sentence names each array whose warp loads or stores touch more 32-byte
  sectors than the bytes they ask for need ("warp 0's loads of x touch 16 sectors where 8
  would do"), with the line that issued them. Empty when the pattern is tight. When the
  tracer cannot run the kernel (an unsupported intrinsic, too many threads, a time limit)
  the answer is ONE line naming the reason and the limit; never a hang.
- :func:`sanitize`: does the kernel race or step out of bounds even though the values came
  out right? The lab's public tests run under compute-sanitizer ``memcheck`` and
  ``racecheck`` (:mod:`book.sanitizer`) in a fresh process with the student's code, and the
  findings that fall in the student's own lines come back as sentences pointing at them.
  Where compute-sanitizer is missing or refused (no GPU, the simulator, no CUDA toolkit):
  exactly one line saying it is "not available on this machine" and why.

How the student's code reaches a fresh process (both functions need one on a GPU: the
simulator cannot be switched on in a process that already uses the GPU, and
compute-sanitizer must start the process it watches): the code is *re-run*, not pickled.

- In a notebook, the cells the student ran, in order, from IPython's ``In`` history, minus
  the course's setup cell, every top-level ``check(...)`` call and notebook magics (the same
  filtering the grader applies to a submission, ``autograder.submission``). Re-running is the
  only route that reproduces a function defined in ``__main__`` with its globals; its cost is
  that whatever else those cells launch runs (and is checked) again.
- A function defined in a module file: that file.
- Or the caller passes ``source=`` (the grader, which already holds the submission's cells).

Lines in that re-run file are mapped back to where the student wrote them ("In [4], line 12"
in a notebook), so a finding points at the student's own line.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from .submission import SETUP_MARKERS, _neutralize_magics

__all__ = ["access_advice", "sanitize", "sanitizer_unavailable", "student_source",
           "StudentSource", "sandbox_findings", "NOT_AVAILABLE", "TRACE_TIMEOUT_S",
           "SANITIZE_TIMEOUT_S"]

NOT_AVAILABLE = "not available on this machine"
# the tracer's budget: lab 2's public case takes under a second here, lab 4's tiled GEMM
# (256 threads, every shared access recorded) 10 to 35 s on this 2-core machine
TRACE_TIMEOUT_S = 60.0
SANITIZE_TIMEOUT_S = 300.0   # per tool: compute-sanitizer slows kernels (and their compile) down
_CHILD_START_S = 60.0        # a fresh process imports numpy, numba and the course first
_REPO = Path(__file__).resolve().parent.parent


# ------------------------------------------------------------------------------ source
@dataclass
class StudentSource:
    """The student's code as one file, and where each of its lines came from."""

    text: str
    pieces: list   # (first line in text, label, number of lines), label like "In [4]"

    def where(self, line: int) -> str:
        """'In [4], line 12' (or 'line 12' for a single file) for a line of ``text``."""
        for start, label, n in self.pieces:
            if start <= line < start + n:
                return f"{label}, line {line - start + 1}" if label else f"line {line}"
        return f"line {line}"


def _blank_checks(src: str) -> str:
    """Top-level ``check(...)`` calls and ``from autograder import ...`` lines become blank
    lines: the re-run must not call check() again (it would recurse into this module), and
    blanking (not deleting) keeps every other line where the student wrote it."""
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return src
    lines = src.splitlines()
    for node in tree.body:
        call = node.value if isinstance(node, ast.Expr) else None
        is_check = (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    and call.func.id == "check")
        is_import = isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "autograder")
        ipython = "get_ipython" in (ast.get_source_segment(src, node) or "")
        if is_check or is_import or ipython:
            for k in range(node.lineno - 1, node.end_lineno):
                lines[k] = ""
    return "\n".join(lines) + "\n"


def _is_setup_source(src: str) -> bool:
    return any(src.lstrip().startswith(m) for m in SETUP_MARKERS)


def student_source(fn=None, *, source=None, cells=None) -> StudentSource:
    """The student's code to re-run in a fresh process (see the module docstring).

    ``source``: code text (one file). ``cells``: [{'index', 'source'}] as
    ``autograder.submission.read_cells`` gives them. Else from ``fn``: IPython's ``In``
    history when ``fn`` lives in ``__main__`` of a notebook, its module file otherwise.
    Raises ValueError naming what to pass when none of these is available.
    """
    if source is not None:
        cells = [{"index": None, "source": source}]
    if cells is None:
        cells = _cells_of(fn)
    text, pieces, line = [], [], 1
    for c in cells:
        src = c["source"]
        if _is_setup_source(src):
            continue
        src = _blank_checks(_neutralize_magics(src))
        n = len(src.splitlines())
        if not n:
            continue
        label = None if c["index"] is None else str(c["index"])
        pieces.append((line, label, n))
        text.append(src if src.endswith("\n") else src + "\n")
        line += n
    return StudentSource("".join(text), pieces)


def _cells_of(fn) -> list[dict]:
    code = getattr(getattr(fn, "py_func", fn), "__code__", None)
    mod = getattr(fn, "__module__", None)
    if mod == "__main__":
        try:
            from IPython import get_ipython

            ip = get_ipython()   # None outside a notebook's kernel
        except ImportError:
            ip = None
        if ip is not None:
            hist = ip.user_ns.get("In") or []
            return [{"index": f"In [{k}]", "source": s} for k, s in enumerate(hist) if s.strip()]
    path = Path(code.co_filename) if code is not None else None
    if path is not None and path.is_file():
        return [{"index": None, "source": path.read_text()}]
    raise ValueError(f"cannot find the source of {getattr(fn, '__name__', fn)!r} to re-run it "
                     "in a fresh process: call this from the notebook that defines it, or pass "
                     "source='...' (the code that defines the function)")


# ------------------------------------------------------------------------------ the case
def _small_case(lab):
    """The public case with the most outputs: still a page's worth of simulated threads (the
    public cases are tiny), and the one whose warps are fullest, so the pattern shows."""
    cases = lab.public_cases
    return max(cases, key=lambda c: lab.out_size(c))


def _case_arrays(lab, case):
    """Host arrays in the order of the student's parameters (output filled with NaN)."""
    import numpy as np

    from .inputs import generate

    ins = {n: generate(s) for n, s in lab.input_specs(case).items()}
    o = lab.out_spec(case)
    ins[lab.output] = np.full(o["shape"], np.nan, dtype=o["dtype"])
    return [ins[p] for p in lab.params]


# ------------------------------------------------------------------------------ advice
def access_advice(lab, fn, *, timeout_s: float = TRACE_TIMEOUT_S, source=None) -> list[str]:
    """Sentences about wasted bandwidth in the student's kernels, [] when the pattern is tight.

    ``lab``: a lab's spec (``autograder.labs.get(name)``) or its name; ``fn``: the student's host function.
    In a simulator session the trace runs here; in a GPU session the student's code is re-run
    in a simulator process (module docstring). One line naming the reason and the limit when
    the tracer cannot run the kernel; never longer than about ``timeout_s`` (plus a fresh
    process's start on a GPU).
    """
    from . import labs as _labs

    lab = lab if isinstance(lab, _labs.LabSpec) else _labs.get(lab)
    if not lab.kernel:
        return []
    import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
    from book import gpu

    if not gpu.SIMULATED:
        return _advice_in_child(lab, fn, source, timeout_s)
    return _advice_here(lab, fn, timeout_s)


def _advice_here(lab, fn, timeout_s) -> list[str]:
    """Trace in this (simulator) process, in a worker thread with a deadline: the tracer stops
    a launch that keeps accessing memory past ``timeout_s``; the join's deadline covers one
    that spins without touching memory (its simulated threads are left to finish)."""
    from book import tracer

    case = _small_case(lab)
    box = {}

    def work():
        try:
            from numba import cuda

            dev = [cuda.to_device(a) for a in _case_arrays(lab, case)]
            box["trace"] = tracer.trace_call(fn, *dev, names=list(lab.params),
                                             timeout_s=timeout_s)
        except tracer.TracerError as e:
            box["error"] = str(e)
        except Exception as e:  # the student's own error: check() reports values, not this
            box["error"] = f"your function raised {type(e).__name__}: {e}"

    t = threading.Thread(target=work, daemon=True, name="access-advice")
    t.start()
    t.join(timeout_s + 2)
    if t.is_alive():
        # a launch spinning without touching memory (the tracer's deadline fires on an
        # access) cannot be stopped from outside: its Python threads run on, so say so
        return [f"access pattern not traced: the traced call ran past the tracer's {timeout_s:.0f}"
                f" s limit on {lab.describe(case)} without touching memory (a loop that never "
                "ends?); its simulated threads are still running: restart the kernel before "
                "running more kernels here"]
    if "error" in box:
        # the simulator prefixes a thread's error with its ids: not the student's business here
        why = re.sub(r"tid=\[[^\]]*\] ctaid=\[[^\]]*\]: ", "", box["error"])
        if "time limit" in why:
            why += f" (the limit: {timeout_s:.0f} s on {lab.describe(case)})"
        return [f"access pattern not traced: {why}"]
    return advice_for(box["trace"])


WASTE_RATIO = 1.5   # sectors moved over sectors needed, from which a pattern is named
SCATTER_RATIO = 3   # a request's sectors over its minimum, from which scattering is named
MIN_WAYS = 4        # bank-conflict degree from which it is named (lab 4's padded transposed
                    # tile stores are 2-way, once per tile: not worth a student's time)


def _function_of(where) -> tuple:
    """(file, first line) of the function holding the instruction at ``where``."""
    return _functions(where[0]).get(where[1], (where[0], 0))


_FUNCTIONS: dict = {}


def _functions(filename) -> dict:
    """line -> (file, def line) for every line inside a function of ``filename``."""
    got = _FUNCTIONS.get(filename)
    if got is None:
        import linecache

        got = {}
        try:
            tree = ast.parse("".join(linecache.getlines(filename)))
        except SyntaxError:
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for ln in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    if ln not in got or got[ln][1] < node.lineno:   # the innermost def
                        got[ln] = (filename, node.lineno)
        _FUNCTIONS[filename] = got
    return got


def _lines(t, where) -> str:
    return "; ".join(f"line {w[1]}: `{t.source(w)}`" if t.source(w) else f"line {w[1]}"
                     for w in list(where)[:2])


def advice_for(t, warp: int = 0) -> list[str]:
    """Waste in warp ``warp``'s global accesses, and shared-memory bank conflicts.

    Two kinds of waste, each judged the way the memory system pays for it:

    - *Bytes moved and never used*: per block and kernel, every sector warp ``warp`` touches
      in ``array`` against the sectors the bytes it uses would fill. Sectors that several
      instructions share are moved once (the later ones hit in L1), so lab 2's interleaved
      gate and up loads (each 8 sectors for 4 sectors' worth of floats, together every byte)
      or lab 3's per-thread runs of halves are not waste; a strided load, or two kernels
      that each read half of every sector, are.
    - *Scattered requests*: one request whose lanes each touch a sector of their own (lanes
      32 bytes or more apart: a thread walking its own row or run of columns), many times
      the sectors its bytes need, whatever L1 saves later.
    """
    import math
    from collections import defaultdict

    from book.tracer import SECTOR

    out = []
    pools = defaultdict(list)
    for r in t.requests:
        if r.warp == warp and r.space == "global":
            pools[(r.array, r.kind, r.block, _function_of(r.where))].append(r)
    worst = {}
    for (array, kind, _block, _fn), rs in pools.items():
        touched = set()
        for r in rs:
            touched |= r._bytes()
        sectors = len({b // SECTOR for b in touched})
        need = math.ceil(len(touched) / SECTOR)
        # a sector or so over is where a row of an odd-sized case starts mid-sector (the
        # public shapes are deliberately odd): not the pattern's fault, so not named
        wasteful = sectors >= WASTE_RATIO * need and sectors - need >= 2
        if wasteful and sectors - need > worst.get((array, kind), (0,))[0]:
            worst[(array, kind)] = (sectors - need, sectors, need, rs, "unused")
        for r in rs:
            scattered = (r.lanes >= 8 and r.sectors >= r.lanes
                         and r.sectors >= SCATTER_RATIO * r.min_sectors)
            if scattered and r.sectors - r.min_sectors > worst.get((array, kind), (0,))[0]:
                worst[(array, kind)] = (r.sectors - r.min_sectors, r.sectors, r.min_sectors,
                                        [r], "scattered")
    for (array, kind), (_d, sectors, need, rs, why) in sorted(
            worst.items(), key=lambda kv: (kv[0][1] != "ld", kv[0][0])):
        verb = "loads" if kind == "ld" else "stores"
        where = sorted({r.where for r in rs}, key=lambda w: w[1])
        what = ("one request: each lane touches a sector of its own" if why == "scattered"
                else "the rest of each sector is moved and never used")
        out.append(f"warp {warp}'s {verb} of {array} touch {sectors} sectors where {need} "
                   f"would do ({_lines(t, where)}; {what}): neighbouring lanes should access "
                   "neighbouring elements")
    for kind in ("ld", "st"):
        rs = [r for r in t.requests if r.warp == warp and r.space == "shared" and r.kind == kind]
        by_where = {}
        for r in rs:
            if r.ways >= MIN_WAYS and r.ways > by_where.get(r.where, 0):
                by_where[r.where] = r.ways
        for w, ways in sorted(by_where.items(), key=lambda x: x[0][1]):
            verb = "loads" if kind == "ld" else "stores"
            out.append(f"warp {warp}'s shared-memory {verb} ({_lines(t, [w])}) hit one bank "
                       f"{ways} times: a {ways}-way bank conflict (pad the tile's rows or "
                       "change which index the lanes walk)")
    return out


# ------------------------------------------------------------------------------ children
def _child_env(simulated: bool) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("BOOK_SIMULATOR", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulated:
        env["BOOK_SIMULATOR"] = "1"
    return env


def _write_job(tmp: Path, lab, src: StudentSource, what: str, timeout_s: float) -> Path:
    (tmp / "student.py").write_text(src.text)
    job = tmp / "job.json"
    job.write_text(json.dumps({"what": what, "lab": lab.name, "timeout_s": timeout_s,
                               "student": str(tmp / "student.py"),
                               "result": str(tmp / "result.json")}))
    return job


def _advice_in_child(lab, fn, source, timeout_s, cells=None) -> list[str]:
    try:
        src = student_source(fn, source=source, cells=cells)
    except ValueError as e:
        return [f"access pattern not traced: {e}"]
    with tempfile.TemporaryDirectory(prefix="ag-advice-") as tmp:
        tmp = Path(tmp)
        job = _write_job(tmp, lab, src, "advice", timeout_s)
        limit = timeout_s + _CHILD_START_S
        try:
            p = subprocess.run([sys.executable, "-m", "autograder.feedback", str(job)],
                               capture_output=True, text=True, timeout=limit,
                               env=_child_env(True), cwd=tmp)
        except subprocess.TimeoutExpired:
            return [f"access pattern not traced: the simulator process did not finish within "
                    f"{limit:.0f} s (the tracer's limit is {timeout_s:.0f} s)"]
        res = tmp / "result.json"
        if not res.exists():
            tail = (p.stderr or p.stdout).strip().splitlines() or ["no message"]
            return [f"access pattern not traced: the simulator process failed ({tail[-1]})"]
        lines = json.loads(res.read_text())["lines"]
    # lines of student.py are reported as "line N": say where the student wrote them
    return [re.sub(r"line (\d+)(?=[:)])", lambda m: src.where(int(m.group(1))), s)
            for s in lines]


# ------------------------------------------------------------------------------ sanitize
def sanitize(lab, fn=None, *, source=None, cells=None,
             timeout_s: float = SANITIZE_TIMEOUT_S) -> list[str]:
    """compute-sanitizer's findings (memcheck, racecheck) on the lab's public tests, as
    sentences pointing at the student's own lines; [] when it found nothing.

    The student's code (``fn``'s notebook history or file, or ``source``/``cells``) re-runs in
    a fresh process under each tool. Exactly one line containing "not available on this
    machine" where compute-sanitizer cannot run here (no GPU, the simulator, no toolkit).
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
    from book import sanitizer

    with tempfile.TemporaryDirectory(prefix="ag-sanitize-") as tmp:
        tmp = Path(tmp)
        job = _write_job(tmp, lab, src, "sanitize", timeout_s)
        try:
            res = sanitizer.run([sys.executable, "-m", "autograder.feedback", str(job)],
                                timeout=timeout_s, env=_child_env(False), cwd=tmp)
        except sanitizer.Unavailable as e:
            return [str(e) if NOT_AVAILABLE in str(e) else
                    f"compute-sanitizer is {NOT_AVAILABLE}: {e}"]
        return findings_sentences(res, src, tmp / "student.py")


def sanitizer_unavailable() -> str | None:
    """The one line saying why compute-sanitizer cannot run here, or None when it can."""
    import book  # noqa: F401
    from book import gpu, sanitizer

    if gpu.SIMULATED:
        return (f"compute-sanitizer is {NOT_AVAILABLE}: this session runs Numba's CUDA "
                "simulator (no GPU), and the tool watches kernels on a GPU; the values were "
                "still checked")
    if sanitizer.find() is None:
        return (f"compute-sanitizer is {NOT_AVAILABLE}: it comes with the CUDA toolkit and was "
                "not found on PATH, in $CUDA_HOME/bin or /usr/local/cuda/bin; the values were "
                "still checked")
    return None


def findings_sentences(res: dict, src: StudentSource, student_file, limit: int = 6) -> list[str]:
    """book.sanitizer.explain's sentences on the student's file, with its line numbers turned
    into the student's own (cell and line); a note when the tests did not run at all."""
    from book import sanitizer

    name = Path(student_file).name
    out = []
    for s in sanitizer.explain(res, own_files=[student_file], limit=limit):
        s = s.replace(f"at {name}, line ", "at line ")
        out.append(re.sub(r"\bline (\d+)", lambda m: src.where(int(m.group(1))), s))
    for tool, r in res.items():   # a run that never reached the tests proves nothing
        text = r.get("output", "")
        if "AG-SANITIZE-DONE" not in text:
            tail = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("=")]
            why = tail[-1][:300] if tail else f"exit status {r.get('returncode')}"
            out.append(f"{tool}: the public tests did not finish under compute-sanitizer "
                       f"({why})")
    return out


# ------------------------------------------------------------------------------ grade
SANITIZE_TEST = "compute-sanitizer: memcheck and racecheck (feedback, no points)"


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


# ------------------------------------------------------------------------------ the child
def _run_student(path: str) -> dict:
    """Execute the student's file as __main__ would run its cells: one error does not stop
    the rest (a notebook's later cells ran after an earlier one failed, too)."""
    ns = {"__name__": "__main__", "check": lambda *a, **k: True}
    code = compile(Path(path).read_text(), path, "exec")
    exec(code, ns)
    return ns


def _child(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    import book  # noqa: F401  (BOOK_SIMULATOR decides GPU or simulator)

    from . import labs as _labs

    lab = _labs.get(job["lab"])
    try:
        ns = _run_student(job["student"])
    except Exception as e:
        msg = f"your code raised {type(e).__name__} when run again: {e}"
        Path(job["result"]).write_text(json.dumps({"lines": [msg]}))
        print(msg, file=sys.stderr)
        return 1
    fn = ns.get(lab.function)
    if fn is None:
        msg = f"no function named `{lab.function}` after running your code"
        Path(job["result"]).write_text(json.dumps({"lines": [msg]}))
        print(msg, file=sys.stderr)
        return 1
    if job["what"] == "advice":
        lines = _advice_here(lab, fn, job["timeout_s"])
        Path(job["result"]).write_text(json.dumps({"lines": lines}))
        return 0
    # sanitize: the public tests, as check() runs them (values compared, so a race that
    # changes them is seen as both); the marker tells the parent the tests finished
    t0 = time.monotonic()
    for case in lab.public_cases:
        got, note = lab.call_here(fn, case)
        ok, msg = lab.check(got, case)
        print(("PASS " if ok and not note else "FAIL ") + f"{case['name']}: {msg}{note}",
              flush=True)
    print(f"AG-SANITIZE-DONE in {time.monotonic() - t0:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
