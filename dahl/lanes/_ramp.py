"""The start ramp: a lane with unknown limits sends at most ``per_s`` requests per second until
its first reply shows the server's ``x-ratelimit-*`` headers.
"""

from __future__ import annotations

import asyncio
from collections import deque

from dahl.lanes._clock import Clock, SystemClock
from dahl.lanes._limits import check_positive

__all__ = ["StartRamp"]

# Slack for float comparisons, so a waiter woken exactly on time never sleeps again.
_EPS = 1e-9


class StartRamp:
    """Admit callers FIFO at most ``per_s`` per second (the first at once) until opened.

    Admissions are at least ``1 / per_s`` seconds apart; :meth:`open` releases every waiter and
    later caller at once. A cancelled waiter takes no turn.

    Args:
        per_s: callers per second before the ramp is opened.
        clock: time source; :class:`SystemClock` by default.

    Raises:
        ConfigError: ``per_s`` is not a finite number > 0.
    """

    def __init__(self, per_s: float, clock: Clock | None = None) -> None:
        self._gap_s = 1.0 / check_positive("per_s", per_s)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._last: float | None = None  # clock time of the latest admission
        self._admitted = 0
        self._open = False
        self._opened: asyncio.Future[None] | None = None  # set by open(); wakes the head
        self._queue: deque[asyncio.Future[None]] = deque()

    @property
    def admitted(self) -> int:
        """Callers let through by pacing (not counting those released by :meth:`open`)."""
        return self._admitted

    @property
    def waiting(self) -> int:
        """Callers queued."""
        return len(self._queue)

    def open(self) -> None:
        """Let every waiter through now, and every later caller at once."""
        self._open = True
        if self._opened is not None and not self._opened.done():
            self._opened.set_result(None)
        for turn in self._queue:
            if not turn.done():
                turn.set_result(None)

    def _due(self) -> float:
        assert self._last is not None
        return self._last + self._gap_s

    def _pass(self, now: float) -> None:
        self._last = now
        self._admitted += 1

    async def wait(self) -> None:
        """Return when this caller may send: at once when open, else at its paced turn.

        Raises:
            asyncio.CancelledError: the caller was cancelled; it took no turn.
        """
        if self._open:
            return
        now = self._clock.now()
        if not self._queue and (self._last is None or now + _EPS >= self._due()):
            self._pass(now)
            return
        loop = asyncio.get_running_loop()
        turn: asyncio.Future[None] = loop.create_future()
        self._queue.append(turn)
        if len(self._queue) == 1:
            turn.set_result(None)
        try:
            await turn
            while not self._open:
                now = self._clock.now()
                if now + _EPS >= self._due():
                    self._pass(now)
                    return
                await self._sleep_unless_opened(self._due() - now)
        finally:
            self._leave(turn)

    async def _sleep_unless_opened(self, seconds: float) -> None:
        """Sleep ``seconds`` on the clock, or less if :meth:`open` is called meanwhile."""
        if self._opened is None:
            self._opened = asyncio.get_running_loop().create_future()
        sleeper = asyncio.ensure_future(self._clock.sleep(seconds))
        try:
            await asyncio.wait((sleeper, self._opened), return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()

    def _leave(self, turn: asyncio.Future[None]) -> None:
        """Remove ``turn`` from the queue; if it was the head, hand the turn on."""
        if self._queue and self._queue[0] is turn:
            self._queue.popleft()
            if self._queue and not self._queue[0].done():
                self._queue[0].set_result(None)
        else:
            try:
                self._queue.remove(turn)
            except ValueError:
                pass  # already gone

    def __repr__(self) -> str:
        state = "open" if self._open else f"{1.0 / self._gap_s:g}/s"
        return f"<StartRamp {state}, {self._admitted} paced, {len(self._queue)} waiting>"
