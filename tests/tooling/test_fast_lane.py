"""The fast lane (`pytest -m "not slow and not browser"`) does not depend on the wall clock:
no test outside the slow and GPU lanes asserts how long something took (a loaded machine runs
it slower, and the test would fail there and pass alone, as issue 29's "alternates" did).
Speed targets live in benchmarks that print ratios. Waiting for an event with a bound (a
process to start or to go) is not asserting a duration, and is allowed."""

from __future__ import annotations

import ast

from repo import ROOT

CLOCKS = {"monotonic", "perf_counter", "time", "process_time", "thread_time"}
LANES = ("slow", "gpu", "browser")
# fixtures and helpers that put a test in a lane (tests/conftest.py's MARKED_BY_FIXTURE, and
# the GPU skips files define for themselves)
LANE_WORDS = ("slow", "gpu", "browser", "built_book", "needs_nvml", "gpu_only", "needs_gpu")


def _calls_clock(node) -> bool:
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in CLOCKS and getattr(n.func.value, "id", "") == "time"
               for n in ast.walk(node))


def timed_asserts(path):
    """(test name, line) of each assert that compares a clock reading, in tests of the fast
    lane (not marked slow, gpu or browser, by decorator or by the module's pytestmark)."""
    tree = ast.parse(path.read_text(), str(path))
    module_lane = any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "pytestmark"
                                                        for t in n.targets)
                      and any(w in ast.unparse(n.value) for w in LANES) for n in tree.body)
    if module_lane:
        return []
    found = []
    for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test")):
        marks = " ".join(ast.unparse(d) for d in fn.decorator_list)
        args = " ".join(a.arg for a in fn.args.args)
        if any(w in marks or w in args for w in LANE_WORDS):
            continue
        found += [(fn.name, a.lineno) for a in ast.walk(fn)
                  if isinstance(a, ast.Assert) and _calls_clock(a.test)]
        # an elapsed time taken earlier (t0 = time.monotonic()) and compared in an assert
        starts = {t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) and _calls_clock(n.value)
                  for t in n.targets if isinstance(t, ast.Name)}
        found += [(fn.name, a.lineno) for a in ast.walk(fn) if isinstance(a, ast.Assert)
                  and starts & {n.id for n in ast.walk(a.test) if isinstance(n, ast.Name)}
                  and (fn.name, a.lineno) not in found]
    return found


def test_no_fast_test_asserts_a_duration():
    found = {str(p.relative_to(ROOT)): timed_asserts(p)
             for p in sorted((ROOT / "tests").rglob("test_*.py")) if "fixtures" not in p.parts}
    found = {k: v for k, v in found.items() if v}
    assert found == {}, f"fast-lane tests that assert a duration (mark them slow, or assert the behaviour): {found}"


def test_the_check_finds_one(tmp_path):
    p = tmp_path / "test_x.py"
    p.write_text("import time\n\n\ndef test_fast():\n    t0 = time.monotonic()\n    work()\n"
                 "    assert time.monotonic() - t0 < 20\n\n\n@pytest.mark.slow\ndef test_slow():\n"
                 "    t0 = time.perf_counter()\n    assert time.perf_counter() - t0 < 1\n")
    assert timed_asserts(p) == [("test_fast", 7)]
