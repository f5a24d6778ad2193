"""What ptxas makes of lab 6's graded kernel, per token count (issue 43, L9), without a GPU.

The master compiles one kernel per T (``make_decode_kernel``), its two accumulator arrays
``cuda.local.array(T, float32)``. ``python -m tools.lab_ptx --ptxas lab6 --T ...`` runs the
graded function through the grader's call in the simulator once per T, compiles each launched
kernel for sm_90 and assembles it with ptxas -v (nvJitLink); records/labs/lab6_master_ptxas.json
keeps what it said. Held here: the tool's answer at T = 1 (no stack frame) and T = 16 (one),
the record equal to a fresh compile, and lab 6's page saying what the record says."""

from __future__ import annotations

import json
import re

import pytest

import book  # first: GPU or simulator, decided before numba.cuda is imported
from repo import ROOT
from tools import lab_ptx

LAB = "lab6_decode_mlp_up"
RECORD = ROOT / "records" / "labs" / "lab6_master_ptxas.json"
FIGURES = ("registers", "stack_frame_bytes", "spill_store_bytes", "spill_load_bytes", "barriers")
FRESH_T = (1, 6, 7, 16)  # the ends, and the last T without a stack frame and the first with one


def _record() -> dict:
    return json.loads(RECORD.read_text())


def _by_T(rows) -> dict[int, dict]:
    return {r["T"]: r for r in rows}


def test_usage_reads_what_ptxas_prints():
    log = ("ptxas info    : 0 bytes gmem\n"
           "ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'\n"
           "ptxas info    : Function properties for _Z1kPf\n"
           "ptxas         .     64 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
           "ptxas info    : Used 48 registers, used 1 barriers\n")
    got = lab_ptx.usage(log)
    assert {k: got[k] for k in FIGURES} == {"registers": 48, "stack_frame_bytes": 64,
                                            "spill_store_bytes": 8, "spill_load_bytes": 4,
                                            "barriers": 1}
    assert got["ptxas_said"] == [
        "ptxas . 64 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads",
        "ptxas info : Used 48 registers, used 1 barriers"]
    with pytest.raises(ValueError, match="exactly one entry function"):
        lab_ptx.usage(log + log.split("\n", 1)[1])


def test_token_cases_set_T_on_the_timing_case():
    cases = lab_ptx.token_cases(LAB, (1, 16))["final"]
    assert [(c["name"], c["T"], c["h"]) for c in cases] == [("T = 1", 1, 1), ("T = 16", 16, 1)]


@pytest.fixture(scope="module")
def fresh():
    if not book.gpu.SIMULATED:
        pytest.skip("the launches are recorded in the simulator")
    return _by_T(lab_ptx.ptxas_rows(LAB, FRESH_T))


@pytest.mark.extended
def test_the_master_has_no_stack_frame_at_one_token_and_one_at_sixteen(fresh):
    assert sorted(fresh) == list(FRESH_T)
    assert {t: r["kernel"] for t, r in fresh.items()} == {t: f"K{t}" for t in FRESH_T}
    assert all(r["arch"] == "sm_90" and r["cell"] == "lab6-03" for r in fresh.values())
    assert fresh[1]["stack_frame_bytes"] == 0, fresh[1]["ptxas_said"]
    # both accumulator arrays, 2 x 16 float32, in local memory: nothing spilled
    assert fresh[16]["stack_frame_bytes"] == 2 * 16 * 4, fresh[16]["ptxas_said"]
    assert all(r["spill_store_bytes"] == r["spill_load_bytes"] == 0 for r in fresh.values())
    # the launch's types: six float16 arrays, the float32 partials, int32 counters, d, h, splits
    assert fresh[1]["signature"] == ("(" + ", ".join(["array(float16, 1d, C)"] * 6)
                                     + ", array(float32, 1d, C), array(int32, 1d, C), int64, "
                                     "int64, int64)")


@pytest.mark.extended
def test_the_record_is_what_a_fresh_compile_says(fresh):
    rec = _record()
    here = lab_ptx.toolchain()
    if rec["toolchain"] != here:
        pytest.skip(f"recorded with {rec['toolchain']}, here {here}: record again with "
                    f"{rec['provenance']['command']}")
    rows = _by_T(rec["rows"])
    for T, r in fresh.items():
        assert {k: rows[T][k] for k in FIGURES + ("kernel", "signature", "ptxas_said")} == \
            {k: r[k] for k in FIGURES + ("kernel", "signature", "ptxas_said")}, T


def test_the_record_covers_every_kernel_the_master_builds():
    from autograder.labs import lab6_decode_mlp_up as spec

    rec = _record()
    assert rec["lab"] == LAB and rec["provenance"]["command"].startswith(
        "python -m tools.lab_ptx --ptxas lab6 --T")
    assert sorted(_by_T(rec["rows"])) == list(range(1, spec.T_MAX + 1))
    assert {r["arch"] for r in rec["rows"]} == {"sm_90"}
    assert rec["toolchain"]["ptxas"].startswith("nvJitLink ")


def _markdown(path) -> str:
    return re.sub(r"\s+", " ", "".join("".join(c["source"]) for c in json.loads(
        path.read_text())["cells"] if c["cell_type"] == "markdown"))


@pytest.mark.parametrize("folder", ["solutions", "labs"])
def test_lab6_says_where_its_accumulators_leave_registers_as_recorded(folder):
    """The page's figures are the record's: the last T with no stack frame, the first with
    one, the frame's size per token and at T = 8 and 16, no spills; and step 3's promise of
    registers is bounded where the record bounds it."""
    rows = _by_T(_record()["rows"])
    text = _markdown(ROOT / folder / f"{LAB}.ipynb")
    m = re.search(r"ptxas \(for `sm_90`, `records/labs/lab6_master_ptxas\.json`.*?\) gives its "
                  r"kernel no stack frame up to `T = (\d+)` and from `T = (\d+)` on a stack "
                  r"frame of `(\d+) T` bytes, (\d+) at `T = 8` and (\d+) at `T = 16`, with no "
                  r"spills", text)
    assert m, f"{folder}/{LAB}.ipynb no longer says what ptxas reports of its kernel"
    last, first, per, at8, at16 = (int(g) for g in m.groups())
    assert first == last + 1
    assert all(rows[T]["stack_frame_bytes"] == 0 for T in rows if T <= last)
    assert all(rows[T]["stack_frame_bytes"] == per * T for T in rows if T >= first)
    assert (at8, at16) == (rows[8]["stack_frame_bytes"], rows[16]["stack_frame_bytes"])
    assert all(r["spill_store_bytes"] == r["spill_load_bytes"] == 0 for r in rows.values())
    step3 = re.search(r"the loops unroll and the accumulators stay in registers \(in the "
                      r"reference solution up to `T = (\d+)`", text)
    assert step3 and int(step3.group(1)) == last, "step 3's registers, bounded by the record"
