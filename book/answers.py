"""How a result is compared with its float64 reference and said: the one answer checker.

A chapter's checked exercise (:mod:`book.exercises`), a lab's ``check()`` in the student's
notebook and the grader (``autograder``: each case's verdict, the timing's fresh call, the GPU
replay process) all compare here, so a wrong array or number is said in the same words
wherever it is found. It lives in ``book`` because ``book`` may not import ``autograder``
(tests/tooling/test_structure.py), while the grader imports ``book``.

- :func:`within`: the tolerance test, element by element: ``|got - expected| <= atol + rtol *
  |expected|`` for a finite ``expected``; an infinite one takes only the same infinity. A NaN
  never matches, not even a NaN in the reference: outputs start as NaN poison, so a NaN read
  back cannot be told from an element never written. NumPy arrays, torch tensors (the replay
  process checks on the GPU) and numbers.
- :func:`compare_array`: an output array against its reference: its shape, its dtype, how many
  elements are off, how many still hold the NaN poison (and the first of them, where that is not
  the first bad index), the first bad index with expected and got, the tolerance.
- :func:`compare_number`: a lab's numeric (or one-word) answer, with :func:`how_far` it is.
- :func:`how_far`: too high or too low, by how many percent or by what factor (exact when the
  factor is a whole number), the words a chapter's :class:`~book.exercises.Number` says too;
  :func:`prefix_apart`: whether that factor is a unit prefix (1,000 or 1,024 and their powers).
- :func:`guard_message`, :func:`guard_notes`: stores outside an array (the grader's guard zones,
  and ``check()``'s in the simulator), said the same way by every grader.

Only arrays and numbers come in, never a student's objects: the grader calls this in its
trusted process. Tests: tests/library/test_answers.py.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["within", "compare_array", "compare_number", "how_far", "factor_apart",
           "prefix_apart", "number_text", "percent_text", "factor_text", "guard_message",
           "guard_notes"]


def within(got, expected, *, rtol, atol):
    """True where ``got`` is within ``atol + rtol * |expected|`` of ``expected`` (element by
    element for arrays and tensors, a bool-like for numbers). An infinite ``expected`` takes
    only itself: its tolerance would be infinite, so that any finite value (or the other
    infinity) would pass, and ``inf - inf`` is NaN, which fails every tolerance, so the same
    infinity is matched as equal. A NaN matches nothing. Written with ``abs`` and operators
    only, so that torch tensors (the replay process, on the GPU) go through it too."""
    with np.errstate(invalid="ignore", over="ignore"):   # inf - inf, as above
        finite = abs(expected) < math.inf                 # False for NaN and both infinities
        return (got == expected) | (finite & (abs(got - expected) <= atol + rtol * abs(expected)))


def compare_array(got, expected, *, rtol: float, atol: float, dtype_name: str,
                  what: str = "out", shape_hint: str = "") -> tuple[bool, str]:
    """(ok, message). ``got`` holds what the kernel wrote into an output filled with NaN before
    the call; ``expected`` the float64 reference; ``shape_hint`` names the case ("for ...")."""
    got = np.asarray(got)
    expected = np.asarray(expected, dtype=np.float64)
    where = f" for {shape_hint}" if shape_hint else ""
    if got.shape != expected.shape:
        return False, (f"`{what}` has shape {got.shape}, expected {expected.shape}{where}")
    if got.dtype != np.dtype(dtype_name):
        return False, (f"`{what}` has dtype {got.dtype}, expected {dtype_name}{where}: "
                       "write into the `out` array you are given, do not allocate a new one")
    g = got.astype(np.float64)
    bad = ~within(g, expected, rtol=rtol, atol=atol)
    if not bad.any():
        return True, f"`{what}` correct{where} (rtol={rtol:g}, atol={atol:g})"
    unwritten = np.isnan(g) & ~np.isnan(expected)
    n_bad, n_unw = int(bad.sum()), int(unwritten.sum())
    idx = _first(bad)
    msg = (f"`{what}` wrong{where}: {n_bad} of {bad.size} elements off")
    if n_unw:
        msg += f", {n_unw} never written"
        first = _first(unwritten)
        if first != idx:   # the first bad index below is a wrong value: say where the gap starts
            msg += f", the first at index {first}"
        # "put there before the call": the grader, check() and an exercise all poison `out`
        msg += (" (the NaN poison put there before the call is still there: check your grid "
                "covers every element and your bounds test)")
        if n_unw == bad.size:   # said as what was seen: no store reached `out` in this call
            msg += ("; nothing was written at all in this call: no store reached `out` (a kernel "
                    "not launched on it, a grid of no blocks, or a test every thread failed, such "
                    "as a count left over from an earlier call)")
    msg += (f"; first bad index {idx}: expected {expected[idx]:.6g}, got {g[idx]:.6g} "
            f"(tolerance |got-expected| <= {atol:g} + {rtol:g}*|expected|)")
    return False, msg


def _first(mask) -> tuple[int, ...]:
    """The index (a tuple, as NumPy prints it) of the first True of ``mask``, in memory order."""
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(mask)[0]), mask.shape))


def compare_number(got, expected, *, rtol: float = 1e-6, what: str = "answer") -> tuple[bool, str]:
    """(ok, message) for a lab's answer: a number within ``rtol`` of ``expected``, or the word
    ``expected`` (any case, spaces around it ignored). A wrong number is told the expected value
    and :func:`how_far` it is."""
    if isinstance(expected, str):
        ok = isinstance(got, str) and got.strip().lower() == expected
        return ok, (f"{what}: correct" if ok else f"{what}: expected {expected!r}, got {got!r}")
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return False, f"{what}: expected a number, got {type(got).__name__} {got!r}"
    if not math.isfinite(got):
        return False, f"{what}: expected {expected:.6g}, got {got!r}"
    if within(got, expected, rtol=rtol, atol=0.0):
        return True, f"{what}: correct"
    msg = f"{what}: expected {expected:.6g}, got {got:.6g}: {how_far(got, expected)}"
    far = factor_apart(got, expected)
    prefix = prefix_apart(far)
    if prefix:
        msg += f" ({prefix} away: check the units)"
    elif far is not None and _whole(far):   # a count off by whole bytes per element, say
        msg += " (a whole factor: check the units and the bytes per element)"
    return False, msg


# -- how far a number is from the truth: a lab's check and a chapter's Number say it alike ------
def number_text(x: float) -> str:
    """A number as a reader writes it: thousands separators, three significant figures."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return f"{x:.3g}"
    return f"{x:,.3g}" if abs(x) >= 1000 else f"{x:.3g}"


def percent_text(p: float) -> str:
    """A percentage to two significant figures: 2.3%, 12%, 0.16%."""
    return f"{float(f'{p:.2g}'):g}%"


def factor_text(f: float) -> str:
    """A factor (1.5 or more) to two significant figures: 1.9, 12, 1,000, 10^6."""
    if f >= 1e6:
        return f"10^{round(math.log10(f))}"
    return number_text(float(f"{f:.2g}"))


def factor_apart(got: float, expected: float) -> float | None:
    """How many times larger the larger of the two is (1 or more); None when one is zero or
    their signs differ (no factor says that)."""
    if expected == 0 or got == 0 or (got > 0) != (expected > 0):
        return None
    ratio = abs(got / expected)
    return max(ratio, 1 / ratio)


def _whole(far: float) -> bool:
    """A factor that is a whole number (2, 4, 1,000) to rounding, not 1."""
    return round(far) != 1 and abs(far - round(far)) < 1e-9 * far


def how_far(got: float, expected: float, *, small=number_text) -> str:
    """``got`` against ``expected``: "2.3% too low", "too high, by a factor of 8" (a whole
    factor is said exactly), "too low, by a factor of about 2.3", or "too high (check the sign
    and the units)" where no factor says it. Close (within a factor of 1.5) it is said in
    percent, as "a factor of 1.02" says nothing; a miss under 0.1% by the difference itself,
    written by ``small`` (a chapter's exercise adds its unit)."""
    side = "too high" if got > expected else "too low"
    far = factor_apart(got, expected)
    if far is None:
        return f"{side} (check the sign and the units)"
    if far < 1.5:
        p = 100 * abs(got - expected) / abs(expected)
        return f"{percent_text(p) if p >= 0.1 else small(abs(got - expected))} {side}"
    # a whole factor in full (1,024 is not "1,000"), any other to two figures
    said = number_text(round(far)) if _whole(far) and far < 1e6 else (
        factor_text(far) if _whole(far) else f"about {factor_text(far)}")
    return f"{side}, by a factor of {said}"


def prefix_apart(far: float | None) -> str:
    """"a decimal prefix (k, M, G)" or "a binary prefix (Ki, Mi, Gi)" when the factor ``far``
    (:func:`factor_apart`) is within 1% of a power of 1,000 or of 1,024: a unit prefix, not a
    wrong count; "" otherwise."""
    if far is None or far < 1.5:
        return ""
    fits = [(abs(far / base ** round(math.log(far, base)) - 1), what) for base, what in
            ((1000, "a decimal prefix (k, M, G)"), (1024, "a binary prefix (Ki, Mi, Gi)"))
            if round(math.log(far, base)) >= 1]
    return min(fits)[1] if fits and min(fits)[0] < 0.01 else ""


# -- stores outside an array ---------------------------------------------------------------------
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
