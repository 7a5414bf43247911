"""The in-memory limiter backend: one process's buckets, pause gate, breaker and spend ledger.

A pause holds the buckets too, so afterwards they restart empty and pace the held calls.
"""

from __future__ import annotations

import asyncio
import logging
import random

from dahl.lanes._breaker import Breaker, BreakerSettings
from dahl.lanes._clock import Clock, SystemClock
from dahl.lanes._limiter import Announced, LimiterSnapshot, Outcome, Reservation, endpoint_name
from dahl.lanes._limits import LaneLimits, PauseGate, RateBucket
from dahl.errors import ConfigError, CostCapReached, FatalAPIError

__all__ = ["MemoryLimiter", "MemoryLimiters", "SpendLedger"]

logger = logging.getLogger(__name__)


class SpendLedger:
    """The money of a run's calls against its cap: charged, reserved and in flight (USD)."""

    def __init__(self) -> None:
        self.charged_usd = 0.0  # reported cost, plus the bound of calls that reported no usage
        self.reserved_usd = 0.0
        self.in_flight = 0
        self._settled = asyncio.Event()  # set (and replaced) whenever a call settles
        self._stop: tuple[float, float] | None = None  # (spent, refused bound) of the first refusal

    async def reserve(self, usd: float, cap_usd: float | None) -> None:
        """Reserve ``usd`` under ``cap_usd`` (``None``: no cap).

        Raises:
            CostCapReached: see :meth:`~dahl.lanes._limiter.Limiter.reserve_spend`.
        """
        while cap_usd is not None and (
            self._stop is not None or self.charged_usd + self.reserved_usd + usd > cap_usd
        ):
            if self._stop is not None:  # the run is stopping: no call leaves after the first refusal
                raise CostCapReached(cap_usd=cap_usd, spent_usd=self._stop[0], next_usd=self._stop[1])
            if self.in_flight == 0:
                self._stop = (self.charged_usd, usd)
                continue
            await self._settled.wait()
        self.reserved_usd += usd
        self.in_flight += 1

    def settle(self, reserved_usd: float, spent_usd: float) -> None:
        """Release a reservation of ``reserved_usd`` and charge ``spent_usd``."""
        self.reserved_usd -= reserved_usd
        self.in_flight -= 1
        self.charged_usd += spent_usd
        settled, self._settled = self._settled, asyncio.Event()
        settled.set()

    def __repr__(self) -> str:
        stop = "" if self._stop is None else ", stopped"
        return (f"<SpendLedger charged ${self.charged_usd:.6f}, reserved ${self.reserved_usd:.6f} "
                f"by {self.in_flight} in flight{stop}>")


class MemoryLimiter:
    """The :class:`~dahl.lanes._limiter.Limiter` of one lane in this process.

    Args:
        key: the lane key (``URL|key id|model``), for logs and the breaker's messages.
        limits: configured limits (RPM, TPM, ``refund_tokens``).
        breaker: the breaker's thresholds; ``BreakerSettings()`` by default.
        spread_s: seconds; callers held by a pause leave a further ``uniform(0, spread_s)`` after it.
        clock: time source; :class:`SystemClock` by default.
        rng: random source for the spread.
        ledger: the run's spend ledger; a fresh one by default.
        share: the part of every rate this process may use, in (0, 1]: of the configured RPM and
            TPM and of those the server announces (1/N for one of N shards pacing alone).

    Raises:
        ConfigError: ``share`` is not in (0, 1].
    """

    def __init__(
        self,
        key: str,
        limits: LaneLimits,
        *,
        breaker: BreakerSettings | None = None,
        spread_s: float = 0.0,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        ledger: SpendLedger | None = None,
        share: float = 1.0,
    ) -> None:
        if not 0.0 < share <= 1.0:
            raise ConfigError(f"a lane's share of the limits must be in (0, 1], got {share}")
        self.key = key
        self.limits = limits
        self.share = share
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.breaker = Breaker(endpoint_name(key), breaker, clock=self._clock)
        self.gate = PauseGate(self._clock, spread_s=spread_s, rng=rng)
        self.ledger = ledger if ledger is not None else SpendLedger()
        # One request may go at once; tokens start empty, so a cold run ramps in at the rate.
        self._rpm = None if limits.rpm is None else self._bucket(limits.rpm * share, "requests", 1.0)
        self._tpm = None if limits.tpm is None else self._bucket(limits.tpm * share, "tokens", 0.0)

    def _bucket(self, rate: float, unit: str, initial: float) -> RateBucket:
        return RateBucket(rate, clock=self._clock, unit=unit, initial=initial)

    @property
    def tpm_bucket(self) -> RateBucket | None:
        """The tokens-per-minute bucket, ``None`` while unlimited."""
        return self._tpm

    async def acquire(self, requests: int, tokens: int) -> Reservation:
        """Wait at the gate and both buckets; return what was taken."""
        if self._rpm is None and self._tpm is None and not self.gate.is_paused():
            return _NOTHING  # nothing to wait for: what the loop below returns, without its frames
        while True:
            await self.gate.wait()
            rpm, tpm = self._rpm, self._tpm
            taken_requests = taken_tokens = 0
            try:
                if rpm is not None and requests > 0:
                    await rpm.acquire(requests)
                    taken_requests = requests
                if tpm is not None and tokens > 0:
                    await tpm.acquire(tokens)
                    taken_tokens = tokens
            except BaseException:
                self._give_back(taken_requests, taken_tokens)
                raise
            if not self.gate.is_paused():
                return Reservation(taken_requests, taken_tokens)
            # A 429 arrived while we queued: hand the units back and wait it out.
            self._give_back(taken_requests, taken_tokens)

    def _give_back(self, requests: int, tokens: int) -> None:
        """Return units that never left with a request (also off the buckets' window caps)."""
        if requests and self._rpm is not None:
            self._rpm.refund(requests, sent=False)
        if tokens and self._tpm is not None:
            self._tpm.refund(tokens, sent=False)

    async def settle(
        self,
        reserved: Reservation,
        used_tokens: int | None,
        *,
        announced: Announced | None = None,
        unmetered: Reservation | None = None,
    ) -> None:
        """Settle the token reservation against the usage; apply the reply's limits and resets."""
        tpm = self._tpm
        if reserved.tokens and tpm is not None and used_tokens is not None and used_tokens >= 0:
            if used_tokens < reserved.tokens and self.limits.refund_tokens:
                tpm.refund(reserved.tokens - used_tokens)
            elif used_tokens > reserved.tokens:
                tpm.consume(used_tokens - reserved.tokens)
        if announced is not None:
            if announced.rpm is not None:
                self._adopt("requests", announced.rpm)
            if announced.requests_reset_at is not None:
                self._exhausted("requests", announced.requests_reset_at)
            if announced.tpm is not None:
                self._adopt("tokens", announced.tpm)
            if announced.tokens_reset_at is not None:
                self._exhausted("tokens", announced.tokens_reset_at)
        if unmetered is not None:
            # Sent before any limit was known; the server counts them in its window.
            if self._rpm is not None:
                self._rpm.consume(unmetered.requests)
            if self._tpm is not None:
                self._tpm.consume(unmetered.tokens)

    def _exhausted(self, kind: str, reset_at: float) -> None:
        logger.debug("lane %s: %s exhausted; pausing %.3fs", self.key, kind, reset_at - self._clock.now())
        self._pause(reset_at)

    def _adopt(self, kind: str, announced: float) -> None:
        limit = announced * self.share  # the server announces the account's limit
        current = self._rpm if kind == "requests" else self._tpm
        if current is None:
            bucket = self._bucket(limit, kind, 0.0)  # learnt limits start empty
            if kind == "requests":
                self._rpm = bucket
            else:
                self._tpm = bucket
            logger.info("lane %s: server limit %g %s/min adopted%s", self.key, announced, kind, self._mine(limit))
        elif current.rate_per_minute > limit:
            current.set_rate(limit)
            logger.info("lane %s: limit lowered to the server's %g %s/min%s", self.key, announced, kind,
                        self._mine(limit))

    def _mine(self, limit: float) -> str:
        """", this process's share: L/min" for a log line, or nothing at a whole share."""
        return "" if self.share == 1.0 else f", this process's share: {limit:g}/min"

    async def pause_until(self, t: float) -> None:
        """Close the gate until clock time ``t`` and hold both buckets for the whole pause."""
        self._pause(t)

    def _pause(self, t: float) -> None:
        self.gate.pause_until(t)
        until = self.gate.paused_until
        if until is None:
            until = t  # a zero pause still empties the buckets down to their start level
        for bucket in (self._rpm, self._tpm):
            if bucket is not None:
                bucket.hold_until(until)

    async def admit(self) -> bool:
        """Wait for the breaker (:meth:`Breaker.admit`)."""
        breaker = self.breaker
        if breaker.state == "closed":
            return False  # what Breaker.admit returns at once, without its frame
        return await breaker.admit()

    async def report(
        self, outcome: Outcome, *, probe: bool, error: BaseException | None = None
    ) -> FatalAPIError | None:
        """Count the outcome in the breaker; return the error to raise when it tripped."""
        breaker = self.breaker
        if outcome == "success":
            breaker.succeeded(probe)
        elif outcome == "transient":
            assert error is not None
            return breaker.failed_transient(error, probe)
        elif outcome == "permanent":
            assert error is not None
            return breaker.failed_permanent(error, probe)
        else:
            breaker.released(probe)
        return None

    async def trip(self, error: FatalAPIError, *, probe: bool = False) -> None:
        """Trip the breaker with ``error``."""
        self.breaker.tripped_by(error, probe)

    async def reserve_spend(self, usd: float, cap_usd: float | None) -> None:
        """Reserve in the run's ledger (:meth:`SpendLedger.reserve`)."""
        await self.ledger.reserve(usd, cap_usd)

    async def settle_spend(self, reserved_usd: float, spent_usd: float) -> None:
        """Settle in the run's ledger (:meth:`SpendLedger.settle`)."""
        self.ledger.settle(reserved_usd, spent_usd)

    def snapshot(self) -> LimiterSnapshot:
        """The gate, rates and breaker state now."""
        return LimiterSnapshot(
            paused_until=self.gate.paused_until,
            rpm=None if self._rpm is None else self._rpm.rate_per_minute,
            tpm=None if self._tpm is None else self._tpm.rate_per_minute,
            breaker=self.breaker.state,
        )

    def __repr__(self) -> str:
        return f"<MemoryLimiter {self.key!r} rpm={self._rpm!r} tpm={self._tpm!r} {self.gate!r} {self.breaker!r}>"


_NOTHING = Reservation()


class MemoryLimiters:
    """The default :class:`~dahl.lanes._limiter.LimiterFactory`: a :class:`MemoryLimiter` per lane.

    Its limiters share one :class:`SpendLedger`: build one factory per run.

    Args:
        shards: how many processes split the account's limits among them without talking to
            each other; each lane here paces at ``1/shards`` of every rate (configured or
            announced by the server).

    Raises:
        ConfigError: ``shards < 1``.
    """

    def __init__(self, *, shards: int = 1) -> None:
        if shards < 1:
            raise ConfigError(f"shards must be >= 1, got {shards}")
        self.shards = shards
        self.ledger = SpendLedger()

    def __call__(
        self,
        key: str,
        limits: LaneLimits,
        *,
        breaker: BreakerSettings,
        spread_s: float,
        clock: Clock,
        rng: random.Random,
    ) -> MemoryLimiter:
        """Return a new in-memory limiter for lane ``key`` on the shared ledger."""
        return MemoryLimiter(key, limits, breaker=breaker, spread_s=spread_s, clock=clock, rng=rng,
                             ledger=self.ledger, share=1.0 / self.shards)

    def __repr__(self) -> str:
        return f"<MemoryLimiters shards={self.shards} {self.ledger!r}>"
