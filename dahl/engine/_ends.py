"""The two ends of a pipeline: the reader feeding answers in, the writer appending results.

Both are plain tasks of :func:`~dahl.engine._stage.run_stages`, not stages: the reader
takes batches of a blocking iterator in a thread, the writer appends batches to the
answer log in a thread.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TypeVar

import anyio

from dahl.engine._channel import Channel, EndOfChannel
from dahl.results._counters import RunCounters
from dahl.results._log import AnswerLog
from dahl.engine._queued import QueuedAnswer
from dahl.results._assemble import EncodedResult
from dahl.records import AnswerResult

__all__ = ["Reader", "Writer", "next_batch", "read_batches"]

T = TypeVar("T")

#: A line the writer appends.
Line = AnswerResult | EncodedResult


def next_batch(source: Iterator[T], size: int) -> list[T]:
    """The next ``size`` items of ``source`` (fewer at its end, ``[]`` once exhausted).

    Blocking (the iterator reads and parses a file): call it in a worker thread.
    """
    return list(itertools.islice(source, size))


async def read_batches(source: Iterator[T], size: int) -> AsyncIterator[list[T]]:
    """``source`` in lists of up to ``size`` items, each read in a worker thread, so a
    blocking reader never runs on the event loop; ends when ``source`` is exhausted."""
    while batch := await anyio.to_thread.run_sync(next_batch, source, size):
        yield batch


class Reader:
    """Reads ``source`` in batches of ``read_batch`` (in a thread) and routes each batch.

    With a whole-answer cache a batch goes to ``batches`` to be looked up whole;
    without one its answers go to ``answers``. Built before the run starts, it counts
    itself as a sender of ``answers`` and ``batches``.

    Args:
        source: answers to score; a blocking iterator.
        read_batch: answers taken per thread hop.
        counters: ``answers_read`` is updated.
        answers: answers to split.
        batches: batches of answers to look up whole, or None without a whole-answer cache.
    """

    def __init__(
        self,
        source: Iterator[QueuedAnswer],
        *,
        read_batch: int,
        counters: RunCounters,
        answers: Channel[QueuedAnswer],
        batches: Channel[list[QueuedAnswer]] | None,
    ) -> None:
        self._source = source
        self._read_batch = read_batch
        self._counters = counters
        self._answers = answers
        self._batches = batches
        answers.open_sender()
        if batches is not None:
            batches.open_sender()

    async def __call__(self) -> None:
        """Read until ``source`` is exhausted, then close this reader's senders."""
        counters, answers, batches = self._counters, self._answers, self._batches
        try:
            async for batch in read_batches(self._source, self._read_batch):
                counters.answers_read += len(batch)
                if batches is not None:
                    await batches.send(batch)
                    continue
                for item in batch:
                    await answers.send(item)
        finally:
            answers.close_sender()
            if batches is not None:
                batches.close_sender()


class Writer:
    """Appends the lines of ``inbox`` to ``log_file`` in batches, in a thread.

    A batch is written when it holds ``flush_items`` lines or its first line waited
    ``flush_interval_s`` seconds; cancelled (Ctrl-C, quota), the writer still writes
    what it holds (shielded), so no finished answer is lost.

    Args:
        inbox: the finished lines.
        log_file: an open :class:`AnswerLog`.
        counters: ``answers_done`` and ``status`` are counted as lines are written.
        on_result: called on the event loop for every written result, or None.
        flush_items: lines per write batch.
        flush_interval_s: longest a line waits before being written, seconds.
    """

    def __init__(
        self,
        inbox: Channel[Line],
        log_file: AnswerLog,
        *,
        counters: RunCounters,
        on_result: Callable[[AnswerResult], None] | None,
        flush_items: int,
        flush_interval_s: float,
    ) -> None:
        self._inbox = inbox
        self._log_file = log_file
        self._counters = counters
        self._on_result = on_result
        self._flush_items = flush_items
        self._flush_interval_s = flush_interval_s

    def _record(self, batch: list[Line]) -> None:
        counters, on_result = self._counters, self._on_result
        for r in batch:
            counters.answers_done += 1
            counters.status[str(r.status)] += 1
            if on_result is not None:
                on_result(r if isinstance(r, AnswerResult) else r.decoded())

    async def __call__(self) -> None:
        """Write until ``inbox`` ends (or the run is cancelled: what is held is still written)."""
        batch: list[Line] = []
        inbox, append = self._inbox, self._log_file.append

        async def flush() -> None:
            # Cancelled before the thread starts, the batch is still held and the finally
            # below writes it; once written it is let go before _record(), which may raise.
            nonlocal batch
            await anyio.to_thread.run_sync(append, batch)
            out, batch = batch, []
            self._record(out)

        try:
            while True:
                with anyio.move_on_after(self._flush_interval_s):
                    while len(batch) < self._flush_items:
                        try:
                            batch.append(await inbox.receive())
                        except EndOfChannel:
                            if batch:
                                await flush()
                            return
                if batch:
                    await flush()
        finally:
            if batch:  # cancelled (Ctrl-C, quota): keep what was finished
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(append, batch)
                    self._record(batch)
