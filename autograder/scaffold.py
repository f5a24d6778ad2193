"""``python -m autograder new-lab NAME``: a new lab's three files, written from a template that
is a working lab (CONTRIBUTING.md, "Add a lab", takes it from there):

- ``autograder/labs/NAME.py``: the lab's spec, built on the elementwise problem labs 2 and 3
  share (``labs/elementwise.py``): ``out = relu(gate)**2 * up`` in float32, one checked step
  with its planted bug, the graded function;
- ``solutions/NAME.ipynb``: its master (title, the setup cell's placeholder, the grader's
  ``check`` import, the step, its check and hints, the graded function);
- ``autograder/rubrics/NAME.toml``: its points, provisional performance lines (the shipped
  bandwidth labs' until its lesson's control is measured) and limits.

Each is meant to be edited into the lab you want; as written they list, assign, check and
grade (tests/grader/test_lab_registry.py follows the recipe with them).
"""

from __future__ import annotations

from pathlib import Path

from .labs.spec import LabSpecError, lab_number

REPO = Path(__file__).resolve().parent.parent

MODULE = '''"""Lab {n}: {words} (made by `python -m autograder new-lab`: a working lab to edit into
yours). out = relu(gate)**2 * up, float32, on [M, F] arrays; one checked step, then the graded
function. What each field means: autograder/labs/spec.py and autograder/labs/elementwise.py."""

from __future__ import annotations

import numpy as np

from .elementwise import Elementwise
from .spec import PlantedBug


def reference(inputs):
    """The float64 truth the grader compares with."""
    g = np.maximum(inputs["gate"].astype(np.float64), 0.0)
    return g * g * inputs["up"].astype(np.float64)


# The largest block the lab allows: 1024 threads (CUDA's most) of one element each, over the
# flat arrays (the master's 1-D grid). It sizes the simulator's hidden cases, which span two
# such blocks, so a kernel that forgets blockIdx fails them there as on a GPU.
LARGEST_BLOCK = 1024


def sim_shape(rng):
    """One hidden shape in the simulator: two of the largest blocks and a ragged end."""
    M = int(rng.integers(2, 4))
    return M, -(-(LARGEST_BLOCK + 1) // M) + int(rng.integers(0, 300))


def gpu_shapes(rng):
    """The hidden shapes on a GPU: a decode row, a ragged batch, anything."""
    return [(1, 18944), (int(rng.integers(60, 130)), 14336 + int(rng.integers(1, 64))),
            (int(rng.integers(2, 40)), int(rng.integers(1000, 20000)))]


# rtol, atol: float32 arithmetic against the float64 truth. guard_tile: a whole row of the
# output and one block may be stored past its end (the guard zones that catch it).
PROBLEM = Elementwise(dtype="float32", layout="separate", reference=reference, rtol=1e-5,
                      atol=1e-6, scale=2.0, block=LARGEST_BLOCK, guard_tile=(1, LARGEST_BLOCK),
                      sim_shape=sim_shape, gpu_shapes=gpu_shapes, timing_shape=(8192, 14336),
                      flops_per_element=3)

# Each step: the function its notebook cell defines, what it teaches, its small cases, and the
# typical mistake its check must catch (the master's step cell with `right` made `wrong`).
STEPS = (
    PROBLEM.step("one", "{fn}_one", "one output element per thread",
                 ({{"name": "step one M=2 F=70", "M": 2, "F": 70, "seed": 11}},
                  {{"name": "step one M=1 F=129", "M": 1, "F": 129, "seed": 12}}),
                 PlantedBug("if i < M * F:", "if i < M * F - 1:", r"never written")),
)

LAB = PROBLEM.lab(
    name="{name}",
    title="Lab {n}: {words}",
    chapters="chapters 4-5",
    asks="a fused kernel for `relu(gate)**2 * up` on two [M, F] float32 arrays",
    function="{fn}",
    public_cases=({{"name": "public M=3 F=40", "M": 3, "F": 40, "seed": 1}},
                  {{"name": "public M=1 F=257", "M": 1, "F": 257, "seed": 2}}),
    steps=STEPS)
'''

RUBRIC = '''lab = "{name}"

[correctness]
public_points = 1
hidden_points = 2
hidden_cases = 3
hidden_visibility = "after_due_date"

[performance]
points = 4
# Units: the lab's master, timed by the grader beside each submission on the same GPU in the
# same run (basis = "master": a copy of the master scores 1.0 on every GPU). Provisional
# lines, the shipped bandwidth labs', until the lesson's control (a correct solution that
# misses the lesson: tests/grader/derived_fixtures.py) is timed against the master on a GPU
# (benchmarks/lesson_controls_probe.py --apply writes the lines by the rule of
# autograder/rubric.py, lines_from_control).
lesson = "one fused pass: gate and up read once, out written once (three streams of float32)"
basis = "master"
zero_at = 0.30
full_at = 0.80
remeasure_band = 0.03
physical_limit = 1.08

[limits]
load_s = 120
test_s = 30
'''

# (kind, source) of the master's cells; {fn} is the graded function's name
CELLS = [
    ("markdown", "# Lab {n}: {words}\n\n**Goal.** Write `{fn}(gate, up, out)`: "
                 "`out = relu(gate)**2 * up` on two `[M, F]` float32 arrays, in one fused kernel."),
    ("code", "import book"),   # the setup cell's placeholder: python -m tools.setup_cell --write
    ("code", "# autograder: setup (the grader skips this cell)\n"
             "from autograder import check  # check(fn): the public tests on your function"),
    ("code", "from numba import cuda, float32\n\nTHREADS = 256    # threads per block"),
    ("markdown", "## Step 1: one output element per thread\n\nWrite `{fn}_one(gate, up, out)`: "
                 "one thread per element of `out`, in a 1-D grid over the flat arrays."),
    ("code", "# BEGIN SOLUTION one thread per element, a 1-D grid\n"
             "@cuda.jit\n"
             "def _relu2_kernel(gate, up, out):\n"
             "    i = cuda.grid(1)\n"
             "    M, F = out.shape\n"
             "    if i < M * F:\n"
             "        r, c = i // F, i % F\n"
             "        g = max(gate[r, c], float32(0.0))\n"
             "        out[r, c] = g * g * up[r, c]\n"
             "# END SOLUTION\n\n\n"
             "def {fn}_one(gate, up, out):\n"
             "    # BEGIN SOLUTION launch enough blocks of THREADS for every element\n"
             "    M, F = out.shape\n"
             "    _relu2_kernel[(M * F + THREADS - 1) // THREADS, THREADS](gate, up, out)\n"
             "    # END SOLUTION"),
    ("code", 'check({fn}_one, step="one")'),
    ("markdown", "<details><summary>Hint 1</summary>\n\nThread `i = cuda.grid(1)` owns element "
                 "`(i // F, i % F)`.\n\n</details>\n\n<details><summary>Hint 2</summary>\n\n"
                 "Round the number of blocks up, and let the threads past the end do "
                 "nothing.\n\n</details>"),
    ("markdown", "## The graded function\n\n`{fn}(gate, up, out)` is what the grader calls."),
    ("code", "def {fn}(gate, up, out):\n"
             "    # BEGIN SOLUTION call your step 1\n"
             "    {fn}_one(gate, up, out)\n"
             "    # END SOLUTION"),
    ("code", "check({fn})"),
]


def paths(name: str, root: Path = REPO) -> dict[str, Path]:
    """The three files of lab ``name``."""
    return {"module": root / "autograder" / "labs" / f"{name}.py",
            "master": root / "solutions" / f"{name}.ipynb",
            "rubric": root / "autograder" / "rubrics" / f"{name}.toml"}


def new_lab(name: str, root: Path = REPO) -> list[Path]:
    """Write lab ``name``'s three files (refused, saying why, if the name is not a lab's name,
    its number is taken or a file exists); the paths written."""
    import nbformat

    from . import labs

    n = lab_number(name)   # lab<number>_<topic>, or a LabSpecError that says so
    taken = [x for x in labs.names() if lab_number(x) == n]
    if taken:
        raise LabSpecError(f"lab number {n} is taken by {taken[0]}: pick another number")
    files = paths(name, root)
    there = [str(p.relative_to(root)) for p in files.values() if p.exists()]
    if there:
        raise LabSpecError(f"{', '.join(there)} exist already: new-lab writes new files only")
    topic = name.split("_", 1)[1]
    words = dict(name=name, n=n, fn=topic, words=topic.replace("_", " "))
    files["module"].write_text(MODULE.format(**words))
    files["rubric"].write_text(RUBRIC.format(**words))
    nb = nbformat.v4.new_notebook()
    make = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    nb.cells = [make[kind](src.format(**words)) for kind, src in CELLS]
    for k, c in enumerate(nb.cells):
        c["id"] = f"lab{n}-{k:02d}"
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(files["master"]))
    return list(files.values())
