"""Deterministic lab inputs from a small spec: the grader and the sandboxed child both call
:func:`generate`, so the child needs the seed, never the grader's arrays or references."""

from __future__ import annotations

import numpy as np


def generate(spec: dict) -> np.ndarray:
    """``spec``: {"shape": [...], "dtype": "float32"|"float16", "seed": int, "scale": float,
    "shift": float}. Uniform values with standard deviation ``scale`` (uniform, not normal:
    several times faster to draw, which matters for the GPU timing shapes of ~10^8 elements),
    never all zeros (zeros hide unwritten outputs)."""
    shape = tuple(int(s) for s in spec["shape"])
    rng = np.random.default_rng(int(spec["seed"]))
    a = rng.random(size=shape, dtype=np.float32)
    a -= np.float32(0.5)
    a *= np.float32(2.0 * 3.0 ** 0.5 * spec.get("scale", 1.0))
    if spec.get("shift"):
        a += np.float32(spec["shift"])
    return a.astype(spec.get("dtype", "float32"), copy=False)


# --------------------------------------------------------------------------- guard zones
# Every array the grader hands a submission (inputs, outputs; the replay's scratch) is the
# middle of a larger allocation: ``guard`` elements before and after it, poisoned. A store
# past the end of ``out`` (or before its start) lands in a guard zone instead of in another
# array, on a GPU and in the simulator alike (book/simulator/addressing.py addresses a simulated
# kernel's arrays as the GPU does), and the grader finds it there after the call. The output's
# guards hold a NaN with a payload no arithmetic produces (a kernel's NaN is the canonical
# one), so any store changes them; the inputs' guards hold the canonical NaN, so a load past
# an input's end gives NaN and a wrong value, and a kernel copying it into an output's guard
# is still seen. A guard is a whole number of 256-byte units (cudaMalloc's alignment), so the
# array keeps the alignment it would have alone (lab 3's 16-byte packed loads, lab 5's
# cp.async) and the master takes the same path as without guards.
GUARD_ALIGN_BYTES = 256
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
OUTPUT_GUARD_BITS = {1: 0xA5, 2: 0x7DA5, 4: 0x7FA5A5A5, 8: 0x7FF4A5A5A5A5A5A5}


def guard_elems(shape, dtype, tile) -> int:
    """Elements of each guard zone of an array of ``shape``: room for a whole tile row of the
    lab's largest tile, ``tile = (rows, cols)``: ``rows`` rows of the array (its last
    dimension; 1 for a 1-D array) plus ``cols`` elements, rounded up to GUARD_ALIGN_BYTES."""
    rows, cols = (int(t) for t in tile)
    last = int(shape[-1]) if len(shape) > 1 else 1
    per = max(1, GUARD_ALIGN_BYTES // np.dtype(dtype).itemsize)
    return -(-(rows * last + cols) // per) * per


def guard_bits(dtype, role: str) -> int:
    """The bit pattern a guard zone holds: ``role`` "out" (the output's payload NaN) or "in"
    (an input's: NaN, as a load of it computes)."""
    dt = np.dtype(dtype)
    if role == "in" and dt.kind == "f":
        return int(np.array(np.nan, dtype=dt).view(_UINT[dt.itemsize]))
    return OUTPUT_GUARD_BITS[dt.itemsize]


def guarded(body: np.ndarray, guard: int, role: str) -> np.ndarray:
    """A flat host array: ``guard`` poisoned elements, ``body`` (flattened, C order), ``guard``
    more. The submission is given the middle, reshaped to ``body``'s shape."""
    body = np.ascontiguousarray(body)
    flat = np.empty(body.size + 2 * guard, dtype=body.dtype)
    bits = flat.view(_UINT[body.dtype.itemsize])
    bits[:guard] = bits[body.size + guard:] = guard_bits(body.dtype, role)
    flat[guard:guard + body.size] = body.reshape(-1)
    return flat


def unguarded(flat: np.ndarray, shape, guard: int) -> np.ndarray:
    """The array a submission was given, out of the flat allocation ``guarded`` made."""
    n = int(np.prod(shape, dtype=np.int64))
    if flat.ndim != 1 or flat.size != n + 2 * guard:
        raise ValueError(f"expected {n + 2 * guard} elements ({n} and two guard zones of "
                         f"{guard}), got {flat.size}")
    return flat[guard:guard + n].reshape(tuple(shape))


def guard_damage(flat: np.ndarray, guard: int, role: str) -> dict:
    """What was written into the guard zones of a flat allocation: {"before": [count, first
    flat index], "after": [count, first flat index]}, flat indices counted from the array's
    first element (negative before it), in memory order; {} when both are intact."""
    if guard <= 0:
        return {}
    bits = flat.view(_UINT[flat.dtype.itemsize])
    want = guard_bits(flat.dtype, role)
    n = flat.size - 2 * guard
    out = {}
    hit = np.flatnonzero(bits[:guard] != want)
    if hit.size:
        out["before"] = [int(hit.size), int(hit[0]) - guard]
    hit = np.flatnonzero(bits[guard + n:] != want)
    if hit.size:
        out["after"] = [int(hit.size), n + int(hit[0])]
    return out
