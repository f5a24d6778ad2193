"""ISOLATION's one H100 call: NVML watch + PID namespace tests, then lab 3 master vs its control.

Writes records/isolation/ (isolation_pytest.txt, lab3_master_h100.json) into $OUT. The control,
build/isolation/lab3_master_2byte.ipynb, is `git show 6a4d149:solutions/lab3_half_precision.ipynb`
(git-ignored; the device machine has no .git). The recorded run was
`python3 build/isolation/h100_check.py`, when this script lived there.
"""
import json
import os
import statistics
import subprocess
import sys
import time

OUT = os.environ["OUT"]
CMD = "python3 benchmarks/isolation_h100_check.py"
t00 = time.time()

# 1. the isolation tests, GPU ones included (NVML is on this image)
# --noconftest: pytest's own process never imports book (no CUDA context of its own beside the
# submission's); tests/ on the path gives the test its tests/repo.py without the conftest
r = subprocess.run([sys.executable, "-m", "pytest", "tests/grader/test_isolation.py", "-v", "-rs",
                    "-p", "no:cacheprovider", "--noconftest"], capture_output=True, text=True, timeout=240,
                   env={**os.environ, "PYTHONPATH": os.pathsep.join(
                       filter(None, ["tests", os.environ.get("PYTHONPATH")]))})
open(f"{OUT}/isolation_pytest.txt", "w").write(r.stdout[-20000:] + r.stderr[-5000:])
print(r.stdout[-3500:], r.stderr[-1500:], flush=True)
from autograder import gpuwatch  # noqa: E402  (after the tests: see --noconftest above)
print("NVML:", gpuwatch.available(), gpuwatch.backend() if gpuwatch.available() else gpuwatch.unavailable_reason())
print("compute processes now:", gpuwatch.describe(gpuwatch.processes(0, max_age=0)), flush=True)
print(f"[{time.time() - t00:.0f} s]", flush=True)

# 2. lab 3: the master (16-byte packed) against its control (the 2-byte master of 6a4d149)
import book  # noqa: F401,E402  (GPU or simulator, before numba.cuda; after the tests)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from numba import cuda  # noqa: E402
from book.provenance import provenance  # noqa: E402

def load_cells(path):
    nb = json.load(open(path))
    ns = {}
    exec("\n".join("".join(c["source"]) for c in nb["cells"] if c.get("id") in ("lab3-02", "lab3-03")), ns)
    return ns["swiglu_clamped_fp16"]

M, F = 8192, 14336
fns = {"master_packed16": load_cells("solutions/lab3_half_precision.ipynb"),
       "control_2byte": load_cells("build/isolation/lab3_master_2byte.ipynb")}
rng = np.random.default_rng(0)
hsets = [tuple((rng.standard_normal((M, F)) * 6).astype(np.float16) for _ in range(2)) for _ in range(2)]
dsets = [(cuda.to_device(g), cuda.to_device(u), cuda.device_array((M, F), np.float16)) for g, u in hsets]

def ref64(g, u):
    g = np.minimum(g.astype(np.float64), 7.0)
    u = np.clip(u.astype(np.float64), -7.0, 7.0)
    return (u + 1) * g / (1 + np.exp(-1.702 * g))

def time_numba(fn, sets, reps=60, windows=5):
    for s in sets:
        fn(*s)
    cuda.synchronize()
    per = []
    for _ in range(windows):
        a, b = cuda.event(), cuda.event()
        a.record()
        for k in range(reps):
            fn(*sets[k % 2])
        b.record(); b.synchronize()
        per.append(cuda.event_elapsed_time(a, b) / 1e3 / reps)
    return statistics.median(per), per

def time_torch(sets, reps=60, windows=5):
    for a_, b_, c_ in sets:
        torch.add(a_, b_, out=c_)
    torch.cuda.synchronize()
    per = []
    for _ in range(windows):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for k in range(reps):
            x, y, z = sets[k % 2]
            torch.add(x, y, out=z)
        b.record(); b.synchronize()
        per.append(a.elapsed_time(b) / 1e3 / reps)
    return statistics.median(per), per

rows = {}
nbytes = 3 * M * F * 2
tsets = [tuple(torch.randn(M, F, device="cuda", dtype=torch.float16) for _ in range(2))
         + (torch.empty(M, F, device="cuda", dtype=torch.float16),) for _ in range(2)]
for rnd in range(2):   # interleaved: reference, master, control, twice
    t, w = time_torch(tsets)
    rows.setdefault("torch_add_fp16_reference", []).append({"s": t, "windows": w})
    for name, fn in fns.items():
        t, w = time_numba(fn, dsets)
        rows.setdefault(name, []).append({"s": t, "windows": w})
res = {}
for name, rs in rows.items():
    s = min(r["s"] for r in rs)   # best of the two rounds (each a median of 5 windows)
    res[name] = {"per_call_s": s, "bandwidth_TBps": nbytes / s / 1e12, "rounds": rs}
ref = res["torch_add_fp16_reference"]["per_call_s"]
for name in fns:
    res[name]["fraction_of_reference"] = ref / res[name]["per_call_s"]
    g, u = hsets[0]
    fns[name](cuda.to_device(g[:64]), cuda.to_device(u[:64]), o := cuda.device_array((64, F), np.float16))
    err = np.abs(o.copy_to_host().astype(np.float64) - ref64(g[:64], u[:64]))
    res[name]["max_abs_err_first_64_rows"] = float(err.max())
rec = {"what": "lab 3 master (16-byte packed loads/stores) against its control (2-byte loads, "
               "the master at 6a4d149) and the grader's reference (torch.add, three fp16 [M, F])",
       "shape": [M, F], "dtype": "float16", "min_bytes": nbytes,
       "method": "CUDA events around 60 back-to-back calls alternating 2 input sets, median of 5 windows, best of 2 interleaved rounds",
       "results": res, "provenance": provenance(CMD)}
json.dump(rec, open(f"{OUT}/lab3_master_h100.json", "w"), indent=1)
for name, r in res.items():
    print(f"{name:28s} {r['per_call_s'] * 1e6:8.1f} us  {r['bandwidth_TBps']:.3f} TB/s  "
          f"{r.get('fraction_of_reference', 1.0):.3f} of ref  err {r.get('max_abs_err_first_64_rows', 0):.2e}")
print(f"[{time.time() - t00:.0f} s]", flush=True)

# 3. the grader itself on the lab-3 master and the untouched lab (GRADER's pipeline as committed)
if os.environ.get("RUN_GRADE") != "1":
    print("leftover compute processes:", gpuwatch.describe(gpuwatch.processes(0, max_age=0)))
    sys.exit(0)
g = subprocess.run([sys.executable, "-m", "autograder", "grade", "lab3", "solutions/lab3_half_precision.ipynb",
                    "labs/lab3_half_precision.ipynb", "--out", "/tmp/g3"], capture_output=True, text=True, timeout=200)
print(g.stdout[-3000:], g.stderr[-2000:])
for f in ("grades.csv", "measurements.jsonl"):
    if os.path.exists(f"/tmp/g3/{f}"):
        subprocess.run(["cp", f"/tmp/g3/{f}", f"{OUT}/lab3_grade_{f}"])
if os.path.exists("/tmp/g3/solutions_lab3_half_precision/feedback.md"):
    subprocess.run(["cp", "/tmp/g3/solutions_lab3_half_precision/feedback.md", f"{OUT}/lab3_grade_master_feedback.md"])
print("leftover compute processes:", gpuwatch.describe(gpuwatch.processes(0, max_age=0)))
print(f"[{time.time() - t00:.0f} s]")
