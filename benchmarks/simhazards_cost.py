"""What the simulator's hazard trace (book/simhazards.py) costs: a lab master's call on a case,
as ``check()`` and the grader make it (``KernelLab.call_here``: the arrays between guard zones,
addressed as on a GPU), with the recorder on and off, in Numba's CUDA simulator on the CPU.

Record: `records/simulator/simhazards_cost.json`.

For each case the call runs ``--reps`` times each way, the two ways alternating; the record
keeps every run's CPU time of the process (the simulator's threads included: less disturbed by
other work on the machine than wall time, which is kept too), their minimum and median, the
ratio on over off, and the largest number of accesses one launch recorded (what
``simhazards.MAX_EVENTS`` caps). Cases: lab 2's and lab 6's public ones, lab 6 at a split-K
case (T = 4, d = 1096, h = 2: the master splits each row over two blocks in the simulator),
lab 4's first public one and lab 4 at the size of a hidden case the simulator draws. No GPU: it
forces the simulator.

    python3 benchmarks/simhazards_cost.py --out records/simulator/simhazards_cost.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPLIT = {"name": "split T=4 d=1096 h=2", "T": 4, "d": 1096, "h": 2, "seed": 3}
# the size of a hidden case the simulator draws for lab 4 (its shared-memory tiles: the most
# accesses per launch of the labs' masters, about a million)
LAB4_HIDDEN = {"name": "hidden-sized T=138 d=32 h=131", "T": 138, "d": 32, "h": 131, "seed": 5}


def cases():
    from autograder import labs

    out = []
    for lab in ("lab2_packed_swiglu", "lab6_decode_mlp_up"):
        out += [(lab, c) for c in labs.get(lab).public_cases]
    out.append(("lab6_decode_mlp_up", SPLIT))
    out.append(("lab4_dual_gemm", labs.get("lab4_dual_gemm").public_cases[0]))
    out.append(("lab4_dual_gemm", LAB4_HIDDEN))
    return out


def master(lab: str):
    from autograder import labs
    from tools.lab_ptx import master_cells

    ns = {"__name__": "__main__"}
    for cid, src in master_cells(lab):  # the master's code, without setup, checks, hidden tests
        exec(compile(src, f"<{lab} {cid}>", "exec"), ns)
    return ns[labs.get(lab).function]


def measure(lab: str, case: dict, reps: int) -> dict:
    from autograder import labs
    from book import simhazards

    spec, fn = labs.get(lab), master(lab)
    real = simhazards.recording
    biggest = [0]

    @contextlib.contextmanager
    def off(bodies=(), **limits):   # a recorder that records nothing
        yield simhazards.Recorder()

    end = simhazards.Recorder._end

    def counting_end(self):   # the accesses of each launch, before they are analysed
        if self._launch is not None:
            biggest[0] = max(biggest[0], len(self._launch["events"]))
        return end(self)

    simhazards.Recorder._end = counting_end
    runs = {"on": [], "off": []}
    try:
        spec.call_here(fn, case)   # warm: imports, first launches
        for _ in range(reps):
            for way in ("off", "on"):
                simhazards.recording = real if way == "on" else off
                c0, w0 = time.process_time(), time.perf_counter()
                got, note = spec.call_here(fn, case)
                runs[way].append({"cpu_s": time.process_time() - c0,
                                  "wall_s": time.perf_counter() - w0})
                ok, msg = spec.check(got, case)
                if not ok or note:
                    raise SystemExit(f"{lab} {case['name']} ({way}): {msg}{note}")
    finally:
        simhazards.recording = real
        simhazards.Recorder._end = end

    def summary(way, key):
        xs = [r[key] for r in runs[way]]
        return {"min": min(xs), "median": statistics.median(xs)}

    row = {"lab": lab, "case": case, "runs": runs, "events_per_launch_max": biggest[0]}
    for key in ("cpu_s", "wall_s"):
        on, off_ = summary("on", key), summary("off", key)
        row[key] = {"on": on, "off": off_, "ratio_min": on["min"] / off_["min"],
                    "ratio_median": on["median"] / off_["median"]}
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "records/simulator/simhazards_cost.json")
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    os.environ["BOOK_SIMULATOR"] = "1"
    os.environ.setdefault("BOOK_QUIET", "1")
    sys.path.insert(0, str(ROOT))
    import book  # noqa: F401  (the simulator, decided before numba.cuda is imported)
    from book.provenance import provenance

    rows = []
    for lab, case in cases():
        row = measure(lab, case, args.reps)
        rows.append(row)
        print(f"{lab} {case['name']}: cpu on/off {row['cpu_s']['ratio_median']:.2f}x (median), "
              f"{row['cpu_s']['ratio_min']:.2f}x (min); wall {row['wall_s']['ratio_median']:.2f}x;"
              f" {row['events_per_launch_max']:,} accesses in the largest launch", flush=True)
    record = {"provenance": provenance(" ".join(["python3", *sys.argv])),
              "cpus": os.cpu_count(), "load_average": list(os.getloadavg()), "rows": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
