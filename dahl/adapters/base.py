"""The Splitter and Checker protocols every adapter implements (DESIGN.md §6)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dahl.records import Answer, AnswerResult, Claim, Verdict

__all__ = ["Checker", "Coverer", "Splitter"]


@runtime_checkable
class Splitter(Protocol):
    """Turns an answer into atomic claims.

    Attributes:
        fingerprint: stable string naming the Splitter and every setting that
            changes its output (goes into cache keys).
    """

    fingerprint: str

    async def split(self, answer: Answer) -> list[Claim]:
        """Split ``answer.response`` (already preprocessed) into claims, in answer order.

        Raises:
            AdapterError: the split failed (the answer gets status ``error``).
        """
        ...


@runtime_checkable
class Checker(Protocol):
    """Decides whether one claim is supported.

    Attributes:
        fingerprint: stable string naming the Checker and every setting that
            changes its output (goes into cache keys).
    """

    fingerprint: str

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return the verdict on ``claim`` (``answer`` gives the question for context).

        A Checker returns a Verdict with label ``unknown`` when it cannot decide.

        Raises:
            AdapterError: the call failed; the pipeline records label ``error``.
        """
        ...


@runtime_checkable
class Coverer(Protocol):
    """Adds recall to a finished answer: judges its coverage of its question's F*.

    The engine's cover stage calls it once per finished answer; it looks the
    answer's reference set up itself (by ``question_id``, else the normalized
    question), judges coverage (caching per fact) and returns the result with
    ``recall`` set (left UNSET when the question has no reference set).

    Attributes:
        fingerprint: stable string naming the judge, the reference set and every
            setting that changes recall (F* cut, α, β, partial mode).
    """

    fingerprint: str

    async def cover(self, result: AnswerResult) -> AnswerResult:
        """Return ``result`` with its recall.

        A failed judge call gives the fact label ``error`` (the answer's recall is
        None, reason ``coverage_error``), never ``not_covered``.

        Raises:
            QuotaExhausted, FatalAPIError: the run must stop.
        """
        ...
