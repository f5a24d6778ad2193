"""The simulator's hazard trace (book/simulator/hazard_recorder.py) on the labs' real kernels, as check() runs
them (KernelLab.run_step) and as the grader's child reports them (launches.watching_hazards,
the reply's "hazards"): lab 6's master has none, at its public cases and at a split-K case;
its faults are each reported with their kind, array and flat index (a counter without an
atomic, partial sums published without a fence, no barrier before the cross-warp sum, token
loops that read x past its end), the same over several runs and block orders; labs 2 and 4's
masters have none and their faults are found (a read past x, a missing barrier). The grading
runs of these fixtures are tests/grader/test_split_k_faults.py (slow)."""

from __future__ import annotations

import linecache

import numpy as np
import pytest

import book  # noqa: F401  (GPU or simulator, decided before numba.cuda is imported)
from numba import config
from repo import FIXTURES, ROOT

from autograder import hazards, labs, master
from autograder.labs.edits import Edit
from book.simulator import scheduler

pytestmark = pytest.mark.skipif(not config.ENABLE_CUDASIM,
                                reason="the simulator's hazard trace (a GPU runs it in a child)")

LAB6 = labs.get("lab6_decode_mlp_up")
SPLIT = {"name": "split T=4 d=1096 h=2", "T": 4, "d": 1096, "h": 2, "seed": 3}  # 2 blocks a row
SMALL = {"name": "small T=3 d=64 h=2", "T": 3, "d": 64, "h": 2, "seed": 4}      # 1 block a row


def _module(path, edit=None) -> dict:
    """A submission file's namespace (``edit``: its source -> source)."""
    src = path.read_text()
    if edit is not None:
        changed = edit(src)
        assert changed != src, f"the edit did not apply to {path.name}: the fixture changed"
        src = changed
    name = str(path) if edit is None else f"{path.stem}_edited.py"
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns = {"__name__": path.stem}
    exec(compile(src, name, "exec"), ns)
    return ns


def _master6(edits=()):
    """The lab 6 master's graded function, from its graded cells (autograder.master), each
    executed in order as the grader runs them, ``edits`` made."""
    return master.namespace(LAB6, edits)["decode_swiglu"]


# the fence that publishes a block's partials before it is counted, dropped
NO_FENCE = Edit("    cuda.threadfence()  # this block's partials", "    pass  # this block's partials",
                "lab6-02")


def _found(lab, fn, case):
    """(the hazards check() says for one call, whether the values passed)."""
    got, note = lab.call_here(fn, case)
    ok, _ = lab.check(got, case)
    said = [h for h in note.split("\n") if h.startswith("A ")]
    return said, ok


def _key(said):
    """kind, array and flat index of each hazard sentence (what must not change run to run)."""
    out = []
    for s in said:
        name = s.split(" on ")[0] if " on " in s else s.split(",")[0]
        rest = s.split(" at flat index ")
        index = rest[1].split(" ")[0].rstrip(",") if len(rest) > 1 else None
        array = s.split(" on ")[1].split(" at flat index")[0] if " on " in s else ""
        out.append((name, array, index))
    return sorted(out)


@pytest.mark.parametrize("case", [*LAB6.public_cases, SPLIT], ids=lambda c: c["name"])
def test_the_lab6_master_has_no_hazard(case):
    said, ok = _found(LAB6, _master6(), case)
    assert ok and said == []


COUNTER = FIXTURES / "hazards" / "lab6_counter_without_atomic.py"


def test_a_counter_without_an_atomic_is_a_race_on_count_and_on_the_partials():
    said, ok = _found(LAB6, _module(COUNTER)["decode_swiglu"], SPLIT)
    assert ok   # the values cannot show it: the blocks run one at a time
    assert _key(said) == [("A RACE BETWEEN BLOCKS", "`count`", "0"),
                          ("A RACE BETWEEN BLOCKS", "`part`", "0")]
    count = said[0] if "`count`" in said[0] else said[1]
    assert "(2 words in all)" in count   # both rows' counters
    assert "`count[j] = n + 1` in last_block, called at" in count
    assert "with no atomic and threadfence ordering them" in count


def test_the_verdict_is_the_same_over_runs_and_block_orders():
    fn = _module(COUNTER)["decode_swiglu"]
    got = []
    try:
        for seed in (0, 0, 1, 5, None):
            scheduler.set_block_order(seed)
            said, _ = _found(LAB6, fn, SPLIT)
            got.append(_key(said))
    finally:
        scheduler.set_block_order(scheduler._seed_from_env())
    assert got[0] and all(g == got[0] for g in got), got


def test_partials_published_without_a_fence_are_a_race_on_the_partials():
    fn = _master6([NO_FENCE])
    said, ok = _found(LAB6, fn, SPLIT)
    assert _key(said) == [("A RACE BETWEEN BLOCKS", "`part`", "0")]
    assert "read by an atomic by block" in said[0] and "in read_l2, called at" in said[0]
    # read plainly too: the same race
    fn = _master6([NO_FENCE, Edit("return cuda.atomic.add(a, i, float32(0.0))", "return a[i]",
                                  "lab6-02")])
    said, _ = _found(LAB6, fn, SPLIT)
    assert _key(said) == [("A RACE BETWEEN BLOCKS", "`part`", "0")]


def test_no_barrier_before_the_cross_warp_sum_is_a_race_on_shared_memory_every_run():
    fn = _module(FIXTURES / "sanitizer" / "lab6_missing_syncthreads.py")["decode_swiglu"]
    keys = []
    for case in (SMALL, SMALL, SPLIT):
        said, _ = _found(LAB6, fn, case)   # the values: right or wrong as Python schedules
        keys.append(_key(said))
        assert "written by warp 1 (`red[0, t, warp] = vg`) and read by warp 0" in said[0]
    assert keys[0] == [("A RACE ON SHARED MEMORY", "shared array `red`", "1")]
    assert all(k == keys[0] for k in keys)


def test_token_loops_past_t_are_a_read_outside_x():
    fn = _module(FIXTURES / "sanitizer" / "lab6_reads_x_past_end.py")["decode_swiglu"]
    said, ok = _found(LAB6, fn, SMALL)
    assert ok
    n = SMALL["T"] * SMALL["d"]
    assert _key(said) == [("A READ OUTSIDE AN INPUT", "`x`", str(n))]
    assert f"(`x` has {n} elements, flat indices 0 to {n - 1})" in said[0]
    assert "in load8, called at" in said[0]


def test_labs_2_and_4_masters_have_none_and_their_faults_are_found():
    lab2, lab4 = labs.get("lab2_packed_swiglu"), labs.get("lab4_dual_gemm")
    case2 = lab2.public_cases[0]
    said, ok = _found(lab2, _module(FIXTURES / "hazards" / "lab2_reads_past_x.py")[lab2.function],
                      case2)
    assert ok and [k[:2] for k in _key(said)] == [("A READ OUTSIDE AN INPUT", "`x`")]
    shape = (case2["M"], 2 * case2["F"])
    assert int(_key(said)[0][2]) == int(np.prod(shape))   # x[M - 1, 2F]: one past the end
    case4 = lab4.public_cases[0]
    for name, want in (("lab4_honest", []), ("lab4_missing_syncthreads", ["A RACE ON SHARED MEMORY"])):
        said, _ = _found(lab4, _module(FIXTURES / "sanitizer" / f"{name}.py")[lab4.function], case4)
        assert sorted({k[0] for k in _key(said)}) == want, said


# The child's side of the sandbox is imported only inside a child (its package may move its
# parts: tests/grader/test_sandbox_package.py), so this runs in a process of its own, as the
# child does, and says what it found as JSON.
CHILD_CALL = """
import json, sys
import numpy as np
import book
from numba import cuda
from autograder import labs
from autograder.inputs import generate, guarded
from autograder.sandbox.inside import launches
from book.simulator.addressing import installed
lab = labs.get("lab6_decode_mlp_up")
case = json.loads(sys.argv[2])
ns = {"__name__": "submission"}
exec(compile(open(sys.argv[1]).read(), sys.argv[1], "exec"), ns)
args, built = [], []
for n, spec in lab.input_specs(case).items():
    a = generate(spec)
    flat = cuda.to_device(guarded(a, 64, "in"))
    built.append(flat[64:64 + a.size].reshape(a.shape))
    args.append({"name": n, "role": "in"})
o = lab.out_spec(case)
built.append(cuda.to_device(np.full(o["shape"], np.nan, o["dtype"])))
args.append({"name": "out", "role": "out"})
with launches.watching_hazards(args, built) as watched, installed():
    ns["decode_swiglu"](*built)
print(json.dumps({"hazards": watched.hazards, "notes": watched.notes}))
"""


def test_the_childs_reply_carries_the_calls_hazards():
    """launches.watching_hazards, around a call as calls.run_test makes it (in a process of
    its own, as the child's): the reply's "hazards" are autograder/hazards.py's, named by the
    test's arguments."""
    import json
    import os
    import subprocess
    import sys

    env = dict(os.environ, BOOK_SIMULATOR="1", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD_CALL, str(COUNTER), json.dumps(SPLIT)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.strip().splitlines()[-1])
    found = hazards.from_report(said["hazards"])
    assert [(h.kind, h.array, h.index) for h in found] == [("race_global", "count", 0),
                                                            ("race_global", "part", 0)]
    assert said["notes"] == []
    assert hazards.message(found[0]).startswith("A RACE BETWEEN BLOCKS on `count` at flat index 0")
