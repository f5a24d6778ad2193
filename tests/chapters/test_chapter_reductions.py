"""The reductions section (chapters/07b_reductions.ipynb, issue 43's M8: lab 6's block reduction,
warp shuffles and last-block reduction taught before the lab): its kernels, taken from the
section's own cells, sum what they say in the simulator; its exercise says Right to the completed
kernel and names what each incomplete one gets wrong; and the kernels compile for a T4 and an
H100 with the simulator off (a chapter that runs only in the simulator would fail its recording).
"""

import ast
import json
import subprocess
import sys

import book  # first: GPU or simulator is decided before numba.cuda loads
import numpy as np
import pytest

from book import exercises
from book.exercises.chapters import _LAST_BLOCK
from repo import ROOT

SECTION = ROOT / "chapters" / "07b_reductions.ipynb"

pytestmark = pytest.mark.skipif(not book.gpu.SIMULATED,
                                reason="the section's cells are run here in the simulator")


def cell(cid):
    for c in json.loads(SECTION.read_text(encoding="utf-8"))["cells"]:
        if c.get("id") == cid:
            return "".join(c["source"])
    raise KeyError(cid)


def definitions(source):
    """The top-level functions of a cell (kernels and device functions), not its launches."""
    tree = ast.parse(source)
    return ast.Module([n for n in tree.body if isinstance(n, ast.FunctionDef)], [])


@pytest.fixture(scope="module")
def ns():
    """The section's imports, warp_sum, butterfly, block_sum and row_sum."""
    from numba import cuda, float32

    from book.kernels.instructions.tensorcore import shfl_xor

    space = {"cuda": cuda, "float32": float32, "shfl_xor": shfl_xor, "np": np}
    for cid in ("ch07b-004", "ch07b-006"):
        exec(compile(definitions(cell(cid)), cid, "exec"), space)
    return space


def kernel_from(source, ns):
    space = dict(ns)
    exec(source, space)
    return space["row_sum_split"]


def test_the_butterfly_leaves_every_lane_with_the_warps_sum(ns):
    from numba import cuda

    steps = cuda.to_device(np.zeros((6, 32), np.float32))
    ns["butterfly"][1, 32](steps)
    held = steps.copy_to_host()
    assert (held[0] == np.arange(32)).all()
    # after the step with mask m, lane i holds the sum of the lanes j with j = i mod m
    for s, m in enumerate((16, 8, 4, 2, 1), 1):
        want = [sum(j for j in range(32) if j % m == i % m) for i in range(32)]
        assert (held[s] == np.array(want)).all(), (s, m)
    assert (held[5] == 496).all()


def test_block_sum_sums_a_row_the_block_is_not_a_multiple_of(ns):
    from numba import cuda

    a = np.random.default_rng(3).standard_normal((2, 150)).astype(np.float32)
    out = cuda.to_device(np.full(2, np.nan, np.float32))
    ns["row_sum"][2, 64](cuda.to_device(a), out)
    assert np.allclose(out.copy_to_host(), a.astype(np.float64).sum(axis=1), atol=1e-4)


def test_the_exercise_says_right_to_the_completed_kernel(ns):
    ex = exercises.last_block_sum()
    assert ex.check(None).correct is None          # the placeholder runs without raising
    verdict = ex.check(kernel_from(_LAST_BLOCK, ns))
    assert verdict, verdict


def test_the_chapters_kernel_as_given_is_one_blocks_share(ns):
    space = dict(ns)
    exec(compile(definitions(cell("ch07b-008")), "ch07b-008", "exec"), space)
    verdict = exercises.last_block_sum().check(space["row_sum_split"])
    assert not verdict and "one block's share" in verdict.message, verdict


def test_a_counter_left_standing_is_named(ns):
    src = _LAST_BLOCK.replace("            count[row] = 0  # ready for the next launch\n", "")
    src = src.replace("            count[row] = 0  # ready for the next launch", "")
    assert "count[row] = 0" not in src
    verdict = exercises.last_block_sum().check(kernel_from(src, ns))
    assert not verdict and "`count[0]` is 3, not 0" in verdict.message, verdict


def test_adding_into_out_is_named(ns):
    src = _LAST_BLOCK.split("    if cuda.threadIdx.x == 0:")[0] + (
        "    if cuda.threadIdx.x == 0:\n"
        "        cuda.atomic.add(out, row, total)\n")
    verdict = exercises.last_block_sum().check(kernel_from(src, ns))
    assert not verdict and "is NaN" in verdict.message, verdict


def test_a_last_block_that_adds_only_its_own_partial_is_caught(ns):
    src = _LAST_BLOCK.replace("for q in range(splits):", "for q in range(s, s + 1):")
    verdict = exercises.last_block_sum().check(kernel_from(src, ns))
    assert not verdict, verdict


def test_the_exercise_refuses_sizes_that_hide_a_ragged_share():
    with pytest.raises(ValueError):
        exercises.ReductionExercise("q", n=192, block=64, splits=(3,))
    with pytest.raises(ValueError):
        exercises.ReductionExercise("q", block=48)


CHILD = r"""
import ast, json, sys, types
root = sys.argv[1]
# a bare `book` package: book/__init__.py would pick the simulator on a machine without a GPU
pkg = types.ModuleType("book"); pkg.__path__ = [root + "/book"]; sys.modules["book"] = pkg
from numba import cuda, float32
from book.kernels import tensorcore
from book.exercises.chapters import _LAST_BLOCK
cells = {c["id"]: "".join(c["source"])
         for c in json.load(open(root + "/chapters/07b_reductions.ipynb"))["cells"]}
ns = {"cuda": cuda, "float32": float32, "shfl_xor": tensorcore.shfl_xor}
for cid in ("ch07b-004", "ch07b-006"):
    tree = ast.parse(cells[cid])
    exec(compile(ast.Module([n for n in tree.body if isinstance(n, ast.FunctionDef)], []),
                 cid, "exec"), ns)
exec(_LAST_BLOCK, ns)
sigs = {"butterfly": "void(float32[:, ::1])",
        "row_sum": "void(float32[:, ::1], float32[::1])",
        "row_sum_split": "void(float32[:, ::1], float32[::1], float32[::1], int32[::1], int64)"}
out = {}
for cc in ((7, 5), (9, 0)):
    for name, sig in sigs.items():
        ptx, _ = cuda.compile_ptx(ns[name].py_func, sig, cc=cc)
        out[f"{name} sm_{cc[0]}{cc[1]}"] = ptx
print(json.dumps(out))
"""


@pytest.mark.slow
def test_the_sections_kernels_compile_for_a_t4_and_an_h100():
    run = subprocess.run([sys.executable, "-c", CHILD, str(ROOT)], capture_output=True,
                         text=True, timeout=600, env={"NUMBA_ENABLE_CUDASIM": "0",
                                                      "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    ptx = json.loads(run.stdout.strip().splitlines()[-1])
    for key, text in ptx.items():
        assert "shfl.sync.bfly" in text, key  # the shuffles are real on a GPU
        if key.startswith("row_sum_split"):
            assert "atom.global" in text and ("membar.gl" in text or "fence" in text), key
