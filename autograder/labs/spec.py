"""What a lab declares: one ``LAB = KernelLab(...)`` or ``LAB = NumericLab(...)`` per lab
module, GPU-Puzzles' ``CudaProblem`` style. Every fact the grader, ``check()``, ``assign`` and
the tools read about a lab is a typed field here; the behaviour that differs between a numeric
lab (lab 1: functions returning numbers) and a kernel lab (labs 2 onwards: a host function that
launches kernels writing an output array) is a method of its class, so no caller asks which
kind it holds except through ``kernel``.

Instructor-side: the sandboxed child never receives these objects, only seeds, shapes and the
argument order (see autograder/sandbox/inside/).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

from .edits import Derived, Edit

Case = dict[str, Any]            # one case: "name", then the lab's own keys (shapes, "seed", ...)
Spec = dict[str, Any]            # one array: {"shape": [...], "dtype": "float32", "seed": int, ...}

LAB_NAME = re.compile(r"lab(\d+)_[a-z0-9_]+")   # lab<number>_<topic>: module, master and rubric
PERF_METRICS = ("bandwidth", "flops")


#: the course's GPU (Hopper, H100/H200): the capability a lab's kernels compile for by default
COURSE_CC = (9, 0)


class LabSpecError(ValueError):
    """A lab declares itself wrongly: the message names the lab, the field and the fix."""


def lab_number(name: str) -> int:
    m = LAB_NAME.fullmatch(name)
    if not m:
        raise LabSpecError(f"{name!r} is not a lab name: a lab is named lab<number>_<topic> "
                           "(lower case), e.g. lab5_tensor_core_gemm, and its module, master "
                           "notebook and rubric all carry that name")
    return int(m.group(1))


@dataclass(frozen=True)
class PlantedBug:
    """A typical mistake in a step, which its check must catch and name: the master's step cell
    (``cell``: another of the cells up to it, by id) with ``right`` replaced by ``wrong`` (every
    occurrence) fails ``check(fn, step=...)`` with a message matching the regular expression
    ``says`` (tests/grader/test_lab_steps.py plants it: ``autograder.master.namespace``)."""

    right: str
    wrong: str
    says: str
    cell: str | None = None

    @property
    def edit(self) -> Edit:
        """The bug as an edit of the master (None: the step's own cell, the last one read)."""
        return Edit(self.right, self.wrong, self.cell)


@dataclass(frozen=True)
class LabPath:
    """A path through the lab's problem that a kernel must get right, and that every grader's
    cases make the lab's master take (issue 41: lab 6's split-K was never graded in the
    simulator, whose cases were too small for the master to split). ``taken(case, launches)``
    says whether the master took it on ``case``, from the launches recorded in that call:
    each ``{"grid": [x, y, z], "block": [x, y, z], "scalars": [...]}``, the kernel's scalar
    arguments in order. The grader logs the paths each case took (measurements.jsonl, kind
    ``test``, ``paths``); tests/grader/test_lab_paths.py shows every declared path taken by the
    master on the simulator's cases, and the GPU lane on a GPU's."""

    name: str
    """A few words, unique in the lab ("split-K", "T = 1")."""
    words: str
    """What taking it means, one phrase ("d split over several blocks per row, the partial
    sums met in the kernel")."""
    taken: Callable[[Case, list], bool]


def odd_multiple(rng, lo: int, hi: int, unit: int = 1) -> int:
    """A size in ``[lo, hi)`` that is ``unit`` times an odd number, drawn by ``rng`` (a NumPy
    Generator): no power-of-two tile wider than ``unit`` divides it, so a kernel whose last
    tile lacks its bounds test stores (or loads) past the end on it whatever tile its author
    chose. (A size drawn from a plain range can land on a multiple of the tile: a T of 128
    or 256 needs no row test from a 128-row tile, and such a case is earned by a kernel
    without one.)"""
    first, last = -(-lo // unit), (hi - 1) // unit      # the multiples of unit in [lo, hi)
    first += 1 - first % 2
    last -= 1 - last % 2
    if first > last:
        raise ValueError(f"no odd multiple of {unit} in [{lo}, {hi})")
    return unit * (first + 2 * int(rng.integers(0, (last - first) // 2 + 1)))


def blocks_along(axis: int, along: str) -> LabPath:
    """The path of a grid with two blocks or more along ``axis`` (0 x, 1 y) of the last launch:
    a kernel that forgets ``blockIdx`` there fails it."""
    return LabPath(f"several blocks along {along}", f"two blocks or more along {along}: every "
                   "block must find its own part of the work from blockIdx",
                   lambda c, L: int(L[-1]["grid"][axis]) >= 2)


@dataclass(frozen=True)
class Step:
    """One stage of a kernel lab that builds its kernel in steps (every kernel lab): the function the
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
    input_specs: Callable[[Case], dict[str, Spec]]
    out_spec: Callable[[Case], Spec]
    reference: Callable[[dict], Any]
    describe: Callable[[Case], str]
    teaches: str = ""
    graded: bool = field(default=False)
    bug: PlantedBug | None = None
    """A mistake this step's check is tested to catch (every step of a lab declares one)."""
    explain: Callable[[Callable], str] | None = None
    """``explain(fn) -> str``: run by ``check(fn, step=...)`` in the student's process after a
    failed check, to say more than the first wrong value (lab 5's first step draws which lane
    holds what); "" says nothing. The grader never calls it."""


@dataclass(frozen=True, kw_only=True, eq=False)
class LabSpec:
    """What every lab declares. Use ``KernelLab`` or ``NumericLab``; this class holds what they
    share and the methods the grader calls on either."""

    name: str
    """``lab<number>_<topic>``: the module's file name, the master ``solutions/<name>.ipynb``
    and the rubric ``autograder/rubrics/<name>.toml``."""
    title: str
    """One line, shown by ``python -m autograder list`` and in feedback: the master's title
    (its first heading), as the lab's page shows it (tests/grader/test_lab_registry.py)."""
    chapters: str
    """The chapters the lab builds on, in words ("chapters 4-6")."""
    asks: str
    """What the lab asks the student for, one phrase of Markdown (no table pipes needed:
    they are escaped): the instructors' tables, the README's and the introduction's list of
    labs are written from it (``python -m tools.lab_pages``)."""
    rtol: float
    """Relative tolerance of a value compared with the float64 (or exact) answer."""
    public_cases: tuple[Case, ...]
    """The cases a student sees and ``check()`` runs; each has a unique ``"name"``."""
    hidden_cases: Callable[..., list[Case]]
    """``hidden_cases(rng, simulated, n)``: n fresh cases from the grader's secret ``rng``
    (smaller where ``simulated``)."""
    steps: tuple[Step, ...] = ()
    """The stages a kernel lab's notebook builds its kernel in, before the graded function
    (empty: the lab is not staged)."""
    derived: tuple[Derived, ...] = ()
    """Submissions made from the master by edits (``autograder.labs.edits``): the lab's bounds
    bugs, hazards, lesson controls (the rubric names one) and hostile submissions, which the
    suite grades (``python -m tools.lab_fixtures --write`` writes them)."""

    compile_cc: tuple[int, int] = COURSE_CC
    """The compute capability a kernel lab's kernels must compile for where no GPU runs them
    (the simulator's grading compiles every launched kernel for it: autograder/compiling.py;
    ``tools/lab_ptx.py`` checks the master for it by default). The course's GPU, sm_90, has
    every instruction family the labs use (lab 5's sm_80 ``cp.async`` and ``mma.sync``)."""

    kernel: ClassVar[bool] = False
    hidden_key: ClassVar[str] = "hidden_cases"     # the rubric's [correctness] key for n
    hidden_default: ClassVar[int] = 3

    def __post_init__(self):
        lab_number(self.name)
        if not self.public_cases:
            raise LabSpecError(f"{self.name}: public_cases is empty: a student needs at least "
                               "one case to check against")
        names = [c.get("name") for c in self.public_cases]
        if None in names or len(set(names)) != len(names):
            raise LabSpecError(f"{self.name}: every public case needs its own \"name\" "
                               f"(got {names})")
        if not callable(self.hidden_cases):
            raise LabSpecError(f"{self.name}: hidden_cases must be a function "
                               "(rng, simulated, n) -> list of cases")
        object.__setattr__(self, "derived", tuple(self.derived))
        names = [d.name for d in self.derived if isinstance(d, Derived)]
        if len(names) != len(self.derived) or len(set(names)) != len(names):
            raise LabSpecError(f"{self.name}: derived holds Derived(...) objects with names of "
                               f"their own (got {names})")
        # a shared folder (bounds/, controls/, ...) finds a lab's files by their prefix
        short = self.name.split("_")[0] + "_"
        wrong = [d.name for d in self.derived if d.kind != "hostile" and not d.name.startswith(short)]
        if wrong:
            raise LabSpecError(f"{self.name}: derived {wrong}: a name outside the lab's own "
                               f"folder starts with {short!r}")

    @property
    def number(self) -> int:
        return lab_number(self.name)

    @property
    def functions(self) -> dict[str, list[str]]:
        """What the student writes: function name -> parameter names."""
        raise NotImplementedError

    @property
    def staged(self) -> bool:
        return bool(self.steps)

    def derived_named(self, name: str) -> Derived:
        """One of the lab's derived submissions, by name (a rubric names its control so)."""
        for d in self.derived:
            if d.name == name:
                return d
        raise KeyError(f"{self.name} derives no submission {name!r}: it derives "
                       + (", ".join(d.name for d in self.derived) or "none"))

    def signature(self) -> str:
        return ", ".join(f"{f}({', '.join(p)})" for f, p in self.functions.items())

    def cases(self, rng, simulated: bool, correctness: dict) -> list[Case]:
        """Public cases, then hidden ones drawn from ``rng`` (the grader's secret seed)."""
        n = correctness.get(self.hidden_key, self.hidden_default)
        return ([dict(c, visibility="public") for c in self.public_cases]
                + [dict(c, visibility="hidden") for c in self.hidden_cases(rng, simulated, n)])

    def public_cases_for(self, function: str) -> list[Case]:
        return [c for c in self.public_cases if self.function_of(c) == function]

    @property
    def all_steps(self) -> list[Step]:
        """The steps the notebook builds its kernel in, in order, then the graded one."""
        return []

    def step(self, name: str) -> Step:
        for s in self.all_steps:
            if name in (s.name, s.function):
                return s
        raise KeyError(f"{self.name} has no step {name!r}: its steps are "
                       + (", ".join(f"{s.name!r} ({s.function})" for s in self.all_steps)
                          or "none"))


@dataclass(frozen=True, kw_only=True, eq=False)
class NumericLab(LabSpec):
    """A lab whose answers are numbers or words (lab 1): each function is called on a case's
    ``"args"`` and its return value compared with ``answers[function](*args)``. A case carries
    ``"function"`` and ``"args"``."""

    signatures: dict[str, tuple[str, ...]]
    """function name -> parameter names: the signatures the lab asks for."""
    answers: dict[str, Callable[..., Any]]
    """function name -> the instructor's answer, called with a case's ``"args"``."""

    hidden_key: ClassVar[str] = "hidden_per_function"
    hidden_default: ClassVar[int] = 2

    def __post_init__(self):
        super().__post_init__()
        if set(self.signatures) != set(self.answers):
            raise LabSpecError(f"{self.name}: signatures and answers must name the same "
                               f"functions (signatures: {sorted(self.signatures)}, answers: "
                               f"{sorted(self.answers)})")
        if self.steps:
            raise LabSpecError(f"{self.name}: a numeric lab has no steps (steps are kernel stages)")
        for c in self.public_cases:
            if c.get("function") not in self.signatures or "args" not in c:
                raise LabSpecError(f"{self.name}: public case {c.get('name')!r} needs "
                                   "\"function\" (one of signatures) and \"args\"")

    @property
    def functions(self) -> dict[str, list[str]]:
        return {f: list(p) for f, p in self.signatures.items()}

    def function_of(self, case) -> str:
        return case["function"]

    def args(self, case, guard: bool = True) -> list[dict]:
        """The call as the sandboxed child builds it: the values (no arrays, no guards)."""
        return [{"role": "value", "value": v} for v in case["args"]]

    def expected(self, case):
        """The answer: a number or a word."""
        return self.answers[case["function"]](*case["args"])

    def check(self, got, case, expected=None) -> tuple[bool, str]:
        """(ok, message naming what is wrong) for what the student's code returned."""
        from book.answers import compare_number

        expected = self.expected(case) if expected is None else expected
        return compare_number(got, expected, rtol=self.rtol, what=case["name"])

    def show(self, case) -> str:
        return case["name"]

    def call_here(self, fn, case, guard: bool = True):
        """Call the student's function in THIS process (``check()`` in their own notebook):
        (what it returned, ""). Not used by the grader (``guard``: a kernel lab's)."""
        return fn(*case["args"]), ""

    def out_size(self, case) -> int:
        return 1


@dataclass(frozen=True, kw_only=True, eq=False)
class KernelLab(LabSpec):
    """A lab whose student writes one host function ``function(*params)`` that launches kernels
    writing ``output`` (labs 2 onwards). Inputs are generated from seeds (``autograder.inputs``), the
    output compared with a float64 reference, then timed against ``make_reference_runner``."""

    function: str
    """The graded host function's name."""
    params: tuple[str, ...]
    """Its parameters, in order: the input arrays and the output array."""
    inputs: tuple[str, ...]
    """The parameters that are inputs (never modified by a correct kernel)."""
    output: str
    """The parameter the kernel writes its result into."""
    dtype: str
    """The output's dtype name ("float32", "float16", "bfloat16")."""
    atol: float
    """Absolute tolerance, beside ``rtol``: |got - ref| <= atol + rtol * |ref|."""
    perf_metric: str
    """"bandwidth" (a memory-bound lab: bytes per second) or "flops" (compute-bound)."""
    input_specs: Callable[[Case], dict[str, Spec]]
    """case -> {input name: array spec (shape, dtype, seed, scale)}."""
    out_spec: Callable[[Case], Spec]
    """case -> the output's {"shape", "dtype"}."""
    reference: Callable[[dict], Any]
    """{input name: host array} -> the float64 answer."""
    describe: Callable[[Case], str]
    """case -> the shapes in words, for messages ("x [3, 80] float32 (M=3, F=40)")."""
    timing_case: Callable[[bool, int], Case]
    """``timing_case(simulated, seed)``: the case performance is measured on."""
    min_bytes: Callable[[Case], int]
    """case -> the bytes the operation must move at least (for effective bandwidth)."""
    flops: Callable[[Case], int]
    """case -> the floating-point operations of the operation."""
    make_reference_runner: Callable[[Case], tuple]
    """case -> (fn, [argument tuples]) of the performance reference, on torch tensors on the
    GPU; its docstring's first line names it in reports."""
    reference_name: str
    """The performance reference in a few words, as feedback names it ("torch's reference",
    "strict-f32 cuBLAS")."""
    guard_tile: tuple[int, int] = (64, 4096)
    """The largest tile, (rows, columns), one block of a kernel for this lab may cover: every
    array the grader hands a submission sits between two guard zones of ``rows`` of its rows
    plus ``cols`` elements (``autograder.inputs.guard_elems``), so that a whole tile row
    stored past the end of ``out`` (a dropped bounds test in the last tile) lands in a guard
    zone and is reported, on a GPU and in the simulator alike."""
    sim_blocks: Callable[[Case], tuple[int, ...]] | None = None
    """``sim_blocks(case)``: for each grid dimension of the master's launch, the blocks it
    would take on ``case`` if every block were the largest the lab allows (in the simulator).
    Every hidden case drawn for the simulator gives at least 2 in each dimension, so a kernel
    that forgets ``blockIdx`` in any dimension fails there (tests/grader/test_block_crossing.py)."""
    out_units: tuple[int, ...] = (1, 1)
    """The unit each dimension of the output comes in (lab 5: ``(1, 2)``, T any, h even; 0: a
    dimension no kernel of the lab tiles, any size). Every hidden case, drawn for a GPU or for
    the simulator, gives each tiled dimension an odd number of its units (:func:`odd_multiple`), so a kernel that
    drops a bounds test in any of them stores past the end of ``out`` in every hidden case,
    whatever its tile (tests/grader/test_bounds_grading.py holds it over many seeds)."""
    paths: tuple[LabPath, ...] = ()
    """The paths of the problem a kernel must get right (:class:`LabPath`); the lab's hidden
    cases are drawn so that the master takes every one of them on every grader."""
    untraced: str = ""
    """Why ``check()``'s access-pattern trace cannot judge this lab's kernels, in words ("": it
    can). Where set, ``check()`` says this instead of tracing: the tracer records element
    accesses, and a kernel built on instructions it does not model (lab 5's ``cp.async``,
    ``ldmatrix``, paired half stores) would be misread, its student accused of conflicts and
    wasted sectors that are not there."""

    kernel: ClassVar[bool] = True

    def __post_init__(self):
        super().__post_init__()
        where = f"{self.name}"
        if self.output not in self.params:
            raise LabSpecError(f"{where}: output {self.output!r} is not one of params {self.params}")
        if not set(self.inputs) <= set(self.params) or self.output in self.inputs:
            raise LabSpecError(f"{where}: inputs {self.inputs} must be params {self.params} "
                               "other than the output")
        if self.perf_metric not in PERF_METRICS:
            raise LabSpecError(f"{where}: perf_metric {self.perf_metric!r}: use one of "
                               f"{', '.join(PERF_METRICS)}")
        seen = {self.function}
        for s in self.steps:
            if not isinstance(s, Step) or s.graded:
                raise LabSpecError(f"{where}: steps holds Step(...) objects of the stages before "
                                   "the graded function (the graded one is added by the lab)")
            if s.function in seen or s.name == "final":
                raise LabSpecError(f"{where}: step {s.name!r}: its function {s.function!r} (or "
                                   "its name) is used twice: each step has its own")
            seen.add(s.function)
        names = [p.name for p in self.paths]
        if len(set(names)) != len(names) or not all(isinstance(p, LabPath) for p in self.paths):
            raise LabSpecError(f"{where}: paths holds LabPath(...) objects with names of their "
                               f"own (got {names})")

    @property
    def functions(self) -> dict[str, list[str]]:
        return {self.function: list(self.params)}

    def paths_taken(self, case, launches) -> list[str]:
        """The names of the declared paths ``case`` took, given the launches recorded in the
        call (a path whose test raises on a foreign launch is not taken)."""
        out = []
        for p in self.paths:
            try:
                if p.taken(case, launches):
                    out.append(p.name)
            except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
                continue
        return out

    @property
    def reference_impl(self) -> str:
        """The performance reference in words (its runner's docstring, first line)."""
        return (self.make_reference_runner.__doc__ or "").strip().split("\n")[0]

    def function_of(self, case) -> str:
        return self.function

    def args(self, case, guard: bool = True) -> list[dict]:
        """The call as the sandboxed child builds it: input specs and the output, each with
        the elements of its guard zones (``guard=False``: none, for compute-sanitizer, whose
        memcheck sees a store past an allocation's end, not past a guard's)."""
        specs, out = self.input_specs(case), []
        for p in self.params:
            if p == self.output:
                o = self.out_spec(case)
                out.append({"role": "out", "name": p, "shape": o["shape"], "dtype": o["dtype"]})
            else:
                out.append({"role": "in", "name": p, "spec": specs[p]})
        for a in out:
            shape, dtype = (a["shape"], a["dtype"]) if a["role"] == "out" else \
                (a["spec"]["shape"], a["spec"].get("dtype", "float32"))
            a["guard"] = self.guard(shape, dtype) if guard else 0
        return out

    def guard(self, shape, dtype) -> int:
        """Elements of each guard zone of an array of ``shape`` and ``dtype`` in this lab."""
        from ..inputs import guard_elems

        return guard_elems(shape, dtype, self.guard_tile)

    def expected(self, case):
        """The float64 output array for ``case``."""
        from ..inputs import generate

        return self.reference({n: generate(s) for n, s in self.input_specs(case).items()})

    def check(self, got, case, expected=None) -> tuple[bool, str]:
        """(ok, message naming what is wrong) for the array the student's kernel wrote."""
        from book.answers import compare_array

        expected = self.expected(case) if expected is None else expected
        return compare_array(got, expected, rtol=self.rtol, atol=self.atol, dtype_name=self.dtype,
                             what=self.output, shape_hint=self.show(case))

    def show(self, case) -> str:
        return self.describe(case)

    @property
    def final(self) -> Step:
        """The graded function as a Step (its public cases), so one code path checks both."""
        return Step(name="final", function=self.function, params=tuple(self.params),
                    inputs=tuple(self.inputs), output=self.output, dtype=self.dtype,
                    rtol=self.rtol, atol=self.atol, cases=tuple(self.public_cases),
                    input_specs=self.input_specs, out_spec=self.out_spec,
                    reference=self.reference, describe=self.describe, teaches=self.title,
                    graded=True)

    @property
    def all_steps(self) -> list[Step]:
        return list(self.steps) + [self.final]

    def run_step(self, fn, step: Step, case, guard: bool = True):
        """Call ``fn`` on one of ``step``'s cases in this process: (output, note, inputs).
        Every array sits between guard zones, as the grader hands them (``guard=False``:
        exact allocations, for compute-sanitizer); in the simulator the kernels' arrays are
        addressed as on a GPU (book.simulator.addressing), so a store past the end of ``out`` is
        found in its guard zone here as on a GPU, and the note says so in the grader's words;
        and every simulated launch is watched for hazards (book.simulator.hazard_recorder: races, barriers,
        reads outside an array), each said in the note as the grader says it (autograder.hazards)."""
        import numpy as np
        from numba import cuda

        from book.simulator import hazard_recorder
        from book.simulator.addressing import installed

        from .. import hazards
        from book.answers import guard_notes
        from ..inputs import generate, guard_damage, guarded, unguarded

        ins = {n: generate(s) for n, s in step.input_specs(case).items()}
        o = step.out_spec(case)
        bodies = dict(ins, **{step.output: np.full(o["shape"], np.nan, dtype=o["dtype"])})
        flats, dev = {}, {}
        for n, a in bodies.items():
            g = self.guard(a.shape, a.dtype) if guard else 0
            flats[n] = (cuda.to_device(guarded(a, g, "out" if n == step.output else "in")), g)
            dev[n] = flats[n][0][g:g + a.size].reshape(a.shape)
        with hazard_recorder.recording([(d, n) for n, d in dev.items()]) as watch, installed():
            fn(*[dev[p] if p in dev else case[p] for p in step.params])
            cuda.synchronize()
        found, got, note = [], None, ""
        for n, (d, g) in flats.items():
            host = d.copy_to_host()
            body = unguarded(host, bodies[n].shape, g)
            found.append((n, guard_damage(host, g, "out" if n == step.output else "in"),
                          body.size))
            if n == step.output:
                got = body
            elif not np.array_equal(body, ins[n], equal_nan=True):
                note += f"\n`{n}` was modified: inputs must stay as they were"
        note += hazards.messages(hazards.from_report(watch.hazards()))
        return got, guard_notes(found) + note, ins

    def check_step(self, got, step: Step, case, inputs) -> tuple[bool, str]:
        """(ok, message): the same words as check() and the grader (compare_array)."""
        from book.answers import compare_array

        return compare_array(got, step.reference(inputs), rtol=step.rtol, atol=step.atol,
                             dtype_name=step.dtype, what=step.output,
                             shape_hint=step.describe(case))

    def call_here(self, fn, case, guard: bool = True):
        """Call the student's function in THIS process (``check()`` in their own notebook):
        (what it wrote, a note if it stored outside its arrays or changed its inputs). Not
        used by the grader."""
        got, note, _ = self.run_step(fn, self.final, case, guard=guard)
        return got, note

    def out_size(self, case) -> int:
        return math.prod(self.out_spec(case)["shape"])
