"""Aggregation of answer results per model and per (model, category): :class:`SummaryBuilder` counts
the answers of each distinct row (label counts, flag, model, category, reasons) and computes the
blocks of :mod:`dahl.analysis._summary._blocks` at the end, so its memory grows with the variety of
rows, not with the number of answers (recall, continuous, keeps a row per answer)."""

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
from dahl.analysis._summary._recall import GroupedRecall, RecordedRecallSettings
from dahl.analysis._summary._blocks import Figures, GroupSummary, ModelSummary, UnsupportedByReason
from dahl.records import LABELS, AnswerResult, Label, ResultDigest, Status, UnsupportedReason

__all__ = ["SummaryBuilder"]

# A row's flag: what counts alone cannot tell.
_RESPONDED, _ABSTAINED, _SPLIT_ERROR = 0, 1, 2
_COLUMN = {str(label): j for j, label in enumerate(LABELS)}
# A row: label counts (LABELS order), flag, model code, category code, unsupported claims by reason
# (contradicted, no_evidence; the rest are "unstated").
_FLAG, _MODEL, _CATEGORY = len(LABELS), len(LABELS) + 1, len(LABELS) + 2
_REASON_COLUMN = {UnsupportedReason.CONTRADICTED: len(LABELS) + 3, UnsupportedReason.NO_EVIDENCE: len(LABELS) + 4}
_ROW_WIDTH = len(LABELS) + 5
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
        # Distinct row -> number of answers with it.
        self._rows: dict[tuple[int, ...], int] = {}
        self._any_reason = False
        self._models: dict[str, int] = {}
        self._categories: dict[str, int] = {}
        self.recall_settings = recall_settings
        # Answers added since recall was tracked (None: not yet); the others are no_refs.
        self._recall = GroupedRecall() if recall_settings is not None else None

    def __len__(self) -> int:
        """Number of answers added."""
        return self._n

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
        row = [0] * _ROW_WIDTH
        for key, value in result.counts.items():
            col = _COLUMN.get(key)
            if col is None:
                raise InputError(f"unknown label {key!r} in answer {result.id!r}", field="counts")
            if value < 0:
                raise InputError(f"negative count {value} for {key!r} in answer {result.id!r}", field="counts")
            row[col] = value
        if result.status == Status.ABSTAINED:
            row[_FLAG] = _ABSTAINED
        elif result.status == Status.ERROR:
            row[_FLAG] = _SPLIT_ERROR
        row[_MODEL] = self._models.setdefault(result.model, len(self._models))
        row[_CATEGORY] = self._categories.setdefault(result.category, len(self._categories))
        if self._recall is None and not isinstance(result.recall, msgspec.UnsetType):
            self._recall = GroupedRecall()
        if self._recall is not None:
            self._recall.add(result, (row[_MODEL], row[_CATEGORY], row[_FLAG], sum(row[: len(LABELS)])))
        if row[_UNSUPPORTED]:
            reasons = [r for c in result.claims if (r := c.reason) is not None]
            if reasons:
                for reason in reasons:
                    row[_REASON_COLUMN[reason]] += 1
                self._any_reason = True
        distinct = tuple(row)
        self._rows[distinct] = self._rows.get(distinct, 0) + 1
        self._n += 1

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
        out = SummaryBuilder(self.gamma, self.k, self.seed, self.n_boot, self.level,
                             recall_settings=self.recall_settings or other.recall_settings)
        out._models = dict(self._models)
        out._categories = dict(self._categories)
        model_code = np.array([out._models.setdefault(m, len(out._models)) for m in _names(other._models)],
                              dtype=np.int32)
        category_code = np.array(
            [out._categories.setdefault(c, len(out._categories)) for c in _names(other._categories)], dtype=np.int32)
        out._rows = dict(self._rows)
        for key, answers in other._rows.items():
            row = list(key)
            row[_MODEL] = int(model_code[row[_MODEL]])
            row[_CATEGORY] = int(category_code[row[_CATEGORY]])
            mapped = tuple(row)
            out._rows[mapped] = out._rows.get(mapped, 0) + answers
        out._n = self._n + other._n
        out._any_reason = self._any_reason or other._any_reason
        if self._recall is not None or other._recall is not None:
            out._recall = GroupedRecall.joined(self._recall, other._recall, model_code, category_code)
        return out

    def build(self) -> Figures:
        """The summary's figures: models and their categories sorted by name (see
        :class:`~dahl.analysis._summary._blocks.ModelSummary` for which fields are set when)."""
        rows = np.array(list(self._rows), dtype=np.int64).reshape(len(self._rows), _ROW_WIDTH)
        weight = np.fromiter(self._rows.values(), dtype=np.int64, count=len(self._rows))
        counts = rows[:, : len(LABELS)]
        flag = rows[:, _FLAG]
        eligible = flag == _RESPONDED
        in_dahl = dahl_mask(counts, eligible)
        in_fs = factscore_mask(counts, eligible)
        prec = precision(counts[:, LABELS.index(Label.SUPPORTED)], counts[:, LABELS.index(Label.UNSUPPORTED)])
        columns = _Columns(
            weight=weight,
            counts=counts,
            codes=exclusion_codes(counts, flag == _ABSTAINED, flag == _SPLIT_ERROR),
            in_dahl=in_dahl,
            in_fs=in_fs,
            precision=np.where(in_dahl, prec, 0.0),
            f1=np.where(in_dahl, f1_values(counts, self.k), 0.0),
            fs=np.where(in_fs, factscore_values(counts, self.gamma), 0.0),
            fs_init=np.where(in_fs, factscore_values(counts, 0.0), 0.0),
            reasons=rows[:, _REASON_COLUMN[UnsupportedReason.CONTRADICTED]:] if self._any_reason else None,
        )
        model_names = _names(self._models)
        category_names = _names(self._categories)
        n_cat = max(len(category_names), 1)
        groups = _groups(rows[:, _MODEL], rows[:, _CATEGORY], n_cat)
        recall_groups: dict[int, dict[int, npt.NDArray[np.intp]]] = {}
        if self._recall is not None:
            self._recall.flush()
            meta = self._recall.meta[: self._recall.n]
            recall_groups = _groups(meta[:, 0], meta[:, 1], n_cat)
        no_rows = np.zeros(0, dtype=np.intp)

        out: dict[str, ModelSummary] = {}
        for m_code in sorted(groups, key=model_names.__getitem__):
            name = model_names[m_code]
            by_category = groups[m_code]
            recall_by_category = recall_groups.get(m_code, {})
            cats = {
                category_names[c]: GroupSummary(**self._block(
                    columns, by_category[c], recall_by_category.get(c, no_rows),
                    group_seed(self.seed, name, category_names[c])))
                for c in sorted(by_category, key=category_names.__getitem__)
            }
            model_rows = np.concatenate(list(by_category.values()))
            recall_rows = np.concatenate([no_rows, *recall_by_category.values()])
            out[name] = ModelSummary(**self._block(columns, model_rows, recall_rows, group_seed(self.seed, name)),
                                     categories=cats)
        if self._recall is None:
            return Figures(models=out)
        return Figures(models=out, recall_settings=self.recall_settings)

    def _block(self, col: _Columns, rows: npt.NDArray[np.intp], recall_rows: npt.NDArray[np.intp],
               seed: list[int]) -> dict[str, Any]:
        """Fields of the :class:`~dahl.analysis._summary._blocks.GroupSummary` of the answers of the
        distinct ``rows`` (and of the recall columns' ``recall_rows``)."""
        weight = col.weight[rows]
        in_dahl = col.in_dahl[rows]
        in_fs = col.in_fs[rows]
        n_answers = int(weight.sum())
        n_scored = int(weight[in_dahl].sum())
        by_reason = np.zeros(len(REASONS) + 1, dtype=np.int64)
        np.add.at(by_reason, col.codes[rows], weight)
        prec = col.precision[rows][in_dahl]
        ci = bootstrap_ci(prec, rng=np.random.default_rng(seed), n_boot=self.n_boot, level=self.level,
                          counts=weight[in_dahl])
        label_totals = weight @ col.counts[rows]
        block: dict[str, Any] = {
            "n_answers": n_answers,
            "n_scored": n_scored,
            "n_abstained": int(by_reason[1 + REASONS.index("abstained")]),
            "n_excluded": n_answers - n_scored,
            "excluded_by_reason": {r: int(by_reason[i + 1]) for i, r in enumerate(REASONS)},
            "n_factscore": int(weight[in_fs].sum()),
            "dahl_score": sorted_mean(prec, weight[in_dahl]),
            "dahl_score_ci": None if ci is None else [ci[0], ci[1]],
            "factscore": sorted_mean(col.fs[rows][in_fs], weight[in_fs]),
            "factscore_init": sorted_mean(col.fs_init[rows][in_fs], weight[in_fs]),
            "f1_at_k": sorted_mean(col.f1[rows][in_dahl], weight[in_dahl]),
            "labels": {str(label): int(label_totals[j]) for j, label in enumerate(LABELS)},
        }
        if col.reasons is not None:
            contradicted, no_evidence = (int(v) for v in weight @ col.reasons[rows])
            unsupported = int(label_totals[LABELS.index(Label.UNSUPPORTED)])
            block["unsupported_by_reason"] = UnsupportedByReason(
                contradicted=contradicted, no_evidence=no_evidence, unstated=unsupported - contradicted - no_evidence)
        if self._recall is not None:
            meta = self._recall.meta[recall_rows]
            block["recall"] = self._recall.block(
                recall_rows, untracked=n_answers - int(recall_rows.size), abstained=meta[:, 2] == _ABSTAINED,
                responded=meta[:, 2] == _RESPONDED, claims=meta[:, 3].astype(np.int64),
                seed=seed, n_boot=self.n_boot, level=self.level, precision=block["dahl_score"],
            )
        return block


@dataclass(frozen=True, slots=True, kw_only=True)
class _Columns:
    """Arrays over the distinct rows shared by every group's computation (NaN already replaced by 0)."""

    weight: npt.NDArray[np.int64]  # answers with the row
    counts: npt.NDArray[np.int64]
    codes: npt.NDArray[np.int8]
    in_dahl: npt.NDArray[np.bool_]
    in_fs: npt.NDArray[np.bool_]
    precision: npt.NDArray[np.float64]
    f1: npt.NDArray[np.float64]
    fs: npt.NDArray[np.float64]
    fs_init: npt.NDArray[np.float64]
    reasons: npt.NDArray[np.int64] | None = None  # (m, 2): contradicted, no_evidence; None: no reason given


def _groups(model: npt.NDArray[np.integer], category: npt.NDArray[np.integer],
            n_cat: int) -> dict[int, dict[int, npt.NDArray[np.intp]]]:
    """Row indices by model code, then category code, of rows with those codes (each ascending)."""
    pair = model.astype(np.int64) * n_cat + category
    order = np.argsort(pair, kind="stable")
    present, starts = np.unique(pair[order], return_index=True)
    ends = [*starts[1:].tolist(), int(pair.size)]
    out: dict[int, dict[int, npt.NDArray[np.intp]]] = {}
    for code, start, end in zip(present.tolist(), starts.tolist(), ends):
        m_code, c_code = divmod(code, n_cat)
        out.setdefault(m_code, {})[c_code] = order[start:end]
    return out


def _names(codes: dict[str, int]) -> list[str]:
    """Names indexed by their code."""
    names = [""] * len(codes)
    for name, code in codes.items():
        names[code] = name
    return names
