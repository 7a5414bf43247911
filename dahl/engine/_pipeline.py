"""The streaming scheduler: read -> preprocess/split -> check [-> cover] -> write.

A run is a set of :class:`~dahl.engine._stage.Stage` s joined by bounded channels,
with the reader and the writer as plain tasks, all in one task group
(:func:`~dahl.engine._stage.run_stages`). Each stage is a fixed pool of workers, so
memory is O(workers + queue sizes) whatever the input size:

    reader (thread, batches) [--batches--> whole] --answers--> split [--split--> lookup]
        --claims--> check --results--> [cover --covered-->] writer (thread, batches of
        <= flush_items or flush_interval_s)

With a whole-answer cache (:class:`WholeAnswers`), each batch the reader reads is looked
up at once; an answer found whole goes straight to the results, the others go on to
splitting, and each answer finished without an error is stored whole for next time.

With a cache (a Checker offering ``look_up``, i.e. :class:`dahl.cache.CachingChecker`
with a store), lookup workers look all claims of an answer up in one batched read;
found verdicts never become per-claim jobs, so a re-score of cached claims costs a
key and a share of one read per claim. Claims not found go on to the check workers.

With a :class:`~dahl.adapters._base.Coverer`, every finished answer goes through the
cover stage (:mod:`dahl.engine._cover`) for its recall before it is written.

An answer's result is emitted as soon as its last claim has a verdict. Blocking
work (reading and hashing input, preprocessing and rule splitting, file writes)
runs in worker threads; the event loop only moves records.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from dahl.adapters._base import Checker, Coverer, Splitter
from dahl.engine._channel import Channel
from dahl.results._counters import RunCounters
from dahl.engine._cover import Covering
from dahl.engine._ends import Reader, Writer
from dahl.engine._options import PipelineOptions
from dahl.results._log import AnswerLog
from dahl.engine._queued import Line, QueuedAnswer, WholeAnswers
from dahl.engine._scoring import WHOLE_WORKERS, Scoring
from dahl.engine._stage import Stage, run_stages
from dahl.errors import ConfigError
from dahl.records import AnswerResult

__all__ = ["PipelineOptions", "QueuedAnswer", "WholeAnswers", "run_pipeline"]

log = logging.getLogger(__name__)


async def run_pipeline(
    source: Iterator[QueuedAnswer],
    splitter: Splitter,
    checker: Checker,
    log_file: AnswerLog,
    *,
    options: PipelineOptions,
    counters: RunCounters,
    on_result: Callable[[AnswerResult], None] | None = None,
    whole: WholeAnswers | None = None,
    coverer: Coverer | None = None,
) -> None:
    """Stream every answer of ``source`` through split and check (and cover) into ``log_file``.

    Args:
        source: answers still to score; a blocking iterator, read in a thread.
        splitter: turns each answer into claims.
        checker: gives each claim a verdict.
        log_file: an open :class:`AnswerLog`; results are appended in batches.
        options: concurrency, queue sizes and scoring parameters.
        counters: updated as work progresses (read by the progress bar).
        on_result: called on the event loop for every written result.
        whole: the whole-answer cache: answers found there skip splitting and checking
            (counted in ``answers_cached`` and ``claims_cached``), and answers finished
            here without an error are stored in it.
        coverer: adds recall to every finished answer (``options.cover_workers`` at
            once) before it is written; see :mod:`dahl.engine._cover`.

    Raises:
        ConfigError: (a ValueError) ``coverer`` is given with ``whole`` (lines found whole
            carry no recall).
        QuotaExhausted: the API quota ran out; results finished before are written.
        FatalAPIError: the endpoint cannot work (bad key, unreachable, breaker tripped);
            results finished before are written, and a re-run continues.
    """
    if coverer is not None and whole is not None:
        raise ConfigError("a run with a Coverer cannot use the whole-answer cache: its lines carry no recall")
    answers: Channel[QueuedAnswer] = Channel(options.queue_size)
    results: Channel[Any] = Channel(options.queue_size)
    batches: Channel[list[QueuedAnswer]] | None = Channel(WHOLE_WORKERS) if whole is not None else None
    stages: list[Stage[Any]] = []
    written: Channel[Line] = results
    emit: Callable[[Line], Awaitable[None]] = results.send
    if coverer is not None:
        written = Channel(options.queue_size)
        covering = Covering(coverer, counters=counters, results=results, covered=written,
                            workers=options.cover_workers)
        emit = covering.emit
    # Every producer is counted (by building it) before any task runs, so no channel ends early.
    reader = Reader(source, _router(counters, answers, batches), outputs=[answers] if batches is None else [answers, batches],
                    batch=options.read_batch)
    stages.extend(Scoring(splitter=splitter, checker=checker, whole=whole, options=options, counters=counters,
                          answers=answers, batches=batches, results=results, emit=emit).stages())
    if coverer is not None:
        stages.append(covering.stage)
    writer = Writer(written, log_file.append, written=_recorder(counters, on_result), flush_items=options.flush_items,
                    flush_interval_s=options.flush_interval_s)
    await run_stages(stages, [reader, writer])


def _router(
    counters: RunCounters, answers: Channel[QueuedAnswer], batches: Channel[list[QueuedAnswer]] | None
) -> Callable[[list[QueuedAnswer]], Awaitable[None]]:
    """What the reader does with a batch: count it, then send it whole to ``batches`` (to be
    looked up in the whole-answer cache) or, without one, its answers to ``answers``."""

    async def take(batch: list[QueuedAnswer]) -> None:
        counters.answers_read += len(batch)
        if batches is not None:
            await batches.send(batch)
            return
        for item in batch:
            await answers.send(item)

    return take


def _recorder(
    counters: RunCounters, on_result: Callable[[AnswerResult], None] | None
) -> Callable[[list[Line]], None]:
    """What the writer does with a written batch: count ``answers_done`` and ``status``, call ``on_result``."""

    def written(batch: list[Line]) -> None:
        for r in batch:
            counters.answers_done += 1
            counters.status[str(r.status)] += 1
            if on_result is not None:
                on_result(r if isinstance(r, AnswerResult) else r.decoded())

    return written
