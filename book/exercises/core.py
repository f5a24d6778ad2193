"""What every checked exercise shares: the verdict on an answer (:class:`Feedback`), and the
question with its hints revealed in order and its answer kept folded (:class:`Exercise`)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

__all__ = ["Feedback", "Exercise", "Text", "PLACEHOLDER", "inline_html"]

#: The message for an answer left as the placeholder ``None``: a chapter executes its
#: exercise cells unanswered (in CI and on the page), so this must not be an error.
PLACEHOLDER = "Write your prediction in `answer` and run the cell again."


_CODE = re.compile(r"`([^`\n]+)`")


def inline_html(text: str) -> str:
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
                f'padding-left:0.6em">{inline_html(str(self))}</div>')


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
        e = inline_html
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
        return f"<p>{inline_html(self._answer_text())}</p>"


class Text(str):
    """A string that a notebook displays as plain text (no quotes, newlines kept)."""

    def __repr__(self) -> str:
        return str(self)
