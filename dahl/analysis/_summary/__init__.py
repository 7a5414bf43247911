"""``summary.json``: :class:`SummaryBuilder` counts answers per distinct row and computes the
per-model and per-category figures; :class:`Summary` is the whole typed file.
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
