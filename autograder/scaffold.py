"""``python -m autograder new-lab NAME``: a new lab's three files, written from a template that
is a working lab (CONTRIBUTING.md, "Add a lab", takes it from there):

- ``autograder/labs/NAME.py``: the lab's spec, built on the elementwise problem labs 2 and 3
  share (``labs/elementwise.py``): ``out = relu(gate)**2 * up`` in float32, one checked step
  with its planted bug, the graded function, and the submissions the suite derives from the
  master (``derived``: a store past the end of ``out``, a forgotten ``blockIdx``, a result kept
  by shape, and the "lesson not learned" control the rubric names, two passes through a
  temporary);
- ``solutions/NAME.ipynb``: its master (title, the course's setup cell, folded, the grader's
  ``check`` import, the step, its check and hints, the graded function);
- ``autograder/rubrics/NAME.toml``: its points, provisional performance lines (the shipped
  bandwidth labs', until its control is timed on a GPU), its lesson and control, and limits.

Each is meant to be edited into the lab you want (the kernel keeps its template name,
``_relu2_kernel``, until you rename it); as written they list, assign, check and grade, and
pass the suite's lab tests (tests/grader/test_lab_registry.py follows the recipe with them).
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

from .edits import Derived, Edit, cache_by_shape
from .elementwise import Elementwise
from .spec import PlantedBug, odd_multiple


def reference(inputs):
    """The float64 truth the grader compares with."""
    g = np.maximum(inputs["gate"].astype(np.float64), 0.0)
    return g * g * inputs["up"].astype(np.float64)


# The largest block the lab allows: 1024 threads (CUDA's most) of one element each, over the
# flat arrays (the master's 1-D grid). It sizes the simulator's hidden cases, which span two
# such blocks, so a kernel that forgets blockIdx fails them there as on a GPU.
LARGEST_BLOCK = 1024


def sim_shape(rng):
    """One hidden shape in the simulator: two of the largest blocks and a ragged end (every
    size odd, spec.odd_multiple: no tile of a power of two fits it)."""
    M = odd_multiple(rng, 2, 4)
    lo = -(-(LARGEST_BLOCK + 1) // M)
    return M, odd_multiple(rng, lo, lo + 300)


def gpu_shapes(rng):
    """The hidden shapes on a GPU: a decode row, a ragged batch, anything (every size odd)."""
    return [(1, odd_multiple(rng, 18900, 19000)),
            (odd_multiple(rng, 60, 130), odd_multiple(rng, 14337, 14400)),
            (odd_multiple(rng, 2, 40), odd_multiple(rng, 1000, 20000))]


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

# The submissions the suite grades, each the master made wrong (or slow) by edits of its cells
# (by id: the step's cell is {short}-05); `python -m tools.lab_fixtures --write` writes them.
DERIVED = (
    Derived("bounds", "{short}_writes_past_end", """\\
writes past the end of `out`: the master launching one block more than it needs with its bounds
test dropped, so the last block's threads store past the end of `out`. Every case fails with
"wrote N elements past the end of `out`".""",
            [Edit("    if i < M * F:\\n", "    if True:  # (planted) the bounds test dropped\\n",
                  "{short}-05"),
             Edit("[(M * F + THREADS - 1) // THREADS, THREADS]",
                  "[(M * F + THREADS - 1) // THREADS + 1, THREADS]", "{short}-05")]),
    Derived("bounds", "{short}_forgets_blockidx_x", """\\
forgets blockIdx.x: every block does the first block's elements. Fails every hidden case,
which spans two of the largest blocks in the simulator too.""",
            [Edit("    i = cuda.grid(1)\\n", "    i = cuda.threadIdx.x  # blockIdx.x forgotten\\n",
                  "{short}-05")]),
    cache_by_shape("{short}", "{fn}"),
    Derived("controls", "{short}_two_passes", """\\
the "lesson not learned" control: correct, relu(gate)**2 into a float32 temporary, then the
product with up in a second kernel: five streams of float32 where the fused kernel moves three.
Named by the rubric; timed against the master by benchmarks/lesson_controls_probe.py.""",
            append="""
import numpy as np


# the control: the same work in two passes through a temporary
@cuda.jit
def _relu2_pass(gate, tmp):
    i = cuda.grid(1)
    M, F = tmp.shape
    if i < M * F:
        g = max(gate[i // F, i % F], float32(0.0))
        tmp[i // F, i % F] = g * g


@cuda.jit
def _times_up_pass(tmp, up, out):
    i = cuda.grid(1)
    M, F = out.shape
    if i < M * F:
        out[i // F, i % F] = tmp[i // F, i % F] * up[i // F, i % F]


def {fn}(gate, up, out):
    M, F = out.shape
    tmp = cuda.device_array((M, F), dtype=np.float32)
    blocks = (M * F + THREADS - 1) // THREADS
    _relu2_pass[blocks, THREADS](gate, tmp)
    _times_up_pass[blocks, THREADS](tmp, up, out)
"""),
)

LAB = PROBLEM.lab(
    name="{name}",
    title="Lab {n}: {words}",
    chapters="chapters 4-5",
    asks="a fused kernel for `relu(gate)**2 * up` on two [M, F] float32 arrays",
    function="{fn}",
    public_cases=({{"name": "public M=3 F=40", "M": 3, "F": 40, "seed": 1}},
                  {{"name": "public M=1 F=257", "M": 1, "F": 257, "seed": 2}}),
    steps=STEPS, derived=DERIVED)
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
# misses the lesson, named here: one of the submissions the lab module derives) is timed
# against the master on a GPU (benchmarks/lesson_controls_probe.py, then --apply writes the
# lines by the rule of autograder/rubric.py, lines_from_control).
lesson = "one fused pass: gate and up read once, out written once (three streams of float32)"
control = "{short}_two_passes"
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
    ("code", "import book"),   # the setup cell's placeholder, made the setup cell by new_lab
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

    from . import labs, setup_template

    n = lab_number(name)   # lab<number>_<topic>, or a LabSpecError that says so
    taken = [x for x in labs.names() if lab_number(x) == n]
    if taken:
        raise LabSpecError(f"lab number {n} is taken by {taken[0]}: pick another number")
    files = paths(name, root)
    there = [str(p.relative_to(root)) for p in files.values() if p.exists()]
    if there:
        raise LabSpecError(f"{', '.join(there)} exist already: new-lab writes new files only")
    topic = name.split("_", 1)[1]
    words = dict(name=name, n=n, fn=topic, words=topic.replace("_", " "), short=f"lab{n}")
    files["module"].write_text(MODULE.format(**words))
    files["rubric"].write_text(RUBRIC.format(**words))
    nb = nbformat.v4.new_notebook()
    make = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    nb.cells = [make[kind](src.format(**words)) for kind, src in CELLS]
    for k, c in enumerate(nb.cells):
        c["id"] = f"lab{n}-{k:02d}"
    try:   # the placeholder made the course's setup cell, folded (assign refuses a lab without)
        setup_template.fix(nb)
    except FileNotFoundError:   # not a checkout: `python -m tools.setup_cell --write` later
        pass
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, str(files["master"]))
    return list(files.values())
