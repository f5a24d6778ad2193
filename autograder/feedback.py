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
- ``autograder.sanitizer.sanitize``: does the kernel race or step out of bounds even though
  the values came out right? The lab's public tests run under compute-sanitizer in a fresh
  process started by this module's re-run (below); the grader's compute-sanitizer code all
  lives in :mod:`autograder.sanitizer`.

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
from dataclasses import dataclass
from pathlib import Path

from .submission import SETUP_MARKERS, neutralize_magics

__all__ = ["access_advice", "student_source", "StudentSource", "write_job", "child_env",
           "NOT_AVAILABLE", "TRACE_TIMEOUT_S"]

NOT_AVAILABLE = "not available on this machine"
# the tracer's budget: lab 2's public case takes under a second here, lab 4's tiled GEMM
# (256 threads, every shared access recorded) 10 to 35 s on this 2-core machine
TRACE_TIMEOUT_S = 60.0
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
        src = _blank_checks(neutralize_magics(src))
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
    return tracer.advice(box["trace"])   # the one access advice, with its default thresholds


# ------------------------------------------------------------------------------ children
def child_env(simulated: bool) -> dict:
    """The environment of a re-run process: this repository first on the path, and the
    simulator on (``simulated``) or off, whatever this process runs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(_REPO)] + [p for p in env.get(
        "PYTHONPATH", "").split(os.pathsep) if p])
    env.pop("BOOK_SIMULATOR", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulated:
        env["BOOK_SIMULATOR"] = "1"
    return env


def write_job(tmp: Path, lab, src: StudentSource, what: str, timeout_s: float) -> Path:
    """The student's code and the job file of a re-run (``python -m autograder.feedback JOB``)
    in ``tmp``: ``what`` is "advice" (the access pattern) or "sanitize" (the public tests,
    ``autograder.sanitizer.run_public_tests``)."""
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
        job = write_job(tmp, lab, src, "advice", timeout_s)
        limit = timeout_s + _CHILD_START_S
        try:
            p = subprocess.run([sys.executable, "-m", "autograder.feedback", str(job)],
                               capture_output=True, text=True, timeout=limit,
                               env=child_env(True), cwd=tmp)
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
    from .sanitizer import run_public_tests   # under compute-sanitizer (autograder.sanitizer)

    return run_public_tests(lab, fn)


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
