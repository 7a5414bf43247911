"""dahl: async, high-throughput scoring of long-form LLM answers for factual hallucination.

Public API::

    from dahl import ScoreConfig, AdapterSettings, score
    report = score(ScoreConfig(inputs=(Path("answers.jsonl"),), out_dir=Path("out"),
                               adapters=AdapterSettings(checker="fake")))
    report.summary["models"]

Records (:class:`Answer`, :class:`Claim`, :class:`Verdict`, :class:`AnswerResult`),
errors (:class:`DahlError` and its tree) and :class:`ExitStatus` are re-exported here.

Names are imported on first use (PEP 562), so ``import dahl`` is cheap.
"""

from __future__ import annotations

# No runtime import here: ``dahl``'s entry point (``dahl.__main__``) installs its interrupt
# handling first thing, and this package is imported before it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from dahl._version import __version__
    from dahl.adapters._recall import RecallSettings
    from dahl.analysis._summary import Summary
    from dahl.config import EndpointConfig
    from dahl.engine._pipeline import PipelineOptions
    from dahl.errors import (
        AdapterError,
        CacheError,
        ConfigError,
        CostCapReached,
        DahlError,
        FatalAPIError,
        InputError,
        ModelRefused,
        OutputParseError,
        OutputWriteError,
        PermanentAPIError,
        QuotaExhausted,
        RateLimited,
        TransientAPIError,
    )
    from dahl.exit_status import ExitStatus
    from dahl.formats._inline import Records
    from dahl.pricing import Price, PriceTable
    from dahl.records import (
        Answer,
        AnswerMetrics,
        AnswerResult,
        Claim,
        ClaimResult,
        Evidence,
        GivenClaim,
        Label,
        Status,
        Usage,
        Verdict,
    )
    from dahl.results._counters import RunCounters
    from dahl.results._manifest import Shard
    from dahl.run._plan import AdapterSettings
    from dahl.run._score import ScoreConfig, ScoreReport, score, score_async

#: Where each public name is defined (the TYPE_CHECKING imports above, for mypy).
_SOURCES: dict[str, tuple[str, ...]] = {
    "dahl._version": ("__version__",),
    "dahl.run._plan": ("AdapterSettings",),
    "dahl.adapters._recall": ("RecallSettings",),
    "dahl.config": ("EndpointConfig",),
    "dahl.results._counters": ("RunCounters",),
    "dahl.results._manifest": ("Shard",),
    "dahl.engine._pipeline": ("PipelineOptions",),
    "dahl.errors": (
        "AdapterError", "CacheError", "ConfigError", "CostCapReached", "DahlError", "FatalAPIError", "InputError",
        "ModelRefused", "OutputParseError", "OutputWriteError", "PermanentAPIError", "QuotaExhausted", "RateLimited",
        "TransientAPIError",
    ),
    "dahl.exit_status": ("ExitStatus",),
    "dahl.formats._inline": ("Records",),
    "dahl.pricing": ("Price", "PriceTable"),
    "dahl.records": (
        "Answer", "AnswerMetrics", "AnswerResult", "Claim", "ClaimResult", "Evidence", "GivenClaim", "Label",
        "Status", "Usage", "Verdict",
    ),
    "dahl.run._score": ("ScoreConfig", "ScoreReport", "score", "score_async"),
    "dahl.analysis._summary": ("Summary",),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}

__all__ = [
    "AdapterError",
    "AdapterSettings",
    "Answer",
    "AnswerMetrics",
    "AnswerResult",
    "CacheError",
    "Claim",
    "ClaimResult",
    "ConfigError",
    "CostCapReached",
    "DahlError",
    "EndpointConfig",
    "Evidence",
    "ExitStatus",
    "FatalAPIError",
    "GivenClaim",
    "InputError",
    "Label",
    "ModelRefused",
    "OutputParseError",
    "OutputWriteError",
    "PermanentAPIError",
    "PipelineOptions",
    "Price",
    "PriceTable",
    "QuotaExhausted",
    "RateLimited",
    "RecallSettings",
    "Records",
    "RunCounters",
    "ScoreConfig",
    "ScoreReport",
    "Shard",
    "Status",
    "Summary",
    "TransientAPIError",
    "Usage",
    "Verdict",
    "__version__",
    "score",
    "score_async",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use and keep it in the package namespace."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'dahl' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names and the module's own attributes."""
    return sorted(set(globals()) | set(__all__))
