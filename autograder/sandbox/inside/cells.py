"""The submission's code in the child: its cells run in order, the functions the lab asks for
found and their signatures checked, and a traceback cut to the student's own lines."""

from __future__ import annotations

import inspect
import json
import linecache
import os
import traceback


def load_submission(workdir: str):
    """Run the submission's cells (``workdir``/cells.json) in order, each compiled as
    ``<cell N>``: (its namespace, each failing cell's error). One cell's error does not stop
    the rest, as in a notebook."""
    with open(os.path.join(workdir, "cells.json")) as f:
        cells = json.load(f)
    ns = {"__name__": "__main__", "__builtins__": __builtins__}
    # the lab's own helpers are no-ops here: the grader runs the tests itself
    ns["check"] = lambda *a, **k: None
    errors = []
    for i, cell in enumerate(cells):
        name = f"<cell {cell['index']}>"
        linecache.cache[name] = (len(cell["source"]), None, cell["source"].splitlines(True), name)
        try:
            code = compile(cell["source"], name, "exec")
        except SyntaxError as e:
            errors.append({"cell": cell["index"], "error": "SyntaxError",
                           "message": f"line {e.lineno}: {e.msg}"})
            continue
        try:
            exec(code, ns)
        except BaseException as e:  # SystemExit too: keep going
            errors.append({"cell": cell["index"], "error": type(e).__name__, "message": student_tb(e)})
        ns["check"] = lambda *a, **k: None
    return ns, errors


def cell_sources(workdir: str) -> dict:
    """Each cell's code name (``<cell N>``, as load_submission compiles it) -> its source."""
    with open(os.path.join(workdir, "cells.json")) as f:
        return {f"<cell {c['index']}>": c["source"] for c in json.load(f)}


def signature_problems(ns, functions: dict):
    """({name: function} found as the lab asks, {name: what is wrong}) for each of
    ``functions`` (name -> parameter names)."""
    problems, found = {}, {}
    for fname, params in functions.items():
        fn = ns.get(fname)
        if fn is None:
            defined = sorted(k for k, v in ns.items() if callable(v) and not k.startswith("_") and k != "check"
                             and getattr(v, "__module__", None) in (None, "__main__"))
            problems[fname] = (f"no function named `{fname}` is defined (functions your code "
                               f"defines: {', '.join(defined) or 'none'}); the lab asks for "
                               f"`{fname}({', '.join(params)})`")
            continue
        if not callable(fn):
            problems[fname] = f"`{fname}` is a {type(fn).__name__}, not a function"
            continue
        try:
            sig = inspect.signature(fn)
            sig.bind(*params)
        except (TypeError, ValueError) as e:
            try:
                shown = str(inspect.signature(fn))
            except (TypeError, ValueError):
                shown = "(?)"
            problems[fname] = (f"`{fname}{shown}` cannot be called as `{fname}({', '.join(params)})`"
                               f": {e}")
            continue
        found[fname] = fn
    return found, problems


def student_tb(exc) -> str:
    """Traceback lines from the student's own code only (no grader frames)."""
    tb = traceback.extract_tb(exc.__traceback__)
    own = [f for f in tb if f.filename.startswith("<cell") or f.filename.startswith("<submission")]
    lines = traceback.format_list(own[-6:]) if own else []
    return "".join(lines) + f"{type(exc).__name__}: {exc}"
