"""The cover stage, between the scoring stages and the writer: every finished answer gets its recall
from a :class:`~dahl.adapters._base.Coverer`. On an AdapterError other than a quota or fatal one the
answer is written as it was, its recall unset, and the error counted."""

from __future__ import annotations

import logging

from dahl.adapters._base import Coverer
from dahl.engine._channel import Channel
from dahl.results._counters import RunCounters
from dahl.results._assemble import EncodedResult
from dahl.engine._stage import Stage
from dahl.errors import AdapterError, ConfigError
from dahl.records import AnswerRecall, AnswerResult, Coverage

__all__ = ["Covering"]

log = logging.getLogger(__name__)


class Covering:
    """Builds the cover stage (``workers`` >= 1 covers in flight) from ``results`` to ``covered`` (the
    writer's inbox), and the :meth:`emit` the scoring stages send finished answers with.

    Counts in ``counters`` (``covering`` is set): ``answers_covering`` (emitted, not yet passed on),
    ``covers_in_flight``, ``answers_covered``, ``facts_judged``, ``facts_failed`` (labelled ``error``);
    errors in ``errors`` by the class leading their text.
    """

    def __init__(
        self,
        coverer: Coverer,
        *,
        counters: RunCounters,
        results: Channel[AnswerResult],
        covered: Channel[AnswerResult | EncodedResult],
        workers: int,
    ) -> None:
        self._coverer = coverer
        self._counters = counters
        self._results = results
        self._covered = covered
        counters.covering = True
        self.stage: Stage[AnswerResult] = Stage(
            "cover", results, self._cover, workers=workers, outputs=(covered,), on_error=self._failed
        )

    async def emit(self, result: AnswerResult | EncodedResult) -> None:
        """Send a finished answer to the cover stage; ConfigError if it is a line found whole (no recall)."""
        if not isinstance(result, AnswerResult):
            raise ConfigError("an answer found whole cannot be covered: turn the whole-answer cache off "
                              "when the run has a Coverer")
        self._counters.answers_covering += 1
        await self._results.send(result)

    async def _cover(self, result: AnswerResult) -> None:
        counters = self._counters
        counters.covers_in_flight += 1
        try:
            out = await self._coverer.cover(result)
        finally:
            counters.covers_in_flight -= 1
        recall = out.recall
        if isinstance(recall, AnswerRecall):
            counters.facts_judged += len(recall.facts)
            for fact in recall.facts:
                if fact.label is Coverage.ERROR:
                    counters.facts_failed += 1
                    counters.errors[(fact.error or "error").split(":", 1)[0]] += 1
        await self._pass(out)

    async def _failed(self, result: AnswerResult, exc: AdapterError) -> None:
        log.warning("answer %s: coverage failed, written without recall: %s: %s",
                    result.id, type(exc).__name__, exc)
        self._counters.errors[type(exc).__name__] += 1
        await self._pass(result)

    async def _pass(self, result: AnswerResult) -> None:
        await self._covered.send(result)
        self._counters.answers_covering -= 1
        self._counters.answers_covered += 1
