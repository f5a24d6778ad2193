"""book.sanitizer: 'not available' here, and its parser on compute-sanitizer's real H100 output.

The record (records/sanitizer/h100.json) was written by the retired benchmarks/sanitizer_probe.py on the
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
    for tool in record["programs"]["with_syncthreads"]["tools"]:
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

    assert set(sanitizer.TOOLS) == {"memcheck", "racecheck", "synccheck"}
    for tool in sanitizer.TOOLS:
        flags = sanitizer.command(tool)
        assert flags[:2] == ["--tool", tool]
        assert flags[flags.index("--report-api-errors") + 1] == "no"
        assert ("--racecheck-report" in flags) == (tool == "racecheck")
        assert ("--padding" in flags) == (tool == "memcheck")
    monkeypatch.setattr(sanitizer, "find", lambda: "/opt/cuda/bin/compute-sanitizer")
    argv = grader_side.wrapper_argv("memcheck", "/x/log")
    assert argv[0] == "/opt/cuda/bin/compute-sanitizer"
    assert argv[1:-2] == sanitizer.command("memcheck") and argv[-2:] == ["--log-file", "/x/log"]


# ---------------------------------------------------------------- the H200's reports (issue 41)
# records/sanitizer/hazards_h200.json (the retired sanitizer_probe.py --hazards): the tool's own
# lines of each run kept as fixtures (tests/fixtures/sanitizer/*_h200_*.txt, their README)
H200 = ROOT / "records" / "sanitizer" / "hazards_h200.json"


def test_memcheck_needs_padding_to_see_a_read_just_past_an_array():
    """On the H200 the CUDA allocator put lab 6's x (512 bytes) and wg back to back: the read of
    the rows past x's end landed inside wg, and memcheck without --padding said "0 errors";
    with the course's flags (--padding) it reported every read. The read at T = 16 (the case
    with no row past x) is none, with or without."""
    runs = json.loads(H200.read_text())["runs"]
    x4 = runs["lab6_reads_x_past_end@T=4"]["tools"]
    assert "--padding" in x4["memcheck"]["flags"] and "--padding" not in x4["memcheck_no_padding"]["flags"]
    assert "ERROR SUMMARY: 96 errors" in x4["memcheck"]["output"]
    assert "ERROR SUMMARY: 0 errors" in x4["memcheck_no_padding"]["output"]
    assert all("ERROR SUMMARY: 0 errors" in v["output"]
               for v in runs["lab6_reads_x_past_end"]["tools"].values())
    assert sanitizer.command("memcheck")[-2:] == ["--padding", str(sanitizer.PADDING_BYTES)]


def test_memcheck_read_past_an_allocation_is_parsed_field_by_field():
    text = (SANITIZER_FIXTURES / "memcheck_h200_lab6_reads_x_past_end.txt").read_text()
    found = sanitizer.parse("memcheck", text)
    assert len(found) == 19 and all(f.kind == "read" and f.space == "global" and f.size == 16
                                    for f in found)
    f = found[0]
    assert (f.thread, f.block, f.line) == ("(1,0,0)", "(8,0,0)", 224)
    assert f.address == 0x7F284E800210 and f.nearest == (0x7F284E800000, 512)
    src = (SANITIZER_FIXTURES / "lab6_reads_x_past_end.py").read_text().splitlines()
    assert "load8(x, t * d + PIECE * c)" in src[f.line - 1]
    assert sanitizer.unshown("memcheck", text, found) == "memcheck: 96 errors in all (19 shown)"


def test_racecheck_between_warps_and_within_a_warp_on_the_h200():
    text = (SANITIZER_FIXTURES / "racecheck_h200_lab6_missing_syncthreads.txt").read_text()
    found = sanitizer.parse("racecheck", text)
    assert found and {f.kind for f in found} == {"RAW"} and {f.space for f in found} == {"shared"}
    between = [f for f in found if not f.warp_level]
    within = [f for f in found if f.warp_level]
    assert between and within
    src = (SANITIZER_FIXTURES / "lab6_missing_syncthreads.py").read_text().splitlines()
    w, r = between[0].accesses
    assert w[0] == "write" and "red[0, t, warp] = vg" in src[w[3] - 1]
    assert r[0] == "read" and "red[k, t" in src[r[3] - 1]
    assert sanitizer.unshown("racecheck", text, found) == "racecheck: 2304 hazards in all (20 shown)"


@pytest.mark.parametrize("name,what", [
    ("synccheck_h200_barrier_two_sites.txt", "Barrier error detected. Divergent thread(s) in block."),
    ("synccheck_h200_syncwarp_bad_mask.txt", "Barrier error detected. Invalid arguments.")])
def test_synccheck_barrier_errors_are_parsed(name, what):
    text = (SANITIZER_FIXTURES / name).read_text()
    found = sanitizer.parse("synccheck", text)
    assert len(found) == 20 and {f.what for f in found} == {what}
    assert {f.kind for f in found} == {"barrier"} and found[0].thread == "(0,0,0)"
    assert found[0].block == "(0,0,0)" and found[0].line in (10, 11)
    assert sanitizer.explain({"synccheck": {"findings": found, "output": text}})[-1].startswith(
        "synccheck: ")
    assert "errors in all (20 shown)" in sanitizer.unshown("synccheck", text, found)


def test_synccheck_misses_a_barrier_the_skipping_threads_never_wait_at():
    """What the H200's synccheck does not report (so the grader never claims it checked it): a
    barrier inside `if t < 32` (or `t < 16`) whose other threads go on without waiting anywhere;
    two barrier sites met by different threads, and a warp mask that leaves out its callers,
    it does."""
    runs = json.loads(H200.read_text())["runs"]
    for name in ("barrier_warp1_skips", "barrier_half_warp"):
        out = runs[name]["tools"]["synccheck"]["output"]
        assert "ERROR SUMMARY: 0 errors" in out and sanitizer.parse("synccheck", out) == []
    for name in ("barrier_two_sites", "syncwarp_bad_mask"):
        assert sanitizer.parse("synccheck", runs[name]["tools"]["synccheck"]["output"])


def test_the_masters_and_controls_are_clean_on_the_h200():
    runs = json.loads(H200.read_text())["runs"]
    assert "H200" in json.loads(H200.read_text())["provenance"]["gpu"]
    for tool, r in runs["lab6_control"]["tools"].items():
        assert sanitizer.parse(tool.split("_")[0], r["output"]) == [], tool
        assert "values: True" in r["output"]
    # a barrier left out is no barrier error: racecheck, not synccheck, names it
    assert sanitizer.parse("synccheck", runs["lab6_missing_syncthreads"]["tools"]["synccheck"]["output"]) == []


def test_cuda_api_errors_are_never_findings():
    """The API errors the tool prints from cuGetProcAddress (Numba probing the driver; field
    notes: `--report-api-errors no` silences them) are notes about the driver, never a finding
    of any tool, even where an older command line printed them."""
    text = (SANITIZER_FIXTURES / "memcheck_h100_api_errors_first.txt").read_text()
    assert "cuGetProcAddress" in text
    for tool in sanitizer.TOOLS:
        assert sanitizer.parse(tool, text) == []
