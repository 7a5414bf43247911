"""A bounded queue between pipeline stages that ends when its last sender closes."""

from __future__ import annotations

import asyncio
from typing import Generic, TypeVar

__all__ = ["Channel", "ChannelStatistics", "EndOfChannel"]

T = TypeVar("T")


class EndOfChannel(Exception):
    """Raised by :meth:`Channel.receive` once every sender closed and the queue is empty."""


class _End:
    """The end marker put in the queue by the last sender."""


_END = _End()


class ChannelStatistics:
    """A snapshot: items queued, capacity, senders still open."""

    __slots__ = ("queued", "size", "senders")

    def __init__(self, queued: int, size: int, senders: int) -> None:
        self.queued = queued
        self.size = size
        self.senders = senders

    def __repr__(self) -> str:
        return f"ChannelStatistics(queued={self.queued}, size={self.size}, senders={self.senders})"


class Channel(Generic[T]):
    """Bounded multi-producer, multi-consumer queue of at most ``size`` items (ValueError if < 1).

    Each producer calls :meth:`open_sender` before sending and :meth:`close_sender` when done;
    receivers iterate with ``async for`` until the last sender closed and the queue is drained.
    ``send`` and ``receive`` return at once when the queue has room or an item.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("size must be >= 1")
        self._queue: asyncio.Queue[T | _End] = asyncio.Queue(size)
        self._senders = 0
        self._ended = False

    def open_sender(self) -> None:
        """Count one more producer."""
        self._senders += 1

    def close_sender(self) -> None:
        """One producer is done; the last one ends the channel (never blocks)."""
        self._senders -= 1
        if self._senders == 0:
            try:
                self._queue.put_nowait(_END)
            except asyncio.QueueFull:
                # The next receive frees a slot and puts the end marker there.
                self._ended = True

    async def send(self, item: T) -> None:
        """Queue ``item``, waiting while the queue is full (cancellation-safe)."""
        await self._queue.put(item)

    async def receive(self) -> T:
        """Return the next item; EndOfChannel once every sender closed and nothing is left."""
        if self._ended and self._queue.empty():
            raise EndOfChannel
        item = await self._queue.get()
        if isinstance(item, _End):
            self._queue.put_nowait(_END)  # for the other receivers; the slot was just freed
            raise EndOfChannel
        if self._ended:
            # Closed while full: the end marker takes the slot just freed, so a receiver that
            # waits again still gets the end.
            self._ended = False
            self._queue.put_nowait(_END)
        return item

    def __aiter__(self) -> Channel[T]:
        return self

    async def __anext__(self) -> T:
        try:
            return await self.receive()
        except EndOfChannel:
            raise StopAsyncIteration from None

    def statistics(self) -> ChannelStatistics:
        """Queue depth, capacity and open senders (for progress and the bench)."""
        return ChannelStatistics(self._queue.qsize(), self._queue.maxsize, self._senders)
