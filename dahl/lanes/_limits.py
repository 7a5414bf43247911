"""Rate limiting: a paced FIFO token bucket (requests or tokens per minute), a pause gate, and
the configured limits of one lane. Both limiters are timer-driven and cancellation-safe.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from dahl.lanes._clock import Clock, SystemClock
from dahl.errors import ConfigError, PermanentAPIError

__all__ = ["LaneLimits", "PauseGate", "RateBucket", "Reply", "window_cap"]


class Reply(Protocol):
    """What an attempt returns: the server's token usage and response headers."""

    @property
    def usage_tokens(self) -> int | None:
        """Total tokens (prompt + completion) the server reported, or ``None``."""
        ...

    @property
    def headers(self) -> Mapping[str, str]:
        """Response headers (any case)."""
        ...


# Relative slack for float comparisons, so a waiter woken exactly on time never
# sleeps again for a rounding error (which virtual time could not advance).
_EPS = 1e-9


def check_positive(name: str, value: float) -> float:
    """``value`` as a float; ConfigError naming ``name`` unless it is a finite number > 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class LaneLimits:
    """Configured limits of one lane. Immutable; validates itself.

    Args:
        rpm: requests per minute, or ``None`` until the server announces one.
        tpm: tokens per minute, or ``None`` likewise.
        max_in_flight: most requests outstanding at once.
        refund_tokens: ``False`` (OpenAI's accounting, per its rate-limit guide): a request's
            prompt estimate + ``max_tokens`` stays spent; ``True``: ``reserved - usage`` is given
            back after each reply, and the whole reservation of a failed attempt.

    Raises:
        ConfigError: ``rpm``/``tpm`` not ``None`` or a finite number > 0, ``max_in_flight`` not an
            int >= 1, or ``refund_tokens`` not a bool.
    """

    rpm: float | None = None
    tpm: float | None = None
    max_in_flight: int = 64
    refund_tokens: bool = False

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm"):
            if (value := getattr(self, name)) is not None:
                check_positive(name, value)
        slots = self.max_in_flight
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise ConfigError(f"max_in_flight must be an int >= 1, got {slots!r}")
        if not isinstance(self.refund_tokens, bool):
            raise ConfigError(f"refund_tokens must be a bool, got {self.refund_tokens!r}")


class _Waiter:
    """One queued acquire: its amount and a future set when it reaches the head."""

    __slots__ = ("amount", "turn")

    def __init__(self, amount: float, turn: asyncio.Future[None]) -> None:
        self.amount = amount
        self.turn = turn


def window_cap(rate_per_minute: float, window_s: float = 1.0) -> tuple[float, float]:
    """The window cap of a rate: (units, seconds) with units = ``window_s`` seconds of rate rounded up
    to a whole unit (at least 1), and seconds stretched to match (90 RPM over 1 s: 2 units per 1.333 s).

    A server that counts in fixed windows of ``window_s`` (OpenAI's rate-limit guide: limits "may be
    quantized", 60,000 requests/minute enforced as 1,000 requests/second) sees no more than its share
    from a client that takes no more than this in any span. ``rate_per_minute`` and ``window_s`` are > 0.
    """
    per_s = rate_per_minute / 60.0
    units = max(1.0, math.ceil(per_s * window_s - _EPS))
    return units, units / per_s


class RateBucket:
    """A paced token bucket: ``rate_per_minute`` units, no more than one window's worth per window.

    ``acquire(n)`` takes ``n`` units (FIFO) when all hold:

    1. **Bucket.** The level refills at ``rate_per_minute / 60`` units per second up to
       ``capacity = rate_per_minute / 60 * burst_s``, starting from ``initial``.
    2. **Window cap.** Units taken in any span of the window never exceed ``window_s`` seconds of
       rate rounded up to a whole unit, the span stretched to match (90 RPM: 2 requests per
       1.333 s).
    3. **Hold.** After :meth:`hold_until` nothing is taken before the given time; the level then
       restarts from at most ``initial``.

    A request larger than the capacity but within the per-minute rate waits for a full bucket and
    leaves it in debt; one larger than the per-minute rate fails at once.

    Args:
        rate_per_minute: units per minute (requests or tokens).
        burst_s: seconds of rate the bucket can hold.
        window_s: seconds of the window cap, or ``None`` for no cap.
        initial: units at start and at most after a hold (clamped to the capacity).
        clock: time source; :class:`SystemClock` by default.
        unit: name of one unit in error messages ("requests", "tokens").

    Raises:
        ConfigError: ``rate_per_minute``, ``burst_s`` or ``window_s`` not a finite number > 0, or
            ``initial`` not a finite number >= 0.
    """

    def __init__(
        self,
        rate_per_minute: float,
        *,
        burst_s: float = 1.0,
        window_s: float | None = 1.0,
        initial: float = 0.0,
        clock: Clock | None = None,
        unit: str = "tokens",
    ) -> None:
        self._rate_per_minute = check_positive("rate_per_minute", rate_per_minute)
        self._burst_s = check_positive("burst_s", burst_s)
        self._window_s = None if window_s is None else check_positive("window_s", window_s)
        if isinstance(initial, bool) or not isinstance(initial, int | float):
            raise ConfigError(f"initial must be a number, got {initial!r}")
        if not (math.isfinite(initial) and initial >= 0):
            raise ConfigError(f"initial must be a finite number >= 0, got {initial!r}")
        self._initial = float(initial)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._unit = unit
        self._level = min(self._initial, self.capacity)
        # Time up to which refill is accounted; set on first use (SystemClock needs
        # a running loop). A hold moves it into the future: nothing accrues before.
        self._stamp: float | None = None
        self._ceiling = math.inf  # most units the level may reach before _ceiling_until
        self._ceiling_until = -math.inf
        self._queue: deque[_Waiter] = deque()
        self._log: deque[tuple[float, float]] = deque()  # (time taken, units) in the window
        self._log_sum = 0.0
        self._window_units = 0.0
        self._window_len = 0.0
        self._size_window()

    def _size_window(self) -> None:
        if self._window_s is None:
            return
        self._window_units, self._window_len = window_cap(self._rate_per_minute, self._window_s)

    @property
    def rate_per_minute(self) -> float:
        """Refill rate in units per minute."""
        return self._rate_per_minute

    @property
    def capacity(self) -> float:
        """Most units the bucket holds: ``rate_per_minute / 60 * burst_s``."""
        return self._rate_per_minute / 60.0 * self._burst_s

    @property
    def window(self) -> tuple[float, float] | None:
        """The window cap as ``(units, seconds)``, or ``None`` without a cap."""
        return None if self._window_s is None else (self._window_units, self._window_len)

    @property
    def level(self) -> float:
        """Units available now (negative while in debt after an oversize acquire)."""
        self._refill()
        return self._level

    @property
    def waiting(self) -> int:
        """Number of acquires queued."""
        return len(self._queue)

    @property
    def held_until(self) -> float | None:
        """Clock time (seconds) a hold ends, or ``None`` when not held."""
        now = self._clock.now()
        return self._stamp if self._stamp is not None and self._stamp > now else None

    def _refill(self) -> float:
        """Account refill up to now; return now."""
        now = self._clock.now()
        if self._stamp is None:
            self._stamp = now
        elif now > self._stamp:
            per_s = self._rate_per_minute / 60.0
            start = self._stamp
            if self._ceiling_until > start:
                # While the window cap blocked the head, the bucket saved no more
                # than the head needed (else it would burst when the cap lifts).
                mid = min(now, self._ceiling_until)
                grown = self._level + (mid - start) * per_s
                self._level = min(grown, max(self._level, self._ceiling))
                start = mid
            self._level = min(self.capacity, self._level + (now - start) * per_s)
            self._stamp = now
        return now

    def _expire(self, now: float) -> None:
        log = self._log
        horizon = now + _EPS - self._window_len
        while log and log[0][0] <= horizon:
            self._log_sum -= log.popleft()[1]
        if not log:
            self._log_sum = 0.0  # no float drift once empty

    def _need(self, amount: float) -> float:
        """Level required before ``amount`` may be taken (capped at a full bucket)."""
        return min(amount, self.capacity)

    def _ready(self, amount: float, now: float) -> bool:
        assert self._stamp is not None
        if now + _EPS < self._stamp:
            return False  # held
        need = self._need(amount)
        if self._level < need - _EPS * max(1.0, need):
            return False
        if self._window_s is not None and self._log:
            self._expire(now)
            if self._log and self._log_sum + amount > self._window_units * (1.0 + _EPS):
                return False
        return True

    def _due(self, amount: float, now: float) -> float:
        """Earliest clock time at which ``amount`` could be taken if nothing else changes."""
        assert self._stamp is not None
        need = self._need(amount)
        start = max(now, self._stamp)
        due = start + max(0.0, need - self._level) / (self._rate_per_minute / 60.0)
        if self._window_s is None or not self._log:
            return due
        cap_due = -math.inf
        excess = self._log_sum + amount - self._window_units
        if amount > self._window_units:
            cap_due = self._log[-1][0] + self._window_len
        elif excess > 0:
            freed = 0.0
            for taken_at, units in self._log:
                freed += units
                if freed >= excess - _EPS * max(1.0, excess):
                    cap_due = taken_at + self._window_len
                    break
        if cap_due > due:
            self._level = min(self._level, need)
            self._ceiling = need
            self._ceiling_until = cap_due
            return cap_due
        return due

    def _take(self, amount: float, now: float) -> None:
        self._level -= amount
        if self._window_s is not None:
            self._log.append((now, amount))
            self._log_sum += amount

    async def acquire(self, amount: float = 1) -> None:
        """Take ``amount`` units, waiting (FIFO, timer-driven) until the rules allow it.

        Raises:
            PermanentAPIError: ``amount`` exceeds the per-minute rate (at once).
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
        now = self._refill()
        if not self._queue and self._ready(amount, now):
            self._take(amount, now)
            return
        waiter = _Waiter(amount, asyncio.get_running_loop().create_future())
        self._queue.append(waiter)
        if len(self._queue) == 1:
            waiter.turn.set_result(None)
        try:
            await waiter.turn
            while True:
                now = self._refill()
                if self._ready(amount, now):
                    self._take(amount, now)
                    return
                await self._clock.sleep(self._due(amount, now) - now)
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
        """Take ``amount`` units now without waiting, into debt if needed (also counted in the window cap).

        Raises:
            ValueError: ``amount`` is negative or not finite.
        """
        if not (math.isfinite(amount) and amount >= 0):
            raise ValueError(f"amount must be a finite number >= 0, got {amount!r}")
        now = self._refill()
        if amount > 0:
            self._take(amount, now)

    def refund(self, amount: float, *, sent: bool = True) -> None:
        """Give back ``amount`` units taken but not used (level capped at capacity).

        Args:
            amount: units to give back.
            sent: whether a request went out with them; units that never left are also taken off
                the window cap, newest first.

        Raises:
            ValueError: ``amount`` is negative or not finite.
        """
        if not (math.isfinite(amount) and amount >= 0):
            raise ValueError(f"amount must be a finite number >= 0, got {amount!r}")
        self._refill()
        self._level = min(self.capacity, self._level + amount)
        log = self._log
        while not sent and amount > 0 and log:
            taken_at, units = log.pop()
            back = min(units, amount)
            amount -= back
            self._log_sum -= back
            if units > back:
                log.append((taken_at, units - back))
        if not log:
            self._log_sum = 0.0

    def set_rate(self, rate_per_minute: float) -> None:
        """Change the rate (e.g. from ``x-ratelimit-limit-*``), keeping units earned up to the new capacity.

        Raises:
            ConfigError: ``rate_per_minute`` is not a finite number > 0.
        """
        rate = check_positive("rate_per_minute", rate_per_minute)
        self._refill()
        self._rate_per_minute = rate
        self._level = min(self.capacity, self._level)
        self._size_window()

    def drain(self) -> None:
        """Empty the bucket now: nothing more goes until it refills."""
        self._refill()
        self._level = min(0.0, self._level)

    def hold_until(self, t: float) -> None:
        """Take nothing before clock time ``t`` (seconds); then restart from <= ``initial`` units.

        A debt is kept; an existing later hold is kept.
        """
        self._refill()
        assert self._stamp is not None
        self._level = min(self._level, self._initial, self.capacity)
        self._stamp = max(self._stamp, t)

    def __repr__(self) -> str:
        level = self.level if self._stamp is not None else self._level
        held = self.held_until
        hold = "" if held is None else f", held {held - self._clock.now():.3f}s"
        return (
            f"<RateBucket {self._rate_per_minute:g} {self._unit}/min, "
            f"level {level:.2f}/{self.capacity:g}{hold}, {len(self._queue)} waiting>"
        )


class PauseGate:
    """A gate closed until a given time; waiters held by a pause leave over a random spread.

    Args:
        clock: time source; :class:`SystemClock` by default.
        spread_s: seconds; a held waiter then sleeps a further ``uniform(0, spread_s)`` (0 disables).
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
        """Return at once when open; else sleep until the pause (even extended) ends, plus the spread.

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
