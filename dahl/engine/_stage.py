"""A stage: a fixed pool of workers reading one bounded channel and writing others.

Runs are composed of stages: split and check in ``dahl score``, cover
when recall is asked for, extract and rate in ``dahl refs build``. Each stage owns its
error policy; what a worker does with an item (call an adapter, look the cache up, send
the item on) is its ``work`` function, which also counts what the run reports
(:class:`~dahl.results._counters.RunCounters` for ``dahl score``, the job's own counters
for the others): a stage keeps no counts of its own. :func:`run_stages` runs stages and
plain tasks (a reader, a writer) in one task group, and stops them all when a stage
meets an error the run cannot go on from (quota exhausted, a fatal API error).
"""

from __future__ import annotations

import collections
import logging
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar

import anyio
import anyio.lowlevel

from dahl.engine._channel import Channel, EndOfChannel
from dahl.errors import AdapterError, DahlError, FatalAPIError, QuotaExhausted

__all__ = ["Inbox", "Stage", "Unbatched", "run_stages"]

log = logging.getLogger(__name__)

T = TypeVar("T")
B = TypeVar("B")
T_co = TypeVar("T_co", covariant=True)


class Inbox(Protocol[T_co]):
    """What a stage reads: a :class:`~dahl.engine._channel.Channel` or anything iterable
    the same way (``async for`` until the last sender closed)."""

    def __aiter__(self) -> AsyncIterator[T_co]: ...


class Unbatched(Generic[B, T]):
    """An inbox that takes batches from a channel and hands their items out one at a time.

    Producers send a batch as one channel item (e.g. all claims of an answer): with
    many producers on a full channel, one send per item made every item a blocked,
    woken and often re-blocked sender. Every worker of the stage shares this one
    inbox, so the items of a batch go to different workers.

    Args:
        channel: the batches.
        items: the items of one batch, in order (called once per batch).
    """

    __slots__ = ("_channel", "_items", "_ready")

    def __init__(self, channel: Channel[B], items: Callable[[B], Iterable[T]]) -> None:
        self._channel = channel
        self._items = items
        self._ready: collections.deque[T] = collections.deque()

    def __aiter__(self) -> Unbatched[B, T]:
        return self

    async def __anext__(self) -> T:
        ready = self._ready
        while not ready:
            try:
                batch = await self._channel.receive()
            except EndOfChannel:
                if ready:  # another worker's batch arrived while this one waited
                    break
                raise StopAsyncIteration from None
            ready.extend(self._items(batch))
        return ready.popleft()

    def __len__(self) -> int:
        """Items taken from the channel and not handed out yet."""
        return len(self._ready)


class Stage(Generic[T]):
    """``workers`` tasks that each take items of ``inbox`` and ``await work(item)``.

    Every worker counts itself as a sender of each channel in ``outputs`` when the
    stage is built (before any task runs, so no output ends early) and closes them
    when the inbox ends, so a downstream stage ends exactly when this one is done.

    Args:
        name: what the stage does (``"split"``, ``"check"``, ``"cover"``), for logs.
        inbox: the items to work on.
        work: what a worker does with one item; it sends its output itself.
        workers: the pool size (>= 1).
        outputs: the channels ``work`` sends to.
        on_error: called with the item and the error when ``work`` raises an
            :class:`~dahl.errors.AdapterError` (e.g. to emit an error result); None
            re-raises it. Quota and fatal API errors always stop the run.

    Raises:
        ValueError: ``workers < 1``.
    """

    def __init__(
        self,
        name: str,
        inbox: Inbox[T],
        work: Callable[[T], Awaitable[None]],
        *,
        workers: int,
        outputs: Sequence[Channel[Any]] = (),
        on_error: Callable[[T, AdapterError], Awaitable[None]] | None = None,
    ) -> None:
        if workers < 1:
            raise ValueError(f"stage {name}: workers must be >= 1, got {workers}")
        self.name = name
        self.inbox = inbox
        self.workers = workers
        self.outputs = tuple(outputs)
        self._work = work
        self._on_error = on_error
        for channel in self.outputs:
            for _ in range(workers):
                channel.open_sender()

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, workers={self.workers}, outputs={len(self.outputs)})"

    async def serve(self, stop: Callable[[BaseException], None]) -> None:
        """One worker: work on items until the inbox ends; ``stop`` ends the run on a fatal error."""
        work = self._work  # a local: this loop runs once per item
        try:
            async for item in self.inbox:
                try:
                    await work(item)
                except (QuotaExhausted, FatalAPIError) as exc:  # the run stops; finished work is kept
                    stop(exc)
                    return
                except AdapterError as exc:
                    if self._on_error is None:
                        raise
                    await self._on_error(item, exc)
        finally:
            for channel in self.outputs:
                channel.close_sender()


async def run_stages(
    stages: Sequence[Stage[Any]], tasks: Sequence[Callable[[], Coroutine[Any, Any, None]]] = ()
) -> None:
    """Run ``stages`` and plain ``tasks`` (a reader, a writer) until all have ended.

    A stage that meets a quota or fatal API error cancels everything; tasks that
    hold finished work flush it in a shielded ``finally``; then the error is raised.

    Raises:
        QuotaExhausted, FatalAPIError: a stage stopped the run.
        DahlError: the first DahlError any task raised (e.g. unreadable input), not
            the group of follow-on failures it caused.
    """
    fatal: list[BaseException] = []

    def stop(exc: BaseException) -> None:
        if not fatal:
            fatal.append(exc)
        tg.cancel_scope.cancel()

    starters: list[Callable[[], Coroutine[Any, Any, None]]] = list(tasks)
    for stage in stages:
        starters.extend([functools.partial(stage.serve, stop)] * stage.workers)
    try:
        async with anyio.create_task_group() as tg:
            for n, start in enumerate(starters, 1):
                tg.start_soon(start)
                if n % 32 == 0:  # starting ~200 tasks takes ~20 ms: let the loop run between chunks
                    await anyio.lowlevel.checkpoint()
    except BaseExceptionGroup as group:
        first = next((e for e in _leaves(group) if isinstance(e, DahlError)), None)
        if first is None:
            raise
        raise first from group
    if fatal:
        raise fatal[0]


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out
