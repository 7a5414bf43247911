"""Assembling one answer's result: claims with verdicts, label counts, status and metrics."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import msgspec

from dahl.metrics import answer_metrics, answer_status
from dahl.records import (
    LABELS,
    Answer,
    AnswerMetrics,
    AnswerRecall,
    AnswerResult,
    Claim,
    ClaimResult,
    Label,
    Status,
    Verdict,
    content_id,
)

__all__ = ["EncodedResult", "FoundAnswer", "build_result", "label_counts", "result_of_claims", "result_of_encoded",
           "result_of_found"]

_LABEL_NAMES = tuple(label.value for label in LABELS)


# Per-answer status and metrics depend only on the five counts: memoized, so the
# numpy formulas of dahl.metrics run once per distinct count vector, not per answer.
@functools.lru_cache(maxsize=65536)
def _status_of(counts: tuple[int, ...], abstained: bool, split_error: bool) -> tuple[Status, str | None]:
    return answer_status(dict(zip(_LABEL_NAMES, counts, strict=True)), abstained=abstained, split_error=split_error)


@functools.lru_cache(maxsize=65536)
def _metrics_of(counts: tuple[int, ...], gamma: float, k: int) -> AnswerMetrics:
    return answer_metrics(dict(zip(_LABEL_NAMES, counts, strict=True)), gamma=gamma, k=k)


class FoundAnswer(NamedTuple):
    """An answer found whole in the cache (:mod:`dahl.cache._wrap`).

    Attributes:
        claims: JSON array of its claims with verdicts, as ``answers.jsonl`` holds them.
        counts: claims per label, in :data:`~dahl.records.LABELS` order.
        question_id: :func:`~dahl.records.content_id` of the question.
        response: the response as scored, when preprocessing changed it; else None.
    """

    claims: msgspec.Raw
    counts: tuple[int, ...]
    question_id: str
    response: str | None


class EncodedResult(msgspec.Struct, frozen=True, kw_only=True):
    """An :class:`~dahl.records.AnswerResult` whose claims are already JSON (an answer found whole in
    the cache); it encodes to the very line the AnswerResult would."""

    id: str
    model: str
    category: str
    status: Status
    claims: msgspec.Raw
    counts: dict[str, int]
    metrics: AnswerMetrics
    input_hash: str
    question: str = ""
    response: str = ""
    question_id: str = ""
    reason: str | None = None
    meta: dict[str, Any] = {}
    recall: AnswerRecall | msgspec.UnsetType = msgspec.UNSET  # never set: whole answers carry no recall

    def decoded(self) -> AnswerResult:
        """The same result as an :class:`~dahl.records.AnswerResult` (claims decoded).

        Raises:
            msgspec.ValidationError: the claims are not a JSON array of claims with verdicts.
        """
        return _RESULT_DECODER.decode(_JSON_ENCODER.encode(self))


_JSON_ENCODER = msgspec.json.Encoder()
_RESULT_DECODER = msgspec.json.Decoder(AnswerResult)


def label_counts(labels: Iterable[Label]) -> tuple[int, ...]:
    """Claims per label, in :data:`~dahl.records.LABELS` order."""
    counts = dict.fromkeys(LABELS, 0)
    for label in labels:
        counts[label] += 1
    return tuple(counts.values())


def result_of_encoded(
    answer: Answer,
    input_hash: str,
    claims: msgspec.Raw,
    counts: tuple[int, ...],
    question_id: str,
    *,
    gamma: float,
    k: int,
) -> EncodedResult:
    """The result of ``answer`` from its claims' JSON and their label counts (see :func:`result_of_claims`).

    Args:
        claims: JSON array of its claims with verdicts (as :class:`~dahl.records.AnswerResult` writes them).
        counts: claims per label in :data:`~dahl.records.LABELS` order (from :func:`label_counts`).
        question_id: :func:`~dahl.records.content_id` of the question.
    """
    return EncodedResult(claims=claims, **_fields(answer, input_hash, counts, question_id, gamma=gamma, k=k))


def result_of_found(answer: Answer, input_hash: str, found: FoundAnswer, *, gamma: float, k: int) -> EncodedResult:
    """The result of ``answer`` found whole in the cache (the stored response replaces the input's, if kept).

    See :func:`result_of_encoded` for the arguments.
    """
    if found.response is not None:
        answer = msgspec.structs.replace(answer, response=found.response)
    return result_of_encoded(answer, input_hash, found.claims, found.counts, found.question_id, gamma=gamma, k=k)


def result_of_claims(
    answer: Answer,
    input_hash: str,
    claims: tuple[ClaimResult, ...],
    *,
    gamma: float,
    k: int,
    abstained: bool = False,
    split_error: str | None = None,
) -> AnswerResult:
    """The result of ``answer`` whose claims carry their verdicts: status and metrics from the label
    counts (:func:`dahl.metrics.answer_status`, :func:`dahl.metrics.answer_metrics`).

    Args:
        answer: the answer as scored (after preprocessing).
        input_hash: its resume key.
        claims: its claims with verdicts, in answer order.
        gamma: FActScore length-penalty γ (0 disables).
        k: K of F1@K.
        abstained: the answer is noncommittal (no metrics).
        split_error: why splitting failed, if it did.
    """
    counts = label_counts(c.label for c in claims)
    fields = _fields(answer, input_hash, counts, content_id(answer.question), gamma=gamma, k=k, abstained=abstained,
                     split_error=split_error)
    return AnswerResult(claims=claims, **fields)


def _fields(
    answer: Answer,
    input_hash: str,
    counts: tuple[int, ...],
    question_id: str,
    *,
    gamma: float,
    k: int,
    abstained: bool = False,
    split_error: str | None = None,
) -> dict[str, Any]:
    """Every field of a result but its claims, from the answer and its label counts."""
    status, reason = _status_of(counts, abstained, split_error is not None)
    if split_error is not None:
        reason = f"{reason}: {split_error}" if reason else split_error
    return {
        "id": answer.id,
        "model": answer.model,
        "category": answer.category,
        "status": status,
        "counts": dict(zip(_LABEL_NAMES, counts, strict=True)),
        "metrics": _metrics_of(counts, gamma, k) if status is not Status.ABSTAINED else AnswerMetrics(),
        "input_hash": input_hash,
        "question": answer.question,
        "response": answer.response,
        "question_id": question_id,
        "reason": reason,
        "meta": answer.meta,
    }


def build_result(
    answer: Answer,
    input_hash: str,
    claims: Sequence[Claim],
    verdicts: Sequence[Verdict],
    *,
    gamma: float,
    k: int,
    abstained: bool = False,
    split_error: str | None = None,
) -> AnswerResult:
    """Assemble one answer's result from its claims and their verdicts (same order).

    See :func:`result_of_claims` for the other arguments.

    Raises:
        ValueError: ``claims`` and ``verdicts`` differ in length.
    """
    return result_of_claims(
        answer,
        input_hash,
        tuple(
            ClaimResult(
                text=c.text,
                index=c.index,
                label=v.label,
                sentence=c.sentence,
                span=c.span,
                evidence=v.evidence,
                raw=v.raw,
                error=v.error,
                reason=v.reason if v.label is Label.UNSUPPORTED else None,
            )
            for c, v in zip(claims, verdicts, strict=True)
        ),
        gamma=gamma,
        k=k,
        abstained=abstained,
        split_error=split_error,
    )
