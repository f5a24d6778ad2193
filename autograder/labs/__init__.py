"""The labs: one module per lab with its public cases, hidden-case generator, float64
reference and call convention. Instructor-side: the sandboxed child never receives these
modules, only seeds, shapes and argument order (see autograder/driver.py)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Callable

NAMES = (
    "lab1_bytes_and_roofline",
    "lab2_packed_swiglu",
    "lab3_half_precision",
    "lab4_dual_gemm",
    "lab5_tensor_core_dual_gemm",
)


def resolve(name: str) -> str:
    """Full lab name from 'lab2', '2', 'lab2_packed_swiglu' or a notebook path."""
    key = str(name).rsplit("/", 1)[-1].removesuffix(".ipynb").removesuffix(".py").lower()
    for full in NAMES:
        if key == full or key == full.split("_")[0] or key == full[3:4] or full.startswith(key + "_"):
            return full
    raise KeyError(f"unknown lab {name!r}: the labs are {', '.join(NAMES)} "
                   "(`python -m autograder list`)")


def get(name: str):
    return importlib.import_module(f"autograder.labs.{resolve(name)}")


@dataclass(frozen=True)
class Step:
    """One stage of a kernel lab that builds its kernel in steps (labs 2-4): the function the
    student writes in the step's cell (``function(*params)``), the small cases its check runs,
    and the float64 reference those cases are compared with. A check cell calls
    ``check(<function>, step=<name>)``; the grader never runs steps (it grades the lab's final
    function only), so an unfinished step costs no marks. Arguments in ``params`` that are
    neither an input array nor the output (a launch size such as ``blocks``) are taken from the
    case, so a check can fix the grid and see whether the student's loop covers the rest."""

    name: str
    function: str
    params: tuple
    inputs: tuple
    output: str
    dtype: str
    rtol: float
    atol: float
    cases: tuple
    input_specs: Callable
    out_spec: Callable
    reference: Callable
    describe: Callable
    teaches: str = ""
    graded: bool = field(default=False)
    #: ``explain(fn) -> str``: after a failed check, more than the first wrong value (lab 5's
    #: step 1 draws which lane holds what); "" or None says nothing. Run in the student's
    #: process by ``check(fn, step=...)``, never by the grader.
    explain: Callable | None = None


class Lab:
    """One protocol for every lab, numeric (lab 1) or kernel (labs 2-4), GPU-Puzzles style:
    what the student writes (``functions``), the cases, the ``inputs`` of a case, its
    ``reference`` answer, ``check(got, case)`` and ``show(case)``. The lab modules hold the
    facts (shapes, seeds, references, tolerances); this class is the only place that knows
    how a numeric lab and a kernel lab differ. Constants (RTOL, OUTPUT, PERF_METRIC, ...) and
    the kernel labs' performance helpers are read through to the module."""

    def __init__(self, name: str):
        self.name = resolve(name)
        self.module = get(self.name)
        self.kernel = self.module.KIND == "kernel"
        m = self.module
        self.functions = {m.FUNCTION: list(m.PARAMS)} if self.kernel else dict(m.FUNCTIONS)

    def __getattr__(self, attr):
        return getattr(self.module, attr)

    def signature(self) -> str:
        return ", ".join(f"{f}({', '.join(p)})" for f, p in self.functions.items())

    def cases(self, rng, simulated: bool, correctness: dict) -> list[dict]:
        """Public cases, then hidden ones drawn from ``rng`` (the grader's secret seed)."""
        n = correctness.get("hidden_per_function" if not self.kernel else "hidden_cases",
                            2 if not self.kernel else 3)
        return ([dict(c, visibility="public") for c in self.module.public_cases()]
                + [dict(c, visibility="hidden") for c in self.module.hidden_cases(rng, simulated, n)])

    def function_of(self, case) -> str:
        return case["function"] if not self.kernel else self.module.FUNCTION

    def inputs(self, case) -> dict:
        """Numeric lab: the arguments. Kernel lab: each input's spec (shape, dtype, seed)."""
        if not self.kernel:
            return {f"arg{i}": a for i, a in enumerate(case["args"])}
        return self.module.input_specs(case)

    def args(self, case) -> list[dict]:
        """The call as the sandboxed child builds it: values, or input specs and the output."""
        if not self.kernel:
            return [{"role": "value", "value": v} for v in case["args"]]
        m, specs, out = self.module, self.module.input_specs(case), []
        for p in m.PARAMS:
            if p == m.OUTPUT:
                o = m.out_spec(case)
                out.append({"role": "out", "name": p, "shape": o["shape"], "dtype": o["dtype"]})
            else:
                out.append({"role": "in", "name": p, "spec": specs[p]})
        return out

    def reference(self, case):
        """The expected answer: a number or word, or the float64 output array."""
        if not self.kernel:
            return self.module.answer(case)
        from ..inputs import generate

        return self.module.reference({n: generate(s) for n, s in self.module.input_specs(case).items()})

    def check(self, got, case, expected=None) -> tuple[bool, str]:
        """(ok, message naming what is wrong) for what the student's code produced."""
        from ..compare import compare_array, compare_number

        expected = self.reference(case) if expected is None else expected
        m = self.module
        if not self.kernel:
            return compare_number(got, expected, rtol=m.RTOL, what=case["name"])
        return compare_array(got, expected, rtol=m.RTOL, atol=m.ATOL, dtype_name=m.DTYPE,
                             what=m.OUTPUT, shape_hint=self.show(case))

    def show(self, case) -> str:
        return self.module.describe(case) if self.kernel else case["name"]

    @property
    def final(self) -> Step:
        """The graded function as a Step (its public cases), so one code path checks both."""
        m = self.module
        return Step(name="final", function=m.FUNCTION, params=tuple(m.PARAMS),
                    inputs=tuple(m.INPUTS), output=m.OUTPUT, dtype=m.DTYPE, rtol=m.RTOL,
                    atol=m.ATOL, cases=tuple(m.public_cases()), input_specs=m.input_specs,
                    out_spec=m.out_spec, reference=m.reference, describe=m.describe,
                    teaches=getattr(m, "TITLE", ""), graded=True)

    @property
    def steps(self) -> list[Step]:
        """The steps the lab notebook builds its kernel in, in order, then the graded one."""
        if not self.kernel:
            return []
        return list(getattr(self.module, "STEPS", ())) + [self.final]

    def step(self, name: str) -> Step:
        for s in self.steps:
            if name in (s.name, s.function):
                return s
        raise KeyError(f"{self.name} has no step {name!r}: its steps are "
                       + ", ".join(f"{s.name!r} ({s.function})" for s in self.steps))

    def run_step(self, fn, step: Step, case):
        """Call ``fn`` on one of ``step``'s cases in this process: (output, note)."""
        import numpy as np
        from numba import cuda

        from ..inputs import generate

        ins = {n: generate(s) for n, s in step.input_specs(case).items()}
        o = step.out_spec(case)
        dev = {n: cuda.to_device(a) for n, a in ins.items()}
        dev[step.output] = cuda.to_device(np.full(o["shape"], np.nan, dtype=o["dtype"]))
        fn(*[dev[p] if p in dev else case[p] for p in step.params])
        cuda.synchronize()
        note = "".join(f"\n`{n}` was modified: inputs must stay as they were"
                       for n, a in ins.items() if not np.array_equal(dev[n].copy_to_host(), a))
        return dev[step.output].copy_to_host(), note, ins

    def check_step(self, got, step: Step, case, inputs) -> tuple[bool, str]:
        """(ok, message): the same words as check() and the grader (compare_array)."""
        from ..compare import compare_array

        return compare_array(got, step.reference(inputs), rtol=step.rtol, atol=step.atol,
                             dtype_name=step.dtype, what=step.output,
                             shape_hint=step.describe(case))

    def public_cases_for(self, function: str) -> list[dict]:
        return [c for c in self.module.public_cases() if self.function_of(c) == function]

    def call_here(self, fn, case):
        """Call the student's function in THIS process (``check()`` in their own notebook):
        (what it produced, a note if it changed its inputs). Not used by the grader."""
        if not self.kernel:
            return fn(*case["args"]), ""
        import numpy as np
        from numba import cuda

        from ..inputs import generate

        m = self.module
        ins = {n: generate(s) for n, s in m.input_specs(case).items()}
        o = m.out_spec(case)
        dev = {n: cuda.to_device(a) for n, a in ins.items()}
        dev[m.OUTPUT] = cuda.to_device(np.full(o["shape"], np.nan, dtype=o["dtype"]))
        fn(*[dev[p] for p in m.PARAMS])
        cuda.synchronize()
        note = "".join(f"\n`{n}` was modified: inputs must stay as they were"
                       for n, a in ins.items() if not np.array_equal(dev[n].copy_to_host(), a))
        return dev[m.OUTPUT].copy_to_host(), note

    def out_size(self, case) -> int:
        import math

        return math.prod(self.module.out_spec(case)["shape"]) if self.kernel else 1


def lab(name: str) -> Lab:
    return Lab(name)
