"""The grader's clock: the ``Timer``, the part of a grading run (grade.Run composes it with the
judge and the sanitizer) that records each submission's timing call (phase 1, its child
alive) and times the recording with the trusted replay process when no submission is alive
(phase 2), windows alternating with the lab's master, then scores it. The recording itself is
recording.py's; the replay process, replay.py (seen from here through replay_client.py).
"""

from __future__ import annotations

import functools
import secrets
import shutil
import statistics
from pathlib import Path

import numpy as np

from . import gpuwatch
from .context import RunContext, child_problem
from .judge import replay_in_simulator
from .recording import RecordingError, copy_recording, recording_summary
from .results import PERFORMANCE, TestRecord, withheld
from .rubric import (NOT_MEASURED_NO_GPU, REMEASURE_BAND, UNVERIFIED, basis_words, near_boundary,
                     score_performance)
from .sandbox import ChildError
from .submission import read_cells

REPO = Path(__file__).resolve().parent.parent
TIMING_SETS = 4          # input/output sets of a timing window: every call of a window on its own set
TIMING_WINDOWS = 10      # windows per replay request; three requests, windows pooled
REMEASURE_REQUESTS = 6   # a fraction near a scoring line: this many more requests, alone, pooled
STALE = ("called again on the same arrays with new contents, your function did not compute the new "
         "answer: it skipped or cached work it had seen (performance points need a function that "
         "computes every call)")


def timing_cases(ctx: RunContext) -> list:
    """The timing shape's input sets (drawn from the run's secret timing seed)."""
    seed = ctx.secret["timing_seed"]
    return [ctx.lab.timing_case(ctx.simulated, seed + 7919 * k) for k in range(TIMING_SETS)]


class Timer:
    """The timing part of a grading run: before the submissions, the reference and the lab's
    master timed on each GPU (``prepare``); per submission, the function called once on the
    timing shape and recorded (``record``, phase 1); after the batch, the recording timed by
    the replay process with no submission alive and scored (``time_pending``, phase 2)."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self.reference = {}   # gpu -> the torch reference timed there (measure_reference)
        self.masters = {}     # gpu -> the lab's master recorded and timed there (record_master)
        self.reference_error = None
        self.master_error = None

    @functools.cached_property
    def cases(self) -> list:
        """The timing shape's input sets (a lab without kernels has none: never asked)."""
        return timing_cases(self.ctx)

    def prepare(self, gpus: int):
        """Before any submission, on each GPU: the reference, and the master every submission's
        windows are paired with. A failure is logged and said: correctness is still graded,
        and performance says why it was not measured (never the student's fault)."""
        ctx, perf = self.ctx, self.ctx.perf
        for g in range(gpus):
            try:
                self.reference[g] = self.measure_reference(g)
            except Exception as e:  # correctness is still graded; performance says why not
                self.reference_error = f"{type(e).__name__}: {e}"[:500]
                ctx.log(kind="reference", gpu=g, error=self.reference_error)
                ctx.say(f"[gpu {g}] reference FAILED: {self.reference_error}")
            if perf.get("basis", "master") == "master":
                try:  # what every submission's performance is a fraction of, on this GPU
                    self.masters[g] = self.record_master(g)
                except Exception as e:  # performance says the grader could not, never blames
                    self.master_error = f"{type(e).__name__}: {e} {getattr(e, 'detail', '')}"[:500]
                    ctx.log(kind="master", gpu=g, error=self.master_error)
                    ctx.say(f"[gpu {g}] the lab's master could not be timed: {self.master_error}; "
                            f"performance is not scored on this GPU (it needs {self.master_path()}, "
                            "or basis = \"reference\" in the rubric)")

    def measure_reference(self, gpu: int):
        """The lab's reference and a device copy, timed by the replay process exactly as a
        submission's replay is (CUDA events, one call per input set in each window)."""
        ctx = self.ctx
        lab = ctx.lab
        with ctx.replays.lock(gpu):
            srv = ctx.replays.get(gpu)
            r = srv.request(600, cmd="reference", windows=6 * TIMING_WINDOWS)
        if not r.get("ok"):
            raise ChildError("reference failed", r.get("message", ""))
        case = self.cases[0]
        t_ref = r["reference_s"]
        ref = {"gpu": gpu, "case": case, "device": r.get("device"), "method": r.get("method"),
               "reference_s": t_ref, "reference_windows": r["reference_windows"],
               "reference_bandwidth": lab.min_bytes(case) / t_ref,
               "reference_flops_per_s": lab.flops(case) / t_ref,
               "copy_bandwidth": r["copy_bandwidth"], "copy_windows": r["copy_windows"],
               "reference_impl": lab.reference_impl}
        ctx.log(kind="reference", **ref)
        for w in r.get("discarded_windows", []):
            ctx.log(kind="window_discarded", id="(reference)", gpu=gpu, **w)
        ctx.say(f"[gpu {gpu}] reference {ref['reference_bandwidth'] / 1e12:.3f} TB/s effective, "
                 f"copy {ref['copy_bandwidth'] / 1e12:.3f} TB/s")
        return ref

    def master_path(self) -> Path:
        return REPO / "solutions" / f"{self.ctx.lab_name}.ipynb"

    def record_master(self, gpu: int) -> dict:
        """The lab's master solution (solutions/LAB.ipynb: trusted, in the repository) recorded
        once per run per GPU exactly as a submission's timing call is (a sandboxed child, the
        timing shape), then timed once by the replay process for the record: its fraction of
        the torch reference on this GPU. Every submission's timing windows are then paired
        with windows of this recording (``replay_timed``); its points are a fraction of it."""
        ctx = self.ctx
        lab = ctx.lab
        got = ctx.load(read_cells(self.master_path()), gpu, who="(master)", simulated=False)
        child = got.child
        try:
            if not got.loaded:
                raise ChildError("load", f"the master did not load: {got.describe()[:300]}")
            case = dict(self.cases[0], id="timing")
            # a first call compiles (a submission's kernels were compiled by its tests before its
            # timing call); the second, recorded as a submission's is, is the one replayed
            for c in (dict(case, id="warm"), case):
                r = ctx.ask(child, ctx.limits.get("test_s", 60) * 2, **ctx.test_message(c))
                if not r.get("ok"):
                    break
            if not r.get("ok"):
                raise ChildError("call", f"the master raised {r.get('error')}: {r.get('message', '')}"[:500])
            dest = ctx.scratch / f".master-gpu{gpu}"   # a dot: no submission id starts with one
            shutil.rmtree(dest, ignore_errors=True)
            folder = copy_recording(child.workdir, r.get("recording", ""), dest)
        finally:
            if child is not None:
                child.close()
        with ctx.replays.lock(gpu):
            t = ctx.replays.get(gpu).request(float(ctx.limits.get("replay_s", 60)), cmd="time",
                                             dir=str(folder), windows=3 * TIMING_WINDOWS)
        if not t.get("ok") or not t.get("verified"):
            raise ChildError("replay", f"the master's recording did not replay correctly: "
                             f"{t.get('error')}: {t.get('message', '')}"[:500])
        ref = self.reference.get(gpu) or {}
        m = {"gpu": gpu, "folder": str(folder), "per_call_s": t["per_call_s"],
             "launches_per_call": t["launches_per_call"], "windows": t["windows"],
             "bandwidth": lab.min_bytes(case) / t["per_call_s"],
             "fraction_of_reference": (ref["reference_s"] / t["per_call_s"]) if ref else None}
        ctx.log(kind="master", **m)
        ctx.say(f"[gpu {gpu}] lab's master: {m['bandwidth'] / 1e12:.3f} TB/s effective"
                 + (f", {m['fraction_of_reference']:.1%} of the reference" if ref else ""))
        return m


    def record(self, child, result, gpu):
        """Phase 1, with the submission's child alive: its function called once on the timing
        shape and its launches recorded (and called again on new contents, to catch a cache)."""
        ctx = self.ctx
        lab, perf = ctx.lab, ctx.perf
        p = TestRecord(PERFORMANCE, perf["points"])
        result.tests.append(p)
        if not all(t.score == t.max_score for t in result.tests[:-1]):
            p.output = "not measured: performance points need every correctness test to pass"
            result.performance = {"status": "skipped: correctness"}
            return
        case = dict(self.cases[0], id="timing")
        case2 = self.cases[1]
        size = int(np.prod(lab.out_spec(case2)["shape"]))
        pos = np.sort(np.random.default_rng(secrets.randbits(32)).choice(size, min(size, 65536), replace=False))
        try:
            r = ctx.ask(child, ctx.limits.get("test_s", 60) * 2, **ctx.test_message(case),
                        again=lab.args(case2), again_positions=pos.tolist())
            if not r.get("ok"):
                # the timing call comes after the hidden cases: its exception (type and message
                # are the submission's to choose) is the instructor's alone while they are withheld
                said = f"your function raised {r.get('error')}: {r.get('message', '')}"
                ctx.log(kind="timing_setup", id=result.id, error=said[:2000])
                p.output = ("timing setup failed: " + (withheld("your function raised an exception")
                                                       if result.after_hidden else said))
                return
            folder = copy_recording(child.workdir, r.get("recording", ""), ctx.rec_dir(result, "timing"))
        except ChildError as e:
            ctx.log(kind="timing_setup", id=result.id, error=f"{e.reason}: {e.detail}"[:2000])
            p.output = child_problem(e, child, "recording the launches to time", result)
            return
        except RecordingError as e:
            ctx.log(kind="timing_setup", id=result.id, error=str(e)[:2000])
            p.output = "not measured: " + (withheld("the recording of your launches could not be read")
                                           if result.after_hidden else str(e))
            return
        info = {"recording": recording_summary(folder), "shape": lab.describe(case),
                "bytes": lab.min_bytes(case), "flops": lab.flops(case)}
        # the function itself, called again on the same arrays with new contents, must give the
        # new answer: a function that caches by array identity is wrong (and is flagged)
        try:
            got = child.read_npy(r["again"]) if r.get("again") else None
        except (OSError, ValueError):
            got = None
        exp = ctx.expected_for(case2, cache=True).reshape(-1)[pos]
        # book's checker imported here: importing book decides GPU or simulator, which grade
        # decides first (--simulator)
        from book.answers import compare_array
        info["fresh_call_ok"] = bool(got is not None and compare_array(
            got, exp, rtol=lab.rtol, atol=lab.atol, dtype_name=lab.dtype)[0])
        if ctx.simulated:  # --sim-timing: the recording is replayed (correctness only), nothing timed
            ok, msg = replay_in_simulator(ctx, folder, case, result.cells)
            ok_all = ok and info["fresh_call_ok"]
            info.update(verified=ok_all, method="replay in a fresh simulator child (not timed)",
                        launches_per_call=info["recording"]["launches"],
                        flags=([] if ok else [UNVERIFIED]) + ([] if info["fresh_call_ok"] else [STALE]),
                        status="simulator (test mode): not a performance measurement")
            p.output = NOT_MEASURED_NO_GPU + "".join("\nFLAGGED: " + f for f in info["flags"])
            result.performance = info
            ctx.log(kind="timing", id=result.id, **info)
            return
        # on a GPU the recording is timed later, when no submission's process is alive (grade())
        result.timing = {"folder": str(folder), "info": info, "gpu": gpu}

    def unless_correct(self, result):
        """A recording taken for timing is dropped when a later verdict (the kernel proof, the
        hazard trace) took correctness points: performance points need every correctness test
        to pass, as ``record`` checks before it records."""
        p = result.test(PERFORMANCE)
        if p is None or p.score or all(t.score == t.max_score for t in result.tests if t is not p):
            return
        if result.timing is not None or result.performance:
            result.timing = None
            result.performance = {"status": "skipped: correctness"}
            p.output = "not measured: performance points need every correctness test to pass"

    def time_pending(self, result):
        """Phase 2 of a GPU run: time a recording with the trusted replay process while no
        submission's process exists, then score it."""
        ctx = self.ctx
        lab, perf = ctx.lab, ctx.perf
        pts = perf["points"]
        pend, result.timing = result.timing, None
        gpu, folder, info = pend["gpu"], Path(pend["folder"]), pend["info"]
        p = result.test(PERFORMANCE)
        case = self.cases[0]
        by_master = perf.get("basis", "master") == "master"
        if by_master and gpu not in self.masters:
            p.output = ("not measured: the lab's reference solution could not be timed on this GPU "
                           f"({self.master_error or 'unknown error'}); the grader's problem, "
                           "not yours: this submission needs a regrade")
            result.performance = info
            return
        remeasure = pend.get("remeasure")
        timed = self.replay_timed(result, gpu, folder, pair=self.masters[gpu]["folder"] if by_master else None,
                                  requests=REMEASURE_REQUESTS if remeasure else 3,
                                  earlier=(remeasure or {}).get("windows"))
        info.update({k: v for k, v in timed.items() if k not in ("windows_raw", "master_windows_raw")})
        if not timed.get("ok"):
            p.output = f"not measured: {timed.get('message')}"
            if timed.get("hang"):
                p.output = (f"0 points: the recorded launches did not finish on the GPU within "
                               f"{timed.get('limit_s', 0):.0f} s when the grader replayed them (a hang); "
                               "the replay was stopped")
            result.performance = info
            ctx.log(kind="timing", id=result.id, **info)
            return
        per = timed["per_call_s"]
        info["per_rep_s"] = per
        info["bandwidth"] = info["bytes"] / per
        info["flops_per_s"] = info["flops"] / per
        if gpu not in self.reference:
            p.output = ("not measured: the reference could not be measured on this GPU "
                        f"({self.reference_error or 'unknown error'})")
            result.performance = info
            return
        ref = self.reference[gpu]
        info["reference"] = {k: ref[k] for k in ("reference_s", "reference_bandwidth", "copy_bandwidth",
                                                  "reference_flops_per_s", "device")}
        if by_master and not timed.get("master_verified", True):
            p.output = ("not measured: the lab's reference solution gave a wrong result when it was "
                        "replayed beside yours; the grader's problem, not yours: this submission "
                        "needs a regrade")
            result.performance = info
            ctx.log(kind="timing", id=result.id, **info)
            return
        score = score_performance(lab.perf_metric, perf, per_s=per, bandwidth=info["bandwidth"],
                                  reference_s=ref["reference_s"], copy_bandwidth=ref["copy_bandwidth"],
                                  verified=timed["verified"], master_s=timed.get("master_per_call_s"),
                                  reference_name=lab.reference_name)
        if not info.get("fresh_call_ok", True):
            score["flags"].append(STALE)
            score["points"] = 0.0
        info.update(score)
        line = near_boundary(score["fraction"], perf)
        if line and not remeasure and not score["flags"]:
            # near a scoring line: timed again with more windows after the batch (grade.py),
            # these windows pooled with the new ones; scored then
            pend["remeasure"] = {"fraction": score["fraction"], "line": line,
                                 "windows": [timed["windows_raw"], timed["master_windows_raw"]]}
            result.timing = pend
            ctx.log(kind="remeasure_due", id=result.id, gpu=gpu, fraction=score["fraction"],
                     line=line, value=perf[line])
            return
        if remeasure:
            info["remeasured"] = {"first_fraction": remeasure["fraction"], "line": remeasure["line"],
                                  "fraction": score["fraction"], "windows": timed["windows"]}
            ctx.log(kind="remeasure", id=result.id, gpu=gpu, line=remeasure["line"],
                     value=perf[remeasure["line"]], first_fraction=remeasure["fraction"],
                     fraction=score["fraction"], windows=timed["windows"])
        peak = (ref.get("device") or {}).get("peak_bandwidth")
        info["fraction_of_peak"] = info["bandwidth"] / peak if peak else None
        p.score = score["points"]
        zero, full = perf["zero_at"], perf["full_at"]
        unit = (f"{info['bandwidth'] / 1e12:.3f} TB/s effective" if lab.perf_metric == "bandwidth"
                else f"{info['flops_per_s'] / 1e12:.2f} TFLOP/s")
        p.output = (f"{unit} on {lab.describe(case)}: {score['fraction']:.1%} of {basis_words(perf)}"
                       + (f" ({score['fraction_of_reference']:.1%} of {ref_words(lab)})" if by_master else "")
                       + (f", {info['fraction_of_peak']:.1%} of theoretical peak bandwidth"
                          if info["fraction_of_peak"] and lab.perf_metric == "bandwidth" else "")
                       + f"; {p.score}/{pts} points (0 at {zero:.0%}, full at {full:.0%}). Timed by the "
                       f"grader replaying the {timed['launches_per_call']} launch(es) your function made, "
                       "on its own inputs, in its own process"
                       + (", in windows alternating with the reference solution's" if by_master else "")
                       + (f"; timed again with more windows because a first measurement "
                          f"({remeasure['fraction']:.1%}) lay within "
                          f"{perf.get('remeasure_band', REMEASURE_BAND):.0%} of a scoring line"
                          if remeasure else ""))
        if score["flags"]:
            p.output += "\nFLAGGED: " + "\nFLAGGED: ".join(score["flags"])
        result.performance = info
        ctx.log(kind="timing", id=result.id, **info)

    def replay_timed(self, result, gpu, folder, pair=None, requests=3, earlier=None) -> dict:
        """``requests`` replay requests of TIMING_WINDOWS windows each, made when no submission's
        process is alive. With ``pair`` (the master's recording) every request alternates the
        submission's windows with the master's (replay.py's ``time_paired``) and the score is
        the ratio of the two medians. Pairing, not a master timed once per run or at intervals:
        the identical copies of a 200-copy batch spread 5-7 points while five repeats timed
        back to back spread 0.45 (records/grader/, issue 18), the mark of a GPU whose speed
        drifts over the minutes of phase 2 (clocks, temperature, power) against a reference
        timed once at the start; a master timed within milliseconds of each window drifts with
        it, and the ratio cancels what both share. It costs one master window per window.
        ``earlier``: windows of a first measurement ([submission's, master's]) pooled with
        these (a re-measure near a scoring line). Before and after each request, NVML must
        show no process but the replay process holding the GPU; a request that overlapped a
        foreign process is discarded, logged in measurements.jsonl and repeated (at most 3
        times, then kept and said so)."""
        ctx = self.ctx
        limit = float(ctx.limits.get("replay_s", 60)) * (2 if pair else 1)
        windows, mwindows, verified, mverified, discarded, launches = [], [], True, True, 0, None
        rng = np.random.default_rng(secrets.randbits(32))
        with ctx.replays.lock(gpu):
            srv = ctx.replays.get(gpu)
            done = 0
            while done < requests:
                before = gpuwatch.others_on(gpu, {srv.pid})
                r = srv.request(limit, cmd="time", dir=str(folder), windows=TIMING_WINDOWS,
                                start=int(rng.integers(0, TIMING_SETS)),
                                **({"pair": str(pair)} if pair else {}))
                if not r.get("ok"):
                    return {"ok": False, "message": f"{r.get('error')}: {r.get('message', '')}"[:1500],
                            "hang": r.get("error") == "timeout", "limit_s": limit}
                after = gpuwatch.others_on(gpu, {srv.pid})
                for w in r.get("discarded_windows", []):  # the replay process's own per-window check
                    ctx.log(kind="window_discarded", id=result.id, gpu=gpu, **w)
                if (before or after) and discarded < 3:
                    discarded += 1
                    ctx.log(kind="window_discarded", id=result.id, gpu=gpu, foreign_before=before,
                             foreign_after=after, windows=r["windows"])
                    continue
                windows += r["windows"]
                mwindows += r.get("master_windows", [])
                verified &= bool(r["verified"])
                mverified &= bool(r.get("master_verified", True))
                launches = r["launches_per_call"]
                done += 1
        new = {"windows": windows, "master_windows": mwindows}
        if earlier:
            windows, mwindows = earlier[0] + windows, earlier[1] + mwindows
        per = statistics.median(w["per_call_s"] for w in windows)
        ctx.log(kind="timing_windows", id=result.id, gpu=gpu, windows=new["windows"],
                 master_windows=new["master_windows"], discarded=discarded, pooled=bool(earlier))
        out = {"ok": True, "per_call_s": per, "verified": verified, "windows": len(windows),
               "discarded_requests": discarded, "launches_per_call": launches,
               "windows_raw": windows, "master_windows_raw": mwindows,
               "method": "trusted replay of the recorded launches, CUDA events"
               + (", windows alternating with the lab's master (ratio of medians)" if pair else "")}
        if pair:
            out.update(master_per_call_s=statistics.median(w["per_call_s"] for w in mwindows),
                       master_verified=mverified)
        return out


def ref_words(lab) -> str:
    """The torch reference, named as feedback names it."""
    return lab.reference_name
