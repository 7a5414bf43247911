"""The two ends of every job run by :func:`~dahl.engine._stage.run_stages`, plain tasks: the
:class:`Reader` and the :class:`Writer`; and :func:`read_back`, which reads a job's lines to resume."""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

import anyio
import msgspec

from dahl.engine._channel import Channel, EndOfChannel
from dahl.errors import InputError

__all__ = ["Reader", "Writer", "next_batch", "read_back", "read_batches"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def next_batch(source: Iterator[T], size: int) -> list[T]:
    """The next ``size`` items of ``source`` (fewer at its end, ``[]`` once exhausted); blocking."""
    return list(itertools.islice(source, size))


async def read_batches(source: Iterator[T], size: int) -> AsyncIterator[list[T]]:
    """``source`` in lists of up to ``size`` items, each read in a worker thread."""
    while batch := await anyio.to_thread.run_sync(next_batch, source, size):
        yield batch


class Reader(Generic[T]):
    """Reads the blocking iterable ``source`` in batches of ``batch`` items, each in a worker thread,
    and hands each batch to ``take`` on the event loop, which sends its items to ``outputs``.

    It counts itself as a sender of every channel in ``outputs`` when built, and closes them when
    ``source`` is exhausted (or the run stops).
    """

    def __init__(
        self,
        source: Iterable[T],
        take: Callable[[list[T]], Awaitable[None]],
        *,
        outputs: Sequence[Channel[Any]],
        batch: int,
    ) -> None:
        self._source = source
        self._take = take
        self._outputs = tuple(outputs)
        self._batch = batch
        for channel in self._outputs:
            channel.open_sender()

    async def __call__(self) -> None:
        """Read until ``source`` is exhausted, then close this reader's senders."""
        take = self._take
        try:
            async for batch in read_batches(iter(self._source), self._batch):
                await take(batch)
        finally:
            for channel in self._outputs:
                channel.close_sender()


class Writer(Generic[T]):
    """Appends the items of ``inbox`` in batches with the blocking ``append``, each in a worker thread,
    then calls ``written`` (if given) with the batch on the event loop.

    A batch is written when it holds ``flush_items`` items or its first item waited
    ``flush_interval_s`` seconds; cancelled (Ctrl-C, quota), the writer still writes what it holds.
    """

    def __init__(
        self,
        inbox: Channel[T],
        append: Callable[[list[T]], None],
        *,
        written: Callable[[list[T]], None] | None = None,
        flush_items: int = 1,
        flush_interval_s: float = math.inf,
    ) -> None:
        self._inbox = inbox
        self._append = append
        self._written = written
        self._flush_items = flush_items
        self._flush_interval_s = flush_interval_s

    def _record(self, batch: list[T]) -> None:
        if self._written is not None:
            self._written(batch)

    async def __call__(self) -> None:
        """Write until ``inbox`` ends (or the run is cancelled: what is held is still written)."""
        batch: list[T] = []
        inbox, append = self._inbox, self._append

        async def flush() -> None:
            # Cancelled before the thread starts, the batch is still held for the finally below;
            # once written it is let go before _record(), which may raise.
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


def read_back(path: Path, decode: Callable[[bytes], T], what: str) -> list[T]:
    """The items a job appended to ``path`` (missing: none) one line each, decoded by ``decode``, in
    file order (blocking). A last line cut short by a kill is truncated away.

    Raises:
        InputError: a complete line does not decode ("not a ``what`` line"); nothing is touched.
    """
    if not path.exists():
        return []
    items: list[T] = []
    good = 0
    with path.open("rb") as handle:
        for n, line in enumerate(handle, 1):
            try:
                items.append(decode(line))
            except msgspec.DecodeError:
                if line.endswith(b"\n"):
                    raise InputError(f"not a {what} line; choose another -o", file=str(path), line=n) from None
                log.warning("%s:%d: dropping a line cut short by an earlier stop", path, n)
                break
            good += len(line)
    if good != path.stat().st_size:
        with path.open("r+b") as handle:
            handle.truncate(good)
    return items
