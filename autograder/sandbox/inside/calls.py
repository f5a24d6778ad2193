"""One test in the child: the grader's inputs built between guard zones (from seeds: the child
never gets the grader's arrays), the student's function called once with its launches
recorded, and what came back written for the grader to read and judge; the sandbox's probe
kernel. Imported after the child's path is set (numpy, numba.cuda, book)."""

from __future__ import annotations

import os
import time

import numpy as np
from numba import cuda

from ...inputs import generate, guard_damage, guarded
from . import launches
from .launches import recorded_call
from .permissions import open_for_grader


def device_args(args):
    """Build device arrays: inputs from specs, outputs poisoned with NaN, each the middle of
    an allocation with a guard zone before and after it (autograder.inputs.guarded: ``guard``
    elements, as the grader says). Returns the arrays the function gets, the inputs' host
    copies, the outputs, and {name: (whole allocation, guard)}."""
    built, host_in, outs, whole = [], {}, {}, {}
    for a in args:
        if a["role"] not in ("in", "out"):
            built.append(a["value"])
            continue
        if a["role"] == "in":
            h = host_in[a["name"]] = generate(a["spec"])
        else:
            h = np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"])
        g = int(a.get("guard", 0))
        flat = cuda.to_device(guarded(h, g, a["role"]))
        d = flat[g:g + h.size].reshape(h.shape)
        whole[a["name"]] = (flat, g)
        if a["role"] == "out":
            outs[a["name"]] = d
        built.append(d)
    return built, host_in, outs, whole


def run_test(fns, msg, workdir: str) -> dict:
    """One test: the student's function called on the grader's inputs (a numeric lab: its
    value); the outputs (guard zones included), what the call did to its inputs and their
    guards, the recording, the shapes of its launches; with ``repeat`` (a list of argument
    lists, each with new seeds), called again on the same arrays for each, new contents in
    the inputs and ``out`` poisoned again, every call's output written for the grader to
    judge; and with ``again`` a second call on new contents (the timing call's cache check)."""
    fn = fns[msg["function"]]
    if msg["kind"] == "numeric":
        t0 = time.perf_counter()
        value = fn(*[a["value"] for a in msg["args"]])
        if hasattr(value, "item") and getattr(value, "size", 2) == 1:
            value = value.item()
        if not isinstance(value, (int, float, str, bool, type(None))):
            value = repr(value)[:200]
        return {"ok": True, "value": value, "seconds": time.perf_counter() - t0}
    built, host_in, outs, whole = device_args(msg["args"])
    cuda.synchronize()
    before = launches.LAUNCHES[0]
    t0 = time.perf_counter()
    with launches.watching_hazards(msg["args"], built) as watched:   # simulator: book.simulator.hazard_recorder
        ret, rec = recorded_call(fn, msg, built, whole, workdir)
    dt = time.perf_counter() - t0
    shapes = launches.launch_shapes()
    first = _after_call(msg["id"], msg["args"], built, host_in, outs, whole, workdir,
                        launches.LAUNCHES[0] - before)
    returned = None
    if ret is not None:
        returned = "the output array" if any(ret is d for d in outs.values()) else type(ret).__name__
    repeats = [_repeat(fn, msg["id"], k, args, built, outs, whole, workdir)
               for k, args in enumerate(msg.get("repeat") or (), start=2)]
    again = None
    if msg.get("again"):  # the same array objects, new contents: a fresh answer is due
        again = _call_again(fn, msg, built, outs, workdir)
    return dict(first, ok=True, returned=returned, seconds=dt, recording=rec, again=again,
                launch_shapes=shapes, repeats=repeats, hazards=watched.hazards,
                hazard_notes=watched.notes)


def _after_call(tid, args, built, host_in, outs, whole, workdir, launched, tag="") -> dict:
    """What one call left: each output's whole allocation written for the grader (it checks
    the guard zones itself), the inputs it changed and the guards of the inputs it wrote."""
    files = {}
    for name in outs:
        path = os.path.join(workdir, f"out_{tid}{tag}_{name}.npy")
        with open_for_grader(path) as f:   # np.save to a file object adds no suffix
            np.save(f, whole[name][0].copy_to_host())
        files[name] = os.path.basename(path)
    modified, input_guards = [], {}
    for a, d in zip(args, built):
        if a["role"] != "in":
            continue
        flat, g = whole[a["name"]]
        host = flat.copy_to_host()
        if not np.array_equal(host[g:g + d.size].reshape(d.shape), host_in[a["name"]], equal_nan=True):
            modified.append(a["name"])
        damage = guard_damage(host, g, "in")
        if damage:
            input_guards[a["name"]] = [damage, int(d.size)]
    return {"files": files, "launches": launched, "modified_inputs": modified,
            "input_guards": input_guards}


def _repeat(fn, tid, k, args, built, outs, whole, workdir) -> dict:
    """Call ``k`` of a test: the same array objects, new contents in every input (from
    ``args``' seeds, written into the arrays the function already had) and ``out`` poisoned
    with NaN again. A function that kept state from the earlier call (a split-K counter left
    non-zero, a result cached by shape or by array) gets it wrong here. A call that raises is
    said as that call's failure."""
    host_in = {}
    for a, d in zip(args, built):
        if a["role"] == "in":
            host_in[a["name"]] = generate(a["spec"])
            d.copy_to_device(host_in[a["name"]])
        elif a["role"] == "out":
            d.copy_to_device(np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"]))
    cuda.synchronize()
    before = launches.LAUNCHES[0]
    try:   # not watched for hazards: the recorder's verdict is the same on every call (it
        #    reads the order of accesses, not a schedule), and the first call's is taken
        fn(*built)
        cuda.synchronize()
    except Exception as e:  # this call's own failure: the grader says which call raised
        return {"ok": False, "call": k, "error": type(e).__name__, "message": str(e)[:2000]}
    said = _after_call(tid, args, built, host_in, outs, whole, workdir,
                       launches.LAUNCHES[0] - before, tag=f"_call{k}")
    return dict(said, ok=True, call=k)


def _call_again(fn, msg, built, outs, workdir):
    for a, d in zip(msg["again"], built):
        if a["role"] == "in":
            d.copy_to_device(generate(a["spec"]))
        elif a["role"] == "out":
            d.copy_to_device(np.full(tuple(a["shape"]), np.nan, dtype=a["dtype"]))
    cuda.synchronize()
    fn(*built)
    cuda.synchronize()
    name = next(a["name"] for a in msg["again"] if a["role"] == "out")
    pos = np.asarray(msg["again_positions"], dtype=np.int64)
    path = os.path.join(workdir, f"again_{msg['id']}.npy")
    with open_for_grader(path) as f:
        np.save(f, outs[name].copy_to_host().reshape(-1)[pos])
    return os.path.basename(path)


def probe() -> dict:
    """The grader's calibration: can this sandbox run a kernel? (and as which uid)"""
    @cuda.jit
    def inc(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] += 1

    d = cuda.to_device(np.arange(64, dtype=np.float32))
    inc[1, 64](d)
    ok = bool((d.copy_to_host() == np.arange(64) + 1).all())
    return {"ok": ok, "uid": os.getuid()}
