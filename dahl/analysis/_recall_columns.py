"""The recall columns of the verdict store, written only for runs scored with reference facts::

    recall.npy         float64 (n_answers, 7)  RECALL_METRICS order ("Beyond Precision",
                                               dahl.metrics._recall); NaN = null or no recall
    recall_facts.npy   int32   (n_answers, 3)  FACT_COLUMNS: |F*|, covered, partial; -1: no recall
"""

from __future__ import annotations

import math
from array import array
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from dahl.records import Coverage

__all__ = ["FACT_COLUMNS", "RECALL_METRICS", "RecallColumns", "recall_row"]

#: Per-answer recall values, the column order of ``recall.npy``.
RECALL_METRICS: tuple[str, ...] = (
    "recall", "recall_w", "f1", "f1_w", "recall_at_5", "recall_at_10", "recall_at_20",
)
#: Column order of ``recall_facts.npy``: facts in F*, covered facts, partially covered facts.
FACT_COLUMNS: tuple[str, ...] = ("facts", "covered", "partial")

_NULL_ROW = [math.nan] * len(RECALL_METRICS)
_NO_FACTS = [-1] * len(FACT_COLUMNS)


def recall_row(recall: Any) -> tuple[list[float], list[int]] | None:
    """The store row ``(values, facts)`` of ``recall`` (an :class:`dahl.records.AnswerRecall` or a
    digest of one): 7 floats in :data:`RECALL_METRICS` order (NaN for None) and 3 ints in
    :data:`FACT_COLUMNS` order; None for None or UNSET."""
    if recall is None or recall is msgspec.UNSET:
        return None
    values = [math.nan if (x := getattr(recall, name, None)) is None else float(x) for name in RECALL_METRICS]
    facts = getattr(recall, "facts", ())
    labels = [str(f.label) for f in facts]
    return values, [len(labels), labels.count(Coverage.COVERED), labels.count(Coverage.PARTIAL)]


class RecallColumns:
    """Collects the recall rows of a run's answers, in answer order (nothing until one has recall)."""

    def __init__(self) -> None:
        self._values: array[float] | None = None
        self._facts: array[int] | None = None
        self._before = 0  # answers added before the first one with recall

    def add(self, recall: Any) -> None:
        """Append one answer's row (see :func:`recall_row`; None/UNSET: a null row)."""
        if self._values is None and (recall is None or recall is msgspec.UNSET):
            self._before += 1
            return
        row = recall_row(recall)
        if self._values is None or self._facts is None:
            self._values = array("d", _NULL_ROW * self._before)
            self._facts = array("i", _NO_FACTS * self._before)
        values, facts = row if row is not None else (_NULL_ROW, _NO_FACTS)
        self._values.extend(values)
        self._facts.extend(facts)

    def arrays(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int32]] | None:
        """``(recall (n, 7) float64, recall_facts (n, 3) int32)``, or None when no answer had recall."""
        if self._values is None or self._facts is None:
            return None
        values = np.frombuffer(self._values, dtype=np.float64) if len(self._values) else np.zeros(0)
        facts = np.frombuffer(self._facts, dtype=np.int32) if len(self._facts) else np.zeros(0, np.int32)
        return values.reshape(-1, len(RECALL_METRICS)), facts.reshape(-1, len(FACT_COLUMNS))
