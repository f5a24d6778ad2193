"""A number to predict (:class:`Number`), with the units a reader may type after it."""

from __future__ import annotations

import math
import numbers
import re

from ..answers import factor_apart, how_far, number_text, percent_text, prefix_apart, within
from .core import Exercise, Feedback

__all__ = ["Number"]


# -- units a reader may type after a number -----------------------------------------------
# Each unit is (family, size in the family's base unit). The course writes sizes with decimal
# prefixes (MB = 10^6 bytes, GB/s = 10^9 bytes/s) and caches with binary ones (50 MiB of L2):
# KB, MB, GB, TB are powers of 1000 and KiB, MiB, GiB, TiB powers of 1024, as in the text.
# Looked up with case and spaces ignored ("480mib", "12 US").
_UNITS: dict[str, tuple[str, float]] = {}
_ACCEPTED = {  # what the messages list, per family
    "bytes": "B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)",
    "bytes/s": "B/s, KB/s, MB/s, GB/s, TB/s (or KiB/s, MiB/s, GiB/s, TiB/s)",
    "s": "s, ms, µs (or us), ns",
    "flop/s": "FLOP/s, GFLOP/s, TFLOP/s, PFLOP/s (or GFLOPS, TFLOPS, ...)",
    "%": "%",
}
_EXAMPLE = {  # how a reader writes a unit: as text, `answer = "2 MiB"`
    "bytes": '`"0.5 KB"` or `"2 MiB"` (KB, MB, GB: powers of 1000; KiB, MiB, GiB: 1024)',
    "bytes/s": '`"900 GB/s"`', "s": '`"12 µs"` or `"0.5 ms"`',
    "flop/s": '`"900 GFLOP/s"`', "%": '`"3.5%"`'}


def _unit(family: str, size: float, *names: str) -> None:
    for name in names:
        key = _unit_key(name)
        _UNITS[key] = (family, size)
        if key.endswith("/s"):
            _UNITS[key[:-2] + "/sec"] = (family, size)


def _unit_key(text: str) -> str:
    return "".join(text.split()).lower()


_unit("bytes", 1, "B", "byte", "bytes")
_unit("bytes/s", 1, "B/s", "byte/s", "bytes/s")
for _k, (_d, _b, _dw, _bw) in enumerate([("K", "Ki", "kilo", "kibi"), ("M", "Mi", "mega", "mebi"),
                                         ("G", "Gi", "giga", "gibi"), ("T", "Ti", "tera", "tebi")],
                                        1):
    _unit("bytes", 1000 ** _k, f"{_d}B", f"{_dw}byte", f"{_dw}bytes")
    _unit("bytes", 1024 ** _k, f"{_b}B", f"{_bw}byte", f"{_bw}bytes")
    _unit("bytes/s", 1000 ** _k, f"{_d}B/s")
    _unit("bytes/s", 1024 ** _k, f"{_b}B/s")
_unit("s", 1, "s", "sec", "secs", "second", "seconds")
_unit("s", 1e-3, "ms", "msec", "millisecond", "milliseconds")
_unit("s", 1e-6, "us", "µs", "μs", "usec", "microsecond", "microseconds")  # micro sign, mu
_unit("s", 1e-9, "ns", "nsec", "nanosecond", "nanoseconds")
for _p, _size in [("", 1), ("G", 1e9), ("T", 1e12), ("P", 1e15)]:
    _unit("flop/s", _size, f"{_p}FLOP/s", f"{_p}FLOPS")
_unit("%", 1, "%", "percent", "per cent")
#: a byte unit and its twin with the other prefix (KB and KiB), for "did you mean ...?"
_TWIN = {}
for _d in ("KB", "MB", "GB", "TB", "KB/s", "MB/s", "GB/s", "TB/s"):
    _b = _d[0] + "i" + _d[1:]
    _TWIN[_unit_key(_d)], _TWIN[_unit_key(_b)] = _b, _d
del _k, _d, _b, _dw, _bw, _p, _size

_NUMBER = re.compile(r"([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?)\s*(.*)", re.I | re.S)


class Number(Exercise):
    """A number to predict: right within ``rel`` (relative) or ``abs_tol`` of ``truth``.

    ``mistakes``: (value, message) pairs for the usual wrong answers; an answer within the
    tolerance of one gets that message ("too high: you counted the write twice"); where several
    lie that close, each is named, the nearest first.
    Any other wrong answer is told whether it is too high or too low, and by how much: in
    percent when it is close (within a factor of 1.5), else by what factor.

    The answer is a number in ``unit``, or text with a unit of the same kind: ``"0.25 KB"``,
    ``"480MiB"`` (KB, MB, GB are powers of 1000, KiB, MiB, GiB powers of 1024, as in the
    course's text), ``"12 us"``, ``"12 µs"``, ``"0.5 ms"``, ``"50 TFLOP/s"``, ``"3.5%"``."""

    kind = "number"

    def __init__(self, question: str, truth: float, *, unit: str = "", rel: float = 0.02,
                 abs_tol: float = 0.0, mistakes=(), hints=(), explanation: str = "",
                 name: str = "ex"):
        if isinstance(truth, bool) or not isinstance(truth, numbers.Real) \
                or not math.isfinite(truth):
            raise ValueError(f"truth must be a finite number, got {truth!r}")
        if rel < 0 or abs_tol < 0 or (rel == 0 and abs_tol == 0 and truth != int(truth)):
            raise ValueError("give a non-negative tolerance (rel or abs_tol); a zero "
                             "tolerance only suits an integer answer")
        self.truth = float(truth)
        self.unit = unit
        self.rel = rel
        self.abs_tol = abs_tol
        # a usual mistake that lands within the tolerance of the truth is no mistake
        self.mistakes = [(float(v), str(m)) for v, m in mistakes
                         if not self._close(float(v), self.truth)]
        how = "Answer with a number" + (f" in {unit}" if unit else "")
        family = _UNITS.get(_unit_key(unit), (None,))[0]
        if family in _EXAMPLE:
            how += f", or as text with a unit: {_EXAMPLE[family]}"
        super().__init__(question, hints=hints, explanation=explanation, how=how + ".",
                         name=name)

    def _close(self, a: float, b: float) -> bool:
        return bool(within(a, b, rtol=self.rel, atol=self.abs_tol))

    def _placeholder(self) -> str:
        unit = f" (in {self.unit})" if self.unit else ""
        return f"Write your prediction{unit} in `answer` and run the cell again."

    # -- reading an answer given as text ----------------------------------------------
    def _accepted(self) -> str:
        """The units this exercise understands, for a message."""
        family = _UNITS.get(_unit_key(self.unit), (None,))[0]
        if family in _ACCEPTED:
            return f"a number in {self.unit}, or one with a unit: {_ACCEPTED[family]}"
        if self.unit:
            return f"a number in {self.unit}"
        return "a number"

    def _u(self, x: float) -> str:
        """``x`` with this exercise's unit: "640 bytes", "3.2%"."""
        if not self.unit:
            return number_text(x)
        return number_text(x) + ("" if self.unit == "%" else " ") + self.unit

    def _parse(self, text: str):
        """``text`` read as a number in this exercise's unit, or a Feedback saying why not.

        Returns (value, converted, twin): ``converted`` is True when the text's unit is not
        this exercise's (then the feedback shows the conversion); ``twin`` is None or, for
        a byte unit, (its value with the other prefix, unit as typed, that reading as text):
        KB read as KiB, or KiB as KB, for a message when only that reading is right."""
        m = _NUMBER.fullmatch(text.strip().replace(",", "").replace("_", ""))
        if not m:
            return Feedback(False, f"`answer` must be {self._accepted()}; got the text "
                                   f"{text!r}. For example `answer = 1.5e6`.")
        value, typed = float(m.group(1)), m.group(2).strip()
        key, mine = _unit_key(typed), _UNITS.get(_unit_key(self.unit))
        if not key or key == _unit_key(self.unit) \
                or (not self.unit and key in ("x", "×")) \
                or (mine is None and self.unit  # "8 sector" for an answer in sectors
                    and key.rstrip("s") == _unit_key(self.unit).rstrip("s")):
            return value, False, None
        theirs = _UNITS.get(key)
        if mine is None or theirs is None or theirs[0] != mine[0]:
            what = "an answer" + (f" in {self.unit}" if self.unit else " with no unit")
            return Feedback(False, f"the unit {typed!r} does not fit {what}: write "
                                   f"{self._accepted()}.")
        twin = None
        if key in _TWIN:  # the same number with the other prefix: KB read as KiB
            other = _TWIN[key]
            twin = (value * _UNITS[_unit_key(other)][1] / mine[1], typed,
                    f"{m.group(1)} {other}")
        return value * theirs[1] / mine[1], theirs[1] != mine[1], twin

    def _judge(self, answer) -> Feedback:
        twin, shown = None, None
        if isinstance(answer, str):
            parsed = self._parse(answer)
            if isinstance(parsed, Feedback):
                return parsed
            typed = answer.strip()
            answer, converted, twin = parsed
            if converted:  # show the conversion, so that the prefix's meaning is visible
                shown = f"{typed} = {self._u(answer)}"
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            return Feedback(False, f"`answer` must be {self._accepted()}; got "
                                   f"{type(answer).__name__} {answer!r}.")
        a = float(answer)
        if not math.isfinite(a):
            return Feedback(False, f"`answer` must be finite, got {a}.")
        shown = shown or self._u(a)
        if self._close(a, self.truth):
            return Feedback(True, f"{shown} is within {self._tolerance_text()} of "
                                  f"{self._u(self.truth)}.")
        side = "too high" if a > self.truth else "too low"
        # every usual mistake within the tolerance of the answer, nearest first: two mistakes
        # can land close together (chapter 8: the cuBLAS share and the 4-byte count), and the
        # checker cannot tell which one the reader made, so it names each
        near = sorted((abs(a - value) / max(abs(value), 1e-300), message)
                      for value, message in self.mistakes if self._close(a, value))
        if near:
            text = f"{shown} is {side}: {near[0][1]}"
            if len(near) > 1:
                text += " Or: " + " Or: ".join(m for _, m in near[1:])
            return Feedback(False, text)
        # how far, in the words a lab's check says it too (book.answers.how_far)
        text = f"{shown} is {how_far(a, self.truth, small=self._u)}"
        far = factor_apart(a, self.truth)
        if far is None:  # a sign or a zero apart: no factor or percentage says it
            return Feedback(False, f"{text}. {self._try_hint()}")
        if twin is not None and self._close(twin[0], self.truth):
            # right with the other prefix: say which one the course means
            base, other = (1024, 1000) if "i" in _unit_key(twin[1]) else (1000, 1024)
            return Feedback(False, f"{text}: in this course {twin[1]} counts in powers of "
                                   f"{base}, {twin[2].split()[-1]} in powers of {other} "
                                   f"(as in its text). Did you mean {twin[2]}?")
        if far < 1.5:
            return Feedback(False, f"{text}; within {self._tolerance_text()} counts as "
                                   f"right. {self._try_hint()}")
        text += "."
        # a factor of 1,000 or 1,024 (or their powers) is a unit prefix, not a wrong count
        prefix = prefix_apart(far)
        if prefix:
            text += f" That is {prefix} away: check the units."
        return Feedback(False, f"{text} {self._try_hint()}")

    def _tolerance_text(self) -> str:
        parts = []
        if self.rel:
            parts.append(percent_text(100 * self.rel))
        if self.abs_tol:
            parts.append(self._u(self.abs_tol))
        return " + ".join(parts) or "rounding"

    def _answer_text(self) -> str:
        return self._u(self.truth)
