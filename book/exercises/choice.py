"""One of a few options to pick (:class:`Choice`), each wrong option with its own explanation."""

from __future__ import annotations

from .core import Exercise, Feedback

__all__ = ["Choice"]

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
