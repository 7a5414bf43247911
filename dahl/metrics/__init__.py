"""Metric formulas, pure functions: the precision side (:mod:`dahl.metrics._precision`) and the
recall of "Beyond Precision" (:mod:`dahl.metrics._recall`)."""

from __future__ import annotations

from dahl.metrics._precision import (
    REASONS,
    answer_metrics,
    answer_status,
    as_counts,
    bootstrap_ci,
    dahl_mask,
    dahl_score,
    exclusion_codes,
    f1_at_k,
    f1_values,
    factscore,
    factscore_mask,
    factscore_values,
    group_seed,
    precision,
    sorted_mean,
)
from dahl.metrics._recall import (
    PARTIAL_CREDIT,
    RECALL_AT,
    Partial,
    answer_recall,
    coverage_credit,
    f1_score,
    fact_weight,
    fstar,
    importance,
)

__all__ = [
    "PARTIAL_CREDIT",
    "Partial",
    "REASONS",
    "RECALL_AT",
    "answer_metrics",
    "answer_recall",
    "answer_status",
    "as_counts",
    "bootstrap_ci",
    "coverage_credit",
    "dahl_mask",
    "dahl_score",
    "exclusion_codes",
    "f1_at_k",
    "f1_score",
    "f1_values",
    "fact_weight",
    "factscore",
    "factscore_mask",
    "factscore_values",
    "fstar",
    "group_seed",
    "importance",
    "precision",
    "sorted_mean",
]
