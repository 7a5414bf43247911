"""What travels between the scoring stages: queued answers, answers being checked, finished lines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from dahl.results._assemble import EncodedResult, FoundAnswer
from dahl.records import Answer, AnswerResult, Claim, Verdict

__all__ = ["ClaimJob", "Line", "Pending", "QueuedAnswer", "WholeAnswers"]

#: A finished answer's line of ``answers.jsonl``, as the writer appends it (an answer
#: found whole in the cache keeps its claims encoded).
Line = AnswerResult | EncodedResult


@dataclass(frozen=True)
class QueuedAnswer:
    """An input answer with its resume key (computed by the reader thread).

    Attributes:
        answer: the answer (preprocessed, once the split stage has run).
        input_hash: its resume key.
        whole_key: its key in the whole-answer cache (:class:`WholeAnswers`), once looked up
            there and not found (the whole-answer workers skip it).
    """

    answer: Answer
    input_hash: str
    whole_key: str | None = None


class WholeAnswers(Protocol):
    """Finished answers in the cache (:class:`dahl.cache._answers.AnswerCache`).

    An answer found there skips preprocessing, splitting and checking; its line is
    the stored claims' JSON spliced into the answer's fields (status and metrics are
    recomputed from the label counts).
    """

    async def look_up(self, items: Sequence[tuple[Answer, str]]) -> tuple[list[str | None], list[FoundAnswer | None]]:
        """Keys of the (answer, input hash) ``items`` (None: not cacheable) and what is stored."""
        ...

    def keep(self, key: str, result: AnswerResult, cleaned: bool) -> None:
        """Store an answer's finished result (``cleaned``: preprocessing changed its response)."""
        ...


class Pending:
    """An answer whose claims are being checked (lives only on the event loop).

    Attributes:
        item: the answer (preprocessed) with its resume and whole-answer keys.
        claims: its claims, in answer order.
        verdicts: one slot per claim, None until decided.
        remaining: claims still without a verdict.
        keys: the claims' cache keys, once looked up (None without a cache).
        generation: the cache's write generation at the lookup.
        cleaned: preprocessing changed the response.
    """

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
