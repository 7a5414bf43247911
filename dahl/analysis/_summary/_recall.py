"""Recall in the summary ("Beyond Precision"; per-answer formulas in :mod:`dahl.metrics._recall`):
the per-answer recall columns, a group's ``recall`` object and the ``recall_settings`` object.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from dahl.analysis._recall_columns import RECALL_METRICS
from dahl.errors import InputError
from dahl.metrics import bootstrap_ci, f1_score, sorted_mean
from dahl.records import AnswerRecall, AnswerResult, RecallDigest, ResultDigest, Status

__all__ = ["GroupedRecall", "NULL_REASONS", "RecallSummary", "RecordedRecallSettings"]

#: Why an answer's recall (or Rec^w alone, for ``zero_weight``) is None, in
#: ``null_by_reason`` order. ``no_refs``: the answer's question has no reference set.
NULL_REASONS: tuple[str, ...] = ("empty_fstar", "zero_weight", "coverage_error", "split_error", "no_refs")
_CODE = {reason: i + 1 for i, reason in enumerate(NULL_REASONS)}  # 0: no reason
_NO_REFS, _SPLIT_ERROR = _CODE["no_refs"], _CODE["split_error"]
# Float columns: the metrics in the verdict store's order, then |F*|.
_METRICS = RECALL_METRICS
_WITH_CI = frozenset({"recall", "recall_w", "f1", "f1_w"})
_WIDTH = len(_METRICS) + 1
_NO_ROW = [float("nan")] * _WIDTH
_INITIAL_CAPACITY = 1024
# Rows staged in Python lists before one vectorized copy into the columns.
_STAGE_ROWS = 4096


class RecordedRecallSettings(msgspec.Struct, frozen=True, kw_only=True):
    """How a run's recall was computed: ``summary.json``'s ``recall_settings``.

    Attributes:
        refs, refs_sha256: the reference set file, as given, and hex SHA-256 of its bytes.
        coverage: fingerprint of the coverage judge.
        partial: credit of a partial coverage: ``strict`` 0, ``half`` 0.5, ``lenient`` 1.
        fstar_k, fstar_min_importance: F* cut to the top k facts, or to importance >= this (None: no cut).
        alpha, beta: importance weights of relevance and salience ("Beyond Precision") given for the
            run; None: the importances stored in the reference sets.
        recall_at_order: reference sets by what orders their F* for R@k: ``importance``,
            ``support`` (pooled sets), ``none`` (no order: R@k is null).
    """

    refs: str
    refs_sha256: str
    coverage: str
    partial: str = "strict"
    fstar_k: int | None = None
    fstar_min_importance: float | None = None
    alpha: float | None = 0.5
    beta: float | None = 0.5
    recall_at_order: dict[str, int] = {}


class RecallSummary(msgspec.Struct, frozen=True, kw_only=True):
    """The ``recall`` object of a group ("Beyond Precision" importance-aware recall).

    Means over the answers where defined (None: none); a ``*_ci`` is ``[lo, hi]`` of a percentile
    bootstrap over them.

    Attributes:
        n: answers with Rec defined (``n_abstained`` of them abstained: recall 0).
        null_by_reason: answers with no Rec, by each name of :data:`NULL_REASONS`.
        recall, recall_w, f1, f1_w, recall_at_5, recall_at_10, recall_at_20: means in [0, 1].
        rho: mean claims per responding answer whose question has a reference set.
        facts: mean |F*| over the ``n`` answers.
        f1_of_means: 2PR / (P + R) of the group's DAHL Score P and mean Rec R (``f1`` is the mean
            of the per-answer F1).
    """

    n: int
    n_abstained: int
    null_by_reason: dict[str, int]
    recall: float | None
    recall_ci: list[float] | None
    recall_w: float | None
    recall_w_ci: list[float] | None
    f1: float | None
    f1_ci: list[float] | None
    f1_w: float | None
    f1_w_ci: list[float] | None
    recall_at_5: float | None
    recall_at_10: float | None
    recall_at_20: float | None
    rho: float | None
    facts: float | None
    f1_of_means: float | None = None


class GroupedRecall:
    """Per-answer recall metrics, reason codes and group of each answer added since recall was
    tracked, as numpy columns: ``values`` float (n, metrics + 1), ``code`` int8 (n,), ``meta`` int32
    (n, 4) of model code, category code, flag and claim count (the summary builder's codes).
    Answers added before are ``no_refs`` and only counted (``untracked`` in :meth:`block`)."""

    def __init__(self, capacity: int = _INITIAL_CAPACITY) -> None:
        self.n = 0
        self.values = np.full((capacity, _WIDTH), np.nan)
        self.code = np.zeros(capacity, dtype=np.int8)
        self.meta = np.zeros((capacity, 4), dtype=np.int32)
        self._pending: list[list[float]] = []
        self._pending_code: list[int] = []
        self._pending_meta: list[tuple[int, int, int, int]] = []

    def __len__(self) -> int:
        """Number of answers added."""
        return self.n + len(self._pending)

    @staticmethod
    def row(result: AnswerResult | ResultDigest) -> tuple[list[float], int]:
        """One answer's float row (NaN for None) and reason code (``split_error`` first, ``no_refs``
        without ``recall``).

        Raises:
            InputError: ``recall.reason`` is not one of :data:`NULL_REASONS`.
        """
        if result.status == Status.ERROR:
            return _NO_ROW, _SPLIT_ERROR
        rec = result.recall
        if not isinstance(rec, AnswerRecall | RecallDigest):
            return _NO_ROW, _NO_REFS
        code = 0
        if rec.reason is not None:
            found = _CODE.get(rec.reason)
            if found is None:
                raise InputError(f"unknown recall reason {rec.reason!r} in answer {result.id!r}",
                                 field="recall.reason")
            code = found
        out = [float("nan") if (v := getattr(rec, name)) is None else float(v) for name in _METRICS]
        out.append(float(len(rec.facts)))
        return out, code

    def add(self, result: AnswerResult | ResultDigest, meta: tuple[int, int, int, int]) -> None:
        """Stage one answer's row (:meth:`row`) with its model, category, flag and claim count.

        Raises:
            InputError: as :meth:`row`.
        """
        values, code = self.row(result)
        self._pending.append(values)
        self._pending_code.append(code)
        self._pending_meta.append(meta)
        if len(self._pending) >= _STAGE_ROWS:
            self.flush()

    def flush(self) -> None:
        """Move staged rows into the columns, doubling their capacity when full."""
        if not self._pending:
            return
        start, stop = self.n, self.n + len(self._pending)
        cap = self.code.shape[0]
        if stop > cap:
            while cap < stop:
                cap *= 2
            self.values = np.resize(self.values, (cap, _WIDTH))
            self.code = np.resize(self.code, cap)
            self.meta = np.resize(self.meta, (cap, 4))
        self.values[start:stop] = np.array(self._pending, dtype=np.float64)
        self.code[start:stop] = np.array(self._pending_code, dtype=np.int8)
        self.meta[start:stop] = np.array(self._pending_meta, dtype=np.int32)
        self._pending, self._pending_code, self._pending_meta = [], [], []
        self.n = stop

    @staticmethod
    def joined(first: GroupedRecall | None, second: GroupedRecall | None,
               model_code: npt.NDArray[np.int32], category_code: npt.NDArray[np.int32]) -> GroupedRecall:
        """The rows of ``first`` then those of ``second`` (either may be None: none), ``second``'s
        model and category codes mapped through ``model_code`` and ``category_code`` (both are
        flushed first: their staged rows move into their columns)."""
        parts = [(p, remap) for p, remap in ((first, False), (second, True)) if p is not None]
        for part, _ in parts:
            part.flush()
        n = sum(part.n for part, _ in parts)
        out = GroupedRecall(max(n, _INITIAL_CAPACITY))
        start = 0
        for part, remap in parts:
            stop = start + part.n
            out.values[start:stop] = part.values[: part.n]
            out.code[start:stop] = part.code[: part.n]
            out.meta[start:stop] = part.meta[: part.n]
            if remap:
                out.meta[start:stop, 0] = model_code[part.meta[: part.n, 0]]
                out.meta[start:stop, 1] = category_code[part.meta[: part.n, 1]]
            start = stop
        out.n = n
        return out

    def block(
        self,
        rows: npt.NDArray[np.intp],
        *,
        untracked: int,
        abstained: npt.NDArray[np.bool_],
        responded: npt.NDArray[np.bool_],
        claims: npt.NDArray[np.int64],
        seed: list[int],
        n_boot: int,
        level: float,
        precision: float | None = None,
    ) -> RecallSummary:
        """The ``recall`` object of the answers ``rows`` and ``untracked`` more answers (``no_refs``).

        Args:
            untracked: answers of the group added before recall was tracked.
            abstained, responded, claims: per-row flags and claim counts of the group.
            precision: the group's DAHL Score, for ``f1_of_means``.
            seed, n_boot, level: the group's bootstrap seed material (the DAHL Score's), resamples
                and coverage.
        """
        values = self.values[rows]
        code = self.code[rows]
        defined = ~np.isnan(values[:, 0])
        by_reason = np.bincount(code, minlength=len(NULL_REASONS) + 1)
        by_reason[_NO_REFS] += untracked
        out: dict[str, Any] = {
            "n": int(defined.sum()),
            "n_abstained": int((defined & abstained).sum()),
            "null_by_reason": {r: int(by_reason[i + 1]) for i, r in enumerate(NULL_REASONS)},
        }
        for j, name in enumerate(_METRICS):
            column = values[:, j]
            present = column[~np.isnan(column)]
            out[name] = sorted_mean(present)
            if name in _WITH_CI:
                ci = bootstrap_ci(present, rng=np.random.default_rng(seed), n_boot=n_boot, level=level)
                out[f"{name}_ci"] = None if ci is None else [ci[0], ci[1]]
        with_refs = responded & (code != _NO_REFS)
        out["rho"] = sorted_mean(claims[with_refs].astype(np.float64))
        out["facts"] = sorted_mean(values[defined, -1])
        out["f1_of_means"] = f1_score(precision, out["recall"])
        return RecallSummary(**out)
