"""Assembling one answer's result: claims with verdicts, label counts, status and metrics."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from dahl.metrics import answer_metrics, answer_status
from dahl.records import (
    LABELS,
    Answer,
    AnswerMetrics,
    AnswerResult,
    Claim,
    ClaimResult,
    Status,
    Verdict,
    content_id,
)

__all__ = ["build_result", "result_of_claims"]

_LABEL_NAMES = tuple(label.value for label in LABELS)


# Per-answer status and metrics depend only on the five counts: memoized, so the
# numpy formulas of dahl.metrics run once per distinct count vector, not per answer.
@functools.lru_cache(maxsize=65536)
def _status_of(counts: tuple[int, ...], abstained: bool, split_error: bool) -> tuple[Status, str | None]:
    return answer_status(dict(zip(_LABEL_NAMES, counts, strict=True)), abstained=abstained, split_error=split_error)


@functools.lru_cache(maxsize=65536)
def _metrics_of(counts: tuple[int, ...], gamma: float, k: int) -> AnswerMetrics:
    return answer_metrics(dict(zip(_LABEL_NAMES, counts, strict=True)), gamma=gamma, k=k)


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
    """The result of ``answer`` whose claims already carry their verdicts.

    Counts the labels, then derives status (:func:`dahl.metrics.answer_status`) and
    per-answer metrics (:func:`dahl.metrics.answer_metrics`: DAHL precision, FActScore
    with length penalty ``gamma``, F1@``k``) from the counts.

    Args:
        answer: the answer as scored (after preprocessing).
        input_hash: its resume key.
        claims: its claims with verdicts, in answer order.
        gamma: FActScore length-penalty γ (0 disables).
        k: K of F1@K.
        abstained: the answer is noncommittal (no metrics).
        split_error: why splitting failed, if it did.
    """
    counts = dict.fromkeys(_LABEL_NAMES, 0)
    for c in claims:
        counts[c.label.value] += 1
    key = tuple(counts.values())
    status, reason = _status_of(key, abstained, split_error is not None)
    metrics = _metrics_of(key, gamma, k) if status is not Status.ABSTAINED else AnswerMetrics()
    if split_error is not None:
        reason = f"{reason}: {split_error}" if reason else split_error
    return AnswerResult(
        id=answer.id,
        model=answer.model,
        category=answer.category,
        status=status,
        claims=claims,
        counts=counts,
        metrics=metrics,
        input_hash=input_hash,
        question=answer.question,
        response=answer.response,
        question_id=content_id(answer.question),
        reason=reason,
        meta=answer.meta,
    )


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
            )
            for c, v in zip(claims, verdicts, strict=True)
        ),
        gamma=gamma,
        k=k,
        abstained=abstained,
        split_error=split_error,
    )
