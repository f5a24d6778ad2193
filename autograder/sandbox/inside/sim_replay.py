"""The simulator's replay of a recording, in a fresh child that loaded the notebook (its
kernels) but never calls the student's function: only the recorded launches, found among the
kernels the cells made (launches.SIM_KERNELS), on inputs the grader named. The grader's
judge asks for it (autograder/judge.py, replay_in_simulator) to prove the kernels did the work.
Imported after the child's path is set (numpy, numba.cuda, book)."""

from __future__ import annotations

import json
import os
import time

import numpy as np
from numba import cuda

from book.numba_compat import sim_array_class

from ...inputs import generate, guarded
from . import launches
from .launches import array_of


def replay_sim(msg, workdir: str) -> dict:
    """The simulator's replay: launch only the recorded kernels (found by their code, among
    the kernels the notebook's cells created) on fresh inputs the grader named; the student's
    function is never called. Writes the output for the grader to compare."""
    with open(os.path.join(msg["recording_dir"], "launches.json")) as f:
        rec = json.load(f)
    if rec.get("error"):   # nothing was replayed: no verdict either way
        return {"ok": False, "error": "ReplayError", "unverifiable": True,
                "message": f"the launches could not be recorded in the simulator: {rec['error']}"}
    if not rec["launches"]:
        return {"ok": False, "error": "ReplayError", "message": "your function launched no CUDA kernel"}
    bufs = {}   # name -> (the allocation, the byte where the recorded offsets count from)
    for a in msg["args"]:   # inputs and the output between guard zones, as in the test
        if a["role"] not in ("in", "out"):
            continue
        h = generate(a["spec"]) if a["role"] == "in" else \
            np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"])
        g = int(a.get("guard", 0))
        bufs[a["name"]] = (cuda.to_device(guarded(h, g, a["role"])), g * h.dtype.itemsize)
    for s in rec["scratch"]:   # each allocation as it was at its first use, as raw bytes
        raw = open(os.path.join(msg["recording_dir"], s["file"]), "rb").read()
        bufs[s["name"]] = (cuda.to_device(np.frombuffer(raw, dtype=np.uint8).copy()), 0)
    reps = int(msg.get("reps", 1))
    t0 = time.perf_counter()
    for _ in range(reps):
        for L in rec["launches"]:
            made = launches.SIM_KERNELS.get(tuple(L["code"]), [])
            nth = int(L.get("nth", 0))
            if nth >= len(made):   # made inside the function: this child never calls it
                return {"ok": False, "error": "ReplayError", "unverifiable": True,
                        "message": f"the kernel `{L['code'][2]}` (defined at {L['code'][0]} line "
                                   f"{L['code'][1]}) is created inside your function, not when the "
                                   "notebook's cells run: the simulator can only replay kernels "
                                   "made at the top level"}
            k = made[nth]
            args = []
            for p in L["params"]:
                if p["t"] == "arr":
                    base, start = bufs[p["buf"]]
                    base = array_of(base)
                    dt = np.dtype(p["dtype"])
                    view = np.ndarray(tuple(p["shape"]), dtype=dt, buffer=base.reshape(-1).view(np.uint8),
                                      offset=start + p["off"], strides=tuple(p["strides"]))
                    args.append(_wrap_sim(view))
                elif p["t"].startswith("np:"):
                    args.append(np.dtype(p["t"][3:]).type(p["v"]))
                else:
                    args.append(p["v"])
            k[tuple(L["grid"]), tuple(L["block"]), 0, L["shmem"]](*args)
    dt = time.perf_counter() - t0
    out = next(a["name"] for a in msg["args"] if a["role"] == "out")
    path = os.path.join(workdir, "replay_out.npy")
    np.save(path, array_of(bufs[out][0]).copy())   # guard zones included: the grader checks them
    return {"ok": True, "file": "replay_out.npy", "launches": len(rec["launches"]), "seconds": dt}


def _wrap_sim(view):
    return sim_array_class()(view)
