"""Time sources: the :class:`Clock` protocol, the loop's clock and a virtual-time event loop."""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol, TypeVar, runtime_checkable

__all__ = ["Clock", "SystemClock", "VirtualTimeLoop", "run_in_virtual_time"]

T = TypeVar("T")


@runtime_checkable
class Clock(Protocol):
    """A monotonic time source that can sleep."""

    def now(self) -> float:
        """Return the current time in seconds (monotonic; only differences are meaningful)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the calling task for ``seconds`` seconds (cancellable)."""
        ...


class SystemClock:
    """The running event loop's clock (``loop.time()``, else ``time.monotonic()``) and ``asyncio.sleep``."""

    def now(self) -> float:
        """Return ``loop.time()`` of the running loop (else ``time.monotonic()``), in seconds."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return time.monotonic()
        return loop.time()

    async def sleep(self, seconds: float) -> None:
        """Sleep ``seconds`` seconds on the running loop (negative values do not sleep)."""
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "SystemClock()"


class _AutojumpSelector(selectors.DefaultSelector):
    """A selector that advances virtual time instead of blocking on a timeout."""

    def __init__(self, advance: Callable[[float], None]) -> None:
        super().__init__()
        self._advance = advance

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout is not None and timeout <= 0:
            return ready
        if timeout is None:
            # Nothing scheduled: only another thread or real I/O can wake us.
            return super().select(None)
        self._advance(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop whose ``time()`` is virtual and jumps to the next timer.

    When the loop would wait for a timer with no I/O ready, it adds the wait to its virtual time
    instead; real I/O still works but waiting on it does not advance time.

    Args:
        start_s: initial virtual time in seconds.
    """

    def __init__(self, start_s: float = 0.0) -> None:
        self._virtual_now = float(start_s)
        super().__init__(selector=_AutojumpSelector(self._advance))

    def time(self) -> float:
        """Return the virtual time in seconds."""
        return self._virtual_now

    def _advance(self, seconds: float) -> None:
        self._virtual_now += seconds


def run_in_virtual_time(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main()`` (a coroutine function) to completion on a fresh :class:`VirtualTimeLoop` at 0 s."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main())
