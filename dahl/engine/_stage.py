"""A stage: a fixed pool of workers reading one bounded channel and writing others; and
:func:`run_stages`, which runs stages and plain tasks in one task group."""

from __future__ import annotations

import asyncio
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

#: Items after which a worker whose work never waited lets the event loop run others.
_ITEMS_PER_TURN = 8

T = TypeVar("T")
B = TypeVar("B")
T_co = TypeVar("T_co", covariant=True)


class Inbox(Protocol[T_co]):
    """What a stage reads: a :class:`~dahl.engine._channel.Channel` or anything iterable the same way."""

    def __aiter__(self) -> AsyncIterator[T_co]: ...


class Unbatched(Generic[B, T]):
    """An inbox that takes batches from ``channel`` and hands their items (``items(batch)``, called
    once per batch) out one at a time; the stage's workers share it."""

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
    """``workers`` tasks (ValueError if < 1) that each take items of ``inbox`` and ``await work(item)``,
    letting the event loop run others every :data:`_ITEMS_PER_TURN` items when ``work`` did not wait.

    Every worker counts itself as a sender of each channel in ``outputs`` (those ``work`` sends to)
    when the stage is built, and closes them when the inbox ends.

    Args:
        name: what the stage does (``"split"``, ``"check"``, ``"cover"``), for logs.
        on_error: called with the item and the error when ``work`` raises an
            :class:`~dahl.errors.AdapterError`; None re-raises it. Quota and fatal API errors
            always stop the run.
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
        loop = asyncio.get_running_loop()
        turned = [False]  # the loop ran its callbacks since the mark was set

        def turn() -> None:
            turned[0] = True

        loop.call_soon(turn)
        done = 0
        try:
            async for item in self.inbox:
                done += 1
                if done % _ITEMS_PER_TURN == 0:
                    if not turned[0]:
                        # The last items' work never waited (cache hits, an offline Checker): without
                        # this the worker would hold the loop for as long as its inbox has items.
                        await anyio.lowlevel.checkpoint()
                    turned[0] = False
                    loop.call_soon(turn)
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
    """Run ``stages`` and plain ``tasks`` (a reader, a writer) until all have ended; a stage that meets a
    quota or fatal API error cancels everything, then it is raised.

    Raises:
        QuotaExhausted, FatalAPIError: a stage stopped the run.
        DahlError: the first DahlError any task raised, not the group of failures it caused.
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
