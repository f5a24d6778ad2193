"""Grade a class: ``python -m autograder grade LAB SUBMISSION... --out DIR``.

Each submission runs in its own sandboxed process (sandbox.py + driver.py). This process,
the trusted one, owns the rubric, the hidden cases (drawn from a secret seed kept in
DIR/.grader/), the float64 references, the comparison and the clock. See README.md for the
threat model.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import re
import secrets
import shutil
import statistics
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from . import labs as _labs
from .compare import compare_array
from .export import feedback_markdown, gradescope_json, write_grades_csv
from .rubric import UNVERIFIED, load_rubric, score_performance
from .sandbox import Child, ChildError
from .submission import SubmissionError, read_cells, scan
from .timing import RecordingError, ReplayServer, copy_recording, recording_summary

HERE = Path(__file__).resolve().parent
NOT_MEASURED_NO_GPU = "not measured: no GPU (kernels ran in Numba's CUDA simulator, which cannot time)"
# In the simulator each launch extends a test's deadline by this much per simulated thread
# (the simulator runs a few thousand threads a second), up to SIM_DEADLINE_CAP_S in all.
SIM_S_PER_THREAD = 1e-3
SIM_DEADLINE_CAP_S = 600
TIMING_SETS = 4          # input/output sets of a timing window: every call of a window on its own set
TIMING_WINDOWS = 10      # windows per replay request; three requests, windows pooled
STALE = ("called again on the same arrays with new contents, your function did not compute the new "
         "answer: it skipped or cached work it had seen (performance points need a function that "
         "computes every call)")
NOT_REPRODUCED = ("the kernels your function launched, replayed by the grader on fresh inputs without "
                  "calling your function, did not compute the answer. Correctness points need the work "
                  "done by kernels: a result computed on the host and copied into `out` earns nothing")


# --------------------------------------------------------------------------- config
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
        self.lab = _labs.Lab(self.lab_name)
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
        self.secret = self._secret()
        self.limits = self.rubric.get("limits", {})
        self.perf = self.rubric.get("performance")
        self._build_cases()
        self.reference = {}
        self.drop_uid = True
        self.sandbox_note = None
        self.servers = {}
        self._active, self._active_lock = 0, threading.Lock()
        self.server_locks = [threading.Lock() for _ in range(self.gpus)]
        self.hidden_visibility = self.rubric["correctness"]["hidden_visibility"]
        self.scratch = self.out / ".grader" / "recordings"

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
        rng = np.random.default_rng(self.secret["hidden_seed"])
        rub = self.rubric["correctness"]
        self.cases = self.lab.cases(rng, self.simulated, rub)
        for i, c in enumerate(self.cases):
            c["id"] = f"t{i}"
            c["points"] = rub["public_points"] if c["visibility"] == "public" else rub["hidden_points"]
        self._expected = {}

    def expected(self, case):
        if case["id"] not in self._expected:
            self._expected[case["id"]] = self.lab.reference(case)
        return self._expected[case["id"]]

    def functions(self):
        return self.lab.functions

    def test_message(self, case):
        return {"cmd": "test", "id": case["id"], "kind": "kernel" if self.lab.kernel else "numeric",
                "function": self.lab.function_of(case), "args": self.kernel_args(case)}

    def kernel_args(self, case):
        return self.lab.args(case)

    def timing_cases(self):
        seed = self.secret["timing_seed"]
        return [self.lab.timing_case(self.simulated, seed + 7919 * k) for k in range(TIMING_SETS)]

    def server(self, gpu: int) -> ReplayServer:
        """The trusted replay process of one GPU (autograder/replay.py), started on first use."""
        if gpu not in self.servers:
            srv = ReplayServer(gpu, self.lab_name, self.timing_cases(), self.log)
            srv.start()
            self.servers[gpu] = srv
        return self.servers[gpu]

    def measure_reference(self, gpu: int):
        """The lab's reference and a device copy, timed by the replay process exactly as a
        submission's replay is (CUDA events, one call per input set in each window)."""
        lab = self.lab
        with self.server_locks[gpu]:
            srv = self.server(gpu)
            r = srv.request(600, cmd="reference", windows=6 * TIMING_WINDOWS)
        if not r.get("ok"):
            raise ChildError("reference failed", r.get("message", ""))
        case = self.timing_cases()[0]
        t_ref = r["reference_s"]
        ref = {"gpu": gpu, "case": case, "device": r.get("device"), "method": r.get("method"),
               "reference_s": t_ref, "reference_windows": r["reference_windows"],
               "reference_bandwidth": lab.min_bytes(case) / t_ref,
               "reference_flops_per_s": lab.flops(case) / t_ref,
               "copy_bandwidth": r["copy_bandwidth"], "copy_windows": r["copy_windows"],
               "reference_impl": (lab.make_reference_runner.__doc__ or "").strip().split("\n")[0]}
        self.log(kind="reference", **ref)
        for w in r.get("discarded_windows", []):
            self.log(kind="window_discarded", id="(reference)", gpu=gpu, **w)
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
        result["_cells"] = cells
        child = None
        try:
            child = Child(mode="student", functions=self.functions(), cells=cells,
                          simulated=self.simulated, gpu=gpu if not self.simulated else None,
                          limits=self._child_limits(), hide=self._hide_paths(),
                          isolate=self.isolate, drop_uid=self.drop_uid)
            try:
                ev = child.recv(self.limits.get("load_s", 120))  # Python, numba, book: no student code yet
                if ev.get("event") == "ready":
                    # timing happens later, from the recording, with no submission alive
                    ev = self.ask(child, self.limits.get("load_s", 120), cmd="load")
                    self._loaded(ev, result)
                    if ev.get("event") == "loaded":
                        self.run_tests(child, result)
                        self.prove_kernels(child, result, cells, gpu)
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
                self._confirm_gone(child, result, gpu)
                result["output"] = child.output_text()
                if "public_output_len" in result:
                    result["public_output_len"] = min(result["public_output_len"], len(result["output"]))
                result["output_bytes"] = child.output_total
                result["rss_peak_mib"] = child.rss_peak >> 20
        result["_t_start"] = t_start
        if "_timing" in result:  # phase 2 scores it; kept on disk so a killed run loses nothing
            result.pop("_replies", None)
            result.pop("_cells", None)
            _atomic_write(sub_dir / "pending.json", json.dumps(result, default=str))
            return result
        return self.finish(result, sub_dir, t_start)

    def _confirm_gone(self, child, result, gpu):
        """After a submission: nothing of it alive (/proc, the sandbox's survivors()) and, on a
        GPU, nothing of it holding the GPU (NVML, gpuwatch). Logged; a breach is named."""
        after = {}
        try:
            after["survivors"] = [str(x) for x in child.survivors()]
        except AttributeError:
            after["survivors"] = "not checked: this sandbox has no survivors()"
        if not self.simulated:
            from . import gpuwatch

            if gpuwatch.available():
                t0 = time.monotonic()  # a killed process's context takes a moment to leave NVML's list
                while True:
                    left = [str(x) for x in child.gpu_leftovers()]
                    if not left or time.monotonic() - t0 > 5:
                        break
                    time.sleep(0.25)
                after["gpu_leftovers"] = left
                after["gpu_check_s"] = round(time.monotonic() - t0, 2)
            else:
                after["gpu_leftovers"] = f"not checked: {gpuwatch.unavailable_reason()}"
        try:
            after["sandbox"] = child.report()
        except AttributeError:
            pass
        result["after_exit"] = after
        self.log(kind="after_exit", id=result["id"], gpu=gpu, **after)
        left = [x for k in ("survivors", "gpu_leftovers") if isinstance(after.get(k), list) for x in after[k]]
        if left:
            result["problems"]["containment"] = ("processes of this submission outlived it: "
                                                 + "; ".join(left)[:600])

    def _loaded(self, ev, result):
        result["isolation"] = ev.get("isolation")
        result["cell_errors"] = ev.get("cell_errors", [])
        result["problems"].update(ev.get("problems", {}))

    def _child_limits(self):
        lim = {"cpu_s": int(self.limits.get("cpu_s", 600))}
        if "mem_mib" in self.limits:
            lim["mem_bytes"] = int(self.limits["mem_mib"]) << 20
        if "gpu_mem_mib" in self.limits:  # the GPU memory budget (default: a share of the device)
            lim["gpu_mem_bytes"] = int(self.limits["gpu_mem_mib"]) << 20
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

    def ask(self, child, timeout: float, **msg) -> dict:
        """One request to a student child. In the simulator the child announces each launch
        with its number of threads; the deadline grows with it (the simulator's speed is not
        the student's), up to SIM_DEADLINE_CAP_S."""
        child.send(**msg)
        t0 = time.monotonic()
        deadline, cap = t0 + timeout, t0 + max(timeout, SIM_DEADLINE_CAP_S)
        threads = 0
        while True:
            try:
                ev = child.recv(max(0.05, deadline - time.monotonic()))
            except ChildError as e:
                if e.reason == "timeout":
                    what = (f"; a simulated launch of {threads:,} threads was running" if threads else "")
                    raise ChildError("timeout", f"no answer within {time.monotonic() - t0:.0f} s{what}")
                raise
            if ev.get("event") == "launch" and self.simulated:
                threads = int(ev.get("threads", 0))
                deadline = min(cap, max(deadline, time.monotonic() + timeout) + threads * SIM_S_PER_THREAD)
                continue
            return ev

    def run_tests(self, child, result):
        dead = None
        result["_replies"] = {}
        for case in self.cases:
            hidden = case["visibility"] == "hidden"
            if hidden and "public_output_len" not in result:
                time.sleep(0.05)  # let the output drain catch up with what the public cases printed
                result["public_output_len"] = len(child.output)
            t = {"name": case["name"], "max_score": case["points"], "score": 0, "hidden": hidden,
                 "visibility": self.hidden_visibility if hidden else "visible"}
            result["tests"].append(t)
            fn = self.lab.function_of(case)
            if fn in result["problems"]:
                t["output"] = result["problems"][fn]
                continue
            if dead:
                t["output"] = f"not run: {dead}"
                continue
            try:
                r = self.ask(child, self.limits.get("test_s", 60), **self.test_message(case))
            except ChildError as e:
                t["output"] = self._child_problem(e, child, f"running test '{case['name']}'")
                dead = f"an earlier test ('{case['name']}') stopped the process"
                continue
            if r.get("too_large"):
                t["output"] = too_large_message(r["too_large"])
                result["status"] = "needs a GPU"
                result["problems"]["simulator"] = t["output"]
                dead = "the simulator cannot run this submission's launches (see above)"
                continue
            ok, msg = self.judge(case, r, child)
            if not ok and "OUT_OF_MEMORY" in msg.upper().replace(" ", "_") and self._active > 1:
                result["_oom"] = f"test '{case['name']}': {msg[:300]}"
            t["output"] = msg
            t["score"] = case["points"] if ok else 0
            result["_replies"][case["id"]] = (case, r, ok)
            if r.get("cuda_error"):
                dead = (f"a CUDA error in test '{case['name']}' (e.g. an illegal memory access) "
                        "leaves the GPU context unusable for the rest of this submission")
            self.log(kind="test", id=result["id"], test=case["name"], ok=ok, hidden=hidden,
                     seconds=r.get("seconds"), launches=r.get("launches"), message=msg[:2000])

    def judge(self, case, r, child):
        lab = self.lab
        if not r.get("ok"):
            return False, f"your function raised {r.get('error')}:\n{r.get('message', '')}"
        if not lab.kernel:
            return lab.check(r.get("value"), case, self.expected(case))
        notes = []
        if r.get("launches", 1) == 0:
            return False, ("your function launched no CUDA kernel: the lab asks for the work to be "
                           "done by a Numba CUDA kernel on the GPU")
        try:
            got = child.read_npy(r["files"][lab.OUTPUT])
        except (KeyError, OSError, ValueError) as e:
            return False, f"the grader could not read your output back ({e})"
        ok, msg = lab.check(got, case, self.expected(case))
        if r.get("returned") and r["returned"] != "the output array":
            notes.append(f"your function returned a new {r['returned']}; the grader reads the "
                         f"`{lab.OUTPUT}` array it passed in, so write your result there")
        if r.get("modified_inputs"):
            ok = False
            notes.append(f"your function changed its input(s) {', '.join(r['modified_inputs'])}: "
                         "inputs must be left as they were (the next layer reads them)")
        return ok, msg + ("".join("\n" + n for n in notes))

    # -- correctness needs kernels: replay the recorded launches on fresh inputs
    def prove_kernels(self, child, result, cells, gpu):
        """The launches recorded during the largest passing kernel test are replayed on fresh
        inputs of the same shape (another seed), without calling the student's function: on a
        GPU by the trusted replay process, in the simulator by a fresh sandboxed child that
        only launches the recorded kernels. If they do not reproduce the answer, every
        correctness point is withdrawn."""
        if not self.lab.kernel:
            return
        passed = [(c, r) for c, r, ok in result.get("_replies", {}).values() if ok]
        if not passed:
            return
        case, r = max(passed, key=lambda cr: self.lab.out_size(cr[0]))
        fresh = dict(case, seed=int(case["seed"]) * 7 + 123457, id=case["id"] + "_replay")
        proof = {"case": case["name"]}
        try:
            folder = copy_recording(child.workdir, r.get("recording", ""), self._rec_dir(result, "proof"))
            proof.update(recording_summary(folder))
            if self.simulated:
                ok, msg = self._replay_sim(folder, fresh, cells)
            else:
                with self.server_locks[gpu]:
                    rr = self.server(gpu).request(self.limits.get("test_s", 60) * 4, cmd="check",
                                                  dir=str(folder), case=fresh)
                ok, msg = bool(rr.get("reproduced")), rr.get("message", "")
                if not rr.get("ok"):
                    ok, msg = False, f"{rr.get('error')}: {rr.get('message', '')}"
        except (RecordingError, ChildError) as e:
            ok, msg = False, str(getattr(e, "detail", "") or e)
        proof.update(reproduced=ok, message=msg[:1000])
        result["kernel_proof"] = proof
        self.log(kind="kernel_proof", id=result["id"], **proof)
        if ok:
            return
        note = NOT_REPRODUCED + ("" if case["visibility"] == "hidden" else f" ({msg.strip()[:600]})")
        for t in result["tests"]:
            if t["score"] > 0 and t["name"] != "performance":
                t["score"] = 0
                t["output"] = t.get("output", "") + "\n" + note
        result["problems"]["kernels"] = note

    def _rec_dir(self, result, what):
        d = self.scratch / f"{result['id']}-{what}"
        shutil.rmtree(d, ignore_errors=True)
        return d

    def _replay_sim(self, folder, case, cells):
        """A fresh sandboxed child loads the notebook (its kernels), then launches only the
        recorded kernels on inputs it generates from the fresh case: never the function."""
        child = Child(mode="student", functions=self.functions(), cells=cells, simulated=True,
                      limits=self._child_limits(), hide=self._hide_paths(), isolate=self.isolate,
                      drop_uid=self.drop_uid)
        try:
            dest = child.workdir / "recording"
            shutil.copytree(folder, dest)
            for q in [dest, *dest.iterdir()]:
                os.chmod(q, 0o755 if q.is_dir() else 0o644)
            ev = child.recv(self.limits.get("load_s", 120))
            if ev.get("event") == "ready":
                ev = self.ask(child, self.limits.get("load_s", 120), cmd="load")
            if ev.get("event") != "loaded":
                return False, f"the notebook could not be loaded again for the replay: {str(ev)[:300]}"
            r = self.ask(child, self.limits.get("test_s", 60), cmd="replay", recording_dir=str(dest),
                         args=self.kernel_args(case))
            if not r.get("ok"):
                return False, f"{r.get('error')}: {r.get('message', '')}"
            got = child.read_npy(r["file"])
        except ChildError as e:
            return False, self._child_problem(e, child, "replaying your kernels")
        finally:
            child.close()
        return self.lab.check(got, case, self._expected_for(case))

    def _expected_for(self, case, cache=False):
        key = ("case", case["seed"], self.lab.describe(case))
        if key in self._expected:
            return self._expected[key]
        ref = self.lab.reference(case)
        if cache:
            with self.log_lock:
                self._expected[key] = ref
        return ref

    # -- performance: the recorded launches, replayed and timed by the trusted process
    def run_timing(self, child, result, gpu):
        lab, perf = self.lab, self.perf
        pts = perf["points"]
        p = {"name": "performance", "max_score": pts, "score": 0, "visibility": "visible"}
        result["tests"].append(p)
        if not all(t["score"] == t["max_score"] for t in result["tests"][:-1]):
            p["output"] = "not measured: performance points need every correctness test to pass"
            result["performance"] = {"status": "skipped: correctness"}
            return
        case = dict(self.timing_cases()[0], id="timing")
        case2 = self.timing_cases()[1]
        size = int(np.prod(lab.out_spec(case2)["shape"]))
        pos = np.sort(np.random.default_rng(secrets.randbits(32)).choice(size, min(size, 65536), replace=False))
        try:
            r = self.ask(child, self.limits.get("test_s", 60) * 2, **self.test_message(case),
                         again=self.kernel_args(case2), again_positions=pos.tolist())
            if not r.get("ok"):
                p["output"] = (f"timing setup failed: your function raised {r.get('error')}: "
                               f"{r.get('message', '')}")
                return
            folder = copy_recording(child.workdir, r.get("recording", ""), self._rec_dir(result, "timing"))
        except ChildError as e:
            p["output"] = self._child_problem(e, child, "recording the launches to time")
            return
        except RecordingError as e:
            p["output"] = f"not measured: {e}"
            return
        info = {"recording": recording_summary(folder), "shape": lab.describe(case),
                "bytes": lab.min_bytes(case), "flops": lab.flops(case)}
        # the function itself, called again on the same arrays with new contents, must give the
        # new answer: a function that caches by array identity is wrong (and is flagged)
        try:
            got = child.read_npy(r["again"]) if r.get("again") else None
        except (OSError, ValueError):
            got = None
        exp = self._expected_for(case2, cache=True).reshape(-1)[pos]
        info["fresh_call_ok"] = bool(got is not None and compare_array(
            got, exp, rtol=lab.RTOL, atol=lab.ATOL, dtype_name=lab.DTYPE)[0])
        if self.simulated:  # --sim-timing: the recording is replayed (correctness only), nothing timed
            ok, msg = self._replay_sim(folder, case, result.get("_cells"))
            ok_all = ok and info["fresh_call_ok"]
            info.update(verified=ok_all, method="replay in a fresh simulator child (not timed)",
                        launches_per_call=info["recording"]["launches"],
                        flags=([] if ok else [UNVERIFIED]) + ([] if info["fresh_call_ok"] else [STALE]),
                        status="simulator (test mode): not a performance measurement")
            p["output"] = NOT_MEASURED_NO_GPU + "".join("\nFLAGGED: " + f for f in info["flags"])
            result["performance"] = info
            self.log(kind="timing", id=result["id"], **info)
            return
        # on a GPU the recording is timed later, when no submission's process is alive (grade())
        result["_timing"] = {"folder": str(folder), "info": info, "gpu": gpu}

    def time_pending(self, result):
        """Phase 2 of a GPU run: time a recording with the trusted replay process while no
        submission's process exists, then score it."""
        lab, perf = self.lab, self.perf
        pts = perf["points"]
        pend = result.pop("_timing")
        gpu, folder, info = pend["gpu"], Path(pend["folder"]), pend["info"]
        p = next(t for t in result["tests"] if t["name"] == "performance")
        case = self.timing_cases()[0]
        timed = self.replay_timed(result, gpu, folder)
        info.update(timed)
        if not timed.get("ok"):
            p["output"] = f"not measured: {timed.get('message')}"
            if timed.get("hang"):
                p["output"] = (f"0 points: the recorded launches did not finish on the GPU within "
                               f"{timed.get('limit_s', 0):.0f} s when the grader replayed them (a hang); "
                               "the replay was stopped")
            result["performance"] = info
            self.log(kind="timing", id=result["id"], **info)
            return
        per = timed["per_call_s"]
        info["per_rep_s"] = per
        info["bandwidth"] = info["bytes"] / per
        info["flops_per_s"] = info["flops"] / per
        if gpu not in self.reference:
            p["output"] = ("not measured: the reference could not be measured on this GPU "
                           f"({getattr(self, 'reference_error', 'unknown error')})")
            result["performance"] = info
            return
        ref = self.reference[gpu]
        info["reference"] = {k: ref[k] for k in ("reference_s", "reference_bandwidth", "copy_bandwidth",
                                                  "reference_flops_per_s", "device")}
        score = score_performance(lab.PERF_METRIC, perf, per_s=per, bandwidth=info["bandwidth"],
                                  reference_s=ref["reference_s"], copy_bandwidth=ref["copy_bandwidth"],
                                  verified=timed["verified"])
        if not info.get("fresh_call_ok", True):
            score["flags"].append(STALE)
            score["points"] = 0.0
        info.update(score)
        peak = (ref.get("device") or {}).get("peak_bandwidth")
        info["fraction_of_peak"] = info["bandwidth"] / peak if peak else None
        p["score"] = score["points"]
        zero, full = perf["zero_at"], perf["full_at"]
        unit = (f"{info['bandwidth'] / 1e12:.3f} TB/s effective" if lab.PERF_METRIC == "bandwidth"
                else f"{info['flops_per_s'] / 1e12:.2f} TFLOP/s")
        p["output"] = (f"{unit} on {lab.describe(case)}: {score['fraction']:.1%} of the reference "
                       f"measured on this GPU in this run"
                       + (f", {info['fraction_of_peak']:.1%} of theoretical peak bandwidth"
                          if info["fraction_of_peak"] and lab.PERF_METRIC == "bandwidth" else "")
                       + f"; {p['score']}/{pts} points (0 at {zero:.0%}, full at {full:.0%}). Timed by the "
                       f"grader replaying the {timed['launches_per_call']} launch(es) your function made, "
                       "on its own inputs, in its own process")
        if score["flags"]:
            p["output"] += "\nFLAGGED: " + "\nFLAGGED: ".join(score["flags"])
        result["performance"] = info
        self.log(kind="timing", id=result["id"], **info)

    def replay_timed(self, result, gpu, folder) -> dict:
        """Three replay requests of TIMING_WINDOWS windows each, made when no submission's process
        is alive. Before and after each, NVML must show no process but the replay process holding
        the GPU; a request that overlapped a foreign process is discarded, logged in
        measurements.jsonl and repeated (at most 3 times, then kept and said so)."""
        limit = float(self.limits.get("replay_s", 60))
        windows, verified, discarded, launches = [], True, 0, None
        rng = np.random.default_rng(secrets.randbits(32))
        with self.server_locks[gpu]:
            srv = self.server(gpu)
            done = 0
            while done < 3:
                before = gpu_foreign(gpu, {srv.pid})
                r = srv.request(limit, cmd="time", dir=str(folder), windows=TIMING_WINDOWS,
                                start=int(rng.integers(0, TIMING_SETS)))
                if not r.get("ok"):
                    return {"ok": False, "message": f"{r.get('error')}: {r.get('message', '')}"[:1500],
                            "hang": r.get("error") == "timeout", "limit_s": limit}
                after = gpu_foreign(gpu, {srv.pid})
                for w in r.get("discarded_windows", []):  # the replay process's own per-window check
                    self.log(kind="window_discarded", id=result["id"], gpu=gpu, **w)
                if (before or after) and discarded < 3:
                    discarded += 1
                    self.log(kind="window_discarded", id=result["id"], gpu=gpu, foreign_before=before,
                             foreign_after=after, windows=r["windows"])
                    continue
                windows += r["windows"]
                verified &= bool(r["verified"])
                launches = r["launches_per_call"]
                done += 1
        per = statistics.median(w["per_call_s"] for w in windows)
        self.log(kind="timing_windows", id=result["id"], gpu=gpu, windows=windows, discarded=discarded)
        return {"ok": True, "per_call_s": per, "verified": verified, "windows": len(windows),
                "discarded_requests": discarded, "launches_per_call": launches,
                "method": "trusted replay of the recorded launches, CUDA events"}

    def finish(self, result, sub_dir: Path, t_start: float) -> dict:
        result["execution_time"] = time.time() - result.pop("_t_start", t_start)
        if result["status"] == "unreadable" or not result["tests"]:
            for case in self.cases:
                hidden = case["visibility"] == "hidden"
                result["tests"].append({"name": case["name"], "max_score": case["points"], "score": 0,
                                        "hidden": hidden,
                                        "visibility": self.hidden_visibility if hidden else "visible",
                                        "output": "not run: "
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
        for private in ("_replies", "_cells", "_timing", "_oom"):
            result.pop(private, None)
        result["hidden_visibility"] = self.hidden_visibility
        _atomic_write(sub_dir / "feedback.md", feedback_markdown(result, self))
        _atomic_write(sub_dir / "results.json", json.dumps(gradescope_json(result), indent=1))
        (sub_dir / "pending.json").unlink(missing_ok=True)
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
        if todo and self.perf and not self.simulated:
            for g in range(self.gpus):
                try:
                    self.reference[g] = self.measure_reference(g)
                except Exception as e:  # correctness is still graded; performance says why not
                    self.reference_error = f"{type(e).__name__}: {e}"[:500]
                    self.log(kind="reference", gpu=g, error=self.reference_error)
                    self.say(f"[gpu {g}] reference FAILED: {self.reference_error}")
        pending = [a for a in todo if (self.out / a[1] / "pending.json").exists() and not regrade]
        fresh = [a for a in todo if a not in pending]
        try:
            with ThreadPoolExecutor(max_workers=self.workers) as ex:
                done = list(ex.map(lambda a: self._safe_grade(*a), fresh))
            # a test that ran out of GPU memory while others ran is graded again, alone
            again = [(a, r["_oom"]) for a, r in zip(fresh, done) if r.get("_oom") and self.workers > 1]
            for a, why in again:
                self.log(kind="oom_regrade", id=a[1], reason=why)
                self.say(f"{a[1]}: out of GPU memory while other submissions ran: graded again, alone")
                self._safe_grade(*a)
            # phase 2: every recording timed while no submission's process is alive
            for i, sid, _p in sorted(todo, key=lambda a: a[0]):
                pj = self.out / sid / "pending.json"
                if pj.exists():
                    result = json.loads(pj.read_text())
                    try:
                        self.time_pending(result)
                    except Exception as e:  # the grader's own bug: say so, keep the class going
                        result["problems"]["grader"] = f"timing: {type(e).__name__}: {e}"
                        result.pop("_timing", None)
                    self.finish(result, self.out / sid, time.time())
                    write_grades_csv(self.out, self.lab_name)
        finally:
            for srv in self.servers.values():
                srv.close()
        write_grades_csv(self.out, self.lab_name)
        return [json.loads((self.out / sid / "results.json").read_text()) for sid, _ in subs
                if (self.out / sid / "results.json").exists()]

    def _safe_grade(self, i, sid, p):
        with self._active_lock:
            self._active += 1
        try:
            r = self.grade_one(i, sid, p)
        finally:
            with self._active_lock:
                self._active -= 1
        write_grades_csv(self.out, self.lab_name)  # after each one: a killed run loses nothing
        return r


def too_large_message(what: str) -> str:
    return (f"not run in the simulator: {what} is too large to simulate (Numba's CUDA simulator runs a "
            "few thousand threads a second; the grader simulates at most 65,536 threads per launch). "
            "This says nothing about your code: grade this submission on a GPU (or size the grid "
            "to the data when you test in the simulator)")


def gpu_foreign(gpu: int, allowed: set) -> list:
    """Processes other than ``allowed`` doing work on the GPU, through NVML (autograder/gpuwatch.py);
    [] where NVML is not available (the simulator, or no driver library)."""
    try:
        from . import gpuwatch
    except ImportError:
        return []
    fn = getattr(gpuwatch, "foreign", None)
    if fn is None:
        return []
    try:
        return [dict(p) if isinstance(p, dict) else {"process": str(p)} for p in fn(gpu, allowed)]
    except Exception as e:  # noqa: BLE001  (NVML hiccup: say so, do not block grading)
        return [{"nvml_error": f"{type(e).__name__}: {e}"[:200]}]


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
