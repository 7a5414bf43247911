"""Recall formulas of "Beyond Precision: Importance-Aware Recall for Factuality Evaluation
in Long-Form LLM Generation" (docs/recall.md, "The formulas").

* importance: r̃ = (r − 1)/4, s̃ = (s − 1)/4 for the 1–5 relevance and salience ratings,
  imp = α·r̃ + β·s̃ (the paper gives no α, β; dahl's default is α = β = 0.5); a fact's stored
  ``importance`` is used unless α, β are given; an unrated fact weighs 1;
* F*: the facts ranked by importance, or by ``support`` for a set with no importance (pooled
  sets), else in file order (stable: file order breaks ties), cut to the top ``k`` or to those
  with imp ≥ ``min_importance`` (default: all);
* coverage credit c: covered 1, not covered 0, partial 0 (``strict``), 0.5 (``half``)
  or 1 (``lenient``);
* Rec = Σ c / |F*|; Rec^w = Σ imp·c / Σ imp; R@k = Rec over the top min(k, |F*|) facts, None
  when F* has no order (no importance, no support);
* F1 = 2PR / (P + R) with P the answer's DAHL precision S / (S + U) (0 when P + R = 0);
  F1^w the same with Rec^w.

An abstained answer covers nothing: every metric 0 (Rec^w and F1^w None when Σ imp = 0). An
empty F* gives None (reason ``empty_fstar``), Σ imp = 0 gives Rec^w None (``zero_weight``), a
fact whose coverage failed gives None for all (``coverage_error``): never 0 or NaN.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from dahl.errors import ConfigError
from dahl.records import AnswerRecall, Coverage, FactResult, RefFact

__all__ = [
    "DEFAULT_WEIGHT",
    "PARTIAL_CREDIT",
    "RECALL_AT",
    "Partial",
    "answer_recall",
    "coverage_credit",
    "f1_score",
    "fact_weight",
    "fstar",
    "importance",
    "ranking",
]

Partial = Literal["strict", "half", "lenient"]

#: Credit of a ``partial`` coverage label per ``--partial`` mode.
PARTIAL_CREDIT: dict[str, float] = {"strict": 0.0, "half": 0.5, "lenient": 1.0}

#: The k of the R@k columns (R@all is Rec itself).
RECALL_AT: tuple[int, ...] = (5, 10, 20)

#: dahl's α and β when none are given and a rated fact has no stored importance ("Beyond
#: Precision" gives no default).
DEFAULT_WEIGHT = 0.5


def importance(relevance: float, salience: float, *, alpha: float = DEFAULT_WEIGHT,
               beta: float = DEFAULT_WEIGHT) -> float:
    """imp = α·(r − 1)/4 + β·(s − 1)/4 for 1–5 ratings r, s ("Beyond Precision"; α, β: dahl's default 0.5).

    Raises:
        ConfigError: a rating outside [1, 5], or α, β negative or not finite.
    """
    _check_weights(alpha, beta)
    for name, value in (("relevance", relevance), ("salience", salience)):
        if not (math.isfinite(value) and 1.0 <= value <= 5.0):
            raise ConfigError(f"{name} must be a rating in [1, 5], got {value}")
    return alpha * (relevance - 1.0) / 4.0 + beta * (salience - 1.0) / 4.0


def _check_weights(alpha: float, beta: float) -> None:
    if not (math.isfinite(alpha) and math.isfinite(beta)) or alpha < 0 or beta < 0:
        raise ConfigError(f"alpha and beta must be finite and >= 0, got {alpha}, {beta}")


def fact_weight(fact: RefFact, *, alpha: float | None = None, beta: float | None = None) -> float:
    """The weight of ``fact`` in Rec^w.

    With ``alpha`` or ``beta`` given (the other: :data:`DEFAULT_WEIGHT`), the importance of its
    ratings, else its stored ``importance``; with neither, its stored ``importance``, else the
    importance of its ratings at the default weights. A fact with neither weighs 1 (unrated).
    """
    r, s = fact.relevance, fact.salience
    if r is not None and s is not None and (alpha is not None or beta is not None or fact.importance is None):
        return importance(r, s, alpha=DEFAULT_WEIGHT if alpha is None else alpha,
                          beta=DEFAULT_WEIGHT if beta is None else beta)
    if fact.importance is not None:
        return fact.importance
    return 1.0


def ranking(facts: Sequence[RefFact]) -> Literal["importance", "support"] | None:
    """What orders a set's facts in F*: ``importance`` when a fact has one (stored or rated),
    else ``support`` when a fact has one (pooled sets), else None (no order: R@k is None)."""
    if any(f.importance is not None or (f.relevance is not None and f.salience is not None) for f in facts):
        return "importance"
    if any(f.support is not None for f in facts):
        return "support"
    return None


def fstar(
    facts: Sequence[RefFact],
    *,
    k: int | None = None,
    min_importance: float | None = None,
    alpha: float | None = None,
    beta: float | None = None,
) -> list[tuple[RefFact, float]]:
    """F*: ``facts`` with their weights (:func:`fact_weight`), most important first (by ``support``
    when no fact has an importance, see :func:`ranking`; ties in file order), cut by ``k`` or
    ``min_importance``.

    Returns ``[(fact, weight)]``, at most ``k`` long.

    Raises:
        ConfigError: ``k < 1``, or α, β invalid.
    """
    if k is not None and k < 1:
        raise ConfigError(f"--fstar-k must be >= 1, got {k}")
    _check_weights(DEFAULT_WEIGHT if alpha is None else alpha, DEFAULT_WEIGHT if beta is None else beta)
    weighted = [(f, fact_weight(f, alpha=alpha, beta=beta)) for f in facts]
    order = ranking(facts)
    if order == "importance":
        weighted.sort(key=lambda fw: -fw[1])
    elif order == "support":
        weighted.sort(key=lambda fw: -(fw[0].support or 0))
    if min_importance is not None:
        weighted = [fw for fw in weighted if fw[1] >= min_importance]
    return weighted[:k] if k is not None else weighted


def coverage_credit(label: Coverage, partial: Partial = "strict") -> float:
    """Credit of one coverage label: covered 1, not covered 0, partial per ``partial``.

    Raises:
        ConfigError: unknown ``partial`` mode, or ``label`` is ``error`` (never credited).
    """
    if partial not in PARTIAL_CREDIT:
        raise ConfigError(f"--partial must be one of {', '.join(PARTIAL_CREDIT)}, got {partial!r}")
    if label is Coverage.COVERED:
        return 1.0
    if label is Coverage.NOT_COVERED:
        return 0.0
    if label is Coverage.PARTIAL:
        return PARTIAL_CREDIT[partial]
    raise ConfigError("a coverage error has no credit")


def f1_score(precision: float | None, recall: float | None) -> float | None:
    """2PR / (P + R); 0 when P + R = 0; None when either is None."""
    if precision is None or recall is None:
        return None
    total = precision + recall
    return 0.0 if total == 0 else 2.0 * precision * recall / total


def answer_recall(
    facts: Sequence[FactResult],
    *,
    precision: float | None,
    abstained: bool = False,
    partial: Partial = "strict",
    ranked: bool = True,
) -> AnswerRecall:
    """One answer's recall metrics over F* (``facts``, most important first, judged).

    Args:
        facts: F* with each fact's weight and coverage label, in importance order.
        precision: the answer's DAHL precision S / (S + U), None if undefined.
        abstained: the answer abstained (labels ignored).
        partial: credit of a partial coverage (``strict`` 0, ``half`` 0.5, ``lenient`` 1).
        ranked: F* is in an order (:func:`ranking` not None); else R@k is None.

    Raises:
        ConfigError: unknown ``partial`` mode.
    """
    if partial not in PARTIAL_CREDIT:
        raise ConfigError(f"--partial must be one of {', '.join(PARTIAL_CREDIT)}, got {partial!r}")
    facts = tuple(facts)
    if not facts:
        return AnswerRecall(reason="empty_fstar", facts=facts)
    total_weight = sum(f.weight for f in facts)
    if abstained:
        zero = 0.0
        # Rec^w = 0 / Σ imp stays undefined when Σ imp = 0, abstained or not.
        zero_w = zero if total_weight > 0 else None
        zero_at = zero if ranked else None
        return AnswerRecall(recall=zero, recall_w=zero_w, f1=zero, f1_w=zero_w, recall_at_5=zero_at,
                            recall_at_10=zero_at, recall_at_20=zero_at, reason=None if zero_w is not None else "zero_weight", facts=facts)
    if any(f.label is Coverage.ERROR for f in facts):
        return AnswerRecall(reason="coverage_error", facts=facts)
    credit = [coverage_credit(f.label, partial) for f in facts]
    rec = sum(credit) / len(credit)
    rec_w = sum(f.weight * c for f, c in zip(facts, credit, strict=True)) / total_weight if total_weight > 0 else None
    at: dict[int, float | None] = {k: sum(credit[:k]) / min(k, len(credit)) if ranked else None for k in RECALL_AT}
    return AnswerRecall(
        recall=rec,
        recall_w=rec_w,
        f1=f1_score(precision, rec),
        f1_w=f1_score(precision, rec_w),
        recall_at_5=at[5],
        recall_at_10=at[10],
        recall_at_20=at[20],
        reason=None if rec_w is not None else "zero_weight",
        facts=facts,
    )
