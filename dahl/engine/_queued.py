"""What travels between the scoring stages: queued answers, answers being checked, finished lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dahl.results._assemble import EncodedResult, FoundAnswer
from dahl.records import Answer, AnswerResult, Claim, Verdict

__all__ = ["ClaimJob", "Line", "Pending", "QueuedAnswer", "WholeAnswers"]

#: A finished answer's line of ``answers.jsonl`` (one found whole keeps its claims encoded).
Line = AnswerResult | EncodedResult


@dataclass(frozen=True)
class QueuedAnswer:
    """An input ``answer`` (preprocessed once split) with its resume key ``input_hash``, and its
    ``whole_key`` in the whole-answer cache once looked up there and not found."""

    answer: Answer
    input_hash: str
    whole_key: str | None = None


class WholeAnswers(Protocol):
    """Finished answers in the cache (:class:`dahl.cache.AnswerCache`): one found there skips
    preprocessing, splitting and checking."""

    async def look_up(self, items: Sequence[tuple[Answer, str]]) -> tuple[list[str | None], list[FoundAnswer | None]]:
        """Keys of the (answer, input hash) ``items`` (None: not cacheable) and what is stored."""
        ...

    def keep(self, key: str, result: AnswerResult, cleaned: bool) -> None:
        """Store an answer's finished result (``cleaned``: preprocessing changed its response)."""
        ...


class Pending:
    """An answer (``item``) whose ``claims`` are being checked: ``verdicts`` (one slot per claim, None
    until decided), ``remaining`` claims without one, the claims' cache ``keys`` and the store's
    ``generation`` once looked up, and whether preprocessing ``cleaned`` the response."""

    __slots__ = ("item", "claims", "verdicts", "remaining", "keys", "generation", "cleaned")

    def __init__(self, item: QueuedAnswer, claims: list[Claim], cleaned: bool) -> None:
        self.item = item
        self.cleaned = cleaned
        self.claims = claims
        self.verdicts: list[Verdict | None] = [None] * len(claims)
        self.remaining = len(claims)
        self.keys: list[str] | None = None
        self.generation = 0


#: An answer's claims to check: the answer and the indices of its claims without a verdict.
ClaimJob = tuple[Pending, Sequence[int]]
