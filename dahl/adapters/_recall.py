"""The Coverer: recall of one finished answer against its question's F* ("Beyond Precision").

No reference set: ``recall`` stays UNSET; a split error or an empty F*: recall None with a
reason; an abstention covers nothing (no judge call); else the judge labels every fact of F*,
a judge :class:`~dahl.errors.AdapterError` labelling them ``error`` (``coverage_error``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import orjson

from dahl.adapters._coverage import COVERAGE_JUDGES, CoverageJudge
from dahl.config import EndpointConfig
from dahl.errors import AdapterError, ConfigError, FatalAPIError, QuotaExhausted
from dahl.formats._refs import RefIndex
from dahl.metrics import PARTIAL_CREDIT, answer_recall, fstar, ranking
from dahl.metrics._recall import Partial
from dahl.records import AnswerRecall, AnswerResult, Coverage, FactResult, Status

__all__ = ["RecallCoverer", "RecallSettings"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecallSettings:
    """How a run computes recall (``dahl score --refs ...``).

    Attributes:
        refs: the reference fact sets (``refs.jsonl``, :mod:`dahl.formats._refs`).
        coverage: the judge, one of :data:`~dahl.adapters._coverage.COVERAGE_JUDGES`; None
            picks by the Checker (:meth:`judge_name`).
        partial: credit of a partial coverage: ``strict`` 0, ``half`` 0.5, ``lenient`` 1.
        fstar_k: F* = the top ``k`` facts by importance; None = all.
        fstar_min_importance: F* = the facts with importance >= this; None = all.
        alpha, beta: importance weights of relevance and salience; None: each fact's stored
            importance (rated facts without one: dahl's default 0.5, 0.5; the paper gives none).
        endpoint: the ``openai`` judge's endpoint; None = the Checker's.
    """

    refs: Path
    coverage: str | None = None
    partial: Partial = "strict"
    fstar_k: int | None = None
    fstar_min_importance: float | None = None
    alpha: float | None = None
    beta: float | None = None
    endpoint: EndpointConfig | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.coverage is not None and self.coverage not in COVERAGE_JUDGES:
            raise ConfigError(f"unknown coverage judge {self.coverage!r}; choose one of {', '.join(COVERAGE_JUDGES)}")
        if self.partial not in PARTIAL_CREDIT:
            raise ConfigError(f"--partial must be one of {', '.join(PARTIAL_CREDIT)}, got {self.partial!r}")
        if self.fstar_k is not None and self.fstar_min_importance is not None:
            raise ConfigError("give --fstar-k or --fstar-min-importance, not both")
        if self.fstar_k is not None and self.fstar_k < 1:
            raise ConfigError(f"--fstar-k must be >= 1, got {self.fstar_k}")
        for name in ("alpha", "beta"):
            value = getattr(self, name)
            if value is not None and not (0.0 <= value < float("inf")):
                raise ConfigError(f"--{name} must be a finite number >= 0, got {value}")
        if not self.refs.is_file():
            raise ConfigError(f"reference facts file not found: {self.refs}")

    def judge_name(self, checker: str) -> str:
        """The judge a run with Checker ``checker`` uses: ``coverage``, else ``exact`` for
        ``replay``, ``openai`` for ``openai``, ``lexical`` for the offline Checkers."""
        if self.coverage is not None:
            return self.coverage
        return {"replay": "exact", "openai": "openai"}.get(checker, "lexical")


class RecallCoverer:
    """Adds recall to finished answers (implements :class:`dahl.adapters._base.Coverer`).

    ``refs_sha256`` is the hex digest of the refs file.

    Attributes:
        fingerprint: canonical JSON of the judge fingerprint, the refs hash and every setting.
        judge_fingerprint: the judge's fingerprint.
    """

    def __init__(self, index: RefIndex, judge: CoverageJudge, settings: RecallSettings, *, refs_sha256: str) -> None:
        self._index = index
        self._judge = judge
        self._settings = settings
        self.judge_fingerprint = judge.fingerprint
        self.fingerprint = orjson.dumps(
            {"coverage": judge.fingerprint, "refs_sha256": refs_sha256, "partial": settings.partial,
             "fstar_k": settings.fstar_k, "fstar_min_importance": settings.fstar_min_importance,
             "alpha": settings.alpha, "beta": settings.beta},
            option=orjson.OPT_SORT_KEYS,
        ).decode()

    async def cover(self, result: AnswerResult) -> AnswerResult:
        """Return ``result`` with its recall (UNSET when its question has no reference set).

        Raises:
            QuotaExhausted, FatalAPIError: from the judge; the run stops.
        """
        ref_set = self._index.of(result)
        if ref_set is None:
            return result
        s = self._settings
        if result.status is Status.ERROR:
            return msgspec.structs.replace(result, recall=AnswerRecall(reason="split_error"))
        ranked = fstar(ref_set.facts, k=s.fstar_k, min_importance=s.fstar_min_importance, alpha=s.alpha, beta=s.beta)
        precision = result.metrics.precision
        abstained = result.status is Status.ABSTAINED
        ordered = ranking(ref_set.facts) is not None
        if not ranked or abstained:
            facts = tuple(FactResult(id=f.id, text=f.text, weight=w, label=Coverage.NOT_COVERED) for f, w in ranked)
            recall = answer_recall(facts, precision=precision, abstained=abstained, partial=s.partial, ranked=ordered)
            return msgspec.structs.replace(result, recall=recall)
        try:
            judged = await self._judge.judge(result, [f.text for f, _ in ranked])
        except (QuotaExhausted, FatalAPIError):
            raise
        except AdapterError as exc:
            error = f"{type(exc).__name__}: {exc}"
            log.debug("coverage of answer %s failed: %s", result.id, error)
            facts = tuple(FactResult(id=f.id, text=f.text, weight=w, label=Coverage.ERROR, error=error)
                          for f, w in ranked)
        else:
            facts = tuple(
                FactResult(id=f.id, text=f.text, weight=w, label=j.label, raw=j.raw, error=j.error)
                for (f, w), j in zip(ranked, judged, strict=True)
            )
        return msgspec.structs.replace(
            result, recall=answer_recall(facts, precision=precision, partial=s.partial, ranked=ordered)
        )
