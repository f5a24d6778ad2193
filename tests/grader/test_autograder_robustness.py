"""Flawed and hostile submissions (tests/fixtures/submissions/) graded in one run through the
instructor's CLI, in the simulator with the timing protocol switched on (--sim-timing), under
grading_runs.FAST_RUBRIC (public cases only: what these submissions do, they do on every case);
what a hidden case shows before the due date is read from a run of three of them with one
(grading_runs.HIDDEN_RUBRIC)."""

from __future__ import annotations

import re

import pytest

from grading_runs import finished, full_marks, graded_max, results

pytestmark = pytest.mark.slow   # every test reads one grading run of the flawed and hostile submissions

SOLUTION = "lab2_packed_swiglu"


@pytest.fixture(scope="module")
def run():
    out = finished("robust")
    return lambda sid: results(out, sid)


def outputs(r):
    return "\n".join(t["output"] for t in r["tests"])


def correctness(r):
    return sum(t["score"] for t in r["tests"] if t["name"] != "performance")


def test_next_submission_unaffected_by_crashes_and_hangs(run):
    for sid in (SOLUTION, "honest_simple"):
        r = run(sid)
        assert full_marks(r), outputs(r)


def test_infinite_loop_is_stopped_at_the_time_limit(run):
    from autograder.context import CALLS_SIMULATED

    r = run("infinite_loop")
    assert r["score"] == 0
    # the fast rubric's test_s = 20 for each of a case's calls (every case is called more than
    # once: autograder/context.py), the calls of one case asked for in one request
    # (the seconds said are the ones that passed: a loaded machine may add one or two)
    said = re.search(r"stopped after (\d+) s", outputs(r))
    assert said and 20 * CALLS_SIMULATED <= int(said.group(1)) <= 20 * CALLS_SIMULATED + 10, outputs(r)
    assert "not run: an earlier test" in outputs(r)


def test_crash_costs_only_that_submission(run):
    r = run("crash_segfault")
    assert r["score"] == 0 and "segmentation fault" in outputs(r)


def test_illegal_memory_access(run):
    r = run("illegal_access")
    assert r["score"] == 0 and "out of bounds" in outputs(r)


def test_output_flood_is_cut_and_grading_unaffected(run):
    r = run("output_flood")
    assert correctness(r) == graded_max(r)
    assert r["extra_data"]["output_bytes"] > 10 << 20
    assert "output cut" in r["extra_data"]["printed"] + open_feedback(r)


def open_feedback(r):
    from grading_runs import start_all
    out = start_all()["robust"][1]
    return (out / r["extra_data"]["id"] / "feedback.md").read_text()


def test_torch_instead_of_a_kernel(run):
    r = run("uses_torch")
    assert r["score"] == 0 and "not allowed in graded code" in outputs(r)
    assert any("torch" in f for f in r["extra_data"]["flags"])


def test_host_reference_result_earns_nothing(run):
    r = run("host_reference")
    assert r["score"] == 0 and "no CUDA kernel was launched in this call" in outputs(r)


def test_a_cached_result_loses_every_case_on_its_second_call(run):
    """Issue 41: every case is called again on the same arrays with new contents and that call
    judged, so a function that skips the work for arrays it has seen loses its correctness
    points (before, it kept them and only the timing call's check flagged it), said as a
    dependence on an earlier call; nothing of it is timed."""
    r = run("cached_result")
    assert correctness(r) == 0
    kernel_cases = [t for t in r["tests"] if t["name"] != "performance"]
    assert all("the first call of this case was right; call 2 of" in t["output"]
               for t in kernel_cases if t["visibility"] == "visible"), outputs(r)
    assert not r["extra_data"].get("performance", {}).get("verified")


def test_modified_inputs_fail(run):
    r = run("modifies_inputs")
    assert r["score"] == 0 and "changed its input(s) x" in outputs(r)


def test_unwritten_output_is_named(run):
    r = run("unwritten_output")
    assert r["score"] == 0 and "never written" in outputs(r) and "first bad index" in outputs(r)


def test_leftover_memory_earns_nothing(run):
    r = run("leftover_memory")
    assert r["score"] == 0


def test_timer_tampering_does_not_reach_the_graders_clock(run):
    r = run("timer_tamper")
    perf = r["extra_data"]["performance"]
    # the submission zeroed time.perf_counter/monotonic/time and CUDA events in its own process:
    # what is timed is the replay of its recorded launch in another process (the grader's), so
    # none of it reaches the clock; the patching is still reported for review
    assert perf["method"].startswith("replay") and perf["launches_per_call"] == 1
    assert perf["verified"] is True
    assert any("monkeypatching a clock" in f for f in r["extra_data"]["flags"])


def test_hidden_files_and_network_are_out_of_reach(run):
    r = run("reads_hidden")
    iso = r["extra_data"]["isolation"]
    if not iso or not iso.get("mount"):
        pytest.skip(f"this OS gave the sandbox no mount namespace: {iso}")
    assert r["score"] == 0
    assert "found nothing to copy: []" in outputs(r)
    if iso.get("net"):
        assert "network refused" in outputs(r)
    ctl = results(finished("control"), "reads_hidden")  # same file, isolation off: finds the solution
    assert full_marks(ctl)


def test_malformed_notebook_missing_function_wrong_signature(run):
    r = run("malformed")
    assert r["score"] == 0 and "not a valid notebook: JSON error" in outputs(r)
    r = run("missing_function")
    assert "no function named `swiglu_interleaved`" in outputs(r) and "swiglu_interleave" in outputs(r)
    r = run("wrong_signature")
    assert "`swiglu_interleaved(x)` cannot be called as `swiglu_interleaved(x, out)`" in outputs(r)


def test_library_kernels_are_refused(run):
    r = run("uses_book_kernels")
    assert r["score"] == 0 and "write this lab's kernel yourself" in outputs(r)


def test_memory_limit(run):
    r = run("memory_hog")
    assert r["score"] == 0
    assert "MemoryError" in outputs(r) or "resident memory" in outputs(r)


# ---- issue 12: the threats the grader answers, and hidden cases


def test_host_arithmetic_with_a_forged_launch_counter_earns_nothing(run):
    # NumPy on the host, copied into `out`, and the driver's launch counter bumped through
    # `import __main__`: the recorded launches (none) replayed on fresh inputs compute nothing
    r = run("host_numpy_counter")
    assert r["score"] == 0
    assert "did not compute the answer" in outputs(r)


def test_timed_work_is_the_replay_of_the_recorded_launches(run):
    # it rewrites the driver's old timing loop through `import __main__`; the work the grader
    # replays (and would time on a GPU) is what the function launched: three launches per call
    r = run("replay_undercount")
    assert correctness(r) == graded_max(r)
    perf = r["extra_data"]["performance"]
    assert perf["method"].startswith("replay") and perf["launches_per_call"] == 3
    assert perf["verified"] is True


def test_simulator_never_calls_a_correct_kernel_an_infinite_loop(run):
    r = run("grid_stride_264")   # a fixed grid of 264 x 1024 threads, correct on a GPU
    text = outputs(r)
    assert "infinite loop" not in text and "too large to simulate" in text
    assert "270,336 threads" in text and "grade this submission on a GPU" in text
    assert r["extra_data"]["status"] == "needs a GPU"


def test_hidden_cases_stay_hidden_before_the_due_date(run):
    import json
    import re

    import numpy as np

    from autograder.labs import get

    lab = get("lab2")

    out = finished("hidden")   # the run with a hidden case (the robust run draws none)
    seed = json.loads((out / ".grader" / "secret.json").read_text())["hidden_seed"]
    import tomllib

    from grading_runs import HIDDEN_RUBRIC

    n = tomllib.loads(HIDDEN_RUBRIC)["correctness"]["hidden_cases"]
    assert n >= 1
    hidden = lab.hidden_cases(np.random.default_rng(seed), True, n)   # as that rubric draws them
    # a shape is leaked if it appears whole ("M=1, F=25" is not leaked by "M=1, F=257"); a draw
    # that equals a public case's shape is shown as that public case, which is no leak
    public = {(c["M"], c["F"]) for c in lab.public_cases}
    shapes = [re.compile(rf"M={c['M']}, F={c['F']}(?!\d)") for c in hidden
              if (c["M"], c["F"]) not in public]
    for sid in ("unwritten_output", SOLUTION, "leftover_memory"):
        r = results(out, sid)
        tests = [t for t in r["tests"] if "hidden" in t["name"]]
        assert tests and all(t["visibility"] == "after_due_date" for t in tests)
        feedback = (out / sid / "feedback.md").read_text()
        seen = feedback + r["output"] + json.dumps(r["extra_data"]) + "".join(
            t["output"] for t in r["tests"] if t["visibility"] == "visible")
        assert not [s.pattern for s in shapes if s.search(seen)], (sid, [s.pattern for s in shapes])
    assert "shown after the due date" in (out / "unwritten_output" / "feedback.md").read_text()



def test_out_of_memory_beside_others_is_graded_again_alone(run):
    import json

    from grading_runs import start_all

    out = start_all()["robust"][1]
    log = [json.loads(line) for line in open(out / "measurements.jsonl")]
    again = [r for r in log if r["kind"] == "regrade_alone"]
    assert [r for r in again if r["id"] == "out_of_memory" and "out of GPU memory" in r["reason"]]
    graded = [r for r in log if r["kind"] == "result" and r["id"] == "out_of_memory"]
    assert len(graded) == 2                       # beside the others, then alone
    # a submission stopped for time beside others is graded again alone too (a deadline is wall
    # time, and its neighbours share the CPUs): the endless loop, when others ran beside it
    assert not [r for r in again if r["id"] not in ("out_of_memory", "infinite_loop")], again
    assert run("out_of_memory")["score"] == 0     # alone it still fails: its own fault
    assert "regraded alone: it failed the same way alone" in run("out_of_memory")["output"]


def test_stopped_for_time_beside_others_is_graded_again_alone_and_stays_its_own(run):
    """The endless loop, stopped at its deadline while the run's second worker graded the
    submissions sorted after it: graded again alone (a deadline is wall time, and a neighbour that
    keeps the CPUs busy must not cost a slow honest submission its points), and alone it is
    stopped the same way: its own, its score 0."""
    import json

    from grading_runs import start_all

    out = start_all()["robust"][1]
    log = [json.loads(line) for line in open(out / "measurements.jsonl")]
    again = [r for r in log if r["kind"] == "regrade_alone" and r["id"] == "infinite_loop"]
    assert again and "stopped for time beside other submissions (test '" in again[0]["reason"], again
    graded = [r for r in log if r["kind"] == "result" and r["id"] == "infinite_loop"]
    assert len(graded) == 2                       # beside the others, then alone
    assert "regraded alone: it failed the same way alone" in run("infinite_loop")["output"]
    assert run("infinite_loop")["score"] == 0
