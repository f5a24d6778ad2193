"""The compile check, in the simulator only: every kernel a passing test launched is compiled
for a real GPU, without one, and a kernel that does not compile costs the correctness points.

In Numba's CUDA simulator a ``@cuda.jit`` kernel is plain Python: a body of host NumPy
(``a @ b``, ``np.exp`` of an array, a list comprehension, Python objects) passes every test and
the kernel proof there, yet no GPU could compile it (a red-team run: lab 6's whole layer in one
thread of NumPy earned every correctness point on Gradescope). On a GPU the graded run compiles
each kernel at its launch, so this check is for the simulator alone.

How: the recordings the kernel proof replays (``Judge.proof_recording``: every passing kernel
test's launches, public cases first) name each launch's kernel (its code: cell, first line,
name, and which of the kernels made from that code it is) and its parameters (an array's
dtype, dimensions and strides; a scalar's type). One fresh sandboxed child (the run's
``ChildFactory``: the same sandbox, budgets and deadlines as every child that runs a
submission's code), with Numba's real CUDA target and no GPU (``compile_cc``:
``autograder/sandbox/inside/compile.py``), runs the cells and compiles each (kernel, argument
types) once for the lab's capability (``spec.compile_cc``; ``COURSE_TARGET_CC`` when the
grader sets it) through ``book.numba_compat.compile_for_cc``, the mechanism
``tools/lab_ptx.py`` checks the masters with.

The verdict follows the kernel proof's: a kernel that does not compile withdraws every
correctness point, said on each test that had points, naming the kernel, its cell and line and
the first lines of Numba's error. The child is told the public cases' launches first and
answers each before it hears of a hidden case's, so what it says of a public case's kernel
cannot carry a hidden case (it never gets shapes or values, only types); of a kernel that fails
only with a hidden case's types, the feedback says so in the grader's words alone. A check that
could not be carried out (the cells did not load, the child died or ran out of time, a
launched kernel the cells do not make with the simulator off) takes nothing: the submission is
marked for a GPU regrade and flagged, as a withheld kernel proof is. Everything is logged
(``measurements.jsonl``, ``kind: compile_check``).
"""

from __future__ import annotations

import json
import time

from .context import RunContext, child_problem
from .recording import RecordingError
from .results import PERFORMANCE
from .sandbox import ChildError

# the first lines of Numba's message a student reads (it can be pages long)
SHOWN_LINES = 8
SHOWN_CHARS = 1200

NOT_COMPILED = ("{kernel} ran in Numba's CUDA simulator but cannot be compiled for a GPU "
                "({sm}): in the simulator a kernel is plain Python, so code a GPU cannot run "
                "(NumPy on whole arrays, `a @ b`, list comprehensions, Python objects) passes "
                "there. Correctness points need kernels a GPU can compile. {said}")
HIDDEN_ONLY = ("Numba's message is not shown: it failed only with the argument types of a "
               "hidden case")
WITHHELD = ("needs a GPU to verify: the grader could not compile the kernels your function "
            "launched for a GPU ({why}). No points are taken for this; an instructor will grade "
            "it again on a GPU")
WITHHELD_FLAG = "compile check not carried out in the simulator: needs a GPU to verify"


def target_cc(ctx: RunContext) -> tuple[int, int]:
    """The capability the kernels are compiled for: the grader's ``COURSE_TARGET_CC`` (a class
    graded on the T4's instructions), else the lab's (``spec.compile_cc``)."""
    from book.target import forced_cc

    return tuple(forced_cc() or ctx.lab.compile_cc)[:2]


def launches_of(taken) -> list[tuple[dict, dict]]:
    """[(case, launch)] of every recording in ``taken`` (Judge.proof_recording's order: public
    first), each launch with what the compile needs (its code, which one, its parameters);
    unreadable recordings and malformed launches are left out (the proof judges those)."""
    out = []
    for case, folder in taken or ():
        if isinstance(folder, RecordingError):
            continue
        try:
            rec = json.loads((folder / "launches.json").read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(rec, dict) or rec.get("error") or not isinstance(rec.get("launches"), list):
            continue
        for L in rec["launches"]:
            try:
                code = [str(L["code"][0])[:200], int(L["code"][1]), str(L["code"][2])[:200]]
                params = [p for p in L["params"] if isinstance(p, dict)][:64]
                out.append((case, {"code": code, "nth": int(L.get("nth", 0)), "params": params}))
            except (KeyError, IndexError, TypeError, ValueError):
                continue
    return out


def _key(launch: dict) -> str:
    """A launch as the child is asked about it: a case's repeated calls make the same launch,
    asked once. Launches that differ in shapes or scalar values are asked each; the child
    types them (compile.py's ``arg_type``, the one place a recorded parameter becomes a type)
    and compiles each (kernel, argument types) once."""
    return json.dumps(launch, sort_keys=True)


def check_compiles(ctx: RunContext, result, cells, taken) -> None:
    """The compile check of one submission (simulator only): see the module's docstring."""
    if not ctx.simulated or not ctx.lab.kernel or not taken:
        return
    if not any(t.score > 0 for t in result.tests if t.name != PERFORMANCE):
        return
    items, seen = [], set()
    for case, launch in launches_of(taken):
        k = _key(launch)
        if k not in seen:   # each (kernel, argument types) once
            seen.add(k)
            items.append((case, launch))
    if not items:
        return
    cc = target_cc(ctx)
    sm = f"sm_{cc[0]}{cc[1]}"
    t0 = time.monotonic()
    answers, why = _compile_in_child(ctx, cells, items, cc)
    rows = [{"case": c["name"], "kernel": L["code"][2], "cell": L["code"][0], "nth": L["nth"],
             **{k: a.get(k) for k in ("found", "compiled", "signature", "line", "error")
                if isinstance(a, dict)}}
            for (c, L), a in zip(items, answers)]
    for r in rows:
        r["error"] = str(r.get("error") or "")[:2000]
    bad = [(c, L, a) for (c, L), a in zip(items, answers) if a.get("compiled") is False]
    missing = [(c, L) for (c, L), a in zip(items, answers) if not a.get("found")]
    if not bad and why is None and missing:
        why = (f"the kernel `{missing[0][1]['code'][2]}` is not made by the notebook's cells when "
               "Numba's simulator is off (a kernel made inside your function, or only in the "
               "simulator)")
    ctx.log(kind="compile_check", id=result.id, cc=sm, seconds=round(time.monotonic() - t0, 2),
            kernels=rows[:64], failed=len(bad), withheld=why)
    if bad:
        note = _words(bad, sm)
        for t in result.tests:
            if t.score > 0 and t.name != PERFORMANCE:
                t.score = 0
                t.output = t.output + "\n" + note
        result.problems["compile"] = note
    elif why is not None:   # no verdict: points stand, the instructor regrades on a GPU
        result.status = "needs a GPU"
        result.problems["compile"] = WITHHELD.format(why=why)
        result.flags.append({"level": "review", "what": WITHHELD_FLAG, "where": "compile check"})


def _words(bad, sm: str) -> str:
    """What the student reads of the first kernel that did not compile: its name, cell and
    line, and the first lines of Numba's message (a public case's only)."""
    case, launch, a = next(((c, L, a) for c, L, a in bad if c["visibility"] != "hidden"), bad[0])
    cell = launch["code"][0].strip("<>")
    kernel = f"the kernel `{launch['code'][2]}` ({cell}"
    if case["visibility"] == "hidden":
        return NOT_COMPILED.format(kernel=kernel + ")", sm=sm, said=HIDDEN_ONLY)
    if a.get("line"):
        kernel += f", line {int(a['line'])}: `{str(a.get('source', ''))[:160]}`"
    kernel += ")"
    lines = [ln.rstrip() for ln in str(a.get("error", "")).splitlines() if ln.strip()]
    said = "\n".join(lines[:SHOWN_LINES])[:SHOWN_CHARS]
    more = " ..." if len(lines) > SHOWN_LINES or len(said) >= SHOWN_CHARS else ""
    sig = str(a.get("signature") or "")[:300]
    return NOT_COMPILED.format(kernel=kernel, sm=sm, said=(
        f"Numba's GPU compiler, given the argument types of its launch {sig}, said:\n{said}{more}"))


def _compile_in_child(ctx: RunContext, cells, items, cc):
    """([answer per item], why not carried out or None): one fresh sandboxed child with the
    real CUDA target and no GPU loads the cells, then compiles the items one request at a time
    (the public cases' first: ``items`` is in that order)."""
    got = ctx.load(cells, None, simulated=False, compile_cc=tuple(cc))
    child, answers = got.child, []
    try:
        if getattr(got, "error", None) is not None:
            return [{}] * len(items), child_problem(got.error, child, "compiling your kernels")[:1500]
        if not got.loaded:
            return [{}] * len(items), f"the notebook's cells could not be loaded: {got.describe()[:300]}"
        for _case, launch in items:
            r = ctx.ask(child, ctx.limits.get("test_s", 60), cmd="compile", cc=list(cc), **launch)
            answers.append(r if isinstance(r, dict) and r.get("ok") else {})
            if not r.get("ok"):
                return answers + [{}] * (len(items) - len(answers)), (
                    f"the compile check's child answered {str(r.get('error'))[:100]}")
    except ChildError as e:
        answers += [{}] * (len(items) - len(answers))
        return answers, f"{e.reason} while compiling your kernels"
    finally:
        if child is not None:
            child.close()
    return answers, None
