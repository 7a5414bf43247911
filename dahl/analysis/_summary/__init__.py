"""``summary.json``: the per-answer columns a run aggregates, and the typed file they become.

:class:`SummaryBuilder` (``_builder``) collects compact columns per answer and computes the
per-model and per-(model, category) figures (``_blocks``, with a ``recall`` object from
``_recall`` when the run has reference facts); :class:`Summary` (``_file``) is the whole file:
those figures plus the run, cost, config, inputs and change blocks.
"""

from __future__ import annotations

from dahl.analysis._summary._blocks import Figures, GroupSummary, ModelSummary, UnsupportedByReason
from dahl.analysis._summary._builder import SummaryBuilder
from dahl.analysis._summary._file import (
    Changes,
    CostSummary,
    InputFile,
    PriceSummary,
    QuestionSetSummary,
    RunConfig,
    RunSummary,
    StageCost,
    Summary,
    SummaryStatistics,
    TemplateUse,
)
from dahl.analysis._summary._recall import NULL_REASONS, RecallSummary, RecordedRecallSettings

__all__ = [
    "NULL_REASONS",
    "Changes",
    "CostSummary",
    "Figures",
    "GroupSummary",
    "InputFile",
    "ModelSummary",
    "PriceSummary",
    "QuestionSetSummary",
    "RecallSummary",
    "RecordedRecallSettings",
    "RunConfig",
    "RunSummary",
    "StageCost",
    "Summary",
    "SummaryBuilder",
    "SummaryStatistics",
    "TemplateUse",
    "UnsupportedByReason",
]
