"""The streaming scheduler: stages joined by bounded channels, in one task group::

    reader [--batches--> whole] --answers--> split [--split--> lookup] --claims--> check
        --results--> [cover --covered-->] writer
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
    """Stream every answer of ``source`` (a blocking iterator, read in a thread) through split and check
    (and cover) into ``log_file``, updating ``counters``.

    Args:
        on_result: called on the event loop for every written result.
        whole: the whole-answer cache: answers found there skip splitting and checking, and
            answers finished without an error are stored in it.
        coverer: adds recall to every finished answer before it is written.

    Raises:
        ConfigError: ``coverer`` is given with ``whole`` (lines found whole carry no recall).
        QuotaExhausted, FatalAPIError: the run stopped; results finished before are written.
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
    """What the reader does with a batch: count it, send it to ``batches``, else its answers to ``answers``."""

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
