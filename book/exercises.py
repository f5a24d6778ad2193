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
import re
from dataclasses import dataclass

__all__ = ["Feedback", "Exercise", "Number", "Choice", "KernelExercise", "PLACEHOLDER"]

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
        e = _inline
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
        return _inline(self._answer_text())


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
        import warnings

        from numba import cuda
        from numba.core.errors import NumbaPerformanceWarning

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
            with warnings.catch_warnings():
                # a 3-block grid is the point here, not a performance problem: Numba's
                # low-occupancy warning would print into the reader's page (chapter 5)
                warnings.simplefilter("ignore", NumbaPerformanceWarning)
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

    def _past_the_end(self, grid, spare, what) -> Feedback:
        return Feedback(False, f"the kernel {what}. "
                               f"{self.n} elements need {grid} blocks of {self.block} "
                               f"threads = {grid * self.block} threads: the last {spare} "
                               "must do nothing (`if i < out.size:`).")

    def _answer_text(self) -> str:
        return self.solution_source or "see the chapter's kernel"

    def _answer_html(self) -> str:
        return f"<pre>{html.escape(self._answer_text())}</pre>"


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
        f"The unfused SwiGLU runs two kernels (silu, then multiply) on gate and up of "
        f"shape [{T}, {h}] in {dtype} ({size} bytes per element). How many bytes do the "
        "two kernels move to and from main memory in all?",
        naive.bytes, unit="bytes", rel=0.0, abs_tol=0.5,
        mistakes=[
            (fused.bytes, "that is one fused kernel. The pair also writes the "
                          "temporary silu(gate) and reads it back."),
            (naive.transfers, f"that is the number of transfers; each moves {size} "
                              "bytes."),
            (4 * n * size, "the multiply kernel reads the temporary back as well as "
                           "`up`: count its two reads."),
            (6 * n * size, "`gate` and `up` are read once each, and the temporary is "
                           "written once and read once."),
        ],
        hints=["Count each kernel separately: what it reads and what it writes.",
               f"silu reads gate and writes tmp: {2 * n} transfers. The multiply reads "
               "tmp and up and writes out.",
               f"Transfers times {size} bytes."],
        explanation=f"silu: {2 * n} transfers, multiply: {3 * n}; {naive.transfers} "
                    f"transfers of {size} bytes (5Th). The fused kernel moves "
                    f"{fused.bytes:,} bytes (3Th).")


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
               "the ridge is peak / bandwidth.",
               "Left of the ridge the roof is I x bandwidth."],
        explanation=f"I = {tr.intensity:.3f} flop/byte, far left of the ridge "
                    f"({peak / spec.memory_bandwidth:.1f}): memory-bound, so "
                    f"min(P, I x beta) = I x beta = {truth:.2f} TFLOP/s, "
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
        explanation=f"The activation takes {times['act'] * 1e6:.0f} us of "
                    f"{sum(times.values()) * 1e6:.0f} us: {share:.1f}% of the time for "
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
        explanation=f"{naive.bytes:,} / {fused.bytes:,} bytes = 5Th / 3Th = "
                    f"{ratio:.3f}, for every shape and dtype.")


_FIXED_FUSED = '''@cuda.jit
def my_fused(gate, up, out):
    i = cuda.grid(1)
    if i < out.size:  # the last block has threads past the end
        g = gate[i]
        out[i] = g / (float32(1.0) + math.exp(-g)) * up[i]'''


def fix_fused_kernel() -> KernelExercise:
    """Chapter 5: a fused SwiGLU kernel with two bugs to fix, checked in the simulator."""
    return KernelExercise(
        "`my_fused` should compute out = silu(gate) * up, one element per thread, "
        "but it has two bugs. Fix them and run the cell until the check says Right.",
        n=300, block=128, solution_source=_FIXED_FUSED,
        hints=["300 elements in blocks of 128: how many threads run, and what do the "
               "extra ones touch?",
               "silu(g) = g / (1 + exp(-g)): check the sign inside the exponential."],
        explanation="The guard keeps the last block's spare threads off the end of "
                    "the arrays; silu needs exp(-g).")


def uncoalesced_counter(diag: dict | None = None) -> Choice:
    """Chapter 8: which counter tells an uncoalesced kernel from one that moves extra bytes.

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
        return f"the naive pair shows {nv:.2f}x the control, stride 32 {un:.1f}x"

    options = {"a": "DRAM bytes over the minimum (dram__bytes_read + write)",
               "b": "sectors per load request (l1tex__t_sectors / l1tex__t_requests)",
               "c": "long-scoreboard stalls per issued instruction",
               "d": "kernel time (gpu__time_duration)"}
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
    """Chapter 9: the bytes the fused residual add + RMSNorm moves."""
    from .kernels import glu_family

    unfused, fused = glu_family.traffic_bytes("add_rmsnorm", T, d, dtype_bytes)
    n = T * d * dtype_bytes
    return Number(
        f"The fused residual add + RMSNorm kernel reads x and r, each [{T}, {d}] with "
        f"{dtype_bytes} bytes per element, and writes h = x + r and y = rmsnorm(h) * w. "
        "How many bytes does it move to and from main memory? (Ignore the weight w: "
        f"{d} elements.)",
        fused, unit="bytes", rel=0.01,
        mistakes=[
            (unfused, "that is five streams: the two-kernel version writes h and "
                      "reads it back. The fused kernel's second pass over h reads a row "
                      "its block just wrote, from the cache, not from DRAM."),
            (3 * n, "the next layer needs h as its residual, so h is written as well "
                    "as y."),
        ],
        hints=["Count streams of T x d elements: reads, then writes.",
               "Two reads (x, r) and two writes (h, y)."],
        explanation=f"4 streams x {T} x {d} x {dtype_bytes} bytes = {fused:,} bytes; "
                    f"unfused, 5 streams = {unfused:,}.")
