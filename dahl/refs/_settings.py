"""Settings, live counters and the report of ``dahl refs build`` from documents."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

from dahl.config import EndpointConfig
from dahl.engine._options import CallSettings
from dahl.errors import ConfigError
from dahl.metrics import importance
from dahl.refs._dedupe import NEAR_THRESHOLD
from dahl.results._counters import JobCounters, JobReport

__all__ = ["DEFAULT_BATCH", "EXTRACTORS", "RATERS", "BuildCounters", "BuildReport", "BuildSettings", "Granularity"]

#: The extraction call unit: a few sentences of a document, or one sentence.
Granularity = Literal["chunk", "sentence"]

#: Facts per rating call.
DEFAULT_BATCH = 20

#: Fact extractors: the offline rule Splitter, or an LLM.
EXTRACTORS = ("rules", "openai")
#: Raters: none (facts weigh 1), or an LLM.
RATERS = ("none", "openai")


@dataclasses.dataclass(frozen=True)
class BuildSettings(CallSettings):
    """What ``dahl refs build`` does (built at the CLI edge, immutable).

    Attributes:
        questions: the questions input (:func:`dahl.refs._questions.read_questions`).
        out: the ``refs.jsonl`` to write (appended to, resumed).
        evidence: the JSONL corpus to retrieve documents from (and look ``doc_ids`` up in).
        fmt: the questions input format (``"auto"``, ``"questions"`` or an answers format).
        docs_per_question: documents retrieved per question (>= 1).
        extractor: ``"rules"`` (offline) or ``"openai"``.
        granularity: ``"chunk"`` or ``"sentence"`` (extraction call unit).
        rater: ``"none"`` (facts unrated, weight 1) or ``"openai"``.
        extract_endpoint: the ``openai`` extractor's endpoint.
        rate_endpoint: the ``openai`` rater's endpoint.
        rate_batch: facts per rating call (>= 1).
        alpha: α of the importance (>= 0).
        beta: β of the importance (>= 0; α + β <= 1, so an importance is in [0, 1]).
        near: near-duplicate threshold, rapidfuzz ``fuzz.ratio`` 0-100 (100: exact only).
        cache_dir, use_cache, prices, max_cost_usd: keyword-only, see
            :class:`~dahl.engine._options.CallSettings`.

    Raises:
        ConfigError: an unknown extractor or rater, a missing endpoint, a value out of range.
    """

    questions: Path
    out: Path
    evidence: Path | None = None
    fmt: str = "auto"
    docs_per_question: int = 3
    extractor: Literal["rules", "openai"] = "rules"
    granularity: Granularity = "chunk"
    rater: Literal["none", "openai"] = "none"
    extract_endpoint: EndpointConfig | None = None
    rate_endpoint: EndpointConfig | None = None
    rate_batch: int = DEFAULT_BATCH
    alpha: float = 0.5
    beta: float = 0.5
    near: float = NEAR_THRESHOLD

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.extractor not in EXTRACTORS:
            raise ConfigError(f"unknown extractor {self.extractor!r}; choose one of {', '.join(EXTRACTORS)}")
        if self.rater not in RATERS:
            raise ConfigError(f"unknown rater {self.rater!r}; choose one of {', '.join(RATERS)}")
        if self.granularity not in ("chunk", "sentence"):
            raise ConfigError(f"granularity must be chunk or sentence, got {self.granularity!r}")
        if self.extractor == "openai" and self.extract_endpoint is None:
            raise ConfigError("--extractor openai needs --base-url and --model")
        if self.rater == "openai" and self.rate_endpoint is None:
            raise ConfigError("--rater openai needs --base-url and --model")
        if self.docs_per_question < 1:
            raise ConfigError(f"--docs-per-question must be >= 1, got {self.docs_per_question}")
        if self.rate_batch < 1:
            raise ConfigError(f"the rating batch must be >= 1, got {self.rate_batch}")
        if not 0.0 <= self.near <= 100.0:
            raise ConfigError(f"--near-threshold must be in [0, 100], got {self.near}")
        importance(1, 1, alpha=self.alpha, beta=self.beta)  # ConfigError on a bad α or β
        if self.alpha + self.beta > 1.0:  # refs.jsonl importances are in [0, 1]; the reader refuses others
            raise ConfigError(f"--alpha + --beta must be <= 1 (importance in [0, 1]), got {self.alpha} + {self.beta}")
        if self.evidence is not None and not self.evidence.exists():
            raise ConfigError(f"evidence corpus not found: {self.evidence} (a JSONL file or a folder of .txt/.md)")


@dataclasses.dataclass
class BuildCounters(JobCounters):
    """What a build did so far (read by the progress line); items are questions' sets.

    Attributes:
        questions: distinct questions read.
        facts: facts in the sets written by this run.
        skipped: questions with bad input (an unknown doc id, no documents source).
        chunks: chunks extracted (cache hits included).
        extract_calls: chunks sent to the extractor (cache misses).
        rated: facts sent to the rater (cache misses).
        rating_hits: fact ratings found in the cache.
        resumed, written, failed, spend: see :class:`~dahl.results._counters.JobCounters`.
    """

    questions: int = 0
    facts: int = 0
    skipped: int = 0
    chunks: int = 0
    extract_calls: int = 0
    rated: int = 0
    rating_hits: int = 0

    @property
    def incomplete(self) -> bool:
        """Some question has no set: one failed or was skipped."""
        return self.failed > 0 or self.skipped > 0


class BuildReport(JobReport[BuildCounters]):
    """The outcome of :func:`~dahl.refs._documents.build_refs` (``out``: the ``refs.jsonl``)."""
