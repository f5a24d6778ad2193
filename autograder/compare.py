"""Compare a result with a float64 reference and say exactly what is wrong.

Shared by the student's ``check(...)`` and the instructor's ``grade``: the same words
in both places. Runs in the trusted process only (it never sees the student's objects,
only arrays and numbers they produced).
"""

from __future__ import annotations

import math

import numpy as np


def compare_array(got, expected, *, rtol: float, atol: float, dtype_name: str,
                  what: str = "out", shape_hint: str = "") -> tuple[bool, str]:
    """(ok, message). ``got`` holds what the kernel wrote into a NaN-poisoned output."""
    got = np.asarray(got)
    expected = np.asarray(expected, dtype=np.float64)
    where = f" for {shape_hint}" if shape_hint else ""
    if got.shape != expected.shape:
        return False, (f"`{what}` has shape {got.shape}, expected {expected.shape}{where}")
    if got.dtype != np.dtype(dtype_name):
        return False, (f"`{what}` has dtype {got.dtype}, expected {dtype_name}{where}: "
                       "write into the `out` array you are given, do not allocate a new one")
    g = got.astype(np.float64)
    unwritten = np.isnan(g) & ~np.isnan(expected)
    with np.errstate(invalid="ignore"):
        bad = ~(np.abs(g - expected) <= atol + rtol * np.abs(expected))
    if not bad.any():
        return True, f"`{what}` correct{where} (rtol={rtol:g}, atol={atol:g})"
    n_bad, n_unw = int(bad.sum()), int(unwritten.sum())
    idx = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape))
    msg = (f"`{what}` wrong{where}: {n_bad} of {bad.size} elements off")
    if n_unw:
        msg += (f", {n_unw} never written (the NaN poison the grader put there is still "
                "there: check your grid covers every element and your bounds test)")
        if n_unw == bad.size:   # said as what was seen: no store reached `out` in this call
            msg += ("; nothing was written at all in this call: no store reached `out` (a kernel "
                    "not launched on it, a grid of no blocks, or a test every thread failed, such "
                    "as a count left over from an earlier call)")
    msg += (f"; first bad index {idx}: expected {expected[idx]:.6g}, got {g[idx]:.6g} "
            f"(tolerance |got-expected| <= {atol:g} + {rtol:g}*|expected|)")
    return False, msg


def compare_number(got, expected, *, rtol: float = 1e-6, what: str = "answer") -> tuple[bool, str]:
    if isinstance(expected, str):
        ok = isinstance(got, str) and got.strip().lower() == expected
        return ok, (f"{what}: correct" if ok else f"{what}: expected {expected!r}, got {got!r}")
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False, f"{what}: expected a number, got {type(got).__name__} {got!r}"
    if not math.isfinite(got):
        return False, f"{what}: expected {expected:.6g}, got {got!r}"
    ok = abs(got - expected) <= rtol * max(abs(expected), 1e-300)
    if ok:
        return True, f"{what}: correct"
    hint = ""
    if expected and got and abs(got / expected - round(got / expected)) < 1e-9 and round(got / expected) != 1:
        hint = f" (off by a factor of {got / expected:g}: check units and bytes per element)"
    return False, f"{what}: expected {expected:.6g}, got {got:.6g}{hint}"


def guard_message(what: str, damage: dict, size: int) -> str:
    """Stores outside an array, in the words every grader uses (the GPU grader, the
    simulator, ``check()``, Gradescope): ``damage`` is ``autograder.inputs.guard_damage``'s
    finding for the array named ``what`` of ``size`` elements."""
    parts = []
    for side, where in (("after", "past the end of"), ("before", "before the start of")):
        if side in damage:
            n, first = damage[side]
            parts.append(f"wrote {n} element{'' if n == 1 else 's'} {where} `{what}`, the "
                         f"first at flat index {first}")
    return ("; ".join(parts) + f" (`{what}` has {size} elements, flat indices 0 to {size - 1}"
            "): check the bounds test of every store; on a GPU such a store overwrites "
            "whatever lies beside the array (in a model, another tensor), so this case fails")


def guard_notes(found) -> str:
    """The lines a case's message gets for stores outside its arrays ("" when there were
    none): ``found`` is [(name, damage, size)]. Any such line fails the case; the grader and
    ``check()`` append them after the comparison's message, so both say the same."""
    return "".join("\n" + guard_message(name, damage, size) for name, damage, size in found
                   if damage)
