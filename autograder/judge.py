"""Judging one submission: its tests, each compared with the float64 reference (lab.check),
and the kernel proof (the recorded launches replayed on fresh inputs without calling the
student's function: on a GPU by the trusted replay process, in the simulator by
``replay_in_simulator``, a fresh child that launches only the recorded kernels) and, in the
simulator, the compile check (every launched kernel compiled for a GPU: compiling.py). The
``Judge`` is one part of a grading run (grade.Run composes it with the timer and the
sanitizer); it takes the run's context (context.py)."""

from __future__ import annotations

import os
import shutil
import time

from .compiling import check_compiles
from .context import RunContext, ask, child_problem
from .hazards import from_report, messages
from .inputs import guard_damage, unguarded
from .recording import RecordingError, copy_recording, recording_summary
from .results import PERFORMANCE, TestRecord, withheld
from .sandbox import SIM_MAX_THREADS, ChildError, own_thread_failure, storage_use
from .sandbox import describe_thread_failure as describe_threads

NOT_REPRODUCED = ("the kernels your function launched, replayed by the grader on fresh inputs without "
                  "calling your function, did not compute the answer. Correctness points need the answer "
                  "computed by the kernels on every call; what makes a replay differ from the call is "
                  "work done outside the kernels (on the host, copied into `out`), a kernel whose result "
                  "depends on an earlier call, or a race that shows on some runs and not others")

# A later call of a case on the same arrays with new contents was wrong where the first was right
LATER_CALL = ("the first call of this case was right; call {k} of {n}, on the same arrays with new "
              "contents (new inputs, `out` poisoned with NaN again), was not: {msg}\nA function whose "
              "later calls go wrong depends on an earlier call: state kept between calls (a split-K "
              "arrival counter not back at zero, a workspace or a result kept by shape or by array), "
              "or a race that shows on some runs and not on others")
NO_LATER_CALL = ("call {k} of {n} of this case (the same arrays, new contents) gave no answer: every "
                 "call of a case is judged")

# A proof the simulator could not carry out (a kernel made inside the function, a parameter it
# cannot record, a replay that did not finish): no verdict, no points taken, the submission
# marked for a GPU regrade. Never the NOT_REPRODUCED accusation, which needs a finished replay.
NEEDS_GPU_TO_VERIFY = ("needs a GPU to verify: the simulator could not replay the kernels your "
                       "function launched, so the grader could not check that they compute the "
                       "answer. No points are taken for this; an instructor will grade it again on "
                       "a GPU")
MECHANISM_REASONS = ("ReplayError: the kernel `", "ReplayError: the launches could not be recorded")
PROOF_WITHHELD_FLAG = "kernel proof not carried out in the simulator: needs a GPU to verify"


def too_large_message(what: str) -> str:
    return (f"not run in the simulator: {what} is too large to simulate (Numba's CUDA simulator runs a "
            f"few thousand threads a second; the grader simulates at most {SIM_MAX_THREADS:,} threads per launch). "
            "This says nothing about your code: grade this submission on a GPU (or size the grid "
            "to the data when you test in the simulator)")


def thread_failure_message(facts: dict) -> str:
    """What a test whose block's threads could not start is told: the submission's own doing
    where its own processes and threads held its limit (own_thread_failure), else the
    grader's limit."""
    if own_thread_failure(facts):
        return ("not graded: the simulator could not start the threads of a block (Numba's CUDA "
                "simulator runs one Python thread per CUDA thread: RuntimeError: can't start new "
                f"thread) because your code's own processes and threads, {int(facts['own_tasks']):,} "
                "of them still running, held the limit of "
                f"{int(facts['tasks_limit']):,} processes and threads that one submission may run at "
                f"once ({int(facts['tasks']):,} were running, counted by {facts.get('counted_by')}). "
                "This is your code's doing, not the grader's: end every thread and process you start "
                "(join them) before your cells end and before your function returns. This test earns "
                "nothing, and it is not graded again on a GPU")
    return ("not graded in the simulator: the grader's simulator could not start the threads of "
            "a block (Numba's CUDA simulator runs one Python thread per CUDA thread, and the "
            "grading sandbox refused another: RuntimeError: can't start new thread). This is the "
            "grader's limit, not an error in your code: grade this submission on a GPU. What the "
            f"grading process had: {describe_threads(facts)[:600]}")


def needs_gpu(test, result, output: str, what: str, where: str) -> None:
    """A test the simulator could not carry out, for a reason that is not the submission's: it
    says so, the submission waits for a GPU regrade and is flagged for review. On a hidden case
    (details withheld) the summary and the flag say only that a hidden case needs a GPU: the
    reason's text comes from the child (a launch's grid, an exception's message, thread
    counts), which its code chooses after seeing the hidden case (the test's own output keeps
    it, shown with the hidden case's details; the instructor's log has it)."""
    test.output = output
    result.status = "needs a GPU"
    if test.hidden and result.after_hidden:
        output, where = withheld(f"a hidden case ({test.name}) could not be run in the simulator: "
                                 "grade this submission on a GPU"), "a hidden case"
    result.problems["simulator"] = output
    result.flags.append({"level": "review", "what": f"needs a GPU regrade: {what}", "where": where})


class Judge:
    """The tests of one submission and the proof that its kernels did the work."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx

    def run_tests(self, child, result):
        ctx = self.ctx
        dead = None
        result.replies = {}
        for case in ctx.cases:
            hidden = case["visibility"] == "hidden"
            if hidden and result.public_output_len is None:
                time.sleep(0.05)  # let the output drain catch up with what the public cases printed
                result.public_output_len = len(child.output)
                if getattr(child, "workdir", None) is not None:   # what it had written by then
                    result.storage_before_hidden = storage_use(child.workdir)
            t = TestRecord.for_case(case, ctx.hidden_visibility)
            result.tests.append(t)
            fn = ctx.lab.function_of(case)
            if fn in result.problems:
                t.output = result.problems[fn]
                continue
            if dead:
                t.output = f"not run: {dead}"
                continue
            try:
                r = ctx.ask(child, ctx.limits.get("test_s", 60) * ctx.calls_per_case,
                            **ctx.test_message(case, repeat=True))
            except ChildError as e:
                t.output = child_problem(e, child, f"running test '{case['name']}'")
                dead = f"an earlier test ('{case['name']}') stopped the process"
                if e.reason == "timeout":   # a deadline is wall time: grade.regrade_reason
                    result.stopped_for_time = {"what": f"test '{case['name']}'"}
                continue
            if r.get("too_large"):
                needs_gpu(t, result, too_large_message(r["too_large"]), "too large to simulate",
                          r["too_large"][:200])
                ctx.log(kind="test", id=result.id, test=case["name"], ok=False, hidden=hidden,
                        too_large=str(r["too_large"])[:500])
                dead = "the simulator cannot run this submission's launches (see above)"
                continue
            if r.get("thread_failure") and not r.get("ok"):
                facts = r["thread_failure"]
                if own_thread_failure(facts):   # its own tasks held its limit: its points
                    t.output = thread_failure_message(facts)
                    dead = ("your code's own processes and threads left no room for the "
                            "simulator's (see above)")
                else:
                    needs_gpu(t, result, thread_failure_message(facts),
                              "the simulator could not start a block's threads",
                              describe_threads(facts)[:300])
                    dead = "the simulator could not start a block's threads (see above)"
                ctx.log(kind="test", id=result.id, test=case["name"], ok=False, hidden=hidden,
                        thread_failure=facts, own=own_thread_failure(facts))
                continue
            ok, msg = judge_calls(ctx, case, r, child)
            if not ok and "OUT_OF_MEMORY" in msg.upper().replace(" ", "_") and ctx.crowded():
                result.oom = (f"test '{case['name']}' (a hidden case)" if hidden and result.after_hidden
                              else f"test '{case['name']}': {msg[:300]}")
            t.output = msg
            t.score = case["points"] if ok else 0
            result.replies[case["id"]] = (case, r, ok)
            if r.get("cuda_error"):
                dead = (f"a CUDA error in test '{case['name']}' (e.g. an illegal memory access) "
                        "leaves the GPU context unusable for the rest of this submission")
            shapes = r.get("launch_shapes") if isinstance(r.get("launch_shapes"), list) else []
            notes = [str(n)[:300] for n in (r.get("hazard_notes") or [])[:10]] \
                if isinstance(r.get("hazard_notes"), list) else []
            ctx.log(kind="test", id=result.id, test=case["name"], ok=ok, hidden=hidden,
                    seconds=r.get("seconds"), launches=r.get("launches"), message=msg[:2000],
                    hazard_notes=notes,
                    calls=1 + len(r.get("repeats") or []), launch_shapes=shapes[:16],
                    paths=ctx.lab.paths_taken(case, shapes) if ctx.lab.kernel and shapes else [])

    # -- hazards on a GPU: the simulator's trace, in the simulator's words
    def trace_hazards(self, result, cells):
        """On a GPU, the hazards the simulator's access tracer finds (book.simulator.hazard_recorder: races
        between blocks, races on shared memory, reads outside an input) cost points as they do
        in the simulator, in the same words: a simulator child loads the submission and runs
        the simulator's version of each case (``ctx.sim_cases``: the public cases and the
        hidden ones the simulator would draw from the same secret seed), and a case whose
        simulated run had a hazard loses its points here too. Only hazards are taken from it
        (the values are the GPU's to judge); a trace that cannot run costs nothing and is
        logged."""
        ctx = self.ctx
        if ctx.simulated or not ctx.lab.kernel or not ctx.sim_cases or not result.replies:
            return
        got = ctx.load(cells, None, simulated=True, who=f"{result.id} (hazard trace)")
        child, found = got.child, {}
        try:
            if not got.loaded:
                ctx.log(kind="hazard_trace", id=result.id, error=got.describe()[:500])
                return
            for case in ctx.sim_cases:
                try:
                    r = ask(child, ctx.limits.get("test_s", 60), True, **ctx.test_message(case))
                except ChildError as e:
                    ctx.log(kind="hazard_trace", id=result.id, test=case["name"],
                            error=f"{e.reason}: {e.detail}"[:500])
                    break
                hz = from_report(r.get("hazards"))
                if hz:
                    found[case["id"]] = hz
                ctx.log(kind="hazard_trace", id=result.id, test=case["name"],
                        hazards=[h.to_json() for h in hz], ok=r.get("ok"))
        finally:
            if child is not None:
                child.close()
        for case, t in zip(ctx.cases, [t for t in result.tests if t.name != PERFORMANCE]):
            hz = found.get(case["id"])
            if hz:
                t.score = 0
                t.output = hazard_words(hz, t.output)

    # -- correctness needs kernels: replay the recorded launches on fresh inputs
    def proof_recording(self, child, result):
        """What the kernel proof replays, taken while the graded child is alive: the recording
        of every passing kernel test (the largest first), copied out of the child's folder into
        the grader's (then the child is closed: nothing of it is left when the proof's own child
        runs). Every one, not only the largest: a function that launches a kernel on every call
        but puts the answer into `out` from the host on some cases (those its kernel gets wrong:
        the split cases of a broken split-K reduction, a token count it cannot handle) would
        otherwise earn those cases, the proof replaying only a case its kernel gets right.
        ``[(case, folder or the RecordingError)]``, the public cases first (the largest first),
        then the hidden ones: the simulator replays them in this order in one child, which runs
        the notebook's code, so no public case's replay (whose comparison the student reads)
        comes after that child was given a hidden case's shape. None where there is nothing to
        prove."""
        ctx = self.ctx
        if not ctx.lab.kernel:
            return None
        passed = [(c, r) for c, r, ok in result.replies.values() if ok]
        if not passed:
            return None
        passed.sort(key=lambda cr: (cr[0]["visibility"] == "hidden", -ctx.lab.out_size(cr[0])))
        taken = []
        for case, r in passed:
            try:
                taken.append((case, copy_recording(child.workdir, r.get("recording", ""),
                                                   ctx.rec_dir(result, f"proof-{case['id']}"))))
            except RecordingError as e:
                taken.append((case, e))
        return taken

    def check_compiles(self, result, cells, taken):
        """In the simulator, every kernel the passing tests launched (``taken``: the proof's
        recordings) compiled for a real GPU without one; one that does not compile costs every
        correctness point, as a failed proof does (autograder/compiling.py)."""
        check_compiles(self.ctx, result, cells, taken)

    def prove_kernels(self, result, cells, gpu, taken):
        """The launches recorded during each passing kernel test (``taken``:
        ``proof_recording``'s, public then hidden) are replayed on fresh inputs of the same shape
        (another seed), without calling the student's function: on a GPU by the trusted replay
        process, in the simulator by one fresh sandboxed child that only launches the recorded
        kernels. If any does not reproduce the answer, every correctness point is withdrawn."""
        ctx = self.ctx
        if not taken:
            return
        verdicts = []   # [(case, ok, msg, summary)], in ``taken``'s order
        sim_items = []
        for case, folder in taken:
            fresh = dict(case, seed=int(case["seed"]) * 7 + 123457, id=case["id"] + "_replay")
            summary = {}
            try:
                if isinstance(folder, RecordingError):
                    raise folder
                summary = recording_summary(folder)
                if ctx.simulated:
                    sim_items.append((len(verdicts), folder, fresh))
                    verdicts.append([case, None, "", summary])
                    continue
                with ctx.replays.lock(gpu):
                    rr = ctx.replays.get(gpu).request(ctx.limits.get("test_s", 60) * 4, cmd="check",
                                                      dir=str(folder), case=fresh)
                ok, msg = bool(rr.get("reproduced")), rr.get("message", "")
                if not rr.get("ok"):
                    ok, msg = False, f"{rr.get('error')}: {rr.get('message', '')}"
            except (RecordingError, ChildError) as e:
                ok, msg = False, str(getattr(e, "detail", "") or e)
            verdicts.append([case, ok, msg, summary])
        if sim_items:
            got = replay_cases_in_simulator(ctx, [(f, c) for _i, f, c in sim_items], cells)
            for (i, _f, _c), (ok, msg) in zip(sim_items, got):
                verdicts[i][1], verdicts[i][2] = ok, msg
        # the verdict: the first replay that ran and was wrong; else the first that could not
        # be carried out; else the largest case's (all reproduced)
        case, ok, msg, summary = next((v for v in verdicts if v[1] is False),
                                      next((v for v in verdicts if v[1] is None), verdicts[0]))
        proof = {"case": case["name"], **summary, "reproduced": ok, "message": (msg or "")[:1000],
                 "cases": [{"case": v[0]["name"], "reproduced": v[1], "message": (v[2] or "")[:300]}
                           for v in verdicts]}
        if ok is None:
            proof["verdict"] = "withheld: needs a GPU to verify"
        result.kernel_proof = proof
        ctx.log(kind="kernel_proof", id=result.id, **proof)
        if ok:
            return
        # The replay ran after the hidden cases: what it says is shown only in the grader's own
        # words (the comparison of its output, the mechanism's reasons), never text its child
        # could have written (an exception's message, what it printed); the instructor has it
        # all in measurements.jsonl
        shown = graders_words(ctx, case, msg)
        if ok is None:   # no verdict: points stand, the instructor regrades on a GPU
            why = f" ({shown})" if shown else ""
            result.status = "needs a GPU"
            result.problems["kernels"] = NEEDS_GPU_TO_VERIFY + why
            result.flags.append({"level": "review", "what": PROOF_WITHHELD_FLAG,
                                 "where": "kernel proof"})
            return
        note = NOT_REPRODUCED + (f" ({shown})" if shown else "")
        for t in result.tests:
            if t.score > 0 and t.name != PERFORMANCE:
                t.score = 0
                t.output = t.output + "\n" + note
        result.problems["kernels"] = note


def graders_words(ctx: RunContext, case, msg: str) -> str:
    """What a kernel proof's message may show the student: on a public case, the grader's
    comparison of the replay's output (it names the case's own shape and values) and the
    replay mechanism's fixed reasons, cut to the reason's first clause; on a hidden case only
    those reasons; never text from the replay's child (it ran after the hidden cases, and an
    exception message or a kernel's name is the submission's to choose)."""
    msg = (msg or "").strip()
    if msg.startswith(MECHANISM_REASONS):
        return msg.split(":", 2)[0] + ": " + (
            "a kernel created inside your function, which the simulator cannot replay"
            if msg.startswith(MECHANISM_REASONS[0]) else "the launches could not be recorded")
    if case["visibility"] != "hidden" and msg.startswith(f"`{ctx.lab.output}`"):
        return msg[:600]
    return ""


def replay_in_simulator(ctx: RunContext, folder, case, cells):
    """A fresh sandboxed child loads the notebook (its kernels), then launches only the
    recorded kernels on inputs it generates from the fresh case: never the function.
    (True, msg) reproduced; (False, msg) the replay ran every launch and the answer was
    wrong (or nothing was launched); (None, msg) the replay could not be carried out."""
    return replay_cases_in_simulator(ctx, [(folder, case)], cells)[0]


def replay_cases_in_simulator(ctx: RunContext, items, cells):
    """``replay_in_simulator`` for several (recording folder, fresh case) pairs, in one fresh
    child that loads the notebook once: a (ok, msg) per pair, in order."""
    from book.answers import guard_notes   # not at the top: as in verdict below

    def bring_recording(child):   # before any of the notebook's code runs in the child
        for i, (folder, _case) in enumerate(items):
            dest = child.workdir / f"recording_{i}"
            shutil.copytree(folder, dest)
            for q in [dest, *dest.iterdir()]:
                os.chmod(q, 0o755 if q.is_dir() else 0o644)

    got = ctx.load(cells, None, simulated=True, setup=bring_recording)
    child = got.child
    said = []
    try:
        if getattr(got, "error", None) is not None:   # it died or hung while it loaded
            why = child_problem(got.error, child, "replaying your kernels")
            return [(None, why)] * len(items)
        if not got.loaded:
            why = f"the notebook could not be loaded again for the replay: {got.describe()[:300]}"
            return [(None, why)] * len(items)
        for i, (_folder, case) in enumerate(items):
            said.append(_replay_one(ctx, child, child.workdir / f"recording_{i}", case, guard_notes))
    except ChildError as e:
        why = child_problem(e, child, "replaying your kernels")
        said += [(None, why)] * (len(items) - len(said))
    finally:
        if child is not None:
            child.close()
    return said


def _replay_one(ctx: RunContext, child, dest, case, guard_notes):
    """One recording replayed in the proof's child (``dest``: its folder there)."""
    r = ctx.ask(child, ctx.limits.get("test_s", 60), cmd="replay", recording_dir=str(dest),
                args=ctx.lab.args(case))
    if not r.get("ok"):
        what = f"{r.get('error')}: {r.get('message', '')}"
        if r.get("message", "").endswith("launched no CUDA kernel"):
            return False, what
        return None, ("a recorded kernel raised while the simulator replayed it: " + what
                      if not r.get("unverifiable") and not r.get("too_large") else what)
    flat = child.read_npy(r["file"])
    out = next(a for a in ctx.lab.args(case) if a["role"] == "out")
    try:   # the output between its guard zones, as the test's
        got = unguarded(flat, out["shape"], out["guard"])
    except ValueError as e:
        return None, f"the replay's output could not be read back ({e})"
    ok, msg = ctx.lab.check(got, case, ctx.expected_for(case))
    said = guard_notes([(ctx.lab.output, guard_damage(flat, out["guard"], "out"), got.size)])
    return (False, msg + said) if said else (ok, msg)


def verdict(ctx: RunContext, case, r, child, guard: bool = True) -> tuple[bool, str]:
    """(passed, message) for a child's reply to one test: the value compared with the float64
    reference, for a kernel lab read back from the output array the grader passed in, whose
    guard zones (and the inputs', which the child compared) must be as the grader made them
    (``guard=False``: the test ran without guard zones)."""
    # book's answer checker imported here, not at the top of this module: importing book
    # decides GPU or simulator, which grade decides first (--simulator)
    from book.answers import guard_notes

    lab = ctx.lab
    if not r.get("ok"):
        return False, f"your function raised {r.get('error')}:\n{r.get('message', '')}"
    if not lab.kernel:
        return lab.check(r.get("value"), case, ctx.expected(case))
    notes = []
    out = next(a for a in lab.args(case, guard) if a["role"] == "out")
    try:   # the whole allocation: the output between its guard zones
        flat = child.read_npy(r["files"][lab.output])
        got = unguarded(flat, out["shape"], out["guard"])
    except (KeyError, OSError, ValueError) as e:
        return False, f"the grader could not read your output back ({e})"
    ok, msg = lab.check(got, case, ctx.expected(case))
    if r.get("launches", 1) == 0:   # said as what was seen in this call, whatever `out` holds
        ok, msg = False, (f"no CUDA kernel was launched in this call ({lab.show(case)}): the lab "
                          "asks for the work to be done by a Numba CUDA kernel on the GPU; `out` "
                          f"then: {msg}")
    found = [(lab.output, guard_damage(flat, out["guard"], "out"), got.size)]
    found += _input_guards(r.get("input_guards"))
    said = guard_notes(found)
    if said:
        ok, msg = False, msg + said
    if r.get("returned") and r["returned"] != "the output array":
        notes.append(f"your function returned a new {r['returned']}; the grader reads the "
                     f"`{lab.output}` array it passed in, so write your result there")
    if r.get("modified_inputs"):
        ok = False
        notes.append(f"your function changed its input(s) {', '.join(r['modified_inputs'])}: "
                     "inputs must be left as they were (the next layer reads them)")
    return ok, msg + ("".join("\n" + n for n in notes))


def judge_calls(ctx: RunContext, case, r, child) -> tuple[bool, str]:
    """(passed, message) for every call of one case: the first call's verdict, each later
    call's (the same arrays, new contents: ``ctx.repeat_cases``) and the hazards found in any
    of them (autograder/hazards.py: a race or a read outside an input costs the case its points
    and is said as what it is, whatever the values were). A later call that fails where the
    first passed is said as a dependence on an earlier call."""
    ok, msg = verdict(ctx, case, r, child)
    found = from_report(r.get("hazards"))
    later = None
    if r.get("ok"):
        repeats = r.get("repeats") if isinstance(r.get("repeats"), list) else []
        cases = ctx.repeat_cases(case)
        n = 1 + len(cases)
        for k, c in enumerate(cases, start=2):
            rr = repeats[k - 2] if k - 2 < len(repeats) and isinstance(repeats[k - 2], dict) else None
            if rr is None:
                later = later or NO_LATER_CALL.format(k=k, n=n)
                continue
            found += from_report(rr.get("hazards"))
            if later is None:
                k_ok, k_msg = verdict(ctx, c, rr, child)
                if not k_ok:
                    later = LATER_CALL.format(k=k, n=n, msg=k_msg)
    if found:   # said as what it is (once per kind and array); the values after it
        return False, hazard_words(found, msg)
    if ok and later:
        return False, later
    return ok, msg


def hazard_words(hazards, values: str) -> str:
    """A case's message when hazards were found: each said once (per kind, array and finder),
    then the verdict on the values, for what it is worth. The same on every grader."""
    return messages(_once(hazards)).lstrip("\n") + "\nThe values of the first call: " + values


def _once(hazards) -> list:
    """The hazards, one per kind, array and finder (a race repeats in every call)."""
    seen, once = set(), []
    for h in hazards:
        if (h.kind, h.array, h.found_by) not in seen:
            seen.add((h.kind, h.array, h.found_by))
            once.append(h)
    return once


def _input_guards(said) -> list:
    """[(input, damage, size)] from the child's report of its inputs' guard zones
    ({name: [damage, size]}); what is not of that form is dropped (the child is untrusted:
    its report can only fail its own case)."""
    out = []
    for name, v in (said.items() if isinstance(said, dict) else ()):
        try:
            damage, size = v
            damage = {k: [int(n), int(i)] for k, (n, i) in damage.items() if k in ("before", "after")}
            out.append((str(name)[:40], damage, int(size)))
        except (TypeError, ValueError, AttributeError):
            continue
    return out
