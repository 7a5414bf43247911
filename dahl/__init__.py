"""dahl: async, high-throughput scoring of long-form LLM answers for factual hallucination.

Public API::

    from dahl import ScoreConfig, AdapterSettings, score
    report = score(ScoreConfig(inputs=(Path("answers.jsonl"),), out_dir=Path("out"),
                               adapters=AdapterSettings(checker="fake")))
    report.summary["models"]

Records (:class:`Answer`, :class:`Claim`, :class:`Verdict`, :class:`AnswerResult`)
and errors (:class:`DahlError` and its tree) are re-exported here.
"""

from dahl.adapters.factory import AdapterSettings
from dahl.config import EndpointConfig
from dahl.engine.counters import RunCounters
from dahl.engine.pipeline import PipelineOptions
from dahl.errors import (
    AdapterError,
    CacheError,
    ConfigError,
    DahlError,
    InputError,
    OutputParseError,
    PermanentAPIError,
    QuotaExhausted,
    RateLimited,
    TransientAPIError,
)
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
from dahl.run import ScoreConfig, ScoreReport, score, score_async

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
    "DahlError",
    "EndpointConfig",
    "Evidence",
    "GivenClaim",
    "InputError",
    "Label",
    "OutputParseError",
    "PermanentAPIError",
    "PipelineOptions",
    "QuotaExhausted",
    "RateLimited",
    "RunCounters",
    "ScoreConfig",
    "ScoreReport",
    "Status",
    "TransientAPIError",
    "Usage",
    "Verdict",
    "score",
    "score_async",
]
