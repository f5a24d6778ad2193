"""Run a student's code again in a fresh process: what ``check()``'s access advice (feedback.py)
and compute-sanitizer (sanitize.py) both need on a GPU (the simulator cannot be switched on
in a process that already uses the GPU, and compute-sanitizer must start the process it
watches).

The code is *re-run*, not pickled:

- In a notebook, the cells the student ran, in order, from IPython's ``In`` history, minus
  the course's setup cell, every top-level ``check(...)`` call and notebook magics (the same
  filtering the grader applies to a submission, ``autograder.submission``). Re-running is the
  only route that reproduces a function defined in ``__main__`` with its globals; its cost is
  that whatever else those cells launch runs (and is checked) again.
- A function defined in a module file: that file.
- Or the caller passes ``source=`` (the grader, which already holds the submission's cells).

Lines in that re-run file are mapped back to where the student wrote them ("In [4], line 12"
in a notebook), so a finding points at the student's own line.

The parent writes a job (``write_job``) and starts ``python -m <module> JOB`` with
``child_env``; the module's own entry point calls ``run_job`` with the work it does on the
student's function. This module knows neither job: each module that re-runs a student's code
names itself on the command line.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .submission import SETUP_MARKERS, neutralize_magics

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


# ------------------------------------------------------------------------------ the parent
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


def write_job(tmp: Path, lab, src: StudentSource, timeout_s: float) -> Path:
    """The student's code and the job file of a re-run in ``tmp`` (the child reads it with
    ``run_job``): the lab, the time its work may take, where the code is and where a result
    goes."""
    (tmp / "student.py").write_text(src.text)
    job = tmp / "job.json"
    job.write_text(json.dumps({"lab": lab.name, "timeout_s": timeout_s,
                               "student": str(tmp / "student.py"),
                               "result": str(tmp / "result.json")}))
    return job


def command(module: str, job: Path) -> list[str]:
    """The command line of a re-run: ``module``'s entry point on ``job``."""
    return [sys.executable, "-m", module, str(job)]


# ------------------------------------------------------------------------------ the child
def _run_student(path: str) -> dict:
    """Execute the student's file as __main__ would run its cells: one error does not stop
    the rest (a notebook's later cells ran after an earlier one failed, too)."""
    ns = {"__name__": "__main__", "check": lambda *a, **k: True}
    code = compile(Path(path).read_text(), path, "exec")
    exec(code, ns)
    return ns


def run_job(job_path: str, work: Callable[[object, Callable, dict], int]) -> int:
    """In the re-run process: the job's lab, the student's code run as its cells ran, then
    ``work(lab, fn, job)`` on the lab's function; its exit status. The student's code raising,
    or defining no such function, is the job's one result line (``job["result"]``, and
    stderr) and exit status 1."""
    job = json.loads(Path(job_path).read_text())
    import book  # noqa: F401  (BOOK_SIMULATOR decides GPU or simulator)

    from . import labs as _labs

    lab = _labs.get(job["lab"])
    try:
        ns = _run_student(job["student"])
    except Exception as e:
        return _fail(job, f"your code raised {type(e).__name__} when run again: {e}")
    fn = ns.get(lab.function)
    if fn is None:
        return _fail(job, f"no function named `{lab.function}` after running your code")
    return work(lab, fn, job)


def _fail(job: dict, msg: str) -> int:
    Path(job["result"]).write_text(json.dumps({"lines": [msg]}))
    print(msg, file=sys.stderr)
    return 1
