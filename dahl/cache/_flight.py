"""Single flight: identical keys in flight share one call (the local backend's, :meth:`dahl.cache.Store.flight`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """At most one call per key at a time; callers arriving meanwhile share its result or exception.

    The map holds only keys in flight, so its size is at most the number of concurrent
    callers; no future is made for a call nobody waits on. A cancelled waiter leaves the
    call running for the others; a cancelled owner cancels the shared future, and its
    waiters retry (one becomes the owner) unless they were cancelled themselves.
    """

    def __init__(self) -> None:
        self._calls: dict[str, asyncio.Future[T] | None] = {}

    def __len__(self) -> int:
        """Number of keys in flight now."""
        return len(self._calls)

    def __contains__(self, key: object) -> bool:
        """Whether a call for ``key`` is in flight now."""
        return key in self._calls

    async def run(self, key: str, work: Callable[[], Awaitable[T]], on_shared: Callable[[], None]) -> T:
        """``await work()``, or the outcome of the identical call in flight (then ``on_shared()`` is called once).

        Raises:
            BaseException: whatever ``work`` raised, in the owner and every waiter.
        """
        calls = self._calls
        while key in calls:
            future = calls[key]
            if future is None:
                future = calls[key] = asyncio.get_running_loop().create_future()
            try:
                result = await asyncio.shield(future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and (task is None or task.cancelling() == 0):
                    continue  # the owner was cancelled, not this caller: try again
                raise
            except BaseException:
                on_shared()
                raise
            on_shared()
            return result
        calls[key] = None
        try:
            result = await work()
        except BaseException as exc:
            future = calls.pop(key)
            if future is not None:
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
                    future.exception()  # retrieved: asyncio would log it at GC
            raise
        future = calls.pop(key)
        if future is not None:
            future.set_result(result)
        return result
