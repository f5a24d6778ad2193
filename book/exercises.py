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

Three kinds: :class:`Number` (a prediction with a tolerance and a unit), :class:`Choice`
(one of a few options, each wrong option with its own explanation) and
:class:`KernelExercise` (a kernel to complete, run in the simulator on a small input
and compared with the float64 truth of ``book.kernels.reference``).

The right answers of the chapters' exercises are computed by the library (``book.traffic``,
``book.roofline``, ``book.data``), never typed: the ``chapter*`` functions at the end of this
module build them, so a chapter cell shows the question without giving the answer away.
"""

from __future__ import annotations

import html
import math
import numbers
from dataclasses import dataclass

__all__ = ["Feedback", "Exercise", "Number", "Choice", "KernelExercise", "PLACEHOLDER"]

#: The message for an answer left as the placeholder ``None``: a chapter executes its
#: exercise cells unanswered (in CI and on the page), so this must not be an error.
PLACEHOLDER = "Write your prediction in `answer` and run the cell again."


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
                f'padding-left:0.6em">{html.escape(str(self))}</div>')


class Exercise:
    """Question, hints revealed in order, a hidden solution; subclasses define ``_judge``."""

    kind = "exercise"

    def __init__(self, question: str, *, hints=(), explanation: str = "", how: str = ""):
        if not question or not isinstance(question, str):
            raise ValueError("an exercise needs its question as a non-empty string")
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
            return Text("No hints for this one: ex.solution() shows the answer.")
        if self._hints_shown >= len(self.hints):
            return Text(f"No more hints (all {len(self.hints)} shown): "
                        "ex.solution() shows the answer.")
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
        lines.append("ex.check(answer) checks it; ex.hint() gives a hint; "
                     "ex.solution() shows the answer.")
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        e = html.escape
        parts = [f'<div class="course-exercise"><p><strong>Exercise.</strong> '
                 f'{e(self.question)}</p>']
        if self.how:
            parts.append(f"<p>{e(self.how)}</p>")
        for i, h in enumerate(self.hints, 1):
            parts.append(f"<details><summary>Hint {i}</summary><p>{e(h)}</p></details>")
        answer = self._answer_html()
        if self.explanation:
            answer += f"<br>{e(self.explanation)}"
        parts.append(f"<details><summary>Answer</summary><p>{answer}</p></details></div>")
        return "".join(parts)

    def _answer_html(self) -> str:
        return html.escape(self._answer_text())


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


class Number(Exercise):
    """A number to predict: right within ``rel`` (relative) or ``abs_tol`` of ``truth``.

    ``mistakes``: (value, message) pairs for the usual wrong answers; an answer within the
    tolerance of one gets that message ("too high: you counted the write twice").
    Any other wrong answer is told whether it is too high or too low, and by what factor."""

    kind = "number"

    def __init__(self, question: str, truth: float, *, unit: str = "", rel: float = 0.02,
                 abs_tol: float = 0.0, mistakes=(), hints=(), explanation: str = ""):
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
        how = "Answer with a number" + (f" in {unit}" if unit else "") + "."
        super().__init__(question, hints=hints, explanation=explanation, how=how)

    def _close(self, a: float, b: float) -> bool:
        return abs(a - b) <= self.abs_tol + self.rel * abs(b)

    def _placeholder(self) -> str:
        unit = f" (in {self.unit})" if self.unit else ""
        return f"Write your prediction{unit} in `answer` and run the cell again."

    def _judge(self, answer) -> Feedback:
        unit = f" {self.unit}" if self.unit else ""
        if isinstance(answer, str):
            try:
                answer = float(answer.replace(",", "").replace("_", ""))
            except ValueError:
                return Feedback(False, f"`answer` must be a number{unit and ' in' + unit}, "
                                       f"got the text {answer!r}: write it without units, "
                                       "e.g. 1.5e6.")
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            return Feedback(False, f"`answer` must be a number{unit and ' in' + unit}, got "
                                   f"{type(answer).__name__} {answer!r}.")
        a = float(answer)
        if not math.isfinite(a):
            return Feedback(False, f"`answer` must be finite, got {a}.")
        if self._close(a, self.truth):
            return Feedback(True, f"{_fmt(a)}{unit} is within "
                                  f"{self._tolerance_text()} of {_fmt(self.truth)}{unit}.")
        for value, message in self.mistakes:
            if self._close(a, value):
                side = "too high" if a > self.truth else "too low"
                return Feedback(False, f"{_fmt(a)}{unit} is {side}: {message}")
        if self.truth != 0 and a != 0 and (a > 0) == (self.truth > 0):
            factor = a / self.truth
            side = "too high" if abs(factor) > 1 else "too low"
            by = abs(factor) if abs(factor) > 1 else 1 / abs(factor)
            return Feedback(False, f"{_fmt(a)}{unit} is {side}, by a factor of about "
                                   f"{by:.3g}. Try ex.hint().")
        side = "too high" if a > self.truth else "too low"
        return Feedback(False, f"{_fmt(a)}{unit} is {side} (check the sign and the "
                               "units). Try ex.hint().")

    def _tolerance_text(self) -> str:
        parts = []
        if self.rel:
            parts.append(f"{self.rel:.0%}")
        if self.abs_tol:
            parts.append(f"{_fmt(self.abs_tol)}" + (f" {self.unit}" if self.unit else ""))
        return " + ".join(parts) or "rounding"

    def _answer_text(self) -> str:
        return _fmt(self.truth) + (f" {self.unit}" if self.unit else "")


class Choice(Exercise):
    """Pick one of ``options`` (key -> text); ``why`` gives each wrong key its own feedback.

    The reader answers with the key (case and surrounding spaces ignored) or with the
    option's exact text."""

    kind = "choice"

    def __init__(self, question: str, options: dict, answer: str, *, why=None, hints=(),
                 explanation: str = ""):
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
        super().__init__(question, hints=hints, explanation=explanation, how=how)

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
        reason = self.why.get(key, "Try ex.hint().")
        return Feedback(False, f"{key}) {self.options[key]}: {reason}")

    def _answer_text(self) -> str:
        return f"{self.answer}) {self.options[self.answer]}"


class KernelExercise(Exercise):
    """A kernel to fix or complete, checked in the simulator against the float64 truth.

    The candidate is a ``@cuda.jit`` kernel taking ``(gate, up, out)`` float32 arrays,
    launched with one thread per element on ``n`` elements (not a multiple of ``block``,
    so a missing bounds check shows) and compared with ``book.kernels.reference.swiglu``
    within its float32 tolerance. ``out`` starts as NaN so that unwritten elements show."""

    kind = "kernel"

    def __init__(self, question: str, *, n: int = 300, block: int = 128, seed: int = 0,
                 solution_source: str = "", hints=(), explanation: str = ""):
        if n % block == 0:
            raise ValueError("choose n not a multiple of block, so that a kernel without "
                             "a bounds check is caught")
        self.n, self.block, self.seed = n, block, seed
        self.solution_source = solution_source
        how = ("Write the kernel, then pass it to ex.check(kernel): it runs in the "
               f"simulator on {n} elements, {block} threads per block.")
        super().__init__(question, hints=hints, explanation=explanation, how=how)

    def _placeholder(self) -> str:
        return "Complete the kernel, pass it to ex.check(...) and run the cell again."

    def _judge(self, kernel) -> Feedback:
        import numpy as np

        from . import gpu  # noqa: F401  (GPU or simulator is decided before numba.cuda)
        from .kernels import reference

        if not callable(getattr(kernel, "__getitem__", None)):
            return Feedback(False, f"ex.check needs the kernel itself (a @cuda.jit "
                                   f"function), got {type(kernel).__name__}.")
        gate, up = reference.random_inputs(self.n, "float32", seed=self.seed)
        out = np.full(self.n, np.nan, dtype=np.float32)
        grid = -(-self.n // self.block)
        try:
            kernel[grid, self.block](gate, up, out)
        except IndexError as err:
            return Feedback(False, f"the kernel indexed past the end of an array ({err}). "
                                   f"{self.n} elements need {grid} blocks of {self.block} "
                                   f"threads = {grid * self.block} threads: the last "
                                   f"{grid * self.block - self.n} must do nothing "
                                   "(`if i < out.size:`).")
        except Exception as err:  # the reader's code: say what it raised, never hang
            return Feedback(False, f"the kernel raised {type(err).__name__}: {err}")
        expected = reference.swiglu(gate, up, "float32")
        tol = reference.TOLERANCE["float32"]
        unwritten = np.isnan(out)
        if unwritten.all():
            return Feedback(False, "the kernel wrote no element of `out`: store the "
                                   "result with out[i] = ...")
        if unwritten.any():
            first = int(np.argmax(unwritten))
            return Feedback(False, f"{int(unwritten.sum())} of {self.n} elements were never "
                                   f"written, the first at index {first}: does every "
                                   "element get a thread (cuda.grid(1))?")
        bad = np.abs(out - expected) > tol["atol"] + tol["rtol"] * np.abs(expected)
        if bad.any():
            i = int(np.argmax(bad))
            return Feedback(False, f"{int(bad.sum())} of {self.n} elements are wrong; "
                                   f"the first at index {i}: got {out[i]:.6g}, expected "
                                   f"silu({gate[i]:.4g}) * {up[i]:.4g} = "
                                   f"{expected[i]:.6g}.")
        return Feedback(True, f"all {self.n} elements match silu(gate) * up within the "
                              f"float32 tolerance (rtol {tol['rtol']:g}).")

    def _answer_text(self) -> str:
        return self.solution_source or "see the chapter's kernel"

    def _answer_html(self) -> str:
        return f"<pre>{html.escape(self._answer_text())}</pre>"
