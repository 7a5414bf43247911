"""Time sources for the engine: the :class:`Clock` protocol and a virtual-time event loop.

Limiters, the pause gate and the retry loop read time and sleep only through a
:class:`Clock`, so tests and dry runs can replace real time.

:class:`SystemClock` reads the running event loop's clock. Because it asks the
*loop*, running code on a :class:`VirtualTimeLoop` makes every ``SystemClock``,
``asyncio.sleep`` and ``asyncio.timeout`` virtual at once: when no callback is
ready and no I/O is pending, the loop jumps straight to its next timer instead of
waiting (the same idea as trio's ``MockClock(autojump_threshold=0)``).
"""

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
    """The running event loop's clock (``loop.time()``) and ``asyncio.sleep``.

    ``now()`` outside a running loop (e.g. reading statistics after a run) falls
    back to ``time.monotonic()``, which is what asyncio's default loops use.
    """

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

    Whenever the loop would wait for its next timer with no I/O ready, it instead
    adds the wait to its virtual time and continues at once, so an hour of sleeps
    takes microseconds of wall time and runs in a deterministic order. Real I/O
    (e.g. loopback sockets) still works, but waiting on it does not advance time.

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
    """Run ``main()`` to completion on a fresh :class:`VirtualTimeLoop` starting at 0 s.

    Args:
        main: a coroutine function taking no arguments.

    Returns:
        What ``main()`` returned.

    Raises:
        Whatever ``main()`` raises.
    """
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main())
