"""``check(fn)``: the student's self-test inside a lab notebook.

Runs the lab's public tests on the function in this process (the student's own notebook)
and says exactly what is wrong: shape, dtype, first mismatching index, expected vs got,
unwritten outputs. On a GPU it also times the function with book.bench.measure and reports
effective bandwidth (or TFLOP/s), the fraction of the lab's reference measured on this GPU, the
fraction of theoretical peak, and the rubric's scoring lines; where the rubric scores against
the lab's master (``basis = "master"``), the points are left to the grader, which times the
master beside the submission on its own GPU.
"""

from __future__ import annotations


from . import labs as _labs
from .inputs import generate
from .rubric import performance_points


def _lab_for(fn, lab, step=None) -> _labs.LabSpec:
    if lab is not None:
        return _labs.get(lab)
    name = getattr(fn, "__name__", None)
    for one in _labs.registry().values():  # the function's name: the graded one or a step's
        if name in one.functions or any(s.function == name for s in one.all_steps):
            return one
    if step is not None:  # a renamed function: the step's name, where one lab has it
        owners = [one for one in _labs.registry().values()
                  if any(s.name == step for s in one.all_steps)]
        if len(owners) == 1:
            return owners[0]
    raise ValueError(f"check() does not know a lab with a function named {name!r}; "
                     "pass lab='lab2' (or the lab's name) explicitly")


def _rubric(lab_name):
    from .rubric import load_rubric

    return load_rubric(lab_name)


def check(fn, lab=None, *, step: str | None = None, perf: bool = True, access: bool = True,
          sanitize: bool = False, verbose: bool = True) -> bool:
    """Run the public tests of the lab that asks for ``fn``; raise AssertionError naming
    the first failure, else print a report (access-pattern feedback; performance on a GPU)
    and return True.

    ``step="plain"`` (a kernel lab's step, see its spec's ``steps``) checks one stage of the
    lab on that step's small cases instead: correctness only, in seconds in the simulator.
    ``sanitize=True`` also runs the public tests under compute-sanitizer (memcheck and
    racecheck) where this machine has it. ``access=False`` skips the access-pattern trace
    (it runs the kernel once more in the simulator: seconds, half a minute for lab 4)."""
    import warnings

    with warnings.catch_warnings():
        # the public shapes are deliberately tiny: Numba's low-occupancy warning is noise here
        warnings.filterwarnings("ignore", message=".*under-utilization.*")
        if step is not None:
            return _check_step(fn, lab, step, verbose=verbose)
        ok = _check(fn, lab, perf=perf, access=access, verbose=verbose)
        if sanitize:
            _feedback("sanitize", _lab_for(fn, lab), fn,
                      print if verbose else (lambda *a: None))
        return ok


_FILE_SOURCE = None  # the cells check_file is running, joined (None in a notebook)


def _feedback(what, one, fn, say, before: str = "") -> bool:
    """Print the lines of the access-pattern advice (autograder.feedback) or of
    compute-sanitizer (autograder.sanitize): feedback is advice, so a failure in it is
    reported in one line, never raised. Returns whether it printed anything."""
    if what == "access":
        from .feedback import access_advice as lines_of
    else:
        from .sanitize import sanitize as lines_of
    if before:
        say(before)
    # `python -m autograder check LAB FILE` runs the file's cells under names like "<cell 3>",
    # which no source lookup can find: the cells it ran are handed over (_FILE_SOURCE)
    kw = {"source": _FILE_SOURCE} if _FILE_SOURCE is not None else {}
    try:
        lines = lines_of(one, fn, **kw)
    except Exception as e:  # advice must never turn a pass into an error
        lines = [f"{what} feedback could not run: {type(e).__name__}: {e}"]
    for line in lines or ():
        say(line)
    return bool(lines)


def _check_step(fn, lab, step, *, verbose: bool = True) -> bool:
    import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)

    one = _lab_for(fn, lab, step)
    if not one.kernel:
        raise ValueError(f"{one.name} has no steps: call check({getattr(fn, '__name__', 'fn')})")
    st = one.step(step)
    say = print if verbose else (lambda *a: None)
    failures = []
    for case in st.cases:
        try:
            got, note, ins = one.run_step(fn, st, case)
        except NotImplementedError as e:
            failures.append(f"step {st.name!r}, {case['name']}: not written yet ({e})")
            say(f"FAIL {case['name']}: not written yet ({e})")
            continue
        ok, msg = one.check_step(got, st, case, ins)
        if note:
            ok, msg = False, msg + note
        say(("PASS " if ok else "FAIL ") + f"{case['name']}: {msg}")
        if not ok:
            failures.append(f"step {st.name!r}, {case['name']}: {msg}")
    if failures and st.explain is not None:
        try:
            more = st.explain(fn)
        except Exception as e:  # an explanation must never hide the failure it explains
            more = f"(no drawing: {type(e).__name__}: {e})"
        if more:
            say(more)
    if failures:
        raise AssertionError(failures[0])
    nxt = one.all_steps[one.all_steps.index(st) + 1:]
    say(f"step {st.name!r} done" + (f": next, {nxt[0].function}" if nxt else ""))
    return True


def _check(fn, lab=None, *, perf: bool = True, access: bool = True,
           verbose: bool = True) -> bool:
    one = _lab_for(fn, lab)
    say = print if verbose else (lambda *a: None)
    failures = []
    if one.kernel:
        import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
        from book import gpu
    for case in one.public_cases_for(one.function if one.kernel else getattr(fn, "__name__", "")):
        try:
            got, note = one.call_here(fn, case)
        except NotImplementedError as e:
            failures.append(f"{case['name']}: not written yet ({e})")
            say(f"FAIL {case['name']}: not written yet ({e})")
            continue
        ok, msg = one.check(got, case)
        if note:
            ok, msg = False, msg + note
        say(("PASS " if ok else "FAIL ") + (f"{case['name']}: " if one.kernel else "") + msg)
        if not ok:
            failures.append(msg)
    if failures:
        raise AssertionError(failures[0])
    if not one.kernel:
        return True
    if access and one.untraced:  # a trace would misread this lab's instructions
        say(f"access pattern: not traced for this lab: {one.untraced}")
    elif access:  # the access pattern, in the simulator too
        found = _feedback("access", one, fn, say,
                          before="access pattern: tracing your kernel on the first public "
                                 "case (check(..., access=False) skips this)")
        if found is False:
            say("access pattern: no wasted bandwidth found on the traced case")
    if not perf:
        return True
    rub = _rubric(one.name).get("performance")
    if not rub:
        return True
    if gpu.SIMULATED:
        say("performance: not measured: no GPU (the simulator checks correctness only)")
        return True
    _report_performance(fn, one, rub, say)
    return True


def _report_performance(fn, lab, rub, say):
    try:  # every lab's reference runs in torch; the course itself does not need it
        import torch  # noqa: F401
    except ImportError:
        say("performance: not measured: the reference your time is compared with runs in "
            "PyTorch, which is not installed here; `pip install torch` (Colab has it) and "
            "check again. Your values were checked.")
        return
    from book import gpu
    from book.bench import measure, rotation_count
    from numba import cuda

    case = lab.timing_case(False, 12345)
    nbytes, flops = lab.min_bytes(case), lab.flops(case)
    n_sets = min(4, max(2, rotation_count(nbytes)))
    sets = []
    for k in range(n_sets):
        c = dict(case, seed=case["seed"] + k)
        ins = {n: cuda.to_device(generate(s)) for n, s in lab.input_specs(c).items()}
        o = lab.out_spec(c)
        ins[lab.output] = cuda.device_array(tuple(o["shape"]), dtype=o["dtype"])
        sets.append(tuple(ins[p] for p in lab.params))
    mine = measure(fn, sets, bytes_moved=nbytes, flops=flops)
    del sets
    ref_fn, ref_sets = lab.make_reference_runner(case)
    ref = measure(ref_fn, ref_sets, bytes_moved=nbytes, flops=flops)
    frac = ref.median_s / mine.median_s
    info = gpu.device_info()
    pts = performance_points(frac, rub)
    if lab.perf_metric == "bandwidth":
        say(f"performance on {info.name}, {lab.describe(case)}: {mine.bandwidth / 1e12:.3f} TB/s effective "
            f"({mine.median_s * 1e6:.1f} us, {mine.method})")
        if info.peak_bandwidth:
            say(f"  {mine.bandwidth / info.peak_bandwidth:.1%} of theoretical peak "
                f"({info.peak_bandwidth / 1e12:.2f} TB/s)")
    else:
        say(f"performance on {info.name}, {lab.describe(case)}: {flops / mine.median_s / 1e12:.2f} TFLOP/s "
            f"({mine.median_s * 1e3:.2f} ms)")
    say(f"  {frac:.1%} of the reference measured now on this GPU "
        f"({lab.reference_impl})")
    if rub.get("basis", "master") == "master":
        # the grade's basis is the lab's master timed beside your kernel on the grader's GPU;
        # it is not here, so no points are promised from this GPU's torch figure
        say(f"  graded against the lab's reference solution measured on the grader's GPU in the "
            f"same run: 0 points at {rub['zero_at']:.0%} of its speed, full points at "
            f"{rub['full_at']:.0%}")
        return
    say(f"  would earn {pts:.2f}/{rub['points']} performance points "
        f"(0 at {rub['zero_at']:.0%}, full at {rub['full_at']:.0%} of the reference)")


def check_file(lab: str, path: str) -> bool:
    """CLI: run the public tests on a notebook or .py by executing its cells here."""
    from .submission import SubmissionError, read_cells

    one = _labs.get(lab)
    try:
        cells = read_cells(path)
    except SubmissionError as e:
        print(f"cannot check: {e}")
        return False
    import book  # noqa: F401

    global _FILE_SOURCE
    _FILE_SOURCE = "".join(c["source"].rstrip("\n") + "\n" for c in cells)
    try:
        return _check_cells(one, cells)
    finally:
        _FILE_SOURCE = None


def _check_cells(one, cells) -> bool:
    ns = {"__name__": "__main__", "check": lambda *a, **k: None}
    for c in cells:
        try:
            exec(compile(c["source"], f"<cell {c['index']}>", "exec"), ns)
        except Exception as e:
            print(f"cell {c['index']} raised {type(e).__name__}: {e}")
    names = list(one.functions)
    ok = True
    for st in one.all_steps:  # the steps the notebook has written (a blank step is no failure)
        if st.graded or st.function not in ns:
            continue
        try:
            check(ns[st.function], lab=one.name, step=st.name)
        except AssertionError as e:
            print(f"step {st.name!r} not done yet: {e}")
    for n in names:
        if n not in ns:
            print(f"FAIL: no function named `{n}`")
            ok = False
            continue
        try:
            check(ns[n], lab=one.name)
        except AssertionError as e:
            print(f"FAIL: {e}")
            ok = False
    return ok


class _CallableModule(__import__("types").ModuleType):
    """Importing this module binds the package's attribute ``check`` to it (the import system
    does that for every submodule), so a lab's setup cell run a second time, ``from autograder
    import check``, gets this module rather than the function: calling the module calls the
    function, and ``check(fn)`` works either way."""

    def __call__(self, *args, **kwargs):
        return check(*args, **kwargs)


__import__("sys").modules[__name__].__class__ = _CallableModule
