"""Aggregation of answer results per model and per (model, category): :class:`SummaryBuilder` keeps
compact per-answer columns and computes the blocks of :mod:`dahl.analysis._summary._blocks` at the end."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from dahl.errors import ConfigError, InputError
from dahl.metrics import (
    REASONS,
    bootstrap_ci,
    dahl_mask,
    exclusion_codes,
    f1_values,
    factscore_mask,
    factscore_values,
    group_seed,
    precision,
    sorted_mean,
)
from dahl.analysis._summary._recall import RecallColumns, RecordedRecallSettings
from dahl.analysis._summary._blocks import Figures, GroupSummary, ModelSummary, UnsupportedByReason
from dahl.records import LABELS, AnswerResult, Label, ResultDigest, Status, UnsupportedReason

__all__ = ["SummaryBuilder"]

# Per-answer flag column: what counts alone cannot tell.
_RESPONDED, _ABSTAINED, _SPLIT_ERROR = 0, 1, 2
_INITIAL_CAPACITY = 1024
# Rows staged in a Python list before one vectorized copy into the columns.
_STAGE_ROWS = 4096
_COLUMN = {str(label): j for j, label in enumerate(LABELS)}
# Unsupported claims counted by reason (row columns 8 and 9); the rest are "unstated".
_REASON_COLUMN = {UnsupportedReason.CONTRADICTED: 8, UnsupportedReason.NO_EVIDENCE: 9}
_UNSUPPORTED = LABELS.index(Label.UNSUPPORTED)


class SummaryBuilder:
    """Collects answer results and builds ``summary.json``'s per-model figures.

    Args:
        gamma, k: FActScore length-penalty γ in claims (0 disables) and F1@K's K in supported claims.
        seed, n_boot, level: bootstrap seed (one generator per group, with its names), resamples, coverage.
        recall_settings: the run's recall settings: every block gets a ``recall`` object.
            Without them, recall is summarized once an added answer carries ``recall``.

    Raises:
        ConfigError: gamma < 0, k < 1, n_boot < 1 or level outside (0, 1).
    """

    def __init__(
        self,
        gamma: float = 10.0,
        k: int = 64,
        seed: int = 0,
        n_boot: int = 1000,
        level: float = 0.95,
        *,
        recall_settings: RecordedRecallSettings | None = None,
    ) -> None:
        if gamma < 0:
            raise ConfigError(f"gamma must be >= 0, got {gamma}")
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k}")
        if n_boot < 1:
            raise ConfigError(f"n_boot must be >= 1, got {n_boot}")
        if not 0.0 < level < 1.0:
            raise ConfigError(f"level must be in (0, 1), got {level}")
        self.gamma = gamma
        self.k = k
        self.seed = seed
        self.n_boot = n_boot
        self.level = level
        self._n = 0
        self._counts = np.zeros((_INITIAL_CAPACITY, len(LABELS)), dtype=np.int32)
        self._flag = np.zeros(_INITIAL_CAPACITY, dtype=np.int8)
        self._model = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._category = np.zeros(_INITIAL_CAPACITY, dtype=np.int32)
        self._reasons = np.zeros((_INITIAL_CAPACITY, 2), dtype=np.int32)
        self._any_reason = False
        self._models: dict[str, int] = {}
        self._categories: dict[str, int] = {}
        self._pending: list[list[int]] = []
        self.recall_settings = recall_settings
        # Recall rows stay parallel to _pending while recall is tracked (None: not yet).
        self._recall = RecallColumns(_INITIAL_CAPACITY) if recall_settings is not None else None
        self._pending_recall: list[list[float]] = []
        self._pending_code: list[int] = []

    def __len__(self) -> int:
        """Number of answers added."""
        return self._n + len(self._pending)

    def __repr__(self) -> str:
        return (
            f"SummaryBuilder(answers={len(self)}, models={len(self._models)}, "
            f"categories={len(self._categories)}, gamma={self.gamma}, k={self.k}, "
            f"seed={self.seed}, n_boot={self.n_boot})"
        )

    def add(self, result: AnswerResult | ResultDigest) -> None:
        """Record one answer's label counts, model, category and whether it abstained or failed to split.

        The other exclusion reasons are recomputed from the counts (:mod:`dahl.metrics`).

        Raises:
            InputError: ``result.counts`` has an unknown label or a negative count.
        """
        row = [0, 0, 0, 0, 0, _RESPONDED, 0, 0, 0, 0]
        for key, value in result.counts.items():
            col = _COLUMN.get(key)
            if col is None:
                raise InputError(f"unknown label {key!r} in answer {result.id!r}", field="counts")
            if value < 0:
                raise InputError(f"negative count {value} for {key!r} in answer {result.id!r}", field="counts")
            row[col] = value
        if result.status == Status.ABSTAINED:
            row[5] = _ABSTAINED
        elif result.status == Status.ERROR:
            row[5] = _SPLIT_ERROR
        row[6] = self._models.setdefault(result.model, len(self._models))
        row[7] = self._categories.setdefault(result.category, len(self._categories))
        if self._recall is None and not isinstance(result.recall, msgspec.UnsetType):
            self._start_recall()
        if self._recall is not None:
            values, code = RecallColumns.row(result)
            self._pending_recall.append(values)
            self._pending_code.append(code)
        if row[_UNSUPPORTED]:
            reasons = [r for c in result.claims if (r := c.reason) is not None]
            if reasons:
                for reason in reasons:
                    row[_REASON_COLUMN[reason]] += 1
                self._any_reason = True
        self._pending.append(row)
        if len(self._pending) >= _STAGE_ROWS:
            self._flush()

    def _start_recall(self) -> None:
        """Track recall from now on; answers added before had no reference set."""
        recall = RecallColumns(self._counts.shape[0])
        recall.mark_no_refs(self._n)
        self._recall = recall
        values, code = RecallColumns.row_no_refs()
        self._pending_recall = [values] * len(self._pending)
        self._pending_code = [code] * len(self._pending)

    def _flush(self) -> None:
        """Move staged rows into the numpy columns, doubling their capacity when full."""
        if not self._pending:
            return
        block = np.array(self._pending, dtype=np.int64)
        self._pending.clear()
        start, stop = self._n, self._n + block.shape[0]
        cap = self._counts.shape[0]
        if stop > cap:
            while cap < stop:
                cap *= 2
            self._counts = np.resize(self._counts, (cap, len(LABELS)))
            self._flag = np.resize(self._flag, cap)
            self._model = np.resize(self._model, cap)
            self._category = np.resize(self._category, cap)
            if self._recall is not None:
                self._recall.resize(cap)
            self._reasons = np.resize(self._reasons, (cap, 2))
        self._counts[start:stop] = block[:, : len(LABELS)]
        self._flag[start:stop] = block[:, 5]
        self._model[start:stop] = block[:, 6]
        self._category[start:stop] = block[:, 7]
        if self._recall is not None:
            self._recall.put(start, self._pending_recall, self._pending_code)
            self._pending_recall = []
            self._pending_code = []
        self._reasons[start:stop] = block[:, 8:10]
        self._n = stop

    def merged(self, other: SummaryBuilder) -> SummaryBuilder:
        """A new builder of this builder's answers then ``other``'s; its :meth:`build` is that of one
        builder given both. Recall is tracked when either side tracks it (the other's are ``no_refs``).

        Raises:
            ConfigError: the two differ in gamma, k, seed, n_boot, level, or recall settings both have.
        """
        mine = (self.gamma, self.k, self.seed, self.n_boot, self.level)
        theirs = (other.gamma, other.k, other.seed, other.n_boot, other.level)
        if mine != theirs:
            raise ConfigError(f"cannot merge summaries of different settings (gamma, k, seed, n_boot, level): "
                              f"{mine} and {theirs}")
        if None not in (self.recall_settings, other.recall_settings) and self.recall_settings != other.recall_settings:
            raise ConfigError("cannot merge summaries of different recall settings")
        self._flush()
        other._flush()
        out = SummaryBuilder(self.gamma, self.k, self.seed, self.n_boot, self.level,
                             recall_settings=self.recall_settings or other.recall_settings)
        out._models = dict(self._models)
        out._categories = dict(self._categories)
        model_code = np.array([out._models.setdefault(m, len(out._models)) for m in _names(other._models)],
                              dtype=np.int32)
        category_code = np.array(
            [out._categories.setdefault(c, len(out._categories)) for c in _names(other._categories)], dtype=np.int32)
        a, b = self._n, other._n
        out._n = a + b
        capacity = max(out._n, _INITIAL_CAPACITY)
        out._counts = _joined(self._counts[:a], other._counts[:b], capacity)
        out._flag = _joined(self._flag[:a], other._flag[:b], capacity)
        out._model = _joined(self._model[:a], model_code[other._model[:b]], capacity)
        out._category = _joined(self._category[:a], category_code[other._category[:b]], capacity)
        out._reasons = _joined(self._reasons[:a], other._reasons[:b], capacity)
        out._any_reason = self._any_reason or other._any_reason
        if self._recall is not None or other._recall is not None:
            out._recall = RecallColumns.joined(self._recall, a, other._recall, b, capacity)
        return out

    def build(self) -> Figures:
        """The summary's figures: models and their categories sorted by name (see
        :class:`~dahl.analysis._summary._blocks.ModelSummary` for which fields are set when)."""
        self._flush()
        n = self._n
        counts = self._counts[:n].astype(np.int64)
        flag = self._flag[:n]
        codes = exclusion_codes(counts, flag == _ABSTAINED, flag == _SPLIT_ERROR)
        eligible = flag == _RESPONDED
        in_dahl = dahl_mask(counts, eligible)
        in_fs = factscore_mask(counts, eligible)
        prec = precision(counts[:, LABELS.index(Label.SUPPORTED)], counts[:, LABELS.index(Label.UNSUPPORTED)])
        columns = _Columns(
            counts=counts,
            codes=codes,
            in_dahl=in_dahl,
            in_fs=in_fs,
            precision=np.where(in_dahl, prec, 0.0),
            f1=np.where(in_dahl, f1_values(counts, self.k), 0.0),
            fs=np.where(in_fs, factscore_values(counts, self.gamma), 0.0),
            fs_init=np.where(in_fs, factscore_values(counts, 0.0), 0.0),
            reasons=self._reasons[:n].astype(np.int64) if self._any_reason else None,
        )
        model_names = _names(self._models)
        category_names = _names(self._categories)
        model = self._model[:n]
        category = self._category[:n]
        n_cat = max(len(category_names), 1)
        pair = model.astype(np.int64) * n_cat + category

        by_model = np.argsort(model, kind="stable")
        model_bounds = np.searchsorted(model[by_model], np.arange(len(model_names) + 1))
        by_pair = np.argsort(pair, kind="stable")
        pair_sorted = pair[by_pair]

        out: dict[str, ModelSummary] = {}
        for m_code in sorted(range(len(model_names)), key=model_names.__getitem__):
            name = model_names[m_code]
            rows = by_model[model_bounds[m_code] : model_bounds[m_code + 1]]
            cats: dict[str, GroupSummary] = {}
            lo, hi = np.searchsorted(pair_sorted, [m_code * n_cat, (m_code + 1) * n_cat])
            sub = by_pair[lo:hi]
            sub_category = category[sub]  # ascending, since pair = model * n_cat + category
            present = np.unique(sub_category)
            bounds = np.searchsorted(sub_category, present, side="left")
            ends = np.searchsorted(sub_category, present, side="right")
            spans = {category_names[c]: (b, e) for c, b, e in zip(present.tolist(), bounds.tolist(), ends.tolist())}
            for cat in sorted(spans):
                b, e = spans[cat]
                cats[cat] = GroupSummary(**self._block(columns, sub[b:e], group_seed(self.seed, name, cat)))
            out[name] = ModelSummary(**self._block(columns, rows, group_seed(self.seed, name)), categories=cats)
        if self._recall is None:
            return Figures(models=out)
        return Figures(models=out, recall_settings=self.recall_settings)

    def _block(self, col: _Columns, rows: npt.NDArray[np.intp], seed: list[int]) -> dict[str, Any]:
        """Fields of the :class:`~dahl.analysis._summary._blocks.GroupSummary` of answers ``rows``."""
        in_dahl = col.in_dahl[rows]
        in_fs = col.in_fs[rows]
        n_scored = int(in_dahl.sum())
        n_fs = int(in_fs.sum())
        by_reason = np.bincount(col.codes[rows], minlength=len(REASONS) + 1)
        prec = col.precision[rows][in_dahl]
        ci = bootstrap_ci(prec, rng=np.random.default_rng(seed), n_boot=self.n_boot, level=self.level)
        label_totals = col.counts[rows].sum(axis=0)
        block: dict[str, Any] = {
            "n_answers": int(rows.size),
            "n_scored": n_scored,
            "n_abstained": int(by_reason[1 + REASONS.index("abstained")]),
            "n_excluded": int(rows.size) - n_scored,
            "excluded_by_reason": {r: int(by_reason[i + 1]) for i, r in enumerate(REASONS)},
            "n_factscore": n_fs,
            "dahl_score": sorted_mean(prec),
            "dahl_score_ci": None if ci is None else [ci[0], ci[1]],
            "factscore": sorted_mean(col.fs[rows][in_fs]),
            "factscore_init": sorted_mean(col.fs_init[rows][in_fs]),
            "f1_at_k": sorted_mean(col.f1[rows][in_dahl]),
            "labels": {str(label): int(label_totals[j]) for j, label in enumerate(LABELS)},
        }
        if col.reasons is not None:
            contradicted, no_evidence = (int(v) for v in col.reasons[rows].sum(axis=0))
            unsupported = int(label_totals[LABELS.index(Label.UNSUPPORTED)])
            block["unsupported_by_reason"] = UnsupportedByReason(
                contradicted=contradicted, no_evidence=no_evidence, unstated=unsupported - contradicted - no_evidence)
        if self._recall is not None:
            flag = self._flag[rows]
            block["recall"] = self._recall.block(
                rows, abstained=flag == _ABSTAINED, responded=flag == _RESPONDED, claims=col.counts[rows].sum(axis=1),
                seed=seed, n_boot=self.n_boot, level=self.level, precision=block["dahl_score"],
            )
        return block


@dataclass(frozen=True, slots=True, kw_only=True)
class _Columns:
    """Per-answer arrays shared by every group's computation (NaN already replaced by 0)."""

    counts: npt.NDArray[np.int64]
    codes: npt.NDArray[np.int8]
    in_dahl: npt.NDArray[np.bool_]
    in_fs: npt.NDArray[np.bool_]
    precision: npt.NDArray[np.float64]
    f1: npt.NDArray[np.float64]
    fs: npt.NDArray[np.float64]
    fs_init: npt.NDArray[np.float64]
    reasons: npt.NDArray[np.int64] | None = None  # (n, 2): contradicted, no_evidence; None: no reason given


def _joined(first: npt.NDArray[Any], second: npt.NDArray[Any], capacity: int) -> npt.NDArray[Any]:
    """``first`` then ``second`` along rows, in a column of ``capacity`` rows (the rest zero)."""
    out = np.zeros((capacity, *first.shape[1:]), dtype=first.dtype)
    out[: len(first)] = first
    out[len(first) : len(first) + len(second)] = second
    return out


def _names(codes: dict[str, int]) -> list[str]:
    """Names indexed by their code."""
    names = [""] * len(codes)
    for name, code in codes.items():
        names[code] = name
    return names
