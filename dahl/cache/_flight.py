"""Single flight: identical keys in flight share one call."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["SingleFlight"]

T = TypeVar("T")


class _Call(Generic[T]):
    """One call in flight; its future is created only when a second caller shows up."""

    __slots__ = ("future",)

    def __init__(self) -> None:
        self.future: asyncio.Future[T] | None = None

    def shared(self) -> asyncio.Future[T]:
        if self.future is None:
            self.future = asyncio.get_running_loop().create_future()
        return self.future


class SingleFlight(Generic[T]):
    """Runs at most one call per key at a time; later callers await the first one's outcome.

    The first caller of a key (the owner) runs the work; callers arriving while it
    runs (waiters) get the same result or the same exception. The map holds only
    keys in flight: an entry is removed as soon as its call ends, so its size is at
    most the number of concurrent callers. No future is created for a call nobody
    waits on (the common case, and this sits on every cache hit's path).

    Cancellation: a cancelled waiter leaves the call running for the others. A
    cancelled owner cancels the shared future; its waiters then retry (one of them
    becomes the new owner) unless they were cancelled themselves.
    """

    def __init__(self) -> None:
        self._calls: dict[str, _Call[T]] = {}

    def __len__(self) -> int:
        """Number of keys in flight now."""
        return len(self._calls)

    def __contains__(self, key: object) -> bool:
        """Whether a call for ``key`` is in flight now."""
        return key in self._calls

    def busy(self, key: str) -> bool:
        """Whether a call for ``key`` is in flight now (as ``key in flight``, cheaper)."""
        return key in self._calls

    async def run(
        self, key: str, work: Callable[[], Awaitable[T]], on_shared: Callable[[], None]
    ) -> T:
        """Return ``await work()``, or the outcome of the identical call already in flight.

        Args:
            key: identity of the call (a cache key).
            work: starts the call; run only when no call for ``key`` is in flight.
            on_shared: called once when this caller got a shared outcome (result or
                exception) instead of running ``work``.

        Raises:
            BaseException: whatever ``work`` raised, in the owner and every waiter.
        """
        while True:
            if key in self._calls:
                try:
                    shared = await self.join(key)
                except asyncio.CancelledError:
                    raise  # this caller was cancelled: nothing was shared with it
                except BaseException:
                    on_shared()
                    raise
                if shared is not None:
                    on_shared()
                    return shared[0]
                continue  # the owner was cancelled: try again
            call = self.open(key)
            try:
                result = await work()
            except BaseException as exc:
                self.close(key, call, exc=exc)
                raise
            self.close(key, call, result=result)
            return result

    def open(self, key: str) -> _Call[T]:
        """Register the caller as the owner of ``key`` (which must not be in flight).

        The owner must call :meth:`close` exactly once, whatever happens.
        """
        call: _Call[T] = _Call()
        self._calls[key] = call
        return call

    def close(
        self,
        key: str,
        call: _Call[T],
        *,
        result: T | None = None,
        exc: BaseException | None = None,
    ) -> None:
        """End the owner's call: hand ``result`` (or ``exc``) to its waiters, forget ``key``.

        A ``CancelledError`` as ``exc`` cancels the shared future (waiters retry).
        """
        del self._calls[key]
        future = call.future
        if future is None:
            return
        if isinstance(exc, asyncio.CancelledError):
            future.cancel()
        elif exc is not None:
            future.set_exception(exc)
            future.exception()  # mark retrieved, or asyncio logs it at GC
        else:
            future.set_result(result)  # type: ignore[arg-type]  # T when exc is None

    async def join(self, key: str) -> tuple[T] | None:
        """Wait for the call of ``key`` in flight (which must be) and share its outcome.

        Returns:
            ``(result,)``, or None when the owner was cancelled (the caller retries).

        Raises:
            BaseException: what the owner's call raised; CancelledError when this
                caller itself is cancelled (the call goes on for the others).
        """
        flight = self._calls[key].shared()
        try:
            return (await asyncio.shield(flight),)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if flight.cancelled() and (task is None or task.cancelling() == 0):
                return None
            raise
