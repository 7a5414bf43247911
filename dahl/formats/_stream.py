"""An iterator of answers that knows the input line of the answer it gave last."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from dahl.errors import InputError
from dahl.records import Answer

__all__ = ["AnswerStream", "skip_or_raise"]


def skip_or_raise(error: InputError, on_error: Callable[[InputError], None] | None) -> None:
    """Hand a bad record's ``error`` to ``on_error`` (the caller then skips it); raise it when None."""
    if on_error is None:
        raise error
    on_error(error)


class AnswerStream(Iterator[Answer]):
    """Answers of one input file, in file order, each with the line it starts on.

    Attributes:
        line: 1-based input line of the answer last returned; None before the
            first, or when the reader does not know lines.
    """

    def __init__(self, numbered: Iterator[tuple[int | None, Answer]]) -> None:
        """Wrap ``numbered``, an iterator of ``(line or None, answer)`` pairs."""
        self._numbered = numbered
        self.line: int | None = None

    @classmethod
    def unnumbered(cls, answers: Iterator[Answer]) -> AnswerStream:
        """A stream over ``answers`` from a reader that does not know lines."""
        return cls((None, answer) for answer in answers)

    def pairs(self) -> Iterator[tuple[int | None, Answer]]:
        """The remaining ``(line, answer)`` pairs, without a method call per answer
        (:attr:`line` is not updated by them)."""
        return self._numbered

    def __next__(self) -> Answer:
        self.line, answer = next(self._numbered)
        return answer
