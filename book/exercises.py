"""Checked exercises: predict a number, pick a choice, or fix a kernel, with instant feedback.

One small object per exercise, in the spirit of GPU-Puzzles' ``lib.py``: it holds the
question, checks an answer with feedback about *this* answer ("too high: you counted the
write twice"), reveals hints one at a time, and keeps the answer hidden until asked::

    ex = exercises.Number("Bytes the naive pair moves?", truth=naive.bytes, unit="bytes",
                          mistakes=[(fused.bytes, "that is the fused kernel's count")])
    ex                      # the question; on a page hints and answer sit in <details>
    ex.check(None)          # "write your prediction in `answer` and run the cell again"
    ex.check(1234)          # feedback on this answer
    ex.hint(); ex.hint()    # hints in order
    ex.solution()           # the answer and why

Four kinds: :class:`Number` (a prediction with a tolerance and a unit), :class:`Choice`
(one of a few options, each wrong option with its own explanation),
:class:`KernelExercise` (a kernel to complete, run on a small input on the GPU, or in
Numba's CUDA simulator where there is none, and compared with the float64 truth of
``book.kernels.reference``) and :class:`FragmentExercise` (a tensor-core fragment index
function, compared with the registers of one warp's real ``ldmatrix`` + ``mma.sync``). A number may be typed with its unit, ``ex.check("0.25 KiB")``.

The right answers of the chapters' exercises are computed by the library (``book.traffic``,
``book.roofline``, ``book.data``), never typed: the ``chapter*`` functions at the end of this
module build them, so a chapter cell shows the question without giving the answer away.
"""

from __future__ import annotations

import contextlib
import html
import importlib
import math
import numbers
import re
import warnings
from dataclasses import dataclass

__all__ = ["Feedback", "Exercise", "Number", "Choice", "KernelExercise", "FragmentExercise",
           "PLACEHOLDER"]

#: The message for an answer left as the placeholder ``None``: a chapter executes its
#: exercise cells unanswered (in CI and on the page), so this must not be an error.
PLACEHOLDER = "Write your prediction in `answer` and run the cell again."


_CODE = re.compile(r"`([^`\n]+)`")


def _inline(text: str) -> str:
    """``text`` as HTML: escaped, with `code` spans (the messages' Markdown habit) as <code>;
    a page shows ``answer``, not its backticks. Plain text (str) keeps the backticks."""
    return _CODE.sub(r"<code>\1</code>", html.escape(text))


@dataclass(frozen=True)
class Feedback:
    """The verdict on one answer: ``correct`` (or None when nothing was answered) and why.

    Its text is what a notebook prints; ``bool(feedback)`` is True only when right."""

    correct: bool | None
    message: str

    def __bool__(self) -> bool:
        return bool(self.correct)

    def __str__(self) -> str:
        mark = {True: "Right.", False: "Not yet.", None: "No answer yet."}[self.correct]
        return f"{mark} {self.message[:1].upper()}{self.message[1:]}"

    __repr__ = __str__

    def _repr_html_(self) -> str:
        colour = {True: "#009E73", False: "#D55E00", None: "#0072B2"}[self.correct]
        return (f'<div class="exercise-feedback" style="border-left:4px solid {colour};'
                f'padding-left:0.6em">{_inline(str(self))}</div>')


class Exercise:
    """Question, hints revealed in order, a hidden solution; subclasses define ``_judge``."""

    kind = "exercise"

    def __init__(self, question: str, *, hints=(), explanation: str = "", how: str = "",
                 name: str = "ex"):
        if not question or not isinstance(question, str):
            raise ValueError("an exercise needs its question as a non-empty string")
        if not name.isidentifier():
            raise ValueError(f"name must be the notebook variable's name, got {name!r}")
        self.name = name  # the variable the chapter holds it in: its messages say `ex.hint()`
        self.question = question
        self.hints = list(hints)
        self.explanation = explanation
        self.how = how  # how to answer, shown under the question
        self._hints_shown = 0
        self.attempts: list[Feedback] = []

    # -- the reader's side ------------------------------------------------------------
    def check(self, answer) -> Feedback:
        """Judge ``answer``; ``None`` (the placeholder) asks for an answer, never raises."""
        if answer is None or answer is Ellipsis:
            fb = Feedback(None, self._placeholder())
        else:
            fb = self._judge(answer)
        self.attempts.append(fb)
        return fb

    def hint(self) -> str:
        """The next hint (each call reveals one more); after the last, where the answer is."""
        if not self.hints:
            return Text(f"No hints for this one: `{self.name}.solution()` shows the answer.")
        if self._hints_shown >= len(self.hints):
            return Text(f"No more hints (all {len(self.hints)} shown): "
                        f"`{self.name}.solution()` shows the answer.")
        self._hints_shown += 1
        return Text(f"Hint {self._hints_shown} of {len(self.hints)}: "
                    f"{self.hints[self._hints_shown - 1]}")

    def solution(self) -> str:
        """The answer and the reasoning behind it."""
        text = f"Answer: {self._answer_text()}"
        if self.explanation:
            text += f"\n{self.explanation}"
        return Text(text)

    # -- for subclasses ---------------------------------------------------------------
    def _placeholder(self) -> str:
        return PLACEHOLDER

    def _judge(self, answer) -> Feedback:  # pragma: no cover - abstract
        raise NotImplementedError

    def _answer_text(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- display: the question; hints and answer collapsed -----------------------------
    def __repr__(self) -> str:
        lines = [f"Exercise: {self.question}"]
        if self.how:
            lines.append(self.how)
        n = self.name
        lines.append(f"`{n}.check(answer)` checks it; `{n}.hint()` gives a hint; "
                     f"`{n}.solution()` shows the answer.")
        return "\n".join(lines)

    def _try_hint(self) -> str:
        return f"Try `{self.name}.hint()`."

    def _repr_html_(self) -> str:
        e = _inline
        parts = [f'<div class="course-exercise"><p><strong>Exercise.</strong> '
                 f'{e(self.question)}</p>']
        if self.how:
            parts.append(f"<p>{e(self.how)}</p>")
        for i, h in enumerate(self.hints, 1):
            parts.append(f"<details><summary>Hint {i}</summary><p>{e(h)}</p></details>")
        # block elements side by side in the fold (a <pre> inside a <p> is invalid HTML: the
        # browser closes the <p> early and the explanation after it loses its indent)
        answer = self._answer_html()
        if self.explanation:
            answer += f"<p>{e(self.explanation)}</p>"
        parts.append(f"<details><summary>Answer</summary>{answer}</details></div>")
        return "".join(parts)

    def _answer_html(self) -> str:
        """The answer as one block element (a paragraph unless a subclass says otherwise)."""
        return f"<p>{_inline(self._answer_text())}</p>"


class Text(str):
    """A string that a notebook displays as plain text (no quotes, newlines kept)."""

    def __repr__(self) -> str:
        return str(self)


def _fmt(x: float) -> str:
    """A number as a reader writes it: thousands separators, three significant figures."""
    if float(x).is_integer() and abs(x) < 1e15:
        return f"{int(x):,}"
    if x != 0 and (abs(x) >= 1e6 or abs(x) < 1e-3):
        return f"{x:.3g}"
    return f"{x:,.3g}" if abs(x) >= 1000 else f"{x:.3g}"


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


def _pct(p: float) -> str:
    """A percentage to two significant figures: 2.3%, 12%, 0.16%."""
    return f"{float(f'{p:.2g}'):g}%"


def _factor(f: float) -> str:
    """A factor (1.5 or more) to two significant figures: 1.9, 12, 1,000, 10^6."""
    if f >= 1e6:
        return f"10^{round(math.log10(f))}"
    return _fmt(float(f"{f:.2g}"))


class Number(Exercise):
    """A number to predict: right within ``rel`` (relative) or ``abs_tol`` of ``truth``.

    ``mistakes``: (value, message) pairs for the usual wrong answers; an answer within the
    tolerance of one gets that message ("too high: you counted the write twice").
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
        return abs(a - b) <= self.abs_tol + self.rel * abs(b)

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
            return _fmt(x)
        return _fmt(x) + ("" if self.unit == "%" else " ") + self.unit

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
        for value, message in self.mistakes:
            if self._close(a, value):
                return Feedback(False, f"{shown} is {side}: {message}")
        if self.truth == 0 or a == 0 or (a > 0) != (self.truth > 0):
            return Feedback(False, f"{shown} is {side} (check the sign and the units). "
                                   f"{self._try_hint()}")
        ratio = abs(a / self.truth)
        far = max(ratio, 1 / ratio)
        if far < 1.5:  # close: say how far in percent ("a factor of 1.02" says nothing)
            p = 100 * abs(a - self.truth) / abs(self.truth)
            off = _pct(p) if p >= 0.1 else self._u(abs(a - self.truth))
            text = f"{shown} is {off} {side}"
        else:
            text = f"{shown} is {side}, by a factor of about {_factor(far)}"
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
        fits = [(abs(far / base ** round(math.log(far, base)) - 1), what) for base, what in
                ((1000, "a decimal prefix (k, M, G)"), (1024, "a binary prefix (Ki, Mi, Gi)"))
                if round(math.log(far, base)) >= 1]
        if fits and min(fits)[0] < 0.01:
            text += f" That is {min(fits)[1]} away: check the units."
        return Feedback(False, f"{text} {self._try_hint()}")

    def _tolerance_text(self) -> str:
        parts = []
        if self.rel:
            parts.append(_pct(100 * self.rel))
        if self.abs_tol:
            parts.append(self._u(self.abs_tol))
        return " + ".join(parts) or "rounding"

    def _answer_text(self) -> str:
        return self._u(self.truth)


class Choice(Exercise):
    """Pick one of ``options`` (key -> text); ``why`` gives each wrong key its own feedback.

    The reader answers with the key (case and surrounding spaces ignored) or with the
    option's exact text."""

    kind = "choice"

    def __init__(self, question: str, options: dict, answer: str, *, why=None, hints=(),
                 explanation: str = "", name: str = "ex"):
        self.options = {str(k): str(v) for k, v in options.items()}
        if len(self.options) < 2:
            raise ValueError("a choice needs at least two options")
        if str(answer) not in self.options:
            raise ValueError(f"the answer {answer!r} is not one of the options "
                             f"{list(self.options)}")
        self.answer = str(answer)
        self.why = {str(k): str(v) for k, v in (why or {}).items()}
        unknown = set(self.why) - set(self.options)
        if unknown:
            raise ValueError(f"why names keys that are not options: {sorted(unknown)}")
        keys = ", ".join(repr(k) for k in self.options)
        how = "Options: " + "; ".join(f"{k}) {v}" for k, v in self.options.items()) \
            + f". Answer with one of {keys}."
        super().__init__(question, hints=hints, explanation=explanation, how=how, name=name)

    def _placeholder(self) -> str:
        keys = ", ".join(repr(k) for k in self.options)
        return f"Write your choice ({keys}) in `answer` and run the cell again."

    def _key(self, answer):
        if not isinstance(answer, str):
            answer = str(answer)
        a = answer.strip().rstrip(")").strip()
        for k, text in self.options.items():
            if a.lower() == k.lower() or a.lower() == text.lower():
                return k
        return None

    def _judge(self, answer) -> Feedback:
        key = self._key(answer)
        if key is None:
            keys = ", ".join(repr(k) for k in self.options)
            return Feedback(False, f"{answer!r} is not one of the options: answer with "
                                   f"one of {keys}.")
        if key == self.answer:
            return Feedback(True, f"{key}) {self.options[key]}. {self.explanation}".strip())
        reason = self.why.get(key, self._try_hint())
        return Feedback(False, f"{key}) {self.options[key]}: {reason}")

    def _answer_text(self) -> str:
        return f"{self.answer}) {self.options[self.answer]}"


class KernelExercise(Exercise):
    """A kernel to fix or complete, run on the GPU (or in Numba's CUDA simulator where there
    is none) and checked against the float64 truth.

    The candidate is a ``@cuda.jit`` kernel taking ``(gate, up, out)`` float32 arrays,
    launched with one thread per element on ``n`` elements (not a multiple of ``block``,
    so a missing bounds check shows) and compared with ``book.kernels.reference.swiglu``
    within its float32 tolerance. ``out`` starts as NaN so that unwritten elements show."""

    kind = "kernel"

    def __init__(self, question: str, *, n: int = 300, block: int = 128, seed: int = 0,
                 solution_source: str = "", hints=(), explanation: str = "",
                 name: str = "ex"):
        if n % block == 0:
            raise ValueError("choose n not a multiple of block, so that a kernel without "
                             "a bounds check is caught")
        self.n, self.block, self.seed = n, block, seed
        self.solution_source = solution_source
        # true on both kinds of session: the published pages are recorded on a GPU, a
        # reader without one runs the same cell in the simulator
        how = (f"Write the kernel, then pass it to `{name}.check(kernel)`: it runs on the GPU, "
               f"or in Numba's CUDA simulator where there is none, on {n} elements, "
               f"{block} threads per block, and is compared with the float64 reference.")
        super().__init__(question, hints=hints, explanation=explanation, how=how, name=name)

    def _placeholder(self) -> str:
        return (f"Complete the kernel, pass it to `{self.name}.check(...)` and run the cell "
                "again.")

    def _judge(self, kernel) -> Feedback:
        import numpy as np

        from . import gpu  # noqa: F401  (GPU or simulator is decided before numba.cuda)
        from .kernels import reference

        if not callable(getattr(kernel, "__getitem__", None)):
            return Feedback(False, f"`{self.name}.check` needs the kernel itself (a "
                                   f"`@cuda.jit` function), got {type(kernel).__name__}.")
        from numba import cuda

        grid = -(-self.n // self.block)
        spare = grid * self.block - self.n  # threads past the end of the arrays
        # Each array is the first n elements of a longer device allocation, so a
        # kernel without a bounds check touches memory that exists: on a GPU that is
        # caught below (NaN padding overwritten) instead of faulting the context,
        # and the simulator raises IndexError at the view's end.
        total = self.n + spare
        gate_all, up_all = reference.random_inputs(total, "float32", seed=self.seed)
        gate, up = gate_all[:self.n], up_all[:self.n]
        d_gate, d_up = cuda.to_device(gate_all), cuda.to_device(up_all)
        d_out = cuda.to_device(np.full(total, np.nan, dtype=np.float32))
        try:
            with _quiet_performance_warnings():
                kernel[grid, self.block](d_gate[:self.n], d_up[:self.n], d_out[:self.n])
                cuda.synchronize()
        except IndexError as err:
            return self._past_the_end(grid, spare, f"indexed past the end of the arrays "
                                                   f"({err})")
        except Exception as err:  # the reader's code: say what it raised, never hang
            return Feedback(False, f"the kernel raised {type(err).__name__}: {err}")
        out_all = d_out.copy_to_host()
        if not np.isnan(out_all[self.n:]).all():
            return self._past_the_end(grid, spare, "wrote past the end of `out`")
        out = out_all[:self.n]
        expected = reference.swiglu(gate, up, "float32")
        tol = reference.TOLERANCE["float32"]
        unwritten = np.isnan(out)
        if unwritten.all():
            return Feedback(False, "the kernel wrote no element of `out`: store the "
                                   "result with `out[i] = ...`")
        if unwritten.any():
            first = int(np.argmax(unwritten))
            return Feedback(False, f"{int(unwritten.sum())} of {self.n} elements were never "
                                   f"written, the first at index {first}: does every "
                                   "element get a thread (`cuda.grid(1)`)?")
        bad = np.abs(out - expected) > tol["atol"] + tol["rtol"] * np.abs(expected)
        if bad.any():
            i = int(np.argmax(bad))
            return Feedback(False, f"{int(bad.sum())} of {self.n} elements are wrong; "
                                   f"the first at index {i}: got {out[i]:.6g}, expected "
                                   f"silu({gate[i]:.4g}) * {up[i]:.4g} = "
                                   f"{expected[i]:.6g}.")
        return Feedback(True, f"all {self.n} elements match `silu(gate) * up` within the "
                              f"float32 tolerance (rtol {tol['rtol']:g}).")

    def _past_the_end(self, grid, spare, what) -> Feedback:
        return Feedback(False, f"the kernel {what}. "
                               f"{self.n} elements need {grid} blocks of {self.block} "
                               f"threads = {grid * self.block} threads: the last {spare} "
                               "must do nothing (`if i < out.size:`).")

    def _answer_text(self) -> str:
        return self.solution_source or "see the chapter's kernel"

    def _answer_html(self) -> str:
        # a block of its own, beside the explanation's <p> (never inside one); indented as
        # the theme indents a fold's paragraphs (tools/theme/course.css: details > p)
        return (f'<pre class="exercise-solution" style="margin:0.3rem 0 0.5rem 1.2rem">'
                f"{html.escape(self._answer_text())}</pre>")


class FragmentExercise(Exercise):
    """A fragment index function to fix: ``fn(lane, e) -> (row, column)`` of the element ``e``
    that ``lane`` holds of the A operand of ``mma.sync.m16n8k16`` (e = 2 * register + half).

    The check runs one warp of :func:`book.kernels.fragments.run_tile_mma` (``ldmatrix``, then
    ``mma.sync``; on the GPU, or in Numba's CUDA simulator where there is none) on an A whose
    every element is distinct (A[r, c] = 16 r + c, exact in 16 bits), reads each lane's A
    registers back, and compares where each value came from with what ``fn`` says. On an sm_75
    GPU (a T4: no bf16 ``mma``) it runs the fp16 m16n8k8 instruction instead, whose A fragment
    is the first four elements of the same table."""

    kind = "fragment"

    def __init__(self, question: str, *, solution_source: str = "", hints=(),
                 explanation: str = "", name: str = "ex"):
        self.solution_source = solution_source
        how = (f"Write the function, then pass it to `{name}.check(fn)`: it runs one warp's "
               "`ldmatrix` and `mma.sync` on the GPU, or in Numba's CUDA simulator where "
               "there is none, and compares every lane's registers with your function.")
        super().__init__(question, hints=hints, explanation=explanation, how=how, name=name)
        self._run = None

    def _placeholder(self) -> str:
        return f"Fix the function, pass it to `{self.name}.check(...)` and run the cell again."

    def registers(self):
        """(kind, elements per lane, A [16, K] float, values [32, n]: what each lane holds)."""
        if self._run is None:
            import numpy as np

            from . import gpu  # noqa: F401  (GPU or simulator is decided before numba.cuda)
            from .kernels import fragments, tensorcore

            if tensorcore.SIMULATED:
                kind = "bf16_16816"
            else:
                from numba import cuda

                cc = cuda.get_current_device().compute_capability
                tensorcore.check_capability(cc, "float16")  # below sm_75: says what runs
                kind = "bf16_16816" if tuple(cc) >= (8, 0) else "f16_1688"
            K = fragments.K_OF[kind]
            a = (16 * np.arange(16)[:, None] + np.arange(K)[None, :]).astype(np.float32)
            b = ((np.arange(K * 8).reshape(K, 8) * 5) % 11 - 5).astype(np.float32)
            if kind.startswith("bf16"):
                bits = lambda m: (m.view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731
            else:
                bits = lambda m: m.astype(np.float16).view(np.uint16)  # noqa: E731
            d, regs = fragments.run_tile_mma(kind, bits(a), bits(b))
            if not np.array_equal(d, a @ b):  # the instruction itself: never the reader's fault
                raise RuntimeError(f"the {kind} mma did not compute A @ B exactly")
            n = 8 if K == 16 else 4
            half = np.zeros((32, n), dtype=np.uint16)
            for e in range(n):
                half[:, e] = (regs[:, e >> 1] >> (16 * (e & 1))) & 0xFFFF
            if kind.startswith("bf16"):
                vals = (half.astype(np.uint32) << 16).view(np.float32)
            else:
                vals = half.view(np.float16).astype(np.float32)
            self._run = (kind, n, a, vals)
        return self._run

    def _judge(self, fn) -> Feedback:
        if not callable(fn):
            return Feedback(False, f"`{self.name}.check` needs the function itself, "
                                   f"`fn(lane, e)`, got {type(fn).__name__}.")
        try:
            kind, n, a, vals = self.registers()
        except RuntimeError as err:  # a GPU without the instruction: say what it can run
            return Feedback(False, str(err))
        rows, cols = a.shape
        wrong, owners = [], {}
        for lane in range(32):
            for e in range(n):
                try:
                    rc = fn(lane, e)
                    r, c = (int(v) for v in rc)
                except Exception as err:  # the reader's code: say what it raised
                    return Feedback(False, f"`fn({lane}, {e})` raised {type(err).__name__}: "
                                           f"{err}; it must return (row, column).")
                if not (0 <= r < rows and 0 <= c < cols):
                    return Feedback(False, f"`fn({lane}, {e})` = ({r}, {c}) is outside A "
                                           f"({rows} × {cols}).")
                owners.setdefault((r, c), []).append((lane, e))
                held = int(vals[lane, e])
                truth = divmod(held, 16)
                if (r, c) != truth:
                    wrong.append((lane, e, (r, c), truth))
        what = "m16n8k16 (bf16)" if n == 8 else "m16n8k8 (fp16, this GPU's instruction)"
        if wrong:
            shown = "; ".join(f"lane {ln} element {e} (register {e >> 1}, "
                              f"{'high' if e & 1 else 'low'} half) holds A[{t[0]}, {t[1]}] but "
                              f"your function says A[{rc[0]}, {rc[1]}]"
                              for ln, e, rc, t in wrong[:3])
            twice = sum(1 for v in owners.values() if len(v) > 1)
            extra = (f" Your function also gives {twice} elements of A more than one owner "
                     "and leaves others with none." if twice else "")
            return Feedback(False, f"{len(wrong)} of {32 * n} elements are not where your "
                                   f"function puts them: {shown}.{extra}")
        return Feedback(True, f"all {32 * n} elements of A, in every lane's registers after "
                              f"`ldmatrix` and `mma.sync` {what}, are where your function "
                              "says: that is the PTX ISA's fragment table.")

    def _answer_text(self) -> str:
        return self.solution_source or "see book.kernels.tensorcore.a_coords"

    def _answer_html(self) -> str:
        return (f'<pre class="exercise-solution" style="margin:0.3rem 0 0.5rem 1.2rem">'
                f"{html.escape(self._answer_text())}</pre>")


def _performance_warnings() -> list[type]:
    """Numba's NumbaPerformanceWarning classes. numba-cuda raises its own
    (``numba.cuda.core.errors``), not a subclass of ``numba.core.errors``' one: filtering
    only the latter let the warning through on the H100 (chapter 5's recorded page)."""
    found = []
    for module in ("numba.cuda.core.errors", "numba.core.errors"):
        try:
            cls = getattr(importlib.import_module(module), "NumbaPerformanceWarning")
        except (ImportError, AttributeError):
            continue
        if cls not in found:
            found.append(cls)
    return found


@contextlib.contextmanager
def _quiet_performance_warnings():
    """Silence Numba's performance warnings for the exercise's own launch, and only there.

    A 3-block grid is the point of the exercise, not a performance problem; on a GPU Numba
    warns "Grid size 3 will likely result in GPU under-utilization", with the path of its
    own source file, into the reader's page."""
    with warnings.catch_warnings():
        for cls in _performance_warnings():
            warnings.simplefilter("ignore", cls)
        yield


# ---------------------------------------------------------------------------------------
# The chapters' exercises. Each right answer is computed here from the library
# (book.traffic, book.roofline, book.data), so the chapter cell that builds one shows the
# question, not the answer.

def _gemm(M: int, K: int, N: int, dtype: str):
    """Traffic of one [M, K] @ [K, N]: operands read once, output written once."""
    from . import traffic

    step = traffic.Step("GEMM", M * K + K * N, M * N)
    size = traffic.itemsize(dtype)
    return traffic.Traffic(variant="gemm", dtype=traffic.dtype_name(dtype), itemsize=size,
                           transfers=step.reads + step.writes,
                           bytes=(step.reads + step.writes) * size,
                           flops=2 * M * K * N, breakdown=[step], shape={"d": K})


def naive_pair_bytes(T: int = 4, h: int = 8, dtype: str = "float32") -> Number:
    """Chapter 1: the bytes the two-kernel SwiGLU moves for one [T, h] activation."""
    from . import traffic

    naive = traffic.activation(T, h, dtype, "naive")
    fused = traffic.activation(T, h, dtype, "fused")
    n, size = T * h, naive.itemsize
    return Number(
        f"The unfused SwiGLU runs two kernels (silu, then multiply) on `gate` and `up` of "
        f"shape [{T}, {h}] in {dtype} ({size} bytes per element). How many bytes do the "
        "two kernels move to and from main memory in all?",
        naive.bytes, unit="bytes", rel=0.0, abs_tol=0.5,
        mistakes=[
            (fused.bytes, "that is one fused kernel. The pair also writes the "
                          "temporary `silu(gate)` and reads it back."),
            (naive.transfers, f"that is the number of transfers; each moves {size} "
                              "bytes."),
            (4 * n * size, "the multiply kernel reads the temporary back as well as "
                           "`up`: count its two reads."),
            (6 * n * size, "`gate` and `up` are read once each, and the temporary is "
                           "written once and read once."),
        ],
        hints=["Count each kernel separately: what it reads and what it writes.",
               f"silu reads `gate` and writes `tmp`: {2 * n} transfers. The multiply reads "
               "`tmp` and `up` and writes `out`.",
               f"Transfers times {size} bytes."],
        explanation=f"silu: {2 * n} transfers (2·T·h), multiply: {3 * n} (3·T·h); in all "
                    f"{naive.transfers} transfers (5·T·h) of {size} bytes. The fused "
                    f"kernel moves 3·T·h transfers: {fused.bytes:,} bytes.")


def attainable_tflops(spec="H100-SXM", dtype: str = "float32", variant: str = "fused",
                      T: int = 8192, h: int = 14336) -> Number:
    """Chapter 2: the roofline's attainable TFLOP/s of the SwiGLU activation."""
    from . import roofline, specs, traffic

    spec = specs.get(spec)
    tr = traffic.activation(T, h, dtype, variant)
    precision = roofline.default_precision(tr.dtype, "elementwise")
    peak = spec.peak(precision)
    truth = min(peak, tr.intensity * spec.memory_bandwidth) / 1e12
    per_transfer = tr.flops / tr.transfers * spec.memory_bandwidth / 1e12
    return Number(
        f"The {variant} SwiGLU activation in {dtype} does {traffic.FLOPS_PER_ELEMENT} "
        f"flops per output element, for which it moves {tr.transfers // (T * h)} "
        f"elements of {tr.itemsize} bytes ({tr.reads // (T * h)} read, "
        f"{tr.writes // (T * h)} written). On the {spec.name} "
        f"({spec.memory_bandwidth / 1e12:.2f} TB/s, {peak / 1e12:.1f} TFLOP/s "
        f"{precision}), what is its attainable performance, in TFLOP/s?",
        truth, unit="TFLOP/s", rel=0.05,
        mistakes=[
            (peak / 1e12, "that is the compute roof. Is the kernel's intensity left "
                          "or right of the ridge?"),
            (per_transfer, "you divided the flops by transfers, not bytes: intensity "
                           "is flop per byte."),
        ],
        hints=["Intensity I = flops / bytes, per element.",
               f"I = {traffic.FLOPS_PER_ELEMENT} / {tr.bytes // (T * h)} flop/byte; "
               "the ridge is I* = P / β (peak / bandwidth).",
               "Left of the ridge the roof is I · β (intensity × bandwidth)."],
        explanation=f"I = {tr.intensity:.3f} flop/byte, far left of the ridge "
                    f"(I* = P / β = {peak / spec.memory_bandwidth:.1f}): memory-bound, so "
                    f"min(P, I · β) = I · β = {truth:.2f} TFLOP/s, "
                    f"{truth * 1e12 / peak:.1%} of the compute roof.")


def activation_time_share(T: int, d: int, h: int, dtype: str = "bfloat16",
                          spec="H100-SXM") -> Number:
    """Chapter 3: the fused activation's share of one MLP block's roofline time."""
    from . import roofline, specs, traffic

    spec = specs.get(spec)
    steps = {"gate": _gemm(T, d, h, dtype), "up": _gemm(T, d, h, dtype),
             "act": traffic.activation(T, h, dtype, "fused"), "down": _gemm(T, h, d, dtype)}
    times = {k: roofline.predict(s, spec, "bf16").time_s for k, s in steps.items()}
    share = 100 * times["act"] / sum(times.values())
    flops = 100 * steps["act"].flops / sum(s.flops for s in steps.values())
    nbytes = 100 * steps["act"].bytes / sum(s.bytes for s in steps.values())
    return Number(
        f"One MLP block at T = {T} (d = {d}, h = {h}, {dtype}) runs gate, up and down "
        "GEMMs and the fused SwiGLU activation. On the roofline of the "
        f"{spec.name} (bf16 tensor cores for the GEMMs), what percentage of the "
        "block's predicted time is the activation's?",
        share, unit="%", rel=0.25,
        mistakes=[
            (flops, "that is its share of the flops. A memory-bound step's time "
                    "follows its bytes, not its flops."),
            (nbytes, "that is its share of the bytes. The GEMMs are compute-bound: "
                     "their time is flops / peak, not bytes / bandwidth."),
        ],
        hints=["Predict each step's time with the roofline: max(bytes / bandwidth, "
               "flops / peak).",
               "The GEMMs are compute-bound at this T; the activation is memory-bound.",
               "Share = activation time / (sum of the four times)."],
        explanation=f"The activation takes {times['act'] * 1e6:.0f} µs of "
                    f"{sum(times.values()) * 1e6:.0f} µs: {share:.1f}% of the time for "
                    f"{flops:.2f}% of the flops and {nbytes:.1f}% of the bytes.")


def fusion_speedup(T: int, h: int, dtype: str = "float32") -> Number:
    """Chapter 5: the predicted time ratio naive / fused when both stream at one speed."""
    from . import traffic

    naive = traffic.activation(T, h, dtype, "naive")
    fused = traffic.activation(T, h, dtype, "fused")
    ratio = naive.bytes / fused.bytes
    return Number(
        f"Both SwiGLU designs (the naive pair and one fused kernel) run at the same "
        f"memory bandwidth on [{T}, {h}] {dtype} tensors. Predict time(naive) / "
        "time(fused).",
        ratio, unit="", rel=0.03,
        mistakes=[
            (1 / ratio, "that is fused / naive, upside down: the naive pair is the "
                        "slower one."),
            (2.0, "the naive pair is not two full kernels' worth of the fused one: "
                  "silu moves two tensors, multiply three."),
            (1.0, "same bandwidth, but not the same bytes: the pair writes and reads "
                  "a temporary."),
        ],
        hints=["At one bandwidth, time is proportional to bytes.",
               "Count transfers per element: silu kernel + multiply kernel, against "
               "one fused kernel."],
        explanation=f"{naive.bytes:,} / {fused.bytes:,} bytes = 5·T·h / 3·T·h = "
                    f"{ratio:.3f}, for every shape and dtype.")


_FIXED_FUSED = '''@cuda.jit
def my_fused(gate, up, out):
    i = cuda.grid(1)
    if i < out.size:  # the last block has threads past the end
        g = gate[i]
        out[i] = g / (float32(1.0) + math.exp(-g)) * up[i]'''


def fix_fused_kernel(name: str = "fix") -> KernelExercise:
    """Chapter 5: a fused SwiGLU kernel with two bugs to fix, run on the GPU (or in the
    simulator where there is none). ``name``: the chapter's variable for it (``fix``)."""
    return KernelExercise(
        "`my_fused` should compute `out = silu(gate) * up`, one element per thread, "
        "but it has two bugs. Fix them and run the cell until the check says Right.",
        n=300, block=128, solution_source=_FIXED_FUSED, name=name,
        hints=["300 elements in blocks of 128: how many threads run, and what do the "
               "extra ones touch?",
               "`silu(g) = g / (1 + exp(-g))`: check the sign inside the exponential."],
        explanation="The guard `if i < out.size:` keeps the last block's spare threads "
                    "off the end of the arrays; silu needs `exp(-g)`.")


def uncoalesced_counter(diag: dict | None = None) -> Choice:
    """Chapter 9: which counter tells an uncoalesced kernel from one that moves extra bytes.

    The right option is derived from the recorded ncu diagnosis: the one metric that
    stays at the coalesced control's value for the naive pair (extra bytes, coalesced
    loads) and grows for the stride-32 kernel."""
    from . import data

    diag = diag or data.record("ncu/diagnosis_h100")
    cases = diag["cases"]

    def metric(case, key):
        c = cases[case]
        if key == "time":
            return c["gpu_time_s"]
        if key == "stall":
            name = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
            return c["launches"][0]["metrics"][name]
        return c[key]

    keys = {"a": "dram_over_minimum", "b": "sectors_per_load_request", "c": "stall",
            "d": "time"}
    ratio = {k: (metric("naive", m) / metric("coalesced", m),
                 metric("uncoalesced", m) / metric("coalesced", m)) for k, m in keys.items()}
    # singles out uncoalesced loads: unchanged for the naive pair, at least 2x for stride 32
    telling = [k for k, (nv, un) in ratio.items() if abs(nv - 1) < 0.2 and un >= 2]
    if len(telling) != 1:
        raise ValueError(f"the recorded diagnosis no longer singles out one counter "
                         f"(candidates {telling}); revisit this exercise with the data")

    def said(k):
        nv, un = ratio[k]
        return f"the naive pair shows {nv:.2f}× the control, stride 32 {un:.1f}×"

    # the metric names as chapter 9's table writes them
    options = {"a": "DRAM bytes over the minimum (`dram__bytes_read.sum` + "
                    "`dram__bytes_write.sum`)",
               "b": "sectors per load request "
                    "(`l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum` / `..._requests_...`)",
               "c": "long-scoreboard stalls per issued instruction",
               "d": "kernel time (`gpu__time_duration.sum`)"}
    why = {k: f"it moves for other causes too: {said(k)}." for k in keys if k not in telling}
    return Choice(
        "The naive pair (coalesced loads, extra bytes) and a stride-32 kernel (uncoalesced "
        "loads) are both slower than the coalesced control. Which one counter points at "
        "the access pattern, high for the uncoalesced kernel but at the control's value "
        "for the naive pair?",
        options, telling[0], why=why,
        hints=["A coalesced warp load of 32 floats is 128 bytes: 4 sectors of 32 bytes.",
               "Which counter is about one request, not the whole kernel?"],
        explanation=f"Sectors per request: {said(telling[0])}. Each lane of a stride-32 "
                    "warp lands in its own sector.")


def add_rmsnorm_bytes(T: int, d: int, dtype_bytes: int = 2) -> Number:
    """Chapter 10: the bytes the fused residual add + RMSNorm moves."""
    from .kernels import glu_family

    unfused, fused = glu_family.traffic_bytes("add_rmsnorm", T, d, dtype_bytes)
    n = T * d * dtype_bytes
    return Number(
        f"The fused residual add + RMSNorm kernel reads `x` and `r`, each [{T}, {d}] "
        f"with {dtype_bytes} bytes per element, and writes `h = x + r` and "
        "`y = rmsnorm(h) * w`. How many bytes does it move to and from main memory? "
        f"(Ignore the weight `w`: {d} elements.)",
        fused, unit="bytes", rel=0.01,
        mistakes=[
            (unfused, "that is five streams: the two-kernel version writes `h` and "
                      "reads it back. The fused kernel's second pass over `h` reads a row "
                      "its block just wrote, from the cache, not from DRAM."),
            (3 * n, "the next layer needs `h` as its residual, so `h` is written as "
                    "well as `y`."),
        ],
        hints=["Count streams of T × d elements: reads, then writes.",
               "Two reads (`x`, `r`) and two writes (`h`, `y`)."],
        explanation=f"4 streams × {T} × {d} × {dtype_bytes} bytes = {fused:,} bytes; "
                    f"unfused, 5 streams = {unfused:,}.")


def separate_pass_share(T: int = 2048, d: int = 4096, h: int = 14336,
                        gpu: str = "h100") -> Number:
    """Chapter 8: the separate SwiGLU pass's share of the unfused tensor-core MLP-up.

    The reader is given the recorded time of the course's ``mma.sync`` GEMM writing gate|up
    and the rate at which a bf16 elementwise pass streams (the compiled pass's, recorded), and
    predicts the half8 pass's share of GEMM + pass; the truth is the recorded run's."""
    from . import data, traffic
    from .bench.tensorcore import pass_share

    rec = data.load(gpu)
    gemm = rec.find("tc_gate_up", "bfloat16", (T, d, h))["seconds"]
    pass_s = rec.find("tc_half8_only", "bfloat16", (T, h))["seconds"]
    compiled = rec.find("separate_pass_compiled", "bfloat16", (T, d, h))
    cublas_share = 100 * pass_share(rec, T, d, h, "compiled")["share"]  # as chapter 8 shows it
    bw = compiled["bandwidth"]
    act = traffic.activation(T, h, "bfloat16", "fused")
    share = 100 * pass_s / (gemm + pass_s)
    predicted = act.bytes / bw
    as_f32 = 2 * predicted
    no_write = predicted * 2 / 3
    gpu_name = (rec.find("tc_gate_up", "bfloat16", (T, d, h)).get("provenance")
                or rec.provenance).get("gpu")
    return Number(
        f"On the {gpu_name}, the course's `mma.sync` GEMM writing gate and up in bf16 took "
        f"{gemm * 1e6:,.0f} µs at T = {T}, d = {d}, h = {h} (the record's `tc_gate_up` row: "
        "the GEMM of the measurement table's \"control: same GEMM + half8\" path, timed "
        "without its pass). Then the separate SwiGLU pass "
        f"(the `half8` kernel) reads gate and up, [{T}, {h}] bf16 each, and writes `out`, "
        f"streaming at about {bw / 1e12:.2f} TB/s (the compiled pass's measured rate). "
        "Predict the pass's share of the unfused MLP-up time, pass / (GEMM + pass), in %.",
        share, unit="%", rel=0.15,
        mistakes=[  # the first that lies within the tolerance speaks
            (cublas_share, "that is the pass's share beside cuBLAS's GEMM, which is "
                           "faster than ours: the same pass is a smaller share of a slower "
                           "GEMM."),
            (100 * as_f32 / (gemm + as_f32), "bf16 elements are 2 bytes, not 4."),
            (100 * no_write / (gemm + no_write), "the pass also writes `out`: three "
                                                 "transfers per element, not two."),
        ],
        hints=[f"The pass moves 3 × {T} × {h} elements of 2 bytes; its time is bytes / rate.",
               "Share = pass / (GEMM + pass)."],
        explanation=f"{act.bytes / 1e6:.0f} MB / {bw / 1e12:.2f} TB/s ≈ "
                    f"{predicted * 1e6:.0f} µs (recorded: {pass_s * 1e6:.0f} µs), so "
                    f"{pass_s * 1e6:.0f} / ({gemm * 1e6:,.0f} + {pass_s * 1e6:.0f}) = "
                    f"{share:.1f}%. Beside cuBLAS's GEMM the same kind of pass is "
                    f"{cublas_share:.0f}%: the faster the GEMM, the more fusion saves.")


_FIXED_A_COORDS = '''def my_a_coords(lane, e):
    g, t = lane >> 2, lane & 3
    row = g + 8 * ((e >> 1) & 1)  # registers 1 and 3: rows 8-15
    col = 2 * t + (e & 1) + 8 * (e >> 2)  # registers 2 and 3: columns 8-15
    return row, col'''


def fix_fragment_index(name: str = "ex") -> FragmentExercise:
    """Chapter 8: fix an A-fragment index function, checked against one warp's real
    registers (``ldmatrix`` + ``mma.sync``, on the GPU or in the simulator)."""
    return FragmentExercise(
        "`my_a_coords(lane, e)` should say which element of the 16 × 16 A tile a lane "
        "holds as its element `e` (0-7: register `e // 2`, low or high half) for "
        "`mma.sync.m16n8k16`, but it swaps the roles of two registers. Fix it and run the "
        "cell until the check says Right.",
        solution_source=_FIXED_A_COORDS, name=name,
        hints=["Look at the drawing of A above: which lanes hold row 8, and in which "
               "register?",
               "Register 1 (elements 2, 3) holds rows 8-15 at the same columns as "
               "register 0; register 2 (elements 4, 5) holds columns 8-15 of rows 0-7."],
        explanation="Registers 0 and 1 cover columns 0-7 (rows g and g + 8), registers 2 "
                    "and 3 columns 8-15: the row offset comes from bit 1 of `e`, the "
                    "column offset from bit 2. `ldmatrix.x4` loads the four 8 × 8 "
                    "quarters in that order.")
