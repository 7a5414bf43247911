"""The cover stage: every finished answer gets its recall from a Coverer before it is written.

Between the scoring stages and the writer:

    ... --results--> cover workers (coverer.cover) --covered--> writer

The :class:`~dahl.adapters._base.Coverer` decides what each answer gets (scored,
excluded, abstained and split-error answers all pass through it). A quota or fatal
API error stops the run (the answer being covered is not written, so a re-run covers
it); any other :class:`~dahl.errors.AdapterError` writes the answer as it was, its
recall left unset, and counts the error: no answer is lost.
"""

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
    """Builds the cover stage and the ``emit`` the scoring stages send finished answers with.

    Counts in ``counters``: ``answers_covering`` (emitted, not yet passed to the
    writer), ``covers_in_flight`` (``cover`` calls running), ``answers_covered``,
    ``facts_judged`` (facts of every returned recall) and ``facts_failed`` (those
    labelled ``error``, also counted in ``errors`` by the class leading their error
    text); an AdapterError raised by ``cover`` counts in ``errors`` by its class.

    Args:
        coverer: judges each answer's coverage of its question's F*.
        counters: the run's counters (``covering`` is set).
        results: the stage's inbox (finished answers).
        covered: where covered answers go (the writer's inbox).
        workers: cover workers (>= 1), i.e. covers in flight at most.
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
        """Send a finished answer to the cover stage.

        Raises:
            ConfigError: ``result`` is a line found whole (it carries no recall to add to);
                a ValueError, and the DahlError the run stops with.
        """
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
