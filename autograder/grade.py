"""Grade a class: ``python -m autograder grade LAB SUBMISSION... --out DIR``.

Each submission runs in its own sandboxed process (sandbox.py + driver.py). This process,
the trusted one, owns the rubric, the hidden cases (drawn from a secret seed kept in
DIR/.grader/), the float64 references, the comparison and the clock. See README.md for the
threat model.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import hashlib
import json
import math
import os
import re
import secrets
import statistics
import sys
import threading
import time
try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    try:
        import tomli as tomllib
    except ModuleNotFoundError as e:
        raise SystemExit("reading rubrics needs Python 3.11+ (tomllib) or `pip install tomli`") from e
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from . import labs as _labs
from .compare import compare_array, compare_number
from .inputs import generate
from .sandbox import Child, ChildError
from .submission import SubmissionError, read_cells, scan

HERE = Path(__file__).resolve().parent
NOT_MEASURED_NO_GPU = "not measured: no GPU (kernels ran in Numba's CUDA simulator, which cannot time)"


# --------------------------------------------------------------------------- config
def load_rubric(lab: str, path=None) -> dict:
    p = Path(path) if path else HERE / "rubrics" / f"{lab}.toml"
    try:
        with open(p, "rb") as f:
            r = tomllib.load(f)
    except FileNotFoundError:
        raise SystemExit(f"no rubric for {lab}: expected {p}")
    except tomllib.TOMLDecodeError as e:
        raise SystemExit(f"rubric {p} is not valid TOML: {e}")
    if r.get("lab") != lab:
        raise SystemExit(f"rubric {p} is for lab {r.get('lab')!r}, not {lab!r}")
    return r


def detect_simulated(force: bool) -> bool:
    if force:
        os.environ["BOOK_SIMULATOR"] = "1"
    from book import gpu  # probes the driver with ctypes; numba.cuda is never imported here

    return bool(gpu.SIMULATED)


def _sanitize(s: str) -> str:
    s = re.sub(r"[^A-Za-z0-9_.-]+", "_", s).strip("._") or "submission"
    return s[:80]


def collect(paths) -> list[tuple[str, Path]]:
    """(id, path) per submission; folders are searched for .ipynb and .py files. The id is the
    file name without suffix; duplicates (every Colab download has the lab's name) take the
    parent folder's name, then a number."""
    files = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files += sorted(q for q in p.rglob("*") if q.suffix in (".ipynb", ".py") and q.is_file()
                            and ".ipynb_checkpoints" not in q.parts)
        else:
            files.append(p)
    stems = {}
    for f in files:
        stems.setdefault(f.stem, []).append(f)
    out, seen = [], set()
    for f in files:
        sid = _sanitize(f.stem if len(stems[f.stem]) == 1 else f"{f.parent.name}_{f.stem}")
        base, k = sid, 2
        while sid in seen:
            sid, k = f"{base}-{k}", k + 1
        seen.add(sid)
        out.append((sid, f))
    return out


def parse_shard(shard: str | None):
    if not shard:
        return 0, 1
    m = re.fullmatch(r"(\d+)/(\d+)", shard)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise SystemExit(f"--shard wants I/N with 0 <= I < N (e.g. 0/4), got {shard!r}")
    return int(m.group(1)), int(m.group(2))


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# --------------------------------------------------------------------------- the run
class Run:
    def __init__(self, lab, out: Path, *, rubric_path=None, simulated=False, gpus=1, workers=None,
                 sim_timing=False, isolate=True, quiet=False):
        self.lab_name = _labs.resolve(lab)
        self.lab = _labs.get(self.lab_name)
        self.rubric = load_rubric(self.lab_name, rubric_path)
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.simulated = simulated
        self.gpus = max(1, int(gpus))
        self.workers = workers or (2 if simulated else 3 * self.gpus)
        self.sim_timing = sim_timing
        self.isolate = isolate
        self.quiet = quiet
        self.run_id = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ") + f"-{os.getpid()}"
        self.log_lock = threading.Lock()
        self.gpu_locks = [GpuLock() if not simulated else _NullLock() for _ in range(self.gpus)]
        self.secret = self._secret()
        self.limits = self.rubric.get("limits", {})
        self.perf = self.rubric.get("performance")
        self._build_cases()
        self.reference = {}
        self.drop_uid = True
        self.sandbox_note = None

    def say(self, *a):
        if not self.quiet:
            print(*a, flush=True)

    def _secret(self) -> dict:
        """Seeds of the hidden cases: drawn once per output folder, so re-runs and shards of a
        class grade against the same hidden cases; never shown to a submission."""
        d = self.out / ".grader"
        d.mkdir(exist_ok=True)
        os.chmod(d, 0o700)
        p = d / "secret.json"
        if p.exists():
            return json.loads(p.read_text())
        s = {"hidden_seed": secrets.randbits(62), "timing_seed": secrets.randbits(30)}
        env_seed = os.environ.get("AUTOGRADER_SEED")  # instructors pin a class-wide seed this way
        if env_seed:
            s = {"hidden_seed": int(env_seed), "timing_seed": int(env_seed) % (1 << 30)}
        _atomic_write(p, json.dumps(s))
        return s

    def log(self, **rec):
        rec = {"run": self.run_id, "lab": self.lab_name, "time": time.time(), **rec}
        with self.log_lock:
            with open(self.out / "measurements.jsonl", "a") as f:
                f.write(json.dumps(rec, default=str) + "\n")
                f.flush()
                os.fsync(f.fileno())

    # -- cases and references (parent only)
    def _build_cases(self):
        lab, rub = self.lab, self.rubric["correctness"]
        rng = np.random.default_rng(self.secret["hidden_seed"])
        self.cases = [dict(c, visibility="public") for c in lab.public_cases()]
        if lab.KIND == "numeric":
            hidden = lab.hidden_cases(rng, self.simulated, rub.get("hidden_per_function", 2))
        else:
            hidden = lab.hidden_cases(rng, self.simulated, rub.get("hidden_cases", 3))
        self.cases += [dict(c, visibility="hidden") for c in hidden]
        for i, c in enumerate(self.cases):
            c["id"] = f"t{i}"
            c["points"] = rub["public_points"] if c["visibility"] == "public" else rub["hidden_points"]
        self._expected = {}

    def expected(self, case):
        if case["id"] not in self._expected:
            if self.lab.KIND == "numeric":
                self._expected[case["id"]] = self.lab.answer(case)
            else:
                ins = {n: generate(s) for n, s in self.lab.input_specs(case).items()}
                self._expected[case["id"]] = self.lab.reference(ins)
        return self._expected[case["id"]]

    def functions(self):
        if self.lab.KIND == "numeric":
            return dict(self.lab.FUNCTIONS)
        return {self.lab.FUNCTION: list(self.lab.PARAMS)}

    def test_message(self, case):
        lab = self.lab
        if lab.KIND == "numeric":
            return {"cmd": "test", "id": case["id"], "kind": "numeric", "function": case["function"],
                    "args": [{"role": "value", "value": v} for v in case["args"]]}
        return {"cmd": "test", "id": case["id"], "kind": "kernel", "function": lab.FUNCTION,
                "args": self.kernel_args(case)}

    def kernel_args(self, case):
        lab = self.lab
        specs = lab.input_specs(case)
        args = []
        for p in lab.PARAMS:
            if p == lab.OUTPUT:
                o = lab.out_spec(case)
                args.append({"role": "out", "name": p, "shape": o["shape"], "dtype": o["dtype"]})
            else:
                args.append({"role": "in", "name": p, "spec": specs[p]})
        return args

    # -- performance reference, once per GPU per run
    def measure_reference(self, gpu: int):
        lab, perf = self.lab, self.perf
        case = lab.timing_case(False, self.secret["timing_seed"])
        res = {}
        for impl in ("reference", "copy"):
            child = Child(mode="reference", functions={}, cells=None, simulated=False, gpu=gpu,
                          isolate=False)
            try:
                ev = child.recv(120)
                if ev.get("event") != "loaded":
                    raise ChildError("protocol", str(ev)[:300])
                msg = {"cmd": "time_prepare", "impl": impl, "lab": self.lab_name, "case": case,
                       "bytes_per_buffer": 1 << 30}
                r = child.request(300, **msg)
                if not r.get("ok"):
                    raise ChildError("reference failed", r.get("message", ""))
                if impl == "reference":
                    res["device"] = r.get("device")
                per, windows = self.clocked(child, perf.get("window_s", 0.3), np.random.default_rng(gpu))
                res[impl] = {"per_rep_s": per, "windows": windows}
            finally:
                child.close()
        t_ref, t_copy = res["reference"]["per_rep_s"], res["copy"]["per_rep_s"]
        ref = {"gpu": gpu, "case": case, "device": res.get("device"),
               "reference_s": t_ref, "reference_windows": res["reference"]["windows"],
               "reference_bandwidth": lab.min_bytes(case) / t_ref,
               "reference_flops_per_s": lab.flops(case) / t_ref,
               "copy_bandwidth": 2 * (1 << 30) / t_copy, "copy_windows": res["copy"]["windows"],
               "reference_impl": (lab.make_reference_runner.__doc__ or "").strip().split("\n")[0]}
        self.log(kind="reference", **ref)
        self.say(f"[gpu {gpu}] reference {ref['reference_bandwidth'] / 1e12:.3f} TB/s effective, "
                 f"copy {ref['copy_bandwidth'] / 1e12:.3f} TB/s")
        return ref

    def calibrate_sandbox(self):
        """Before any submission: can a fully isolated child (namespaces, hidden paths, uid
        nobody) run a CUDA kernel here? If not, step down (keep the namespaces, keep the uid),
        and say so in the log: better a weaker sandbox, reported, than a class graded zero."""
        tries = [("full isolation", self.isolate, True), ("isolation without the uid drop", self.isolate, False),
                 ("no isolation", False, False)]
        for what, iso, drop in tries:
            child = Child(mode="reference", functions={}, cells=None, simulated=False, gpu=0,
                          isolate=iso, drop_uid=drop, hide=self._hide_paths())
            try:
                ev = child.recv(120)
                r = child.request(120, cmd="probe")
                if ev.get("event") == "loaded" and r.get("ok"):
                    self.isolate, self.drop_uid = iso, drop
                    self.sandbox_note = f"{what}: {ev.get('isolation')}, uid {r.get('uid')}"
                    self.log(kind="sandbox", ok=True, mode=what, isolation=ev.get("isolation"), uid=r.get("uid"))
                    self.say(f"sandbox: {self.sandbox_note}")
                    return
                self.log(kind="sandbox", ok=False, mode=what, reply=r)
            except ChildError as e:
                self.log(kind="sandbox", ok=False, mode=what, error=f"{e.reason}: {e.detail}",
                         output=child.output_text()[-2000:])
            finally:
                child.close()
        raise SystemExit("no sandbox configuration could run a CUDA kernel: see measurements.jsonl")

    def clocked(self, child, window_s, rng, n_windows=3):
        """Time ``reps`` calls with THIS process's clock: the child runs them and synchronizes,
        then answers; the round trip of an empty request is subtracted."""
        def window(reps):
            start = int(rng.integers(0, 2))
            t0 = time.perf_counter()
            r = child.request(max(60.0, 20 * window_s), cmd="go", reps=int(reps), start=start)
            t1 = time.perf_counter()
            if not r.get("ok"):
                raise ChildError("timing failed", r.get("message", ""))
            return t1 - t0

        rtts = []
        for _ in range(5):
            t0 = time.perf_counter()
            child.request(30, cmd="ping")
            rtts.append(time.perf_counter() - t0)
        rtt = min(rtts)
        probe = (window(3) - rtt) / 3
        reps = int(min(20000, max(3, window_s / max(probe, 1e-7))))
        windows = []
        for _ in range(n_windows):
            r = reps + int(rng.integers(0, max(1, reps // 8) + 1))  # unpredictable count
            w = window(r)
            windows.append({"reps": r, "wall_s": w, "rtt_s": rtt, "per_rep_s": max(w - rtt, 1e-9) / r})
        return statistics.median(x["per_rep_s"] for x in windows), windows

    # -- one submission
    def grade_one(self, index: int, sid: str, path: Path) -> dict:
        gpu = index % self.gpus
        t_start = time.time()
        sub_dir = self.out / sid
        sub_dir.mkdir(exist_ok=True)
        result = {"id": sid, "file": str(path), "lab": self.lab_name, "tests": [], "flags": [],
                  "cell_errors": [], "problems": {}, "performance": None, "status": "graded",
                  "run": self.run_id, "sha256": None, "output": ""}
        try:
            result["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            pass
        try:
            cells = read_cells(path)
        except SubmissionError as e:
            result["status"] = "unreadable"
            result["problems"]["submission"] = str(e)
            return self.finish(result, sub_dir, t_start)
        result["flags"] = scan(cells)
        child = None
        try:
            child = Child(mode="student", functions=self.functions(), cells=cells,
                          simulated=self.simulated, gpu=gpu if not self.simulated else None,
                          limits=self._child_limits(), hide=self._hide_paths(),
                          isolate=self.isolate, drop_uid=self.drop_uid)
            glock = self.gpu_locks[gpu]
            try:
                ev = child.recv(self.limits.get("load_s", 120))  # Python, numba, book: no student code yet
                if ev.get("event") == "ready":
                    # the student's code touches the GPU only under the shared lock: timing
                    # windows (exclusive) never overlap another submission's kernels
                    with glock.shared():
                        ev = child.request(self.limits.get("load_s", 120), cmd="load")
                        self._loaded(ev, result)
                        if ev.get("event") == "loaded":
                            self.run_tests(child, result)
            except ChildError as e:
                result["status"] = "crashed while loading"
                result["problems"]["load"] = self._child_problem(e, child, "running your notebook's cells")
                return self.finish(result, sub_dir, t_start)
            if ev.get("event") != "loaded":
                result["status"] = "grader error"
                result["problems"]["grader"] = ev.get("error") or f"unexpected answer {str(ev)[:200]}"
                return self.finish(result, sub_dir, t_start)
            if self.perf and (not self.simulated or self.sim_timing):
                self.run_timing(child, result, gpu)
        except Exception as e:  # the grader's own bug: say so, keep the class going
            result["status"] = "grader error"
            result["problems"]["grader"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-2000:]}"
        finally:
            if child is not None:
                child.close()
                result["output"] = child.output_text()
                result["output_bytes"] = child.output_total
                result["rss_peak_mib"] = child.rss_peak >> 20
        return self.finish(result, sub_dir, t_start)

    def _loaded(self, ev, result):
        result["isolation"] = ev.get("isolation")
        result["cell_errors"] = ev.get("cell_errors", [])
        result["problems"].update(ev.get("problems", {}))

    def _child_limits(self):
        lim = {"cpu_s": int(self.limits.get("cpu_s", 600))}
        if "mem_mib" in self.limits:
            lim["mem_bytes"] = int(self.limits["mem_mib"]) << 20
        return lim

    def _hide_paths(self):
        return [str(self.out.resolve())] + [str(p) for p in getattr(self, "submission_dirs", [])]

    def _child_problem(self, e: ChildError, child, during: str) -> str:
        tail = child.output_text()[-1500:] if child else ""
        if e.reason == "timeout":
            msg = f"stopped after {e.detail.split('within ')[-1]} while {during}: an infinite loop, or far too slow"
        elif e.reason == "memory":
            msg = f"stopped while {during}: {e.detail}"
        elif e.reason == "died":
            msg = f"the process died while {during}: {e.detail}"
        else:
            msg = f"{e.reason} while {during}: {e.detail}"
        if tail.strip():
            msg += f"\n\nlast output:\n{tail}"
        return msg

    def run_tests(self, child, result):
        dead = None
        for case in self.cases:
            t = {"name": case["name"], "max_score": case["points"], "score": 0,
                 "visibility": "visible", "hidden": case["visibility"] == "hidden"}
            result["tests"].append(t)
            fn = case.get("function", getattr(self.lab, "FUNCTION", None))
            if fn in result["problems"]:
                t["output"] = result["problems"][fn]
                continue
            if dead:
                t["output"] = f"not run: {dead}"
                continue
            try:
                r = child.request(self.limits.get("test_s", 60), **self.test_message(case))
            except ChildError as e:
                t["output"] = self._child_problem(e, child, f"running test '{case['name']}'")
                dead = f"an earlier test ('{case['name']}') stopped the process"
                continue
            ok, msg = self.judge(case, r, child)
            t["output"] = msg
            t["score"] = case["points"] if ok else 0
            if r.get("cuda_error"):
                dead = (f"a CUDA error in test '{case['name']}' (e.g. an illegal memory access) "
                        "leaves the GPU context unusable for the rest of this submission")
            self.log(kind="test", id=result["id"], test=case["name"], ok=ok,
                     seconds=r.get("seconds"), launches=r.get("launches"))

    def judge(self, case, r, child):
        lab = self.lab
        if not r.get("ok"):
            return False, f"your function raised {r.get('error')}:\n{r.get('message', '')}"
        if lab.KIND == "numeric":
            exp = self.expected(case)
            return compare_number(r.get("value"), exp, rtol=lab.RTOL, what=case["name"])
        notes = []
        if r.get("launches", 1) == 0:
            return False, ("your function launched no CUDA kernel: the lab asks for the work to be "
                           "done by a Numba CUDA kernel on the GPU")
        try:
            got = child.read_npy(r["files"][lab.OUTPUT])
        except (KeyError, OSError, ValueError) as e:
            return False, f"the grader could not read your output back ({e})"
        ok, msg = compare_array(got, self.expected(case), rtol=lab.RTOL, atol=lab.ATOL,
                                dtype_name=lab.DTYPE, what=lab.OUTPUT, shape_hint=lab.describe(case))
        if r.get("returned") and r["returned"] != "the output array":
            notes.append(f"your function returned a new {r['returned']}; the grader reads the "
                         f"`{lab.OUTPUT}` array it passed in, so write your result there")
        if r.get("modified_inputs"):
            ok = False
            notes.append(f"your function changed its input(s) {', '.join(r['modified_inputs'])}: "
                         "inputs must be left as they were (the next layer reads them)")
        return ok, msg + ("".join("\n" + n for n in notes))

    def run_timing(self, child, result, gpu):
        lab, perf = self.lab, self.perf
        pts = perf["points"]
        p = {"name": "performance", "max_score": pts, "score": 0, "visibility": "visible"}
        result["tests"].append(p)
        if not all(t["score"] == t["max_score"] for t in result["tests"][:-1]):
            p["output"] = "not measured: performance points need every correctness test to pass"
            result["performance"] = {"status": "skipped: correctness"}
            return
        seed = self.secret["timing_seed"]
        cases = [lab.timing_case(self.simulated, seed), lab.timing_case(self.simulated, seed + 7919)]
        msg = {"cmd": "time_prepare", "function": lab.FUNCTION, "sets": [self.kernel_args(c) for c in cases]}
        lock = self.gpu_locks[gpu]
        held = False
        try:
            with lock.shared():  # generation and upload: GPU copies, not a timing window
                r = child.request(self.limits.get("test_s", 60) * 2, **msg)
            if r.get("ok"):
                lock.acquire()  # the GPU alone from here to the last timed call
                held = True
                r = child.request(self.limits.get("test_s", 60) * 2, cmd="time_warm",
                                  bytes=lab.min_bytes(cases[0]), flops=lab.flops(cases[0]))
            if not r.get("ok"):
                p["output"] = f"timing setup failed: your function raised {r.get('error')}: {r.get('message', '')}"
                return
            rng = np.random.default_rng(secrets.randbits(32))
            per, windows = self.clocked(child, perf.get("window_s", 0.3), rng)
            # Proof of work: one more call on each input set, each followed by a sample of the
            # output at positions drawn now. A kernel that skips or caches work it has seen
            # before leaves the other set's result behind and fails here.
            verified = True
            for start, case in enumerate(cases):
                size = int(np.prod(lab.out_spec(case)["shape"]))
                pos = np.sort(rng.choice(size, size=min(size, 65536), replace=False))
                g = child.request(120, cmd="go", reps=1, start=start)
                s = child.request(120, cmd="sample", name=lab.OUTPUT, positions=pos.tolist())
                got = child.read_npy(s["file"]) if g.get("ok") and s.get("ok") else None
                exp = self._timing_expected(case).reshape(-1)[pos]
                verified &= got is not None and compare_array(
                    got, exp, rtol=lab.RTOL, atol=lab.ATOL, dtype_name=lab.DTYPE)[0]
        except ChildError as e:
            p["output"] = self._child_problem(e, child, "timing")
            return
        finally:
            if held:
                lock.release()
        info = {"per_rep_s": per, "windows": windows, "event_timing": r.get("event_timing"),
                "bytes": lab.min_bytes(cases[0]), "flops": lab.flops(cases[0]),
                "shape": lab.describe(cases[0]), "verified": bool(verified)}
        info["bandwidth"] = info["bytes"] / per
        info["flops_per_s"] = info["flops"] / per
        tamper = [f["what"] for f in result["flags"] if f["level"] == "tamper"]
        if self.simulated:
            info["flags"] = [] if verified else [UNVERIFIED]
            info["status"] = "simulator wall time (test mode): not a performance measurement"
            p["output"] = (NOT_MEASURED_NO_GPU + f"; simulator wall time {per:.4g} s per call recorded"
                           + ("" if verified else "\nFLAGGED: " + UNVERIFIED))
            result["performance"] = info
            self.log(kind="timing", id=result["id"], **info)
            return
        if gpu not in self.reference:
            p["output"] = ("not measured: the reference could not be measured on this GPU "
                           f"({getattr(self, 'reference_error', 'unknown error')})")
            result["performance"] = info
            return
        ref = self.reference[gpu]
        info["reference"] = {k: ref[k] for k in ("reference_s", "reference_bandwidth", "copy_bandwidth",
                                                  "reference_flops_per_s", "device")}
        ev = (r.get("event_timing") or {}).get("median_s")
        score = score_performance(lab.PERF_METRIC, perf, per_s=per, bandwidth=info["bandwidth"],
                                  reference_s=ref["reference_s"], copy_bandwidth=ref["copy_bandwidth"],
                                  verified=verified, event_s=ev, tamper=tamper)
        info.update(score)
        peak = (ref.get("device") or {}).get("peak_bandwidth")
        info["fraction_of_peak"] = info["bandwidth"] / peak if peak else None
        p["score"] = score["points"]
        zero, full = perf["zero_at"], perf["full_at"]
        unit = (f"{info['bandwidth'] / 1e12:.3f} TB/s effective" if lab.PERF_METRIC == "bandwidth"
                else f"{info['flops_per_s'] / 1e12:.2f} TFLOP/s")
        p["output"] = (f"{unit} on {lab.describe(cases[0])}: {score['fraction']:.1%} of the reference "
                       f"measured on this GPU in this run"
                       + (f", {info['fraction_of_peak']:.1%} of theoretical peak bandwidth"
                          if info["fraction_of_peak"] and lab.PERF_METRIC == "bandwidth" else "")
                       + f"; {p['score']}/{pts} points (0 at {zero:.0%}, full at {full:.0%})")
        if score["flags"]:
            p["output"] += "\nFLAGGED: " + "\nFLAGGED: ".join(score["flags"])
        if score["notes"]:
            p["output"] += "\nNOTE: " + "\nNOTE: ".join(score["notes"])
        result["performance"] = info
        self.log(kind="timing", id=result["id"], **info)

    def _timing_expected(self, case):
        key = ("timing", case["seed"])
        if key not in self._expected:
            ins = {n: generate(s) for n, s in self.lab.input_specs(case).items()}
            self._expected[key] = self.lab.reference(ins)
        return self._expected[key]

    def finish(self, result, sub_dir: Path, t_start: float) -> dict:
        result["execution_time"] = time.time() - t_start
        if result["status"] == "unreadable" or not result["tests"]:
            for case in self.cases:
                result["tests"].append({"name": case["name"], "max_score": case["points"], "score": 0,
                                        "visibility": "visible", "output": "not run: "
                                        + next(iter(result["problems"].values()), "no result")})
            if self.perf:
                result["tests"].append({"name": "performance", "score": 0, "visibility": "visible",
                                        "max_score": 0 if self.simulated else self.perf["points"],
                                        "output": NOT_MEASURED_NO_GPU if self.simulated else "not run"})
        if self.perf and self.simulated:  # nothing to earn where nothing can be timed
            for t in result["tests"]:
                if t["name"] == "performance":
                    t["max_score"], t["score"] = 0, 0
                    if not t.get("output", "").startswith(NOT_MEASURED_NO_GPU):
                        t["output"] = NOT_MEASURED_NO_GPU
        if self.perf and not any(t["name"] == "performance" for t in result["tests"]):
            result["tests"].append({"name": "performance", "max_score": 0 if self.simulated else self.perf["points"], "score": 0,
                                    "visibility": "visible",
                                    "output": NOT_MEASURED_NO_GPU if self.simulated else "not measured"})
        result["score"] = round(sum(t["score"] for t in result["tests"]), 2)
        result["max_score"] = sum(t["max_score"] for t in result["tests"])
        from .export import feedback_markdown, gradescope_json

        _atomic_write(sub_dir / "feedback.md", feedback_markdown(result, self))
        _atomic_write(sub_dir / "results.json", json.dumps(gradescope_json(result), indent=1))
        self.log(kind="result", id=result["id"], score=result["score"], max_score=result["max_score"],
                 status=result["status"], flags=[f["what"] for f in result["flags"]])
        self.say(f"{result['id']}: {result['score']}/{result['max_score']} ({result['status']}, "
                 f"{result['execution_time']:.1f} s)")
        return result

    # -- the whole class
    def grade(self, submissions, shard=(0, 1), regrade=False) -> list[dict]:
        subs = collect(submissions)
        subs = [s for i, s in enumerate(subs) if i % shard[1] == shard[0]]
        self.submission_dirs = sorted({str(p.resolve().parent) for _, p in subs})
        todo = [(i, sid, p) for i, (sid, p) in enumerate(subs)
                if regrade or not (self.out / sid / "results.json").exists()]
        skipped = len(subs) - len(todo)
        self.say(f"{self.lab_name}: {len(subs)} submission(s), {skipped} already graded in {self.out} "
                 f"(skipped), {'simulator' if self.simulated else f'{self.gpus} GPU(s)'}")
        self.log(kind="run", simulated=self.simulated, gpus=self.gpus, submissions=len(subs),
                 todo=len(todo), shard=list(shard), python=sys.version.split()[0])
        if todo and not self.simulated:
            self.calibrate_sandbox()
        if todo and self.perf and (not self.simulated or self.sim_timing):
            seed = self.secret["timing_seed"]  # float64 references of the timed shapes, once, up front
            for c in (self.lab.timing_case(self.simulated, seed), self.lab.timing_case(self.simulated, seed + 7919)):
                self._timing_expected(c)
        if todo and self.perf and not self.simulated:
            for g in range(self.gpus):
                try:
                    self.reference[g] = self.measure_reference(g)
                except Exception as e:  # correctness is still graded; performance says why not
                    self.reference_error = f"{type(e).__name__}: {e}"[:500]
                    self.log(kind="reference", gpu=g, error=self.reference_error)
                    self.say(f"[gpu {g}] reference FAILED: {self.reference_error}")
        with ThreadPoolExecutor(max_workers=self.workers) as ex:
            list(ex.map(lambda a: self._safe_grade(*a), todo))
        write_grades_csv(self.out, self.lab_name)
        return [json.loads((self.out / sid / "results.json").read_text()) for sid, _ in subs
                if (self.out / sid / "results.json").exists()]

    def _safe_grade(self, i, sid, p):
        r = self.grade_one(i, sid, p)
        write_grades_csv(self.out, self.lab_name)  # after each one: a killed run loses nothing
        return r


UNVERIFIED = ("the timed calls did not leave the right result in the output: the kernel skipped or "
              "cached work while being timed")


def score_performance(metric, perf, *, per_s, bandwidth, reference_s, copy_bandwidth, verified,
                      event_s=None, tamper=()):
    """Points from the grader's own timing. Flags (any one gives 0 points): output not verified
    after the timed calls; faster than physically possible (bandwidth above physical_limit x the
    device-copy bandwidth measured in this run; for GEMMs, above physical_limit x cuBLAS); the
    child's own CUDA-event time far below the grader's clock; tamper patterns in the source."""
    frac = reference_s / per_s
    flags = []
    if not verified:
        flags.append(UNVERIFIED)
    if metric == "bandwidth" and bandwidth > perf["physical_limit"] * copy_bandwidth:
        flags.append(f"faster than physically possible: {bandwidth / 1e12:.2f} TB/s effective is above "
                     f"{perf['physical_limit']}x the device-copy bandwidth measured in this run "
                     f"({copy_bandwidth / 1e12:.2f} TB/s)")
    if metric == "flops" and frac > perf["physical_limit"]:
        flags.append(f"faster than plausible: {frac:.2f}x the strict-f32 cuBLAS reference "
                     f"(limit {perf['physical_limit']}x)")
    notes = []
    if event_s and event_s < 0.85 * per_s:
        # a note, not a penalty: host work inside the function (printing, Python loops) also
        # does this, and the score already rests on the grader's clock
        notes.append(f"the CUDA-event time measured inside the submission's process "
                     f"({event_s * 1e6:.1f} us) is far below the grader's own clock ({per_s * 1e6:.1f} us): "
                     "host-side work in the function, or a tampered timer (the grader's clock counts)")
    if tamper:
        flags.append("performance points withheld pending review: " + "; ".join(tamper))
    zero, full = perf["zero_at"], perf["full_at"]
    pts = 0.0 if flags else perf["points"] * min(1.0, max(0.0, (frac - zero) / (full - zero)))
    return {"fraction": frac, "points": round(pts, 2), "flags": flags, "notes": notes}


class GpuLock:
    """One per GPU. Timing windows take it exclusively; every other moment a submission's code
    can touch the GPU (its cells, its tests, uploading timing inputs) takes it shared. A waiting
    timer goes first, so a stream of correctness tests cannot starve it, and a kernel that hangs
    in a test delays the next timing instead of distorting it."""

    def __init__(self):
        self._c = threading.Condition()
        self._readers = 0
        self._writer = False
        self._waiting = 0

    @contextlib.contextmanager
    def shared(self):
        with self._c:
            while self._writer or self._waiting:
                self._c.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._c:
                self._readers -= 1
                self._c.notify_all()

    def acquire(self):
        with self._c:
            self._waiting += 1
            while self._writer or self._readers:
                self._c.wait()
            self._waiting -= 1
            self._writer = True

    def release(self):
        with self._c:
            self._writer = False
            self._c.notify_all()


class _NullLock:
    def acquire(self):
        return True

    def release(self):
        pass

    @contextlib.contextmanager
    def shared(self):
        yield

    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


_csv_lock = threading.Lock()


def write_grades_csv(out: Path, lab: str) -> Path:
    """grades.csv from every DIR/<id>/results.json (so it is always complete and consistent)."""
    rows, names = [], []
    for rj in sorted(Path(out).glob("*/results.json")):
        try:
            r = json.loads(rj.read_text())
        except (OSError, ValueError):
            continue
        meta = r.get("extra_data", {})
        if meta.get("lab") != lab:
            continue
        row = {"id": meta.get("id", rj.parent.name), "total": r.get("score"),
               "max": meta.get("max_score"), "status": meta.get("status"),
               "flags": " | ".join(meta.get("flags", []))}
        for t in r.get("tests", []):
            row[t["name"]] = t["score"]
            if t["name"] not in names:
                names.append(t["name"])
        rows.append(row)
    path = Path(out) / "grades.csv"
    with _csv_lock:
        tmp = path.with_name(f"grades.csv.tmp{os.getpid()}")
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=["id", "total", "max", *names, "status", "flags"])
            w.writeheader()
            for row in rows:
                w.writerow(row)
        os.replace(tmp, path)
    return path


def main(args) -> int:
    lab = _labs.resolve(args.lab)
    simulated = detect_simulated(args.simulator)
    run = Run(lab, Path(args.out), rubric_path=args.rubric, simulated=simulated, gpus=args.gpus,
              workers=args.workers, sim_timing=args.sim_timing, isolate=not args.no_isolation,
              quiet=args.quiet)
    results = run.grade(args.submissions, shard=parse_shard(args.shard), regrade=args.regrade)
    total = sum(r["score"] for r in results)
    print(f"wrote {run.out / 'grades.csv'} ({len(results)} graded, mean "
          f"{total / max(1, len(results)):.2f}/{results[0]['extra_data']['max_score'] if results else 0})")
    return 0
