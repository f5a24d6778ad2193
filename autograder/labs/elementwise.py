"""The problem the elementwise labs (2, 3 and a new one made from the template, ``python -m
autograder new-lab``) share: one activation of a gate and an up projection, ``out[M, F] =
f(gate, up)``, each output element from the same element of both, stored in one dtype; a
memory-bound kernel graded in bandwidth against ``torch.add`` on three [M, F] tensors (the
three-stream elementwise ceiling in that dtype).

A lab declares an ``Elementwise`` (its dtype, where gate and up lie, the float64 truth, its
block and its shapes) and builds its ``Step``s and its ``KernelLab`` from it, as labs 4 and 5
build theirs from ``linear_layer``; what stays in the lab module is what is its own: the
activation's reference, tolerances, shapes, steps, words.

Layouts (``layout``):

- ``"interleaved"``: one input ``x [M, 2F]``, gate in the even columns and up in the odd (as
  gpt-oss stores them);
- ``"separate"``: two inputs ``gate [M, F]`` and ``up [M, F]``.

Blocks (``block``): the largest block the lab allows, which sets the simulator's hidden
shapes (every grid dimension gets at least two such blocks, so a kernel that forgets
``blockIdx`` fails there as on a GPU) and ``sim_blocks``: ``(columns, rows)`` for a 2D grid
over the output's columns and rows, or an int for a 1D grid over the flat arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .seeds import seeds
from .spec import KernelLab, PlantedBug, Step, odd_multiple

OUTPUT = "out"
LAYOUTS = {"interleaved": ("x",), "separate": ("gate", "up")}


@dataclass(frozen=True)
class Elementwise:
    """One elementwise SwiGLU-family problem in one dtype (see the module docstring)."""

    dtype: str
    """The inputs' and the output's dtype ("float32", "float16")."""
    layout: str
    """Where gate and up lie: "interleaved" (x [M, 2F]) or "separate" (gate, up [M, F])."""
    reference: Callable[[dict], object]
    """{input name: host array} -> the float64 answer [M, F]."""
    rtol: float
    atol: float
    scale: float
    """The inputs' standard deviation (autograder.inputs.generate)."""
    block: tuple[int, int] | int
    """The largest block: (columns, rows) of a 2D grid, or elements of a 1D grid (flat)."""
    guard_tile: tuple[int, int]
    """KernelLab.guard_tile: the largest tile a block may store past the end of `out`."""
    sim_shape: Callable
    """``sim_shape(rng) -> (M, F)``: one hidden shape for the simulator, spanning two blocks
    in every grid dimension."""
    gpu_shapes: Callable
    """``gpu_shapes(rng) -> [(M, F), ...]``: the hidden shapes on a GPU (the first n are
    used; more are drawn at random)."""
    timing_shape: tuple[int, int]
    """(M, F) of the timing case on a GPU (the simulator's is (2, 64))."""
    flops_per_element: int
    """Floating-point operations per output element, for the TFLOP/s a report shows."""
    params: tuple[str, ...] = field(default=())
    """The graded function's parameters: the inputs, then ``out`` (the default)."""

    def __post_init__(self):
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout {self.layout!r}: one of {', '.join(LAYOUTS)}")
        if not self.params:
            object.__setattr__(self, "params", self.inputs + (OUTPUT,))

    # -- the arrays
    @property
    def inputs(self) -> tuple[str, ...]:
        return LAYOUTS[self.layout]

    def input_specs(self, case) -> dict:
        M, F = case["M"], case["F"]
        s = seeds(case["seed"], self.inputs)
        shape = [M, 2 * F] if self.layout == "interleaved" else [M, F]
        return {n: {"shape": list(shape), "dtype": self.dtype, "seed": s[n], "scale": self.scale}
                for n in self.inputs}

    def out_spec(self, case) -> dict:
        return {"shape": [case["M"], case["F"]], "dtype": self.dtype}

    def describe(self, case) -> str:
        M, F = case["M"], case["F"]
        if self.layout == "interleaved":
            return f"x [{M}, {2 * F}] {self.dtype} (M={M}, F={F})"
        return f"{'/'.join(self.inputs)} [{M}, {F}] {self.dtype}"

    # -- the cases
    def sim_blocks(self, case) -> tuple[int, ...]:
        """Blocks of the master's grid on ``case`` if every block were the largest allowed."""
        if isinstance(self.block, int):
            return (-(-case["M"] * case["F"] // self.block),)
        cols, rows = self.block
        return (-(-case["F"] // cols), -(-case["M"] // rows))

    def hidden_cases(self, rng, simulated: bool, n: int = 3) -> list:
        if simulated:
            shapes = [self.sim_shape(rng) for _ in range(n)]
        else:
            shapes = list(self.gpu_shapes(rng))[:n]
            while len(shapes) < n:
                shapes.append((odd_multiple(rng, 1, 300), odd_multiple(rng, 1, 20000)))
        return [{"name": f"hidden {i + 1}", "M": M, "F": F, "seed": int(rng.integers(1 << 30))}
                for i, (M, F) in enumerate(shapes)]

    def timing_case(self, simulated: bool, seed: int) -> dict:
        M, F = (2, 64) if simulated else self.timing_shape
        return {"name": "timing", "M": M, "F": F, "seed": seed}

    # -- the work
    def min_bytes(self, case) -> int:
        """gate and up read once, out written once."""
        from book.dtypes import itemsize   # here: importing book decides GPU or simulator

        return 3 * case["M"] * case["F"] * itemsize(self.dtype)

    def flops(self, case) -> int:
        return self.flops_per_element * case["M"] * case["F"]

    def make_reference_runner(self, case):
        import torch

        M, F = case["M"], case["F"]
        dt = getattr(torch, self.dtype)
        sets = [tuple(torch.randn(M, F, device="cuda", dtype=dt) for _ in range(2))
                + (torch.empty(M, F, device="cuda", dtype=dt),) for _ in range(2)]
        return (lambda a, b, c: torch.add(a, b, out=c)), sets

    def reference_runner(self) -> Callable:
        """``make_reference_runner``, with the words a report names it by."""
        def runner(case):
            return self.make_reference_runner(case)
        runner.__doc__ = (f"torch.add(a, b, out=c) on three [M, F] {self.dtype} tensors: the "
                          "three-stream elementwise ceiling in this dtype")
        return runner

    # -- the lab
    def step(self, name: str, function: str, teaches: str, cases, bug: PlantedBug, **kw) -> Step:
        """A step of the lab on this problem (``kw``: Step's fields that differ, such as a
        launch size among ``params``)."""
        args = dict(params=self.params, inputs=self.inputs, output=OUTPUT, dtype=self.dtype,
                    rtol=self.rtol, atol=self.atol, cases=tuple(cases),
                    input_specs=self.input_specs, out_spec=self.out_spec,
                    reference=self.reference, describe=self.describe)
        args.update(kw)
        return Step(name=name, function=function, teaches=teaches, bug=bug, **args)

    def lab(self, *, name: str, title: str, chapters: str, asks: str, function: str,
            public_cases, steps=(), reference_name: str = "torch's reference",
            paths=(), derived=()) -> KernelLab:
        """The KernelLab of this problem: graded in bandwidth against torch.add."""
        return KernelLab(
            name=name, title=title, chapters=chapters, asks=asks, function=function,
            params=self.params, inputs=self.inputs, output=OUTPUT, dtype=self.dtype,
            rtol=self.rtol, atol=self.atol, perf_metric="bandwidth",
            public_cases=tuple(public_cases), hidden_cases=self.hidden_cases,
            input_specs=self.input_specs, out_spec=self.out_spec, reference=self.reference,
            describe=self.describe, timing_case=self.timing_case, min_bytes=self.min_bytes,
            flops=self.flops, make_reference_runner=self.reference_runner(),
            reference_name=reference_name, steps=tuple(steps), guard_tile=self.guard_tile,
            sim_blocks=self.sim_blocks, paths=tuple(paths), derived=tuple(derived))
