"""Lanes: one rate-limited, retrying channel per (endpoint, API key, model).

A :class:`Lane` owns what DESIGN.md §5 puts on one endpoint: an in-flight cap,
a pause gate (``Retry-After``, ``x-ratelimit-reset-*``), an RPM bucket, a TPM
bucket (reserve prompt estimate + max_tokens; see ``LaneLimits.refund_tokens``
for when the reported usage is refunded) and the retry loop of
:mod:`dahl.lanes._retry`. Split and check calls to the same endpoint share one
lane. :class:`LanePool` builds lanes inside a run; there is no module-global
registry (STYLE.md point 8).

One attempt goes: take an in-flight slot -> wait at the pause gate -> take 1
from the RPM bucket -> take the token estimate from the TPM bucket -> if a pause
began meanwhile, give both back and wait again -> send. The slot is taken
*first* so rate units are spent only when a request is about to leave: units
cannot pile up while waiting for a slot and then go out in a burst.

Ramp-up and pauses never burst: the RPM bucket starts with one request, the
TPM bucket empty, so a cold run starts at the rate. A lane with no limits
configured opens at once but through a :class:`~dahl.lanes._ramp.StartRamp`:
until the first reply, requests leave at most ``max_in_flight`` per second
(one at once, the in-flight cap reached within the first second), so a server
with a low unknown limit sees a few requests, not ``max_in_flight``, before its
``x-ratelimit-*`` headers are known. The first reply opens the ramp; limits it
announces are charged with the requests that went out unmetered (those in
flight and its own), so they are not sent a second time in the same window.
(Holding the rest behind one probe request would cost every run a full
request latency.) A pause (429, exhausted budget) holds the buckets too, so when it ends
they restart empty and pace the held calls.

Every attempt also passes the lane's :class:`~dahl.lanes._breaker.Breaker`: a run of
permanent failures, a long outage or a fatal error (bad key) stops the lane with
``FatalAPIError``, and a call whose retries all ended in ``ConnectError`` raises
``FatalAPIError`` ("cannot connect to URL") and stops it too.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import msgspec

from dahl.lanes._breaker import Breaker, BreakerSettings
from dahl.lanes._clock import Clock, SystemClock
from dahl.lanes._limits import LaneLimits, PauseGate, RateBucket, Reply
from dahl.lanes._ramp import StartRamp
from dahl.lanes._retry import RetryPolicy, classify, parse_duration_s
from dahl.config import normalize_base_url
from dahl.errors import ConnectError, FatalAPIError, PermanentAPIError

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
        waiting: calls in the lane not in flight (queued for a slot, the gate or
            a bucket, or backing off).
        requests: attempts sent.
        successes: calls that returned a reply.
        retries: attempts retried after a rate limit or transient error.
        rate_limited: attempts answered with a rate limit (429).
        transient_errors: attempts that failed with a transient error.
        fatal_errors: calls that failed at once with a non-retryable error.
        tokens_reserved: TPM tokens currently reserved by in-flight attempts.
        tokens_used: total tokens the server reported for successful attempts.
        paused_until: clock time (seconds) the pause gate opens, ``None`` when open.
        rpm: current requests-per-minute limit, ``None`` when unlimited.
        tpm: current tokens-per-minute limit, ``None`` when unlimited.
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
    """Rate limits, pause gate, in-flight cap and retries for one endpoint/key/model.

    Args:
        key: a readable identity (see :meth:`LanePool.get`); never an API key.
        limits: configured limits.
        policy: retry caps and backoff; ``RetryPolicy()`` by default.
        clock: time source; :class:`SystemClock` by default.
        rng: random source for backoff and jitter (seed it in tests).
        breaker: thresholds of the lane's breaker; ``BreakerSettings()`` by default.
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
    ) -> None:
        self.key = key
        self.limits = limits
        self.policy = policy if policy is not None else RetryPolicy()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self.breaker = Breaker(_endpoint_name(key), breaker, clock=self._clock)
        self._rng = rng if rng is not None else random.Random()
        self._gate = PauseGate(
            self._clock, spread_s=self.policy.rate_limit_jitter_s, rng=self._rng
        )
        # One request may go at once; tokens start empty (DESIGN.md §5, B3 ramp-in).
        self._rpm = None if limits.rpm is None else self._bucket(limits.rpm, "requests", 1.0)
        self._tpm = None if limits.tpm is None else self._bucket(limits.tpm, "tokens", 0.0)
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

    def _bucket(self, rate: float, unit: str, initial: float) -> RateBucket:
        return RateBucket(rate, clock=self._clock, unit=unit, initial=initial)

    @property
    def rpm_bucket(self) -> RateBucket | None:
        """The requests-per-minute bucket, ``None`` while unlimited."""
        return self._rpm

    @property
    def tpm_bucket(self) -> RateBucket | None:
        """The tokens-per-minute bucket, ``None`` while unlimited."""
        return self._tpm

    @property
    def gate(self) -> PauseGate:
        """The lane's pause gate."""
        return self._gate

    async def call(self, attempt: Callable[[], Awaitable[R]], *, estimated_tokens: int) -> R:
        """Run ``attempt()`` under the lane's limits, retrying per the policy.

        Args:
            attempt: makes one request; returns a :class:`Reply` or raises an
                error of the :mod:`dahl.errors` tree.
            estimated_tokens: tokens to reserve from the TPM bucket per attempt
                (prompt estimate + max_tokens); usage above it is charged, and
                with ``LaneLimits.refund_tokens`` usage below it is refunded.

        Returns:
            The reply of the first successful attempt.

        Raises:
            PermanentAPIError: ``estimated_tokens`` exceeds the per-minute token
                budget (at once), or the attempt raised it.
            RateLimited, TransientAPIError: the last error, once ``max_attempts``
                attempts were made or the next wait would pass ``max_wall_s``
                (while the breaker is open, a transient error waits for the outage
                to end or the breaker to trip instead).
            FatalAPIError: the breaker tripped (now or before: then nothing is sent),
                or every attempt of this call failed to connect.
            Exception: any fatal error from ``attempt()``, at once.
            asyncio.CancelledError: never swallowed; slots and reservations are
                released first.
        """
        if isinstance(estimated_tokens, bool) or not isinstance(estimated_tokens, int):
            raise TypeError(f"estimated_tokens must be an int, got {estimated_tokens!r}")
        if estimated_tokens < 0:
            raise ValueError(f"estimated_tokens must be >= 0, got {estimated_tokens}")
        policy = self.policy
        first_sent: list[float] = []  # filled by _attempt when the first request leaves
        self._active += 1
        try:
            breaker = self.breaker
            number = 0
            while True:
                number += 1
                probe = await breaker.admit()
                try:
                    reply = await self._attempt(attempt, estimated_tokens, first_sent)
                except Exception as exc:
                    decision = classify(exc)
                    if decision.kind == "fatal":
                        self._fatal += 1
                        if isinstance(exc, FatalAPIError):
                            breaker.tripped_by(exc, probe)
                        elif isinstance(exc, PermanentAPIError):
                            tripped = breaker.failed_permanent(exc, probe)
                            if tripped is not None:
                                raise tripped from exc
                        else:
                            breaker.released(probe)
                        raise
                    if decision.kind == "rate_limit":
                        breaker.released(probe)
                        self._rate_limited += 1
                        wait_s = policy.rate_limit_pause_s(decision.retry_after_s)
                        worst_s = wait_s + policy.rate_limit_jitter_s
                    else:
                        if isinstance(exc, ConnectError):  # waiting cannot fix it: not an outage to pause for
                            breaker.released(probe)
                        elif (stopped := breaker.failed_transient(exc, probe)) is not None:
                            raise stopped from exc
                        self._transient += 1
                        # While the breaker is open its cool-down paces the lane: no backoff on top,
                        # which would only delay the next probe.
                        wait_s = worst_s = 0.0 if breaker.state == "open" else policy.backoff_s(number - 1, self._rng)
                    elapsed = self._clock.now() - first_sent[0] if first_sent else 0.0
                    out_of_budget = number >= policy.max_attempts or elapsed + worst_s > policy.max_wall_s
                    if out_of_budget and decision.kind == "transient" and breaker.state == "open":
                        out_of_budget = False  # an outage the breaker handles: wait it out, or stop with it
                    if out_of_budget:
                        if isinstance(exc, ConnectError):  # the run stops; its message says it all
                            fatal = FatalAPIError(f"{exc} ({number} attempts in {elapsed:.1f} s)")
                            breaker.tripped_by(fatal, False)
                            raise fatal from exc
                        logger.warning(
                            "lane %s: giving up after %d attempts (%.1fs): %s",
                            self.key, number, elapsed, type(exc).__name__,
                        )
                        raise
                    self._retries += 1
                    logger.debug(
                        "lane %s: attempt %d failed (%s); retrying in %.3fs",
                        self.key, number, decision.kind, wait_s,
                    )
                    if decision.kind == "rate_limit":
                        # Everyone waits out the server's reset; the held buckets
                        # then release them at their rate, not all at once.
                        self._pause_until(self._clock.now() + wait_s)
                    else:
                        await self._clock.sleep(wait_s)
                except BaseException:  # cancelled: the probe's turn goes to another call
                    breaker.released(probe)
                    raise
                else:
                    breaker.succeeded(probe)
                    return reply
        finally:
            self._active -= 1

    def _pause_until(self, t: float) -> None:
        """Close the gate until clock time ``t`` and hold both buckets for the whole pause."""
        self._gate.pause_until(t)
        until = self._gate.paused_until
        if until is None:
            until = t  # a zero pause still empties the buckets down to their start level
        for bucket in (self._rpm, self._tpm):
            if bucket is not None:
                bucket.hold_until(until)

    async def _attempt(
        self, attempt: Callable[[], Awaitable[R]], estimated: int, first_sent: list[float]
    ) -> R:
        """One attempt: slot, (start ramp,) gate, buckets, send; reservations settled after."""
        async with self._slots:
            if self._ramp is not None:
                await self._ramp.wait()
            return await self._send(attempt, estimated, first_sent)

    async def _send(
        self, attempt: Callable[[], Awaitable[R]], estimated: int, first_sent: list[float]
    ) -> R:
        """Admit and send one attempt (a slot is held); settle its token reservation."""
        if self._rpm is None and self._tpm is None and not self._gate.is_paused():
            rpm = tpm = None  # nothing to wait for: what _admit would return, without its frames
        else:
            rpm, tpm = await self._admit(estimated)
        reserved = estimated if tpm is not None else 0
        self._in_flight += 1
        self._tokens_reserved += reserved
        self._requests += 1
        sent_at = self._clock.now()
        if not first_sent:
            first_sent.append(sent_at)
        try:
            reply = await attempt()
        except BaseException:
            if tpm is not None and reserved and self.limits.refund_tokens:
                tpm.refund(reserved)  # usage-billed server: a failure used nothing
            raise
        finally:
            self._in_flight -= 1
            self._tokens_reserved -= reserved
        self._successes += 1
        self._settle(reply, tpm, reserved, sent_at)
        if self._ramp is not None:
            self._open_ramp(estimated)
        return reply

    def _open_ramp(self, estimated: int) -> None:
        """First reply: charge limits it announced with what went out unmetered, then open.

        The requests in flight were sent before any limit was known, and the
        server counts them in its window: the learnt buckets take them as debt
        (their token estimate taken as this request's), so the next sends wait
        them out instead of earning 429s.
        """
        ramp, self._ramp = self._ramp, None
        assert ramp is not None
        unmetered = self._in_flight + 1  # this reply's request has left in_flight already
        if self._rpm is not None:
            self._rpm.consume(unmetered)
        if self._tpm is not None:
            self._tpm.consume(unmetered * estimated)
        ramp.open()
        logger.debug("lane %s: first reply after %d paced sends: %r", self.key, ramp.admitted, self)

    async def _admit(self, estimated: int) -> tuple[RateBucket | None, RateBucket | None]:
        """Wait for the gate and both buckets; return the buckets that were charged."""
        while True:
            await self._gate.wait()
            rpm, tpm = self._rpm, self._tpm
            taken_rpm = taken_tpm = False
            try:
                if rpm is not None:
                    await rpm.acquire(1)
                    taken_rpm = True
                if tpm is not None and estimated > 0:
                    await tpm.acquire(estimated)
                    taken_tpm = True
            except BaseException:
                self._give_back(rpm if taken_rpm else None, tpm if taken_tpm else None, estimated)
                raise
            if not self._gate.is_paused():
                return rpm, (tpm if taken_tpm else None)
            # A 429 arrived while we queued: hand the units back and wait it out.
            self._give_back(rpm if taken_rpm else None, tpm if taken_tpm else None, estimated)

    @staticmethod
    def _give_back(rpm: RateBucket | None, tpm: RateBucket | None, estimated: int) -> None:
        if rpm is not None:
            rpm.refund(1, sent=False)
        if tpm is not None:
            tpm.refund(estimated, sent=False)

    def _settle(self, reply: Reply, tpm: RateBucket | None, reserved: int, sent_at: float) -> None:
        """Settle the token reservation against the usage; learn limits from the headers.

        Usage above the reservation is always charged (our estimate was low).
        Usage below it is refunded only with ``LaneLimits.refund_tokens``: a
        server that charges prompt estimate + max_tokens at admission (OpenAI)
        does not give the difference back, and refunding it would over-send.
        """
        usage = reply.usage_tokens
        if usage is not None and usage >= 0:
            self._tokens_used += usage
            if tpm is not None:
                if usage < reserved and self.limits.refund_tokens:
                    tpm.refund(reserved - usage)
                elif usage > reserved:
                    tpm.consume(usage - reserved)
        self._learn(reply.headers, sent_at)

    def _learn(self, headers: Mapping[str, str], sent_at: float) -> None:
        """Apply ``x-ratelimit-*`` headers: lower/set limits, pause when exhausted.

        A reset is counted from ``sent_at`` (about when the server admitted the
        request and computed it), not from when the reply arrived: after a
        reply latency of L seconds the window it describes is L seconds older.
        """
        # Only x-ratelimit-* names are read: keep those, and stop here when there are none.
        lower: dict[str, str] = {}
        for name, value in headers.items():
            name = name.lower()
            if name.startswith("x-ratelimit-"):
                lower[name] = value
        if not lower:
            return
        for kind, unit, limit_name, remaining_name, reset_name in _RATELIMIT_HEADERS:
            limit = _number(lower.get(limit_name))
            if limit is not None and limit > 0:
                self._adopt_limit(kind, limit, unit)
            remaining = _number(lower.get(remaining_name))
            reset = lower.get(reset_name)
            if remaining is not None and remaining <= 0 and reset is not None:
                reset_s = parse_duration_s(reset)
                if reset_s is not None and sent_at + reset_s > self._clock.now():
                    logger.debug("lane %s: %s exhausted; pausing %.3fs", self.key, kind, reset_s)
                    self._pause_until(sent_at + reset_s)

    def _adopt_limit(self, kind: str, limit: float, unit: str) -> None:
        current = self._rpm if kind == "requests" else self._tpm
        if current is None:
            bucket = self._bucket(limit, unit, 0.0)  # learnt limits start empty
            if kind == "requests":
                self._rpm = bucket
            else:
                self._tpm = bucket
            logger.info("lane %s: server limit %g %s/min adopted", self.key, limit, unit)
        elif current.rate_per_minute > limit:
            current.set_rate(limit)
            logger.info("lane %s: limit lowered to the server's %g %s/min", self.key, limit, unit)

    def statistics(self) -> LaneStatistics:
        """Return a snapshot of the lane's counters and limits."""
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
            paused_until=self._gate.paused_until,
            rpm=None if self._rpm is None else self._rpm.rate_per_minute,
            tpm=None if self._tpm is None else self._tpm.rate_per_minute,
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


def _endpoint_name(key: str) -> str:
    """``"URL (model M)"`` of a lane key ``URL|key id|M``, as messages name the endpoint."""
    url, _, rest = key.partition("|")
    model = rest.rpartition("|")[2]
    return f"{url} (model {model})" if rest else url


#: (kind, unit, limit header, remaining header, reset header) read by ``Lane._learn``.
_RATELIMIT_HEADERS = tuple(
    (kind, kind, f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}", f"x-ratelimit-reset-{kind}")
    for kind in ("requests", "tokens")
)


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) else None


class LanePool:
    """The lanes of one run, one per (normalized base URL, API key identity, model).

    Build one inside a run and pass it down; lanes share its clock, policy and rng.

    Args:
        policy: retry policy for every lane; ``RetryPolicy()`` by default.
        clock: time source; :class:`SystemClock` by default.
        rng: random source shared by the lanes.
        spend: the run's money meter and cap (:mod:`dahl.lanes._spend`); the adapters'
            factories wrap each stage's lane with it. None = not metered.
    """

    def __init__(
        self,
        *,
        policy: RetryPolicy | None = None,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        spend: Spend | None = None,
    ) -> None:
        self.spend = spend
        self._policy = policy
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self._lanes: dict[str, Lane] = {}

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
            api_key_id: a stable identity of the API key (e.g. a short hash), never
                the key itself: it appears in the lane key and in logs.
            model: model name, e.g. ``"gpt-4o-mini"``.
            limits: limits used when the lane is created; a later ``get`` with
                different limits keeps the first (and logs a warning).
            breaker: the breaker's thresholds when the lane is created
                (``BreakerSettings()`` by default); a later ``get`` keeps the first.

        Raises:
            ConfigError: ``base_url`` is not a URL.
        """
        key = f"{normalize_base_url(base_url)}|{api_key_id}|{model}"
        lane = self._lanes.get(key)
        if lane is None:
            lane = Lane(key, limits, policy=self._policy, clock=self._clock, rng=self._rng, breaker=breaker)
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
