"""book.sanitizer: 'not available' here, and its parser on compute-sanitizer's real H100 output.

The record (records/sanitizer/h100.json) was written by benchmarks/sanitizer_probe.py on the
H100: planted bugs run under memcheck and racecheck, raw output kept."""

import json
import sys

import pytest

import book  # noqa: F401  (decides GPU or simulator first)
from book import sanitizer
from repo import FIXTURES, ROOT

RECORD = ROOT / "records" / "sanitizer" / "h100.json"


@pytest.mark.skipif(sanitizer.find() is not None, reason="this machine has compute-sanitizer")
def test_without_the_tool_it_says_not_available_on_this_machine():
    with pytest.raises(sanitizer.Unavailable, match="not available on this machine"):
        sanitizer.run([sys.executable, "-c", "pass"])


@pytest.fixture(scope="module")
def record():
    rec = json.loads(RECORD.read_text())
    assert rec["provenance"]["gpu"].startswith("NVIDIA H100")
    return rec


def _parse(record, program, tool):
    return sanitizer.parse(tool, record["programs"][program]["tools"][tool]["output"])


def test_memcheck_finds_the_off_by_one_store_and_names_its_line(record):
    found = _parse(record, "out_of_bounds", "memcheck")
    assert found, "the planted out-of-bounds store was not parsed"
    f = found[0]
    assert f.what.startswith("Invalid __global__ write of size 4 bytes")
    assert f.kernel.endswith("off_by_one") and "block (1,0,0)" in f.detail
    src = record["programs"]["out_of_bounds"]["source"].splitlines()
    assert "out[i] = a[i % a.size] * 2" in src[f.line - 1]


def test_racecheck_finds_the_missing_syncthreads_even_when_values_are_right(record):
    prog = record["programs"]["missing_syncthreads"]
    found = _parse(record, "missing_syncthreads", "racecheck")
    assert found and all(f.tool == "racecheck" for f in found)
    src = prog["source"].splitlines()
    lines = {src[f.line - 1].strip() for f in found if f.line}
    assert lines & {"tile[t] = a[t]", "out[t] = tile[255 - t]"}
    assert all(f.what == "WAR hazard on shared memory" or "hazard" in f.what for f in found)
    res = {"racecheck": {"findings": found}}
    (sentence,) = sanitizer.explain(res, own_files=["missing_syncthreads.py"], limit=1)
    assert "no cuda.syncthreads()" in sentence and "missing_syncthreads.py, line" in sentence


def test_the_barrier_version_is_clean(record):
    for tool in sanitizer.TOOLS:
        assert _parse(record, "with_syncthreads", tool) == []


def test_explain_keeps_only_the_students_own_files(record):
    prog = record["programs"]["missing_syncthreads"]
    res = {t: {"findings": sanitizer.parse(t, v["output"])} for t, v in prog["tools"].items()}
    assert sanitizer.explain(res, own_files=["someone_else.py"]) == []
    assert sanitizer.explain(res, own_files=["missing_syncthreads.py"])


SANITIZER_FIXTURES = FIXTURES / "sanitizer"


def test_racecheck_warp_level_hazards_on_the_h100_are_parsed_at_their_lines():
    # CUDA 13's racecheck on lab 4's planted race (tests/fixtures/sanitizer) words its hazards
    # "Warning: (Warp Level Programming) Potential WAR hazard ..."; the first parser missed
    # them all and reported the race as clean (seen on the H100).
    text = (SANITIZER_FIXTURES / "racecheck_h100_warp_level.txt").read_text()
    found = sanitizer.parse("racecheck", text)
    assert len(found) == 2 and {f.what for f in found} == {"WAR hazard on shared memory"}
    assert {f.line for f in found} == {55} and all("line 41" in f.detail for f in found)
    (sentence,) = sanitizer.explain({"racecheck": {"findings": found}},
                                    own_files=["race_student.py"])
    assert "race_student.py, line 55" in sentence and "no cuda.syncthreads()" in sentence


def test_a_warning_the_parser_does_not_know_is_never_read_as_clean():
    text = ("========= COMPUTE-SANITIZER\n"
            "========= Error: Target application terminated before first instrumented API call\n"
            "========= Warning: (Something New) a hazard worded another way\n")
    found = sanitizer.parse("racecheck", text)
    assert len(found) == 2
    lines = sanitizer.explain({"racecheck": {"findings": found}}, own_files=["student.py"])
    assert lines[0] == ("racecheck said: Error: Target application terminated before first "
                        "instrumented API call")


def test_errors_counted_but_not_printed_never_read_as_clean():
    """memcheck on the H100 printed 20 CUDA API errors (Numba's start-up probes) and counted,
    unprinted, the out-of-bounds stores of a hostile fixture (tests/fixtures/sanitizer): the
    sentences say errors were counted, never nothing. A clean summary says nothing."""
    text = (SANITIZER_FIXTURES / "memcheck_h100_api_errors_first.txt").read_text()
    found = sanitizer.parse("memcheck", text)
    assert found == []
    lines = sanitizer.explain({"memcheck": {"findings": found, "output": text}})
    assert len(lines) == 1 and lines[0].startswith("memcheck: 153 errors counted but not printed")
    clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    assert sanitizer.explain({"memcheck": {"findings": [], "output": clean}}) == []


def test_one_command_line_for_both_routes_without_api_errors(monkeypatch):
    """book.sanitizer.run and the grader's wrapper use the same flags, and neither prints CUDA
    API errors (which used up the print limit before the student's own errors)."""
    from autograder import sanitize as grader_side

    for tool in sanitizer.TOOLS:
        flags = sanitizer.command(tool)
        assert flags[:2] == ["--tool", tool]
        assert flags[flags.index("--report-api-errors") + 1] == "no"
        assert ("--racecheck-report" in flags) == (tool == "racecheck")
    monkeypatch.setattr(sanitizer, "find", lambda: "/opt/cuda/bin/compute-sanitizer")
    argv = grader_side.wrapper_argv("memcheck", "/x/log")
    assert argv[0] == "/opt/cuda/bin/compute-sanitizer"
    assert argv[1:-2] == sanitizer.command("memcheck") and argv[-2:] == ["--log-file", "/x/log"]
