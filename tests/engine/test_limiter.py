"""The Limiter protocol as a lane drives it (a recording fake given through the factory), and the memory backend."""

from __future__ import annotations

import asyncio
import random

import pytest

from dahl.lanes._breaker import BreakerSettings, BreakerState
from dahl.lanes._clock import Clock, run_in_virtual_time
from dahl.lanes._lane import Lane, LaneLimits, LanePool
from dahl.lanes._limiter import Announced, LimiterSnapshot, Outcome, Reservation
from dahl.lanes._memory import MemoryLimiter, MemoryLimiters
from dahl.lanes._spend import Spend
from dahl.errors import ConfigError, CostCapReached, FatalAPIError, PermanentAPIError, RateLimited, TransientAPIError
from dahl.pricing import Price, PriceTable
from dahl.records import Usage
from tests.engine.test_lane import FakeReply, Script, now

#: $1 per million prompt tokens, $10 per million completion tokens.
PRICES = PriceTable({"m": Price(model="m", input_usd=1.0, output_usd=10.0)}, "2025-05-01")

#: A call's reservation as the adapters compute it: prompt estimate + max_tokens.
PROMPT_ESTIMATE, MAX_TOKENS = 120, 256
ESTIMATE = PROMPT_ESTIMATE + MAX_TOKENS  # 376


class RecordingLimiter:
    """A Limiter that never waits and records each call as a tuple (method name first)."""

    def __init__(self, key: str, limits: LaneLimits, *, breaker: BreakerSettings, spread_s: float,
                 clock: Clock, rng: random.Random) -> None:
        self.key, self.limits, self.breaker, self.spread_s = key, limits, breaker, spread_s
        self.calls: list[tuple[object, ...]] = []
        self.state: BreakerState = "closed"

    async def acquire(self, requests: int, tokens: int) -> Reservation:
        self.calls.append(("acquire", requests, tokens))
        return Reservation(requests=requests, tokens=tokens)

    async def settle(self, reserved: Reservation, used_tokens: int | None, *,
                     announced: Announced | None = None, unmetered: Reservation | None = None) -> None:
        self.calls.append(("settle", reserved, used_tokens, announced, unmetered))

    async def pause_until(self, t: float) -> None:
        self.calls.append(("pause_until", t))

    async def admit(self) -> bool:
        self.calls.append(("admit",))
        return False

    async def report(self, outcome: Outcome, *, probe: bool, error: BaseException | None = None) -> FatalAPIError | None:
        self.calls.append(("report", outcome))
        return None

    async def trip(self, error: FatalAPIError, *, probe: bool = False) -> None:
        self.calls.append(("trip", str(error)))
        self.state = "tripped"

    async def reserve_spend(self, usd: float, cap_usd: float | None) -> None:
        self.calls.append(("reserve_spend", usd, cap_usd))

    async def settle_spend(self, reserved_usd: float, spent_usd: float) -> None:
        self.calls.append(("settle_spend", reserved_usd, spent_usd))

    def snapshot(self) -> LimiterSnapshot:
        return LimiterSnapshot(paused_until=None, rpm=None, tpm=None, breaker=self.state)


class Recorder:
    """A limiter factory that keeps every RecordingLimiter it builds."""

    def __init__(self) -> None:
        self.built: list[RecordingLimiter] = []

    def __call__(self, key: str, limits: LaneLimits, *, breaker: BreakerSettings, spread_s: float,
                 clock: Clock, rng: random.Random) -> RecordingLimiter:
        limiter = RecordingLimiter(key, limits, breaker=breaker, spread_s=spread_s, clock=clock, rng=rng)
        self.built.append(limiter)
        return limiter


LIMITED = LaneLimits(rpm=600, tpm=60_000)  # limits configured: no start ramp


def recorded_lane(limits: LaneLimits = LIMITED) -> tuple[Lane, RecordingLimiter]:
    """A lane of a pool whose factory records; the lane and its limiter."""
    recorder = Recorder()
    pool = LanePool(limiter_factory=recorder, rng=random.Random(3))
    lane = pool.get("https://X.test/v1/", "k1", "m", limits, breaker=BreakerSettings(max_outage_s=30.0))
    (limiter,) = recorder.built
    return lane, limiter


class TestLimiterFactory:
    def test_pool_builds_each_lane_limiter_with_the_factory(self) -> None:
        """The factory gets the lane key, its limits, breaker settings and the policy's jitter, once per lane."""
        recorder = Recorder()
        pool = LanePool(limiter_factory=recorder)
        lane = pool.get("https://X.test/v1/", "k1", "m", LIMITED, breaker=BreakerSettings(max_outage_s=30.0))
        assert pool.get("https://x.test/v1", "k1", "m", LIMITED) is lane
        (limiter,) = recorder.built
        assert lane.limiter is limiter
        assert (limiter.key, limiter.limits, limiter.breaker, limiter.spread_s) == (
            "https://x.test/v1|k1|m", LIMITED, BreakerSettings(max_outage_s=30.0), 0.5,
        )

    def test_default_factory_is_the_memory_backend(self) -> None:
        """Without a factory the pool's lanes get MemoryLimiters sharing one ledger."""
        pool = LanePool()
        a = pool.get("https://a.test/v1", "k", "m", LaneLimits())
        b = pool.get("https://b.test/v1", "k", "m", LaneLimits())
        assert isinstance(a.limiter, MemoryLimiter) and isinstance(b.limiter, MemoryLimiter)
        assert a.limiter.ledger is b.limiter.ledger


class TestLaneDrivesTheLimiter:
    def test_acquire_reserves_the_estimate_and_settle_gets_the_usage(self) -> None:
        """A call of a 120-token prompt with max_tokens 256: acquire(1, 376), then settle with the 200 used."""

        async def main() -> list[tuple[object, ...]]:
            lane, limiter = recorded_lane()
            await lane.call(Script(FakeReply(usage_tokens=200)), estimated_tokens=ESTIMATE)
            return limiter.calls

        assert run_in_virtual_time(main) == [
            ("admit",),
            ("acquire", 1, 376),
            ("settle", Reservation(requests=1, tokens=376), 200, None, None),
            ("report", "success"),
        ]

    def test_failed_attempt_settles_with_nothing_used(self) -> None:
        """A 503 then a reply of 300 tokens: the failed attempt settles with 0, the retry with 300."""

        async def main() -> list[tuple[object, ...]]:
            lane, limiter = recorded_lane()
            await lane.call(Script(TransientAPIError("503"), FakeReply(usage_tokens=300)), estimated_tokens=ESTIMATE)
            return limiter.calls

        reserved = Reservation(requests=1, tokens=376)
        assert run_in_virtual_time(main) == [
            ("admit",), ("acquire", 1, 376), ("settle", reserved, 0, None, None), ("report", "transient"),
            ("admit",), ("acquire", 1, 376), ("settle", reserved, 300, None, None), ("report", "success"),
        ]

    def test_a_429_with_retry_after_reaches_pause_until(self) -> None:
        """A 429 with Retry-After 3 s at t=1: the limiter is paused until t=4, and the retry goes through it."""

        async def main() -> list[tuple[object, ...]]:
            lane, limiter = recorded_lane()
            await asyncio.sleep(1.0)
            await lane.call(Script(RateLimited("429", retry_after_s=3.0)), estimated_tokens=ESTIMATE)
            return limiter.calls

        reserved = Reservation(requests=1, tokens=376)
        assert run_in_virtual_time(main) == [
            ("admit",), ("acquire", 1, 376), ("settle", reserved, 0, None, None), ("report", "released"),
            ("pause_until", 4.0),
            ("admit",), ("acquire", 1, 376), ("settle", reserved, None, None, None), ("report", "success"),
        ]

    def test_exhausted_budget_headers_reach_settle(self) -> None:
        """remaining-requests 0, reset 2s in a reply sent at t=0 after 0.5 s: settle is told the reset at t=2."""

        async def main() -> tuple[object, ...]:
            lane, limiter = recorded_lane()
            headers = {"x-ratelimit-limit-requests": "300", "x-ratelimit-remaining-requests": "0",
                       "x-ratelimit-reset-requests": "2s", "x-ratelimit-remaining-tokens": "0"}

            async def slow() -> FakeReply:
                await asyncio.sleep(0.5)
                return FakeReply(usage_tokens=10, headers=headers)

            await lane.call(slow, estimated_tokens=ESTIMATE)
            return limiter.calls[2]

        assert run_in_virtual_time(main) == (
            "settle", Reservation(requests=1, tokens=376), 10, Announced(rpm=300.0, requests_reset_at=2.0), None,
        )

    def test_first_reply_charges_the_ramp_sends_as_unmetered(self) -> None:
        """No limits configured, 3 calls of 376 tokens in flight: the first reply settles with 3 requests, 1128 tokens unmetered."""

        async def main() -> tuple[object, ...]:
            lane, limiter = recorded_lane(LaneLimits())

            async def slow() -> FakeReply:
                await asyncio.sleep(0.2)
                return FakeReply()

            async with asyncio.TaskGroup() as tg:
                for _ in range(3):
                    tg.create_task(lane.call(slow, estimated_tokens=ESTIMATE))
            settles = [call for call in limiter.calls if call[0] == "settle"]
            assert [call[4] for call in settles[1:]] == [None, None]  # only the first reply charges
            return settles[0]

        assert run_in_virtual_time(main) == (
            "settle", Reservation(requests=1, tokens=376), None, None, Reservation(requests=3, tokens=1128),
        )

    def test_cancelled_call_settles_and_releases(self) -> None:
        """A call cancelled in flight settles its reservation with 0 used and releases its breaker turn."""

        async def main() -> list[tuple[object, ...]]:
            lane, limiter = recorded_lane()
            started = asyncio.Event()

            async def hang() -> FakeReply:
                started.set()
                await asyncio.Event().wait()
                raise AssertionError("never answered")

            task = asyncio.create_task(lane.call(hang, estimated_tokens=ESTIMATE))
            await started.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            stats = lane.statistics()
            assert (stats.in_flight, stats.waiting, stats.tokens_reserved) == (0, 0, 0)
            return limiter.calls

        assert run_in_virtual_time(main) == [
            ("admit",), ("acquire", 1, 376), ("settle", Reservation(requests=1, tokens=376), 0, None, None),
            ("report", "released"),
        ]

    def test_fatal_error_trips_through_the_limiter(self) -> None:
        """A FatalAPIError from the attempt trips the limiter's breaker, once, after settling."""

        async def main() -> list[tuple[object, ...]]:
            lane, limiter = recorded_lane()
            with pytest.raises(FatalAPIError):
                await lane.call(Script(FatalAPIError("401: bad key", status=401)), estimated_tokens=ESTIMATE)
            return limiter.calls

        assert run_in_virtual_time(main)[-1] == ("trip", "401: bad key")

    def test_permanent_error_is_reported_as_permanent(self) -> None:
        """A 400 is reported to the breaker as permanent and raised at once."""

        async def main() -> list[tuple[object, ...]]:
            lane, limiter = recorded_lane()
            with pytest.raises(PermanentAPIError):
                await lane.call(Script(PermanentAPIError("400", status=400)), estimated_tokens=ESTIMATE)
            return limiter.calls

        assert run_in_virtual_time(main)[-1] == ("report", "permanent")

    def test_spend_cap_reserves_the_upper_bound_and_settles_the_cost(self) -> None:
        """Cap $0.01, 500 prompt + 100 max_tokens: reserve $0.0015 (500e-6 + 100e-5); used 200 + 100: settle $0.0012."""

        async def main() -> list[tuple[object, ...]]:
            lane, limiter = recorded_lane()
            metered = Spend(PRICES, max_cost_usd=0.01).lane(lane, "check", "m", 100)
            reply = FakeReply(usage_tokens=300, usage=Usage(prompt_tokens=200, completion_tokens=100))
            await metered.call(Script(reply), estimated_tokens=600)
            return [call for call in limiter.calls if call[0] in ("reserve_spend", "settle_spend")]

        (reserve, settle) = run_in_virtual_time(main)
        assert reserve[0] == "reserve_spend" and reserve[1:] == pytest.approx((0.0015, 0.01))
        assert settle[0] == "settle_spend" and settle[1:] == pytest.approx((0.0015, 0.0012))


class TestMemoryLimiter:
    def test_spend_cap_covers_every_lane_of_a_pool(self) -> None:
        """Cap $0.002: split spends $0.0012 on one lane; check's $0.0015 bound on another lane is refused."""
        spend = Spend(PRICES, max_cost_usd=0.002)
        reply = FakeReply(usage=Usage(prompt_tokens=200, completion_tokens=100))

        async def main() -> None:
            pool = LanePool(rng=random.Random(1))
            split = spend.lane(pool.get("https://a.test/v1", "k", "m", LaneLimits()), "split", "m", 100)
            check = spend.lane(pool.get("https://b.test/v1", "k", "m", LaneLimits()), "check", "m", 100)
            await split.call(Script(reply), estimated_tokens=600)
            with pytest.raises(CostCapReached):
                await check.call(Script(reply), estimated_tokens=600)

        run_in_virtual_time(main)
        assert spend.spent_usd() == pytest.approx(0.0012)

    def test_pause_holds_acquire_and_the_buckets(self) -> None:
        """60 RPM, its one request taken at 0, pause_until(2) (no spread): the next acquire returns at 3 s, not 2."""

        async def main() -> tuple[float, Reservation, LimiterSnapshot]:
            limiter = MemoryLimiter("u|k|m", LaneLimits(rpm=60))
            await limiter.acquire(1, 0)
            await limiter.pause_until(2.0)
            paused = limiter.snapshot()
            taken = await limiter.acquire(1, 100)
            return now(), taken, paused

        at, taken, paused = run_in_virtual_time(main)
        assert (at, taken) == (3.0, Reservation(requests=1, tokens=0))  # no TPM limit: no tokens taken
        assert paused == LimiterSnapshot(paused_until=2.0, rpm=60.0, tpm=None, breaker="closed")

    def test_cancelled_acquire_holds_nothing(self) -> None:
        """An acquire cancelled while waiting for tokens gives its request back: the next one goes at once."""

        async def main() -> float:
            limiter = MemoryLimiter("u|k|m", LaneLimits(rpm=60, tpm=600))  # 1 request, 10 tokens per second
            task = asyncio.create_task(limiter.acquire(1, 100))  # request at once, tokens at 10 s
            await asyncio.sleep(1.0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await limiter.acquire(1, 0)
            return now()

        assert run_in_virtual_time(main) == 1.0

    def test_settle_refunds_only_with_refund_tokens(self) -> None:
        """376 reserved, 100 used: the TPM level goes back to 276 with refund_tokens, stays 0 without."""

        async def main(refund: bool) -> float:
            limiter = MemoryLimiter("u|k|m", LaneLimits(tpm=60_000, refund_tokens=refund))
            reserved = await limiter.acquire(1, 376)
            await limiter.settle(reserved, 100)
            assert limiter.tpm_bucket is not None
            return limiter.tpm_bucket.level

        assert run_in_virtual_time(lambda: main(True)) == pytest.approx(276.0)
        assert run_in_virtual_time(lambda: main(False)) == pytest.approx(0.0)

    def test_trip_stops_admit(self) -> None:
        """After trip() every admit raises the trip's FatalAPIError and the snapshot says tripped."""

        async def main() -> str:
            limiter = MemoryLimiter("u|k|m", LaneLimits())
            await limiter.trip(FatalAPIError("401: bad key", status=401))
            with pytest.raises(FatalAPIError, match="bad key"):
                await limiter.admit()
            return limiter.snapshot().breaker

        assert run_in_virtual_time(main) == "tripped"

    def test_repr_explains_state(self) -> None:
        """repr names the lane, its buckets, its gate and its breaker."""
        limiter = MemoryLimiters()("https://x.test/v1|k|m", LaneLimits(rpm=600), breaker=BreakerSettings(),
                                   spread_s=0.0, clock=_StillClock(), rng=random.Random(1))
        assert repr(limiter) == (
            "<MemoryLimiter 'https://x.test/v1|k|m' rpm=<RateBucket 600 requests/min, level 1.00/10, 0 waiting> "
            "tpm=None <PauseGate open, 0 waiting> <Breaker 'https://x.test/v1 (model m)' closed permanent=0 "
            "transient=0 cooldown=1s probes=0>>"
        )


class TestShardShare:
    """One of N shards pacing alone (no --coord) takes 1/N of every rate the lane knows."""

    @staticmethod
    def _limiter(limits: LaneLimits, shards: int) -> MemoryLimiter:
        return MemoryLimiters(shards=shards)("https://x.test/v1|k|m", limits, breaker=BreakerSettings(),
                                             spread_s=0.0, clock=_StillClock(), rng=random.Random(1))

    def test_configured_rates_are_divided_by_the_shard_count(self) -> None:
        snapshot = self._limiter(LaneLimits(rpm=600, tpm=40_000), shards=4).snapshot()
        assert (snapshot.rpm, snapshot.tpm) == (150.0, 10_000.0)

    def test_announced_rates_are_the_accounts_and_are_divided_too(self) -> None:
        """A server's x-ratelimit-limit-* is the account's: a new rate is adopted at 1/N, a lower one lowers to 1/N."""
        learnt = self._limiter(LaneLimits(), shards=4)
        configured = self._limiter(LaneLimits(rpm=600), shards=4)

        async def main() -> tuple[LimiterSnapshot, LimiterSnapshot]:
            await learnt.settle(Reservation(), None, announced=Announced(rpm=1000.0, tpm=80_000.0))
            await configured.settle(Reservation(), None, announced=Announced(rpm=400.0))
            return learnt.snapshot(), configured.snapshot()

        first, second = asyncio.run(main())
        assert (first.rpm, first.tpm, second.rpm) == (250.0, 20_000.0, 100.0)

    def test_one_process_keeps_the_whole_rates(self) -> None:
        snapshot = self._limiter(LaneLimits(rpm=600), shards=1).snapshot()
        assert snapshot.rpm == 600.0

    @pytest.mark.parametrize("shards", [0, -2])
    def test_a_shard_count_below_one_is_refused(self, shards: int) -> None:
        with pytest.raises(ConfigError, match=f"shards must be >= 1, got {shards}"):
            MemoryLimiters(shards=shards)

    def test_a_share_outside_0_1_is_refused(self) -> None:
        with pytest.raises(ConfigError, match="share of the limits must be in"):
            MemoryLimiter("https://x.test/v1|k|m", LaneLimits(rpm=600), share=1.5)


class _StillClock:
    """A clock stopped at 0 s."""

    def now(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:
        raise AssertionError("never sleeps")


class TestAnnounced:
    def test_reads_limits_and_exhausted_resets(self) -> None:
        """Limits per minute and the reset of an exhausted budget, counted from the send time."""
        headers = {"X-RateLimit-Limit-Requests": "600", "x-ratelimit-limit-tokens": "150000",
                   "x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "6m0s",
                   "x-ratelimit-remaining-tokens": "149000", "x-ratelimit-reset-tokens": "1s"}
        assert Announced.read(headers, sent_at=10.0, now=10.5) == Announced(
            rpm=600.0, tpm=150000.0, requests_reset_at=370.0, tokens_reset_at=None,
        )

    @pytest.mark.parametrize(
        ("headers", "expected"),
        [({"Retry-After": "5"}, None),
         ({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "100ms"}, Announced()),
         ({"x-ratelimit-limit-requests": "junk", "x-ratelimit-limit-tokens": "0"}, Announced())],
        ids=["no-ratelimit-headers", "reset-already-past", "junk-and-zero-limits"],
    )
    def test_reads_nothing_usable(self, headers: dict[str, str], expected: Announced | None) -> None:
        """No x-ratelimit-* header gives None; a reset already past (sent 0 s, now 0.2 s) or a junk limit is not read."""
        assert Announced.read(headers, sent_at=0.0, now=0.2) == expected
