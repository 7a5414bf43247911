"""Rate limiting: a FIFO token bucket (requests or tokens per minute) and a pause gate.

:class:`RateBucket` enforces a per-minute rate with a burst of at most
``burst_s`` seconds of that rate (DESIGN.md §5: "burst ≤ 1 s of rate"). The same
class limits requests (amount 1 per request) and tokens (amount = reserved tokens).

:class:`PauseGate` holds everyone back until a time the server named
(``Retry-After``, ``x-ratelimit-reset-*``), then lets the held waiters go over a
short random spread; behind it, the (drained) RPM bucket paces them at its rate,
so a pause never ends in a thundering herd.

Both are driven by timers (``Clock.sleep``), never by polling, and both are
cancellation-safe: a cancelled waiter takes no capacity and leaves the queue.

:class:`LaneLimits` is the configured RPM, TPM and in-flight cap of one lane.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from dataclasses import dataclass

from dahl.engine.clock import Clock, SystemClock
from dahl.errors import ConfigError, PermanentAPIError

__all__ = ["LaneLimits", "PauseGate", "RateBucket"]

# Relative slack for float comparisons, so a waiter woken exactly on time never
# sleeps again for a rounding error (which virtual time could not advance).
_EPS = 1e-9


def _check_rate(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class LaneLimits:
    """Configured limits of one lane. Immutable; validates itself.

    Args:
        rpm: requests per minute, or ``None`` for no limit until the server
            announces one (``x-ratelimit-limit-requests``).
        tpm: tokens per minute, or ``None`` likewise (``x-ratelimit-limit-tokens``).
        max_in_flight: most requests outstanding at once.

    Raises:
        ConfigError: ``rpm``/``tpm`` not ``None`` or a finite number > 0, or
            ``max_in_flight`` not an int >= 1.
    """

    rpm: float | None = None
    tpm: float | None = None
    max_in_flight: int = 64

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            if (value := getattr(self, name)) is not None:
                _check_rate(name, value)
        slots = self.max_in_flight
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ConfigError(f"max_in_flight must be an int >= 1, got {slots!r}")


class _Waiter:
    """One queued acquire: its amount and a future set when it reaches the head."""

    __slots__ = ("amount", "turn")

    def __init__(self, amount: float, turn: asyncio.Future[None]) -> None:
        self.amount = amount
        self.turn = turn


class RateBucket:
    """A token bucket that refills at ``rate_per_minute`` and holds at most ``burst_s`` of it.

    The bucket starts full. ``acquire(n)`` takes ``n`` units, waiting (FIFO)
    until they have refilled. Capacity is ``rate_per_minute / 60 * burst_s``
    units, so with the default ``burst_s = 1`` no more than one second's worth
    of rate ever goes out at once, and over any long window the rate is exact.

    A request larger than the capacity but not larger than the per-minute rate
    waits until the bucket is *full*, then takes its amount and leaves the
    bucket in debt (negative level), which later waiters wait out: it cannot
    deadlock, and the long-run rate is still honoured. A request larger than
    the per-minute rate could never fit and fails at once.

    Only the head of the queue sleeps, on a timer computed from the deficit;
    others wait on a future until it is their turn. ``refund`` and ``set_rate``
    do not wake a sleeping head early (it re-checks when its timer fires; the
    next waiters benefit at once); ``drain`` and rate decreases are re-checked
    and waited out.

    Args:
        rate_per_minute: units per minute (requests per minute, or tokens per minute).
        burst_s: seconds of rate the bucket can hold (capacity = rate/60 * burst_s).
        clock: time source; :class:`SystemClock` by default.
        unit: name of one unit, used in error messages ("requests", "tokens").

    Raises:
        ConfigError: ``rate_per_minute`` or ``burst_s`` is not a finite number > 0.
    """

    def __init__(
        self,
        rate_per_minute: float,
        *,
        burst_s: float = 1.0,
        clock: Clock | None = None,
        unit: str = "tokens",
    ) -> None:
        self._rate_per_minute = _check_rate("rate_per_minute", rate_per_minute)
        self._burst_s = _check_rate("burst_s", burst_s)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._unit = unit
        self._level = self.capacity
        self._stamp: float | None = None  # set on first use: SystemClock needs a running loop
        self._queue: deque[_Waiter] = deque()

    @property
    def rate_per_minute(self) -> float:
        """Refill rate in units per minute."""
        return self._rate_per_minute

    @property
    def capacity(self) -> float:
        """Most units the bucket holds: ``rate_per_minute / 60 * burst_s``."""
        return self._rate_per_minute / 60.0 * self._burst_s

    @property
    def level(self) -> float:
        """Units available now (negative while in debt after an oversize acquire)."""
        self._refill()
        return self._level

    @property
    def waiting(self) -> int:
        """Number of acquires queued."""
        return len(self._queue)

    def _refill(self) -> None:
        now = self._clock.now()
        if self._stamp is not None and now > self._stamp:
            gained = (now - self._stamp) * self._rate_per_minute / 60.0
            self._level = min(self.capacity, self._level + gained)
        self._stamp = now

    def _need(self, amount: float) -> float:
        """Level required before ``amount`` may be taken (capped at a full bucket)."""
        return min(amount, self.capacity)

    def _has(self, amount: float) -> bool:
        need = self._need(amount)
        return self._level >= need - _EPS * max(1.0, need)

    async def acquire(self, amount: float = 1) -> None:
        """Take ``amount`` units, waiting (FIFO, timer-driven) until they are available.

        Args:
            amount: units to take (1 per request; reserved tokens for a TPM bucket).

        Raises:
            PermanentAPIError: ``amount`` exceeds the per-minute rate, so it could
                never be sent; raised at once without waiting.
            ValueError: ``amount`` is not a finite number > 0.
            asyncio.CancelledError: the caller was cancelled; nothing was taken.
        """
        if not (math.isfinite(amount) and amount > 0):
            raise ValueError(f"amount must be a finite number > 0, got {amount!r}")
        if amount > self._rate_per_minute:
            raise PermanentAPIError(
                f"request of {amount:g} {self._unit} exceeds the token budget of "
                f"{self._rate_per_minute:g} {self._unit} per minute"
            )
        self._refill()
        if not self._queue and self._has(amount):
            self._level -= amount
            return
        waiter = _Waiter(amount, asyncio.get_running_loop().create_future())
        self._queue.append(waiter)
        if len(self._queue) == 1:
            waiter.turn.set_result(None)
        try:
            await waiter.turn
            while True:
                self._refill()
                if self._has(amount):
                    self._level -= amount
                    return
                rate_per_s = self._rate_per_minute / 60.0
                await self._clock.sleep((self._need(amount) - self._level) / rate_per_s)
        finally:
            self._leave(waiter)

    def _leave(self, waiter: _Waiter) -> None:
        """Remove ``waiter`` from the queue; if it was the head, hand the turn on."""
        if self._queue and self._queue[0] is waiter:
            self._queue.popleft()
            if self._queue and not self._queue[0].turn.done():
                self._queue[0].turn.set_result(None)
        else:
            try:
                self._queue.remove(waiter)
            except ValueError:
                pass  # already gone; nothing to release

    def consume(self, amount: float) -> None:
        """Take ``amount`` units now without waiting, going into debt if needed.

        Used when the server reports more tokens than were reserved.

        Raises:
            ValueError: ``amount`` is negative or not finite.
        """
        if not (math.isfinite(amount) and amount >= 0):
            raise ValueError(f"amount must be a finite number >= 0, got {amount!r}")
        self._refill()
        self._level -= amount

    def refund(self, amount: float) -> None:
        """Give back ``amount`` units that were taken but not used (level capped at capacity).

        Raises:
            ValueError: ``amount`` is negative or not finite.
        """
        if not (math.isfinite(amount) and amount >= 0):
            raise ValueError(f"amount must be a finite number >= 0, got {amount!r}")
        self._refill()
        self._level = min(self.capacity, self._level + amount)

    def set_rate(self, rate_per_minute: float) -> None:
        """Change the rate (e.g. learnt from ``x-ratelimit-limit-*`` headers).

        Units earned so far are kept, up to the new capacity.

        Raises:
            ConfigError: ``rate_per_minute`` is not a finite number > 0.
        """
        rate = _check_rate("rate_per_minute", rate_per_minute)
        self._refill()
        self._rate_per_minute = rate
        self._level = min(self.capacity, self._level)

    def drain(self) -> None:
        """Empty the bucket (after a 429): nothing more goes until it refills."""
        self._refill()
        self._level = min(0.0, self._level)

    def __repr__(self) -> str:
        level = self.level if self._stamp is not None else self._level
        return (
            f"<RateBucket {self._rate_per_minute:g} {self._unit}/min, "
            f"level {level:.2f}/{self.capacity:g}, {len(self._queue)} waiting>"
        )


class PauseGate:
    """A gate closed until a given time; waiters held by a pause leave over a random spread.

    Args:
        clock: time source; :class:`SystemClock` by default.
        spread_s: seconds; a waiter that had to wait for a pause then sleeps a
            further ``uniform(0, spread_s)`` so held waiters do not all leave at
            the same instant (0 disables).
        rng: random source for the spread.

    Raises:
        ConfigError: ``spread_s`` is negative or not finite.
    """

    def __init__(
        self,
        clock: Clock | None = None,
        *,
        spread_s: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        if not (math.isfinite(spread_s) and spread_s >= 0):
            raise ConfigError(f"spread_s must be finite and >= 0, got {spread_s!r}")
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._spread_s = spread_s
        self._rng = rng if rng is not None else random.Random()
        self._until = -math.inf
        self._waiting = 0

    def pause_until(self, t: float) -> None:
        """Close the gate until clock time ``t`` (seconds); an existing later pause is kept."""
        self._until = max(self._until, t)

    def pause_for(self, seconds: float) -> None:
        """Close the gate for ``seconds`` seconds from now (an existing later pause is kept)."""
        self.pause_until(self._clock.now() + seconds)

    @property
    def paused_until(self) -> float | None:
        """Clock time (seconds) the gate opens, or ``None`` when it is open."""
        return self._until if self.is_paused() else None

    @property
    def waiting(self) -> int:
        """Number of tasks held at the gate."""
        return self._waiting

    def is_paused(self) -> bool:
        """Return whether the gate is closed now."""
        # Never paused: answer without reading the clock.
        return self._until != -math.inf and self._clock.now() < self._until

    async def wait(self) -> None:
        """Return at once when open; otherwise sleep until the pause ends, plus the spread.

        A pause extended while waiting is honoured.

        Raises:
            asyncio.CancelledError: the caller was cancelled.
        """
        if not self.is_paused():
            return
        self._waiting += 1
        try:
            while (remaining := self._until - self._clock.now()) > 0:
                await self._clock.sleep(remaining)
            if self._spread_s > 0:
                await self._clock.sleep(self._rng.uniform(0.0, self._spread_s))
        finally:
            self._waiting -= 1

    def __repr__(self) -> str:
        if self.is_paused():
            left = self._until - self._clock.now()
            return f"<PauseGate paused for {left:.3f}s, {self._waiting} waiting>"
        return f"<PauseGate open, {self._waiting} waiting>"
