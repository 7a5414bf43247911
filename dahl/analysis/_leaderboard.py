"""Leaderboard over verdict stores: per-model scores, bootstrap CIs, ranks and paired comparisons.

Rank follows the Chatbot Arena rule (Chiang et al. 2024, "Chatbot Arena", §5, "rank (UB)"):
1 + the number of models whose CI lies entirely above this one's; models without a score rank
last. A paired comparison takes, per question both models answered, each model's mean over its
included answers, d = A − B, and bootstraps mean(d) over the questions
(:func:`dahl.analysis._paired_bootstrap.joint_paired_bootstrap`).
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dahl.errors import ConfigError
from dahl.metrics import REASONS, bootstrap_ci, exclusion_codes, f1_score, group_seed, sorted_mean
from dahl.metrics._precision import MAX_N_BOOT
from dahl.analysis._paired_bootstrap import MIN_SHARED_QUESTIONS, format_p, joint_paired_bootstrap
from dahl.records import Status
from dahl.analysis._runs import checker_label
from dahl.analysis._verdicts import STATUSES, Verdicts

__all__ = [
    "BOARD_METRICS",
    "RECALL_BOARD_METRICS",
    "CategoryCell",
    "Comparison",
    "Leaderboard",
    "ModelRow",
    "arena_ranks",
    "build_leaderboard",
    "to_csv",
    "to_json",
    "to_markdown",
]

#: Leaderboard metric name -> per-answer value name in :meth:`Verdicts.scores`.
BOARD_METRICS: dict[str, str] = {
    "dahl_score": "precision",
    "factscore": "factscore",
    "factscore_init": "factscore_init",
    "f1_at_k": "f1_at_k",
    "recall": "recall",
    "recall_w": "recall_w",
    "f1": "f1",
    "f1_w": "f1_w",
}
#: The metrics of :data:`BOARD_METRICS` that need runs scored with reference facts.
RECALL_BOARD_METRICS: tuple[str, ...] = ("recall", "recall_w", "f1", "f1_w")
# Metrics whose CI uses summary.json's per-group seed, so both show the same interval.
_SUMMARY_SEEDED = frozenset(("dahl_score", *RECALL_BOARD_METRICS))


@dataclass(frozen=True)
class ModelRow:
    """One leaderboard row; scores in [0, 1], None when no answer qualifies.

    Attributes:
        rank: Chatbot Arena rank (ties where CIs overlap).
        score, ci: the ranking metric and its percentile bootstrap CI.
        n_scored, n_excluded: answers in / out of the ranking metric's mean.
        excluded_by_reason: answers per :data:`dahl.metrics.REASONS`.
        checker: fingerprint of the Checker of the model's run (None: not known).
        recall, recall_w, f1, f1_w: mean per-answer Rec, Rec^w, F1, F1^w over the answers
            where defined ("Beyond Precision"; None without recall).
        f1_of_means: 2PR / (P + R) of the model's DAHL Score P and mean Rec R (None without recall).
        rho: ρ, mean claims per responding answer.
        n_recall: answers with Rec defined (abstained ones included).
    """

    model: str
    rank: int
    score: float | None
    ci: tuple[float, float] | None
    dahl_score: float | None
    dahl_score_ci: tuple[float, float] | None
    factscore: float | None
    factscore_init: float | None
    f1_at_k: float | None
    n_answers: int
    n_scored: int
    n_excluded: int
    excluded_by_reason: dict[str, int]
    checker: str | None = None
    recall: float | None = None
    recall_w: float | None = None
    f1: float | None = None
    f1_w: float | None = None
    rho: float | None = None
    n_recall: int = 0
    f1_of_means: float | None = None


@dataclass(frozen=True)
class Comparison:
    """Paired comparison of model ``a`` (ranked above) with model ``b``.

    Attributes:
        n_pairs: shared questions: both answered with an included answer.
        mean_diff, ci: mean of per-question A − B and its percentile bootstrap CI.
        p_value: two-sided paired bootstrap p-value; None below
            :data:`~dahl.analysis._paired_bootstrap.MIN_SHARED_QUESTIONS` shared questions.
    """

    a: str
    b: str
    n_pairs: int
    mean_diff: float | None
    ci: tuple[float, float] | None
    p_value: float | None


@dataclass(frozen=True)
class CategoryCell:
    """One model in one category: the ranking metric, its CI and answer counts."""

    score: float | None
    ci: tuple[float, float] | None
    n_scored: int
    n_excluded: int


@dataclass(frozen=True)
class Leaderboard:
    """A computed leaderboard.

    Attributes:
        models: rows sorted by rank, then score (descending), then name.
        categories: category -> model -> cell (empty unless requested).
        has_recall: some run has recall columns (the rows carry Rec, Rec^w, F1, F1^w, ρ).
    """

    metric: str
    gamma: float
    k: int
    seed: int
    n_boot: int
    level: float
    models: list[ModelRow]
    comparisons: list[Comparison]
    categories: dict[str, dict[str, CategoryCell]] = field(default_factory=dict)
    has_recall: bool = False


def _ci(values: npt.NDArray[np.float64], seed: list[int], n_boot: int, level: float) -> tuple[float, float] | None:
    return bootstrap_ci(values, rng=np.random.default_rng(seed), n_boot=n_boot, level=level)


def arena_ranks(cis: list[tuple[float, float] | None]) -> list[int]:
    """Chatbot Arena ranks of per-model ``(lo, hi)`` CIs; a None CI ranks after every model with one."""
    have = [ci for ci in cis if ci is not None]
    ranks = []
    for ci in cis:
        if ci is None:
            ranks.append(len(have) + 1)
        else:
            ranks.append(1 + sum(1 for other in have if other[0] > ci[1]))
    return ranks


def build_leaderboard(
    store: Verdicts,
    *,
    metric: str = "dahl_score",
    gamma: float | None = None,
    k: int | None = None,
    seed: int = 0,
    n_boot: int = 1000,
    level: float = 0.95,
    by_category: bool = False,
    compare: Literal["adjacent", "all"] = "adjacent",
    workers: int | None = None,
    checkers: Sequence[str | None] | None = None,
) -> Leaderboard:
    """Compute the leaderboard of every model in ``store``.

    Args:
        metric: ranking metric, a key of :data:`BOARD_METRICS`.
        gamma, k: FActScore γ in claims and F1@K's K (None: the run's, else 10 and 64).
        seed, n_boot, level: bootstrap seed (with the group names), resamples and coverage.
        by_category: also compute the model × category table (DAHL paper Figure 6).
        compare: paired comparisons between rank-adjacent models or all pairs.
        workers: threads for the bootstraps; None: CPU count.
        checkers: the Checker fingerprint of each merged run, in ``store.source`` order.

    Raises:
        ConfigError: unknown metric or compare mode, n_boot outside [1, MAX_N_BOOT], level outside (0, 1),
            or a recall metric while a run has no recall (the message names its folder).
    """
    if metric not in BOARD_METRICS:
        raise ConfigError(f"unknown leaderboard metric {metric!r}; choose one of {', '.join(BOARD_METRICS)}")
    if compare not in ("adjacent", "all"):
        raise ConfigError(f"compare must be 'adjacent' or 'all', got {compare!r}")
    if n_boot < 1 or not 0.0 < level < 1.0:
        raise ConfigError("n_boot must be >= 1 and level in (0, 1)")
    if n_boot > MAX_N_BOOT:  # before any work: each resample's mean is kept
        raise ConfigError(f"n_boot must be at most {MAX_N_BOOT:,}, got {n_boot:,}")
    g = gamma if gamma is not None else (store.gamma if store.gamma is not None else 10.0)
    kk = k if k is not None else (store.k if store.k is not None else 64)
    has_recall = store.recall is not None
    shown = [m for m in BOARD_METRICS if has_recall or m not in RECALL_BOARD_METRICS]
    if metric in RECALL_BOARD_METRICS:
        store.scores(metric)  # a ConfigError naming the run without recall, before any work
    values = {name: store.scores(BOARD_METRICS[name], gamma=g, k=kk, partial_recall=True) for name in shown}
    claims, responded = store.scores("n_claims")
    status = np.asarray(store.status)
    codes = exclusion_codes(
        np.asarray(store.counts),
        status == STATUSES.index(Status.ABSTAINED),
        status == STATUSES.index(Status.ERROR),
    )
    model = np.asarray(store.model)
    order = np.argsort(model, kind="stable")
    bounds = np.searchsorted(model[order], np.arange(len(store.models) + 1))
    groups = {
        store.models[c]: order[bounds[c] : bounds[c + 1]]
        for c in range(len(store.models))
        if bounds[c + 1] > bounds[c]
    }
    main_vals, main_mask = values[metric]
    pool = ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1)
    with pool:
        ci_jobs = {}
        for name, rows in groups.items():
            for mname in dict.fromkeys(("dahl_score", metric)):
                v, m = values[mname]
                s = group_seed(seed, name) if mname in _SUMMARY_SEEDED else group_seed(seed, name, mname)
                ci_jobs[(name, mname)] = pool.submit(_ci, v[rows][m[rows]], s, n_boot, level)
        rows_out = []
        for name, rows in groups.items():
            means = {mname: sorted_mean(v[rows][m[rows]]) for mname, (v, m) in values.items()}
            recall_mask = values["recall"][1][rows] if has_recall else np.zeros(0, bool)
            by_reason = np.bincount(codes[rows], minlength=len(REASONS) + 1)
            n_scored = int(main_mask[rows].sum())
            rows_out.append(
                ModelRow(
                    model=name,
                    rank=0,
                    score=means[metric],
                    ci=ci_jobs[(name, metric)].result(),
                    dahl_score_ci=ci_jobs[(name, "dahl_score")].result(),
                    n_answers=int(rows.size),
                    n_scored=n_scored,
                    n_excluded=int(rows.size) - n_scored,
                    excluded_by_reason={r: int(by_reason[i + 1]) for i, r in enumerate(REASONS)},
                    checker=_checker_of(store, rows, checkers),
                    **{m: means.get(m) for m in BOARD_METRICS},
                    rho=sorted_mean(claims[rows][responded[rows]]) if has_recall else None,
                    n_recall=int(recall_mask.sum()),
                    f1_of_means=f1_score(means["dahl_score"], means["recall"]) if has_recall else None,
                )
            )
        ranks = arena_ranks([r.ci for r in rows_out])
        board_rows = [replace(r, rank=rank) for rank, r in zip(ranks, rows_out)]
        board_rows.sort(key=lambda r: (r.rank, -(r.score if r.score is not None else -1.0), r.model))
        comparisons = _compare(store, board_rows, groups, main_vals, main_mask, compare, seed, n_boot, level)
        categories = (
            _categories(store, groups, main_vals, main_mask, metric, seed, n_boot, level, pool) if by_category else {}
        )
    return Leaderboard(
        metric=metric,
        gamma=g,
        k=kk,
        seed=seed,
        n_boot=n_boot,
        level=level,
        models=board_rows,
        comparisons=comparisons,
        categories=categories,
        has_recall=has_recall,
    )


def _checker_of(store: Verdicts, rows: npt.NDArray[np.intp], checkers: Sequence[str | None] | None) -> str | None:
    """The Checker of the run the answers ``rows`` (one model's, so one run's) come from."""
    if not checkers or rows.size == 0:
        return None
    run = 0 if store.source is None else int(np.asarray(store.source)[rows[0]])
    return checkers[run] if run < len(checkers) else None


def _compare(
    store: Verdicts,
    rows: list[ModelRow],
    groups: dict[str, npt.NDArray[np.intp]],
    values: npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_],
    compare: str,
    seed: int,
    n_boot: int,
    level: float,
) -> list[Comparison]:
    """Paired comparisons between models (adjacent in rank order, or all pairs)."""
    n_q = len(store.question_ids)
    question = np.asarray(store.question)
    per_q: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]] = {}

    def question_means(name: str) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        if name not in per_q:
            r = groups[name]
            r = r[mask[r]]
            total = np.bincount(question[r], weights=values[r], minlength=n_q)
            count = np.bincount(question[r], minlength=n_q)
            has = count > 0
            per_q[name] = (np.divide(total, count, out=np.zeros(n_q), where=has), has)
        return per_q[name]

    names = [r.model for r in rows]
    if compare == "adjacent":
        pairs = list(zip(names, names[1:]))
    else:
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]

    diffs = np.zeros((n_q, len(pairs)))
    shared = np.zeros((n_q, len(pairs)), dtype=bool)
    for j, (a, b) in enumerate(pairs):
        va, ha = question_means(a)
        vb, hb = question_means(b)
        shared[:, j] = ha & hb
        diffs[:, j] = va - vb
    # Questions in key order, not input order, so the resamples (and p) do not depend on
    # the order answers were written in (as bootstrap_ci sorts its values).
    by_key = np.argsort(np.asarray(store.question_ids, dtype=str), kind="stable")
    results = joint_paired_bootstrap(
        diffs[by_key], shared[by_key], rng=np.random.default_rng(group_seed(seed, "comparisons")), n_boot=n_boot, level=level
    )
    out = []
    for j, ((a, b), res) in enumerate(zip(pairs, results)):
        n_pairs = int(shared[:, j].sum())
        out.append(Comparison(a, b, n_pairs, None, None, None) if res is None else Comparison(a, b, n_pairs, *res))
    return out


def _categories(
    store: Verdicts,
    groups: dict[str, npt.NDArray[np.intp]],
    values: npt.NDArray[np.float64],
    mask: npt.NDArray[np.bool_],
    metric: str,
    seed: int,
    n_boot: int,
    level: float,
    pool: ThreadPoolExecutor,
) -> dict[str, dict[str, CategoryCell]]:
    """Model × category cells of the ranking metric (DAHL paper Figure 6)."""
    category = np.asarray(store.category)
    jobs = {}
    for name, rows in groups.items():
        cat = category[rows]
        for code in np.unique(cat).tolist():
            sub = rows[cat == code]
            cat_name = store.categories[code]
            v = values[sub][mask[sub]]
            s = group_seed(seed, name, cat_name) if metric in _SUMMARY_SEEDED else group_seed(seed, name, cat_name, metric)
            jobs[(cat_name, name)] = (pool.submit(_ci, v, s, n_boot, level), v, int(sub.size))
    out: dict[str, dict[str, CategoryCell]] = {}
    for (cat_name, name), (job, v, n) in sorted(jobs.items()):
        out.setdefault(cat_name, {})[name] = CategoryCell(sorted_mean(v), job.result(), int(v.size), n - int(v.size))
    return out


_RECALL_FIELDS = ("recall", "recall_w", "f1", "f1_w", "rho", "n_recall", "f1_of_means")


def _pair(ci: tuple[float, float] | None) -> list[float] | None:
    return None if ci is None else [ci[0], ci[1]]


def to_json(board: Leaderboard) -> dict[str, Any]:
    """The ``board.json`` document: ``metric``, ``settings`` (with ``min_shared_questions``, below which a
    comparison's ``p_value`` is null), ``models`` (the rows' fields, by rank), ``comparisons`` (``n_pairs``:
    shared questions) and ``categories``; scores are fractions in [0, 1] or null."""
    return {
        "metric": board.metric,
        "settings": {"gamma": board.gamma, "k": board.k, "seed": board.seed, "n_boot": board.n_boot,
                     "level": board.level, "min_shared_questions": MIN_SHARED_QUESTIONS, "rank_rule": "chatbot-arena: 1 + models with CI entirely above"},
        "models": [
            {
                "model": r.model,
                "rank": r.rank,
                "dahl_score": r.dahl_score,
                "dahl_score_ci": _pair(r.dahl_score_ci),
                "factscore": r.factscore,
                "factscore_init": r.factscore_init,
                "f1_at_k": r.f1_at_k,
                "score": r.score,
                "score_ci": _pair(r.ci),
                "n_answers": r.n_answers,
                "n_scored": r.n_scored,
                "n_excluded": r.n_excluded,
                "excluded_by_reason": r.excluded_by_reason,
                "checker": r.checker,
                **({name: getattr(r, name) for name in _RECALL_FIELDS} if board.has_recall else {}),
            }
            for r in board.models
        ],
        "comparisons": [{**asdict(c), "ci": _pair(c.ci)} for c in board.comparisons],
        "categories": {
            cat: {m: {**asdict(c), "ci": _pair(c.ci)} for m, c in cells.items()}
            for cat, cells in board.categories.items()
        },
    }


def _rho(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}"


def _pct_ci(ci: tuple[float, float] | None) -> str:
    return "—" if ci is None else f"{100 * ci[0]:.1f}–{100 * ci[1]:.1f}"


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def to_markdown(board: Leaderboard) -> str:
    """GitHub markdown: the model table (percent; with recall Rec, Rec^w, mean F1 (of the per-answer F1),
    F1 of means (of the DAHL Score and Rec), F1^w and ρ after F1@K), the comparisons and the category table."""
    pct = int(round(100 * board.level))
    lines = [f"## Leaderboard (ranked by {board.metric}, {pct}% bootstrap CI, seed {board.seed})", ""]
    with_checker = any(r.checker for r in board.models)  # known for runs that recorded it
    recall_head = ["Rec", "Rec^w", "mean F1", "F1 of means", "F1^w", "ρ"] if board.has_recall else []
    lines.append(_md_row(["rank", "model", "DAHL Score", f"{pct}% CI", "FActScore", "FActScore (no penalty)",
                          f"F1@{board.k}", *recall_head, "scored", "excluded", *(["Checker"] if with_checker else [])]))
    lines.append("|" + "---:|:---|" + "---:|" * (7 + len(recall_head)) + (":---|" if with_checker else ""))
    for r in board.models:
        recall = [_pct(r.recall), _pct(r.recall_w), _pct(r.f1), _pct(r.f1_of_means), _pct(r.f1_w), _rho(r.rho)] \
            if board.has_recall else []
        lines.append(_md_row([str(r.rank), r.model, _pct(r.dahl_score), _pct_ci(r.dahl_score_ci), _pct(r.factscore),
                              _pct(r.factscore_init), _pct(r.f1_at_k), *recall, str(r.n_scored), str(r.n_excluded),
                              *([checker_label(r.checker)] if with_checker else [])]))
    if board.metric != "dahl_score":
        lines += ["", f"Rank uses {board.metric}; its {pct}% CIs: "
                  + ", ".join(f"{r.model} {_pct_ci(r.ci)}" for r in board.models)]
    lines += ["", "Ranks: 1 + number of models whose CI lies entirely above (Chatbot Arena rule)."]
    if board.comparisons:
        lines += ["", f"### Paired comparisons ({board.metric}, shared questions)", ""]
        lines.append(_md_row(["A", "B", "shared questions", "A − B", f"{pct}% CI", "p (two-sided)"]))
        lines.append("|:---|:---|---:|---:|---:|---:|")
        for c in board.comparisons:
            diff = "—" if c.mean_diff is None else f"{100 * c.mean_diff:+.1f}"
            lines.append(_md_row([c.a, c.b, f"{c.n_pairs:,}", diff, _pct_ci(c.ci), format_p(c.p_value, c.n_pairs)]))
    if board.categories:
        models = [r.model for r in board.models]
        lines += ["", f"### {board.metric} by category", ""]
        lines.append(_md_row(["category", *models]))
        lines.append("|:---|" + "---:|" * len(models))
        for cat, cells in board.categories.items():
            lines.append(_md_row([cat, *(_pct(cells[m].score) if m in cells else "" for m in models)]))
    return "\n".join(lines) + "\n"


def to_csv(board: Leaderboard) -> str:
    """CSV, a row per model (fractions; with recall ``recall`` … ``n_recall`` after ``checker``),
    category cells as ``<metric>:<category>`` columns."""
    buf = io.StringIO()
    cats = list(board.categories)
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["rank", "model", "dahl_score", "dahl_score_ci_lo", "dahl_score_ci_hi", "factscore",
                     "factscore_init", "f1_at_k", "n_answers", "n_scored", "n_excluded", "checker",
                     *(_RECALL_FIELDS if board.has_recall else ()), *(f"{board.metric}:{c}" for c in cats)])

    def num(x: float | None) -> str:
        return "" if x is None else repr(x)

    for r in board.models:
        lo, hi = r.dahl_score_ci if r.dahl_score_ci is not None else (None, None)
        cells = [board.categories[c].get(r.model) for c in cats]
        writer.writerow([r.rank, r.model, num(r.dahl_score), num(lo), num(hi), num(r.factscore),
                         num(r.factscore_init), num(r.f1_at_k), r.n_answers, r.n_scored, r.n_excluded,
                         r.checker or "",
                         *([num(r.recall), num(r.recall_w), num(r.f1), num(r.f1_w), num(r.rho), r.n_recall,
                            num(r.f1_of_means)] if board.has_recall else []),
                         *("" if c is None else num(c.score) for c in cells)])
    return buf.getvalue()
