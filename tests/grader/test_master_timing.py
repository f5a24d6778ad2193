"""Phase 2's scoring against the lab's master (autograder/timing.py): what the grader does with
the replay process's paired windows. The replay process itself needs a GPU (its GPU test is
tests/grader/test_grader_gpu.py, `make test-gpu`); here a stand-in answers its protocol with windows
of chosen times, so that the decisions the grader makes from them run for real: the ratio of
medians, the deferral of a fraction near a scoring line, the pooled re-measure after the
batch, the feedback's words and a master that could not be timed."""

import json

from autograder.grade import Run
from autograder.results import PERFORMANCE, Result, TestRecord


class StandIn:
    """Answers `time` requests (replay.py's protocol) with windows of the given per-call times."""

    pid = 0

    def __init__(self, sub_s, master_s):
        self.times = [(sub_s, master_s)]
        self.requests = []

    def request(self, timeout, **msg):
        self.requests.append(msg)
        sub_s, master_s = self.times[min(len(self.requests) - 1, len(self.times) - 1)]
        n = msg["windows"]
        win = [{"per_call_s": sub_s, "calls": 4, "t": float(i)} for i in range(n)]
        mwin = [{"per_call_s": master_s, "calls": 4, "t": float(i)} for i in range(n)]
        r = {"ok": True, "windows": win, "verified": True, "launches_per_call": 1,
             "per_call_s": sub_s, "discarded_windows": []}
        if msg.get("pair"):
            r.update(master_windows=mwin, master_verified=True, master_per_call_s=master_s)
        return r


def make_run(tmp_path, server):
    run = Run("lab2", tmp_path / "out", simulated=False, quiet=True)
    run.ctx.replays.servers[0] = server
    run.timer.reference[0] = {"reference_s": 1.0e-3, "reference_bandwidth": 7e11, "copy_bandwidth": 3e12,
                        "reference_flops_per_s": 1e12, "device": {"peak_bandwidth": 3.35e12}}
    run.timer.masters[0] = {"folder": str(tmp_path / "master"), "per_call_s": 1.0e-3}
    return run


def pending(run, sid="s1"):
    case = run.timer.cases[0]
    r = Result(id=sid, file="x.py", lab=run.lab_name, run=run.run_id)
    r.tests = [TestRecord("public", 1, 1), TestRecord(PERFORMANCE, run.ctx.perf["points"])]
    r.timing = {"gpu": 0, "folder": str(run.out / "rec"), "info": {
        "bytes": run.lab.min_bytes(case), "flops": run.lab.flops(case), "fresh_call_ok": True,
        "recording": {"launches": 1}}}
    (run.out / sid).mkdir(parents=True, exist_ok=True)
    return r


def log(run, kind):
    return [x for x in map(json.loads, (run.out / "measurements.jsonl").read_text().splitlines())
            if x.get("kind") == kind]


def test_a_fraction_far_from_the_lines_is_the_ratio_of_the_paired_medians(tmp_path):
    srv = StandIn(sub_s=2.0e-3, master_s=1.1e-3)               # 0.55 of the master
    run = make_run(tmp_path, srv)
    r = pending(run)
    assert run._time_and_finish("s1", r) == []
    assert all(m.get("pair") == str(tmp_path / "master") for m in srv.requests)
    assert len(srv.requests) == 3
    res = json.loads((run.out / "s1" / "results.json").read_text())
    perf = res["extra_data"]["performance"]
    assert abs(perf["fraction"] - 0.55) < 1e-9 and abs(perf["fraction_of_reference"] - 0.5) < 1e-9
    assert perf["basis"] == "master" and "remeasured" not in perf
    p = next(t for t in res["tests"] if t["name"] == "performance")
    # linear between the rubric's lines (lab 2's are set from its control: records/labs/)
    lines = run.ctx.perf
    want = lines["points"] * (0.55 - lines["zero_at"]) / (lines["full_at"] - lines["zero_at"])
    assert 0 < want < lines["points"] and p["score"] == round(want, 2), (p["score"], want)
    assert "55.0% of the lab's reference solution measured on this GPU in this run" in p["output"]
    assert "50.0% of torch's reference" in p["output"]
    assert log(run, "remeasure_due") == []


def test_a_fraction_near_a_line_is_timed_again_after_the_batch_and_pooled(tmp_path):
    srv = StandIn(sub_s=1.0e-3 / 0.81, master_s=1.0e-3)      # 0.81: within 0.03 of full_at 0.80
    run = make_run(tmp_path, srv)
    r = pending(run)
    again = run._time_and_finish("s1", r)
    assert [sid for sid, _ in again] == ["s1"] and not (run.out / "s1" / "results.json").exists()
    assert [x["line"] for x in log(run, "remeasure_due")] == ["full_at"]
    srv.times = [(1.0e-3 / 0.78, 1.0e-3)] * 100                # the re-measure says 0.78
    assert run._time_and_finish("s1", again[0][1]) == []
    assert len(srv.requests) == 3 + 6
    res = json.loads((run.out / "s1" / "results.json").read_text())
    perf = res["extra_data"]["performance"]
    # 30 first windows at 0.81 pooled with 60 at 0.78: the median is the re-measure's
    assert perf["windows"] == 90 and abs(perf["fraction"] - 0.78) < 1e-9
    assert perf["remeasured"]["line"] == "full_at" and abs(perf["remeasured"]["first_fraction"] - 0.81) < 1e-9
    p = next(t for t in res["tests"] if t["name"] == "performance")
    assert "timed again with more windows" in p["output"] and p["score"] < 4
    [rm] = log(run, "remeasure")
    assert abs(rm["first_fraction"] - 0.81) < 1e-9 and abs(rm["fraction"] - 0.78) < 1e-9


def test_a_master_that_could_not_be_timed_is_the_graders_problem_not_the_students(tmp_path):
    srv = StandIn(sub_s=1.0e-3, master_s=1.0e-3)
    run = make_run(tmp_path, srv)
    del run.timer.masters[0]
    run.timer.master_error = "ChildError: load the master did not load"
    run._time_and_finish("s1", pending(run))
    res = json.loads((run.out / "s1" / "results.json").read_text())
    p = next(t for t in res["tests"] if t["name"] == "performance")
    assert p["score"] == 0 and "the grader's problem, not yours" in p["output"]
    assert "needs a regrade" in p["output"] and srv.requests == []


def test_the_old_basis_still_scores_against_torch(tmp_path):
    srv = StandIn(sub_s=2.0e-3, master_s=1.0e-3)
    run = make_run(tmp_path, srv)
    run.ctx.perf = dict(run.ctx.perf, basis="reference")
    run._time_and_finish("s1", pending(run))
    assert all("pair" not in m for m in srv.requests)
    perf = json.loads((run.out / "s1" / "results.json").read_text())["extra_data"]["performance"]
    assert perf["basis"] == "reference" and abs(perf["fraction"] - 0.5) < 1e-9


def test_the_replay_process_alternates_master_and_submission_windows_and_verifies_both(monkeypatch):
    # replay.Server's window loop with CPU tensors and a clock of its own standing in for CUDA
    # events and the driver API (the real process needs a GPU: tests/grader/test_grader_gpu.py).
    # The stand-in "recordings" advance that clock by a known amount: the master half the
    # submission's. No wall clock: a loaded machine cannot change what this test sees.
    import types

    torch = __import__("pytest").importorskip("torch")
    from autograder import replay

    clock = [0.0]   # seconds of "GPU time", advanced only by the stand-in recordings

    class Event:
        def __init__(self, enable_timing=True):
            self.t = None

        def record(self):
            self.t = clock[0]

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return (other.t - self.t) * 1e3

        def query(self):          # the start event: reached before the host had enqueued all?
            return reached[0]

    spins, reached = [], [False]

    class Rec:
        def __init__(self, folder):
            self.folder, self.launches = folder, [{}]

        def load(self):
            return [], {}

        def fresh_scratch(self, _torch, _guard_bytes=0):
            return {}

        @staticmethod
        def unload(_mods):
            pass

        def run(self, _funcs, bufs, _stream, _extents=None):
            clock[0] += 50e-6 if self.folder == "master" else 100e-6
            bufs["out"].copy_(bufs["x"] * (2 if self.folder != "wrong" else 3))
            if self.folder == "past":   # right values, and one store past the end of `out`
                bufs["out"].as_strided((65,), (1,))[64] = 0.0

    class Torch:
        cuda = types.SimpleNamespace(Event=Event, synchronize=lambda: None, _sleep=spins.append)

        def __getattr__(self, name):
            return getattr(torch, name)

    monkeypatch.setattr(replay, "Recording", Rec)
    srv = object.__new__(replay.Server)
    srv.torch, srv.nvml_gpu, srv.discarded, srv.stream = Torch(), None, [], lambda: None
    srv.lab = types.SimpleNamespace(output="out", atol=1e-6, rtol=1e-6)
    x = torch.randn(64)

    def one_set():   # the output between guard zones, as Server.build_set makes it
        import numpy as np

        from autograder.inputs import guarded

        flat = torch.from_numpy(guarded(np.full(64, np.nan, np.float32), 64, "out"))
        return {"bufs": {"x": x.clone(), "out": flat[64:128]}, "ref": (2 * x).double(),
                "whole": {"out": (flat, 64)}, "extents": {}, "guard_bytes": 256}

    srv.sets = [one_set() for _ in range(4)]
    r = srv.time({"dir": "sub", "pair": "master", "windows": 6, "start": 1})
    assert r["verified"] and r["master_verified"]
    assert len(r["windows"]) == len(r["master_windows"]) == 6
    firsts = [min((w for w in r["windows"] + r["master_windows"] if w["pair"] == i),
                  key=lambda w: w["t"])["who"] for i in range(6)]
    assert firsts == ["master", "sub"] * 3                      # ABBA
    assert abs(r["master_per_call_s"] / r["per_call_s"] - 0.5) < 1e-9    # half the work
    wrong = srv.time({"dir": "wrong", "pair": "master", "windows": 2})
    assert not wrong["verified"] and wrong["master_verified"] and wrong["bad_windows"]
    # a store past the end of `out` (into its guard zone): the window is not verified
    past = srv.time({"dir": "past", "pair": "master", "windows": 2})
    assert not past["verified"] and past["master_verified"]
    assert past["bad_windows"][0]["wrong_elements"] == [0, 0, 0, 0]   # the values were right
    assert past["bad_windows"][0]["guard_hits"] == [1, 1, 1, 1]
    alone = srv.time({"dir": "sub", "windows": 3})
    assert alone["verified"] and len(alone["windows"]) == 3 and "master_windows" not in alone
    # every window queued behind a spin; a start event the GPU reached before the host had
    # enqueued the window (host slower than the spin) is said so, and the next spin is longer
    assert len(spins) == 12 + 4 + 4 + 3 and all(w["primed"] for w in r["windows"] + alone["windows"])
    reached[0] = True
    late = srv.time({"dir": "sub", "windows": 2})
    assert [w["primed"] for w in late["windows"]] == [False, False]
    assert spins[-2:] == [replay.Server.PRIME_CYCLES, 2 * replay.Server.PRIME_CYCLES]
    assert srv.prime_cycles == 4 * replay.Server.PRIME_CYCLES
