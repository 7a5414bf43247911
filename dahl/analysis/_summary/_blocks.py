"""The figures blocks of ``summary.json``: frozen msgspec Structs whose encoding is the JSON object
(``UNSET`` fields left out), computed by :class:`dahl.analysis._summary._builder.SummaryBuilder`.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

from dahl.analysis._summary._recall import RecallSummary, RecordedRecallSettings

__all__ = ["Figures", "GroupSummary", "ModelSummary", "UnsupportedByReason"]


class UnsupportedByReason(msgspec.Struct, frozen=True, kw_only=True):
    """Unsupported claims of a group by their verdict's reason (``contradicted``, ``no_evidence``,
    ``unstated``: none given), summing to ``labels["unsupported"]``."""

    contradicted: int
    no_evidence: int
    unstated: int


class GroupSummary(msgspec.Struct, frozen=True, kw_only=True):
    """Figures of one group of answers: a model's category (and the base of :class:`ModelSummary`).

    Scores are in [0, 1]; None (never NaN) when no answer qualifies.

    Attributes:
        n_scored: answers in the DAHL Score and F1@K (``n_factscore``: in FActScore).
        n_excluded: ``n_answers - n_scored`` (abstained included), by every name of
            :data:`dahl.metrics.REASONS` in ``excluded_by_reason``.
        dahl_score, dahl_score_ci: mean precision S / (S + U) (DAHL paper §3.3), ``[lo, hi]``
            percentile bootstrap.
        factscore, factscore_init: FActScore with the run's γ and with γ = 0 (Min et al. 2023).
        f1_at_k: mean F1@K (SAFE, Wei et al. 2024).
        labels: claims per label, every name of :data:`dahl.records.LABELS`.
        unsupported_by_reason, recall: only when some verdict gave a reason; when the run tracks recall.
    """

    n_answers: int
    n_scored: int
    n_abstained: int
    n_excluded: int
    excluded_by_reason: dict[str, int]
    n_factscore: int
    dahl_score: float | None
    dahl_score_ci: list[float] | None
    factscore: float | None
    factscore_init: float | None
    f1_at_k: float | None
    labels: dict[str, int]
    unsupported_by_reason: UnsupportedByReason | UnsetType = UNSET
    recall: RecallSummary | UnsetType = UNSET


class ModelSummary(GroupSummary, frozen=True, kw_only=True):
    """Figures of one model's answers, and of each of its ``categories`` (sorted by name)."""

    categories: dict[str, GroupSummary] = msgspec.field(default_factory=dict)


class Figures(msgspec.Struct, frozen=True, kw_only=True):
    """The figures part of summary.json: ``models`` and, with recall, ``recall_settings``.

    Attributes:
        models: model -> its figures, sorted by name.
        recall_settings: None when recall is tracked without settings, UNSET when not tracked.
    """

    models: dict[str, ModelSummary]
    recall_settings: RecordedRecallSettings | None | UnsetType = UNSET

    def as_builtins(self) -> dict[str, Any]:
        """The plain-JSON object (dicts, lists, numbers, strings, None)."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out
