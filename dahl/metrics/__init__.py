"""Metric formulas: pure functions, no I/O.

:mod:`dahl.metrics._precision` holds the precision side (factual precision, DAHL Score,
FActScore, F1@K, bootstrap intervals); :mod:`dahl.metrics._recall` the recall side of
"Beyond Precision" (importance, F*, Rec, Rec^w, R@k, F1, F1^w).
"""

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
