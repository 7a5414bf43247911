"""Lanes: one rate-limited, retrying channel per (endpoint, API key, model), and the run's pool of them.

A lane with no configured limits sends at most ``max_in_flight`` requests per second until its
first reply; a breaker trip, or a call whose retries all failed to connect, raises ``FatalAPIError``.

A local server (:func:`~dahl.config.is_local_url`: llama.cpp, vLLM, Ollama on this machine or a
private network) queues what it cannot run at once instead of answering 429 or 503, and keeps
computing a request the client gave up on: there a timeout is a sign of a queue, not of an
outage. After the first one the lane says so once, sends one request at a time, and retries a
timed-out request at most once (each retry would add to the server's queue).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import msgspec

from dahl.lanes._breaker import BreakerSettings
from dahl.lanes._clock import Clock, SystemClock
from dahl.lanes._limiter import Announced, Limiter, LimiterFactory, Reservation, endpoint_name
from dahl.lanes._limits import LaneLimits, Reply
from dahl.lanes._memory import MemoryLimiter, MemoryLimiters
from dahl.lanes._ramp import StartRamp
from dahl.lanes._retry import RetryDecision, RetryPolicy, classify
from dahl.config import is_local_url, normalize_base_url
from dahl.errors import ConnectError, FatalAPIError, PermanentAPIError, RateLimited, RequestTimeout

if TYPE_CHECKING:
    from dahl.lanes._spend import Spend

__all__ = [
    "Lane",
    "LaneLimits",
    "LanePool",
    "LaneStatistics",
    "Reply",
    "normalize_base_url",
]

logger = logging.getLogger(__name__)

#: Seconds over which a lane with unknown limits ramps up to ``max_in_flight``
#: requests before its first reply (see the module docstring).
START_RAMP_S = 1.0


R = TypeVar("R", bound=Reply)


class LaneStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one lane (counters are totals since the lane was built).

    Attributes:
        in_flight: attempts sent and not yet answered.
        waiting: calls in the lane not in flight (queued, paused or backing off).
        requests: attempts sent.
        successes: calls that returned a reply.
        retries: attempts retried after a rate limit or transient error.
        rate_limited: attempts answered with a rate limit (429).
        transient_errors: attempts that failed with a transient error.
        fatal_errors: calls that failed at once with a non-retryable error.
        tokens_reserved: TPM tokens reserved by in-flight attempts.
        tokens_used: total tokens the server reported for successful attempts.
        paused_until: clock time (seconds) the pause gate opens, ``None`` when open.
        rpm: requests-per-minute limit, ``None`` when unlimited.
        tpm: tokens-per-minute limit, ``None`` when unlimited.
    """

    in_flight: int
    waiting: int
    requests: int
    successes: int
    retries: int
    rate_limited: int
    transient_errors: int
    fatal_errors: int
    tokens_reserved: int
    tokens_used: int
    paused_until: float | None
    rpm: float | None
    tpm: float | None


class Lane:
    """The retry loop, in-flight cap and start ramp of one endpoint/key/model, over its limiter.

    Args:
        key: a readable identity (see :meth:`LanePool.get`); never an API key.
        limits: configured limits.
        policy: retry caps and backoff; ``RetryPolicy()`` by default.
        clock: time source; :class:`SystemClock` by default.
        rng: random source for backoff and jitter.
        breaker: thresholds of the default limiter's breaker (unused when ``limiter`` is given).
        limiter: rate limits, pause gate, breaker and spend cap; a :class:`MemoryLimiter` by default.
        local: the endpoint is a local server (see the module docstring).
    """

    def __init__(
        self,
        key: str,
        limits: LaneLimits,
        *,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        breaker: BreakerSettings | None = None,
        limiter: Limiter | None = None,
        local: bool = False,
    ) -> None:
        self.key = key
        self.local = local
        self._one: asyncio.Lock | None = None  # set after a local timeout: one request at a time
        self.limits = limits
        self.policy = policy if policy is not None else RetryPolicy()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._rng = rng if rng is not None else random.Random()
        self.limiter: Limiter = limiter if limiter is not None else MemoryLimiter(
            key, limits, breaker=breaker, spread_s=self.policy.rate_limit_jitter_s,
            clock=self._clock, rng=self._rng,
        )
        # Unknown limits: paced until the first reply (see the module docstring).
        self._ramp: StartRamp | None = (
            StartRamp(limits.max_in_flight / START_RAMP_S, self._clock)
            if limits.rpm is None and limits.tpm is None
            else None
        )
        self._slots = asyncio.Semaphore(limits.max_in_flight)
        self._active = 0
        self._in_flight = 0
        self._requests = 0
        self._successes = 0
        self._retries = 0
        self._rate_limited = 0
        self._transient = 0
        self._fatal = 0
        self._tokens_reserved = 0
        self._tokens_used = 0

    async def call(self, attempt: Callable[[], Awaitable[R]], *, estimated_tokens: int) -> R:
        """Run ``attempt()`` under the lane's limits, retrying per the policy.

        Args:
            attempt: makes one request; returns a :class:`Reply` or raises a :mod:`dahl.errors` error.
            estimated_tokens: tokens reserved from the TPM bucket per attempt (prompt estimate +
                max_tokens).

        Returns:
            The reply of the first successful attempt.

        Raises:
            PermanentAPIError: ``estimated_tokens`` exceeds the per-minute token budget (known before
                sending, or announced by a 429 reply: at once, no wait), or the attempt raised it.
            RateLimited, TransientAPIError: the last error, once ``max_attempts`` attempts were made or
                the next wait would pass ``max_wall_s`` (not while the breaker is open).
            FatalAPIError: the breaker tripped, or every attempt failed to connect.
            Exception: any fatal error from ``attempt()``, at once.
            asyncio.CancelledError: never swallowed; slots and reservations are released first.
        """
        if isinstance(estimated_tokens, bool) or not isinstance(estimated_tokens, int):
            raise TypeError(f"estimated_tokens must be an int, got {estimated_tokens!r}")
        if estimated_tokens < 0:
            raise ValueError(f"estimated_tokens must be >= 0, got {estimated_tokens}")
        first_sent: list[float] = []  # filled by _send when the first request leaves
        self._active += 1
        try:
            number = 0
            while True:
                number += 1
                probe = await self.limiter.admit()
                try:
                    return await self._attempt(attempt, estimated_tokens, probe, first_sent)
                except Exception as exc:
                    error = self._beyond_budget(exc, estimated_tokens)
                    decision = classify(error)
                    wait_s = await self._retry_wait(error, decision, probe, number, first_sent)
                if decision.kind == "rate_limit":
                    # Everyone waits out the server's reset; the held buckets
                    # then release them at their rate, not all at once.
                    await self.limiter.pause_until(self._clock.now() + wait_s)
                else:
                    await self._clock.sleep(wait_s)
        finally:
            self._active -= 1

    async def _attempt(
        self, attempt: Callable[[], Awaitable[R]], estimated: int, probe: bool, first_sent: list[float]
    ) -> R:
        """One admitted attempt: slot, ramp, limiter, send; a reply reported to the breaker."""
        try:
            async with self._slots:
                one = self._one
                if one is None:  # the usual case: no second context manager entered per attempt
                    if self._ramp is not None:
                        await self._ramp.wait()
                    reply = await self._send(attempt, estimated, first_sent)
                else:
                    async with one:
                        if self._ramp is not None:
                            await self._ramp.wait()
                        reply = await self._send(attempt, estimated, first_sent)
        except Exception:
            raise  # reported with its retry decision
        except BaseException:  # cancelled: the probe's turn goes to another call
            await self.limiter.report("released", probe=probe)
            raise
        await self.limiter.report("success", probe=probe)
        return reply

    def _beyond_budget(self, exc: Exception, estimated: int) -> Exception:
        """``exc``, or the ``PermanentAPIError`` of a 429 no window can end.

        A request of ``estimated`` tokens (prompt estimate + ``max_tokens``) above the lane's
        tokens-per-minute limit (configured, learnt from earlier replies, or announced in this
        429's ``x-ratelimit-limit-tokens``) fits no window: waiting cannot help.
        """
        if not isinstance(exc, RateLimited):
            return exc
        limits = [self.limiter.snapshot().tpm]
        announced = Announced.read(exc.headers, sent_at=0.0, now=0.0)
        if announced is not None:
            limits.append(announced.tpm)
        known = [limit for limit in limits if limit is not None]
        if not known or estimated <= min(known):
            return exc
        self._rate_limited += 1
        error = PermanentAPIError(
            f"request of {estimated} tokens (prompt estimate + max_tokens) exceeds the token budget of "
            f"{min(known):g} tokens per minute of {endpoint_name(self.key)}: no window can fit it "
            f"(the server said: {exc})",
            status=exc.status,
        )
        error.__cause__ = exc
        return error

    async def _retry_wait(
        self, exc: Exception, decision: RetryDecision, probe: bool, number: int, first_sent: list[float]
    ) -> float:
        """Seconds to wait before retrying after attempt ``number`` failed with ``exc``.

        Raises:
            Exception: ``exc`` when fatal or past the policy's caps, or the breaker's ``FatalAPIError``.
        """
        policy = self.policy
        if decision.kind == "fatal":
            self._fatal += 1
        stop = await self._tell_breaker(exc, decision, probe)
        if stop is not None:
            raise stop from exc
        if decision.kind == "fatal":
            raise exc
        if self.local and isinstance(exc, RequestTimeout):
            if self._one is None:
                self._one = asyncio.Lock()
                logger.warning(
                    "%s did not answer in time (%s): a local server queues requests rather than refusing "
                    "them, so this is a queue, not an outage; sending one request at a time from now on "
                    "and retrying a timed-out request once (raise --timeout if one reply takes longer)",
                    endpoint_name(self.key), exc,
                )
            if number >= 2:
                self._transient += 1
                raise exc
        if decision.kind == "rate_limit":
            self._rate_limited += 1
            wait_s = policy.rate_limit_pause_s(decision.retry_after_s)
            worst_s = wait_s + policy.rate_limit_jitter_s
            outage = False
        else:
            self._transient += 1
            # While the breaker is open its cool-down paces the lane: no backoff on top,
            # which would only delay the next probe.
            outage = self.limiter.snapshot().breaker == "open"
            wait_s = worst_s = 0.0 if outage else policy.backoff_s(number - 1, self._rng)
        elapsed = self._clock.now() - first_sent[0] if first_sent else 0.0
        # An outage the breaker handles is waited out (or stops with the breaker).
        if not outage and (number >= policy.max_attempts or elapsed + worst_s > policy.max_wall_s):
            if isinstance(exc, ConnectError):  # the run stops; its message says it all
                fatal = FatalAPIError(f"{exc} ({number} attempts in {elapsed:.1f} s)")
                await self.limiter.trip(fatal)
                raise fatal from exc
            logger.warning(
                "lane %s: giving up after %d attempts (%.1fs): %s",
                self.key, number, elapsed, type(exc).__name__,
            )
            raise exc
        self._retries += 1
        logger.debug(
            "lane %s: attempt %d failed (%s); retrying in %.3fs",
            self.key, number, decision.kind, wait_s,
        )
        return wait_s

    async def _tell_breaker(self, exc: Exception, decision: RetryDecision, probe: bool) -> FatalAPIError | None:
        """Report a failed attempt to the breaker; return its error if that tripped it.

        Rate limits and refused connections say nothing about whether the endpoint works.
        """
        limiter = self.limiter
        if isinstance(exc, FatalAPIError):
            await limiter.trip(exc, probe=probe)
            return None
        if decision.kind == "fatal" and isinstance(exc, PermanentAPIError):
            return await limiter.report("permanent", probe=probe, error=exc)
        if decision.kind == "transient" and not isinstance(exc, ConnectError):
            return await limiter.report("transient", probe=probe, error=exc)
        await limiter.report("released", probe=probe)
        return None

    async def _send(
        self, attempt: Callable[[], Awaitable[R]], estimated: int, first_sent: list[float]
    ) -> R:
        """Acquire and send one attempt (a slot is held); settle its reservation."""
        limiter = self.limiter
        reserved = await limiter.acquire(1, estimated)
        self._in_flight += 1
        self._tokens_reserved += reserved.tokens
        self._requests += 1
        sent_at = self._clock.now()
        if not first_sent:
            first_sent.append(sent_at)
        try:
            reply = await attempt()
        except BaseException:
            await limiter.settle(reserved, 0)  # a failure used nothing (refunded on usage-billed servers)
            raise
        finally:
            self._in_flight -= 1
            self._tokens_reserved -= reserved.tokens
        self._successes += 1
        usage = reply.usage_tokens
        if usage is not None and usage >= 0:
            self._tokens_used += usage
        announced = Announced.read(reply.headers, sent_at=sent_at, now=self._clock.now())
        ramp, self._ramp = self._ramp, None
        if ramp is None:
            await limiter.settle(reserved, usage, announced=announced)
            return reply
        # First reply: the requests in flight were sent before any limit was known and
        # the server counts them in its window: limits it announced take them as debt
        # (their token estimate taken as this request's), so the next sends wait them out.
        unmetered = self._in_flight + 1  # this reply's request has left in_flight already
        await limiter.settle(reserved, usage, announced=announced,
                             unmetered=Reservation(requests=unmetered, tokens=unmetered * estimated))
        ramp.open()
        logger.debug("lane %s: first reply after %d paced sends: %r", self.key, ramp.admitted, self)
        return reply

    def statistics(self) -> LaneStatistics:
        """Return a snapshot of the lane's counters and limits."""
        limiter = self.limiter.snapshot()
        return LaneStatistics(
            in_flight=self._in_flight,
            waiting=self._active - self._in_flight,
            requests=self._requests,
            successes=self._successes,
            retries=self._retries,
            rate_limited=self._rate_limited,
            transient_errors=self._transient,
            fatal_errors=self._fatal,
            tokens_reserved=self._tokens_reserved,
            tokens_used=self._tokens_used,
            paused_until=limiter.paused_until,
            rpm=limiter.rpm,
            tpm=limiter.tpm,
        )

    def __repr__(self) -> str:
        s = self.statistics()
        rpm = "unlimited" if s.rpm is None else f"{s.rpm:g}"
        tpm = "unlimited" if s.tpm is None else f"{s.tpm:g}"
        pause = "open" if s.paused_until is None else (
            f"paused {s.paused_until - self._clock.now():.3f}s"
        )
        return (
            f"<Lane {self.key!r} rpm={rpm} tpm={tpm} "
            f"in_flight={s.in_flight}/{self.limits.max_in_flight} waiting={s.waiting} "
            f"gate={pause} requests={s.requests} retries={s.retries}>"
        )


class LanePool:
    """The lanes of one run, one per (normalized base URL, API key identity, model).

    Args:
        policy: retry policy for every lane; ``RetryPolicy()`` by default.
        clock: time source; :class:`SystemClock` by default.
        rng: random source shared by the lanes.
        spend: the run's money meter and cap; None = not metered.
        limiter_factory: builds each lane's limiter; a fresh :class:`MemoryLimiters` by default.

    Attributes:
        checked: ``(base URL, model)`` pairs whose model list was read once (by the endpoint client).
    """

    def __init__(
        self,
        *,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        spend: Spend | None = None,
        limiter_factory: LimiterFactory | None = None,
    ) -> None:
        self.spend = spend
        self._policy = policy if policy is not None else RetryPolicy()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._rng = rng if rng is not None else random.Random()
        self._limiters: LimiterFactory = limiter_factory if limiter_factory is not None else MemoryLimiters()
        self._lanes: dict[str, Lane] = {}
        self.checked: set[tuple[str, str]] = set()

    def get(
        self,
        base_url: str,
        api_key_id: str,
        model: str,
        limits: LaneLimits,
        *,
        breaker: BreakerSettings | None = None,
    ) -> Lane:
        """Return the lane for this endpoint, key and model, creating it on first use.

        Args:
            base_url: endpoint base URL (normalized with :func:`normalize_base_url`).
            api_key_id: a stable identity of the API key (e.g. a short hash), never the key itself.
            model: model name, e.g. ``"gpt-4o-mini"``.
            limits: limits used when the lane is created; a later ``get`` with others keeps the first
                (and logs a warning).
            breaker: the breaker's thresholds when the lane is created (``BreakerSettings()`` by default).

        Raises:
            ConfigError: ``base_url`` is not a URL.
        """
        key = f"{normalize_base_url(base_url)}|{api_key_id}|{model}"
        lane = self._lanes.get(key)
        if lane is None:
            limiter = self._limiters(
                key, limits, breaker=breaker if breaker is not None else BreakerSettings(),
                spread_s=self._policy.rate_limit_jitter_s, clock=self._clock, rng=self._rng,
            )
            lane = Lane(key, limits, policy=self._policy, clock=self._clock, rng=self._rng, limiter=limiter,
                        local=is_local_url(base_url))
            self._lanes[key] = lane
        elif lane.limits != limits:
            logger.warning("lane %s: already built with %s; ignoring %s", key, lane.limits, limits)
        return lane

    def statistics(self) -> dict[str, LaneStatistics]:
        """Return each lane's statistics, keyed by lane key."""
        return {key: lane.statistics() for key, lane in self._lanes.items()}

    def __len__(self) -> int:
        return len(self._lanes)

    def __repr__(self) -> str:
        return f"<LanePool {len(self._lanes)} lanes>"
