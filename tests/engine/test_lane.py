"""Lane, LaneLimits and LanePool on virtual time (no real sleeping)."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from dahl.engine.clock import run_in_virtual_time
from dahl.engine.lane import Lane, LaneLimits, LanePool, LaneStatistics, normalize_base_url
from dahl.engine.retry import RetryPolicy
from dahl.errors import (
    ConfigError,
    OutputParseError,
    PermanentAPIError,
    QuotaExhausted,
    RateLimited,
    TransientAPIError,
)


def now() -> float:
    """Virtual time of the running loop, in seconds."""
    return asyncio.get_running_loop().time()


@dataclass(frozen=True)
class FakeReply:
    """A reply as adapters return it: usage and headers."""

    usage_tokens: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class Script:
    """An attempt function that plays a list of outcomes, then succeeds; it records send times."""

    def __init__(self, *outcomes: BaseException | FakeReply) -> None:
        self.outcomes = list(outcomes)
        self.sent: list[float] = []

    async def __call__(self) -> FakeReply:
        self.sent.append(now())
        outcome = self.outcomes.pop(0) if self.outcomes else FakeReply()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def lane(limits: LaneLimits | None = None, **policy: float) -> Lane:
    """A lane with a seeded rng and the given policy overrides."""
    return Lane(
        "test",
        limits or LaneLimits(),
        policy=RetryPolicy(**policy),  # type: ignore[arg-type]
        rng=random.Random(3),
    )


IDLE = {"in_flight": 0, "waiting": 0, "tokens_reserved": 0}


def idle_view(stats: LaneStatistics) -> dict[str, int]:
    """The fields that must be zero when nothing is running."""
    return {"in_flight": stats.in_flight, "waiting": stats.waiting,
            "tokens_reserved": stats.tokens_reserved}


class TestLaneLimits:
    @pytest.mark.parametrize(
        "kwargs",
        [
            {"rpm": 0},
            {"rpm": -5},
            {"tpm": math.nan},
            {"tpm": math.inf},
            {"rpm": True},
            {"rpm": "60"},
            {"max_in_flight": 0},
            {"max_in_flight": 1.5},
            {"max_in_flight": True},
        ],
        ids=["zero-rpm", "negative-rpm", "nan-tpm", "inf-tpm", "bool-rpm", "str-rpm",
             "zero-slots", "float-slots", "bool-slots"],
    )
    def test_rejects_nonsense(self, kwargs: dict[str, object]) -> None:
        """Limits that are not positive finite numbers (or an int >= 1 slots) are ConfigErrors."""
        with pytest.raises(ConfigError):
            LaneLimits(**kwargs)  # type: ignore[arg-type]

    def test_defaults_are_unlimited_rates_and_64_slots(self) -> None:
        """Default limits: no RPM, no TPM, 64 in flight."""
        assert LaneLimits() == LaneLimits(rpm=None, tpm=None, max_in_flight=64)


class TestLaneRates:
    def test_rpm_burst_then_paced(self) -> None:
        """At 600 RPM, 10 calls go at t=0 and the next 5 at 0.1 s intervals."""

        async def main() -> list[float]:
            subject = lane(LaneLimits(rpm=600))
            script = Script()
            async with asyncio.TaskGroup() as tg:
                for _ in range(15):
                    tg.create_task(subject.call(script, estimated_tokens=0))
            return script.sent

        sent = run_in_virtual_time(main)
        assert sent[:10] == [0.0] * 10
        assert sent[10:] == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])

    def test_in_flight_cap(self) -> None:
        """With max_in_flight 2 and 1 s calls, 6 calls finish at t = 1, 1, 2, 2, 3, 3."""

        async def main() -> tuple[list[float], int]:
            subject = lane(LaneLimits(max_in_flight=2))
            done: list[float] = []
            peak = 0

            async def slow() -> FakeReply:
                nonlocal peak
                peak = max(peak, subject.statistics().in_flight)
                await asyncio.sleep(1.0)
                return FakeReply()

            async def one() -> None:
                await subject.call(slow, estimated_tokens=0)
                done.append(now())

            async with asyncio.TaskGroup() as tg:
                for _ in range(6):
                    tg.create_task(one())
            return done, peak

        done, peak = run_in_virtual_time(main)
        assert done == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
        assert peak == 2


class TestLaneTokens:
    def test_reserve_then_refund_to_usage(self) -> None:
        """Reserving 1000 of a 1000-token bucket with usage 300 gives 700 back."""

        async def main() -> tuple[int, float, float, LaneStatistics]:
            subject = lane(LaneLimits(tpm=60_000))  # 1000 tokens/s, capacity 1000
            bucket = subject.tpm_bucket
            assert bucket is not None
            seen: list[tuple[int, float]] = []

            async def attempt() -> FakeReply:
                seen.append((subject.statistics().tokens_reserved, bucket.level))
                return FakeReply(usage_tokens=300)

            await subject.call(attempt, estimated_tokens=1000)
            return seen[0][0], seen[0][1], bucket.level, subject.statistics()

        reserved, level_during, level_after, stats = run_in_virtual_time(main)
        assert (reserved, level_during, level_after) == (1000, 0.0, 700.0)
        assert stats.tokens_used == 300
        assert stats.tokens_reserved == 0

    def test_unknown_usage_keeps_the_reservation(self) -> None:
        """Without reported usage the whole reservation stays spent."""

        async def main() -> float:
            subject = lane(LaneLimits(tpm=60_000))
            await subject.call(Script(FakeReply(usage_tokens=None)), estimated_tokens=400)
            assert subject.tpm_bucket is not None
            return subject.tpm_bucket.level

        assert run_in_virtual_time(main) == 600.0

    def test_usage_over_reservation_is_charged(self) -> None:
        """Reserved 500 but used 800: the bucket is charged 800 (level 200)."""

        async def main() -> float:
            subject = lane(LaneLimits(tpm=60_000))
            await subject.call(Script(FakeReply(usage_tokens=800)), estimated_tokens=500)
            assert subject.tpm_bucket is not None
            return subject.tpm_bucket.level

        assert run_in_virtual_time(main) == 200.0

    def test_oversize_request_fails_at_once(self) -> None:
        """60001 estimated tokens on a 60000 TPM lane raise PermanentAPIError, nothing sent."""

        async def main() -> tuple[float, list[float], LaneStatistics]:
            subject = lane(LaneLimits(tpm=60_000))
            script = Script()
            with pytest.raises(PermanentAPIError, match="exceeds the token budget"):
                await subject.call(script, estimated_tokens=60_001)
            return now(), script.sent, subject.statistics()

        at, sent, stats = run_in_virtual_time(main)
        assert (at, sent, stats.fatal_errors, stats.requests) == (0.0, [], 1, 0)
        assert idle_view(stats) == IDLE

    def test_failed_attempt_refunds_its_reservation(self) -> None:
        """A fatal error after sending returns the full reservation to the bucket."""

        async def main() -> float:
            subject = lane(LaneLimits(tpm=60_000))
            with pytest.raises(PermanentAPIError):
                await subject.call(Script(PermanentAPIError("400")), estimated_tokens=1000)
            assert subject.tpm_bucket is not None
            return subject.tpm_bucket.level

        assert run_in_virtual_time(main) == 1000.0


class TestLaneRetry:
    def test_transient_errors_then_success(self) -> None:
        """Two 503s then a reply: 3 requests, 2 retries, the reply returned."""

        async def main() -> tuple[FakeReply, LaneStatistics]:
            subject = lane()
            reply = FakeReply(usage_tokens=5)
            script = Script(TransientAPIError("503"), TransientAPIError("503"), reply)
            got = await subject.call(script, estimated_tokens=0)
            return got, subject.statistics()

        got, stats = run_in_virtual_time(main)
        assert got == FakeReply(usage_tokens=5)
        assert (stats.requests, stats.retries, stats.transient_errors, stats.successes) == (
            3, 2, 2, 1,
        )

    def test_backoff_is_full_jitter_and_attempts_are_capped(self) -> None:
        """Always 503 with 4 attempts: gaps are the seeded full-jitter draws, then the error."""

        async def main() -> tuple[list[float], LaneStatistics]:
            subject = lane(max_attempts=4, base_s=1.0, cap_s=8.0)
            script = Script(*[TransientAPIError(f"503 #{i}") for i in range(1, 10)])
            with pytest.raises(TransientAPIError, match="503 #4"):
                await subject.call(script, estimated_tokens=0)
            return script.sent, subject.statistics()

        sent, stats = run_in_virtual_time(main)
        policy = RetryPolicy(max_attempts=4, base_s=1.0, cap_s=8.0)
        rng = random.Random(3)
        expected = [0.0]
        for attempt in range(3):
            expected.append(expected[-1] + policy.backoff_s(attempt, rng))
        assert sent == pytest.approx(expected)
        gaps = [b - a for a, b in zip(sent, sent[1:])]
        assert all(0 <= gap <= ceiling for gap, ceiling in zip(gaps, [1.0, 2.0, 4.0]))
        assert (stats.requests, stats.retries, stats.transient_errors) == (4, 3, 4)
        assert idle_view(stats) == IDLE

    def test_wall_time_caps_retries(self) -> None:
        """With 100 attempts allowed but 10 s of wall time, retrying stops before 10 s."""

        async def main() -> tuple[float, int]:
            subject = lane(max_attempts=100, max_wall_s=10.0, base_s=1.0, cap_s=4.0)
            script = Script(*[TransientAPIError("timeout") for _ in range(100)])
            with pytest.raises(TransientAPIError):
                await subject.call(script, estimated_tokens=0)
            return now(), len(script.sent)

        ended, attempts = run_in_virtual_time(main)
        assert ended <= 10.0
        # Each gap is at most 4 s, so at least 3 attempts fit in 10 s; far fewer than 100.
        assert 3 <= attempts < 100

    def test_rate_limited_retry_waits_retry_after(self) -> None:
        """A 429 with Retry-After 3 s: the retry leaves within [3, 3.5] s (jitter 0.5 s)."""

        async def main() -> tuple[list[float], LaneStatistics]:
            subject = lane()
            script = Script(RateLimited("429", retry_after_s=3.0))
            await subject.call(script, estimated_tokens=0)
            return script.sent, subject.statistics()

        sent, stats = run_in_virtual_time(main)
        assert sent[0] == 0.0
        assert 3.0 <= sent[1] <= 3.5
        assert (stats.rate_limited, stats.retries, stats.successes) == (1, 1, 1)

    def test_rate_limited_without_retry_after_waits_default(self) -> None:
        """A 429 without Retry-After pauses the default 1 s (plus at most 0.5 s jitter)."""

        async def main() -> list[float]:
            script = Script(RateLimited("429"))
            await lane().call(script, estimated_tokens=0)
            return script.sent

        sent = run_in_virtual_time(main)
        assert 1.0 <= sent[1] <= 1.5

    def test_rate_limits_exhaust_attempts(self) -> None:
        """Three 429s with max_attempts 3 raise the last RateLimited."""

        async def main() -> int:
            script = Script(*[RateLimited(f"429 #{i}", retry_after_s=1.0) for i in (1, 2, 3)])
            with pytest.raises(RateLimited, match="429 #3"):
                await lane(max_attempts=3).call(script, estimated_tokens=0)
            return len(script.sent)

        assert run_in_virtual_time(main) == 3

    @pytest.mark.parametrize(
        "exc",
        [PermanentAPIError("400", status=400), QuotaExhausted("quota"),
         OutputParseError("bad"), ValueError("bug")],
        ids=["permanent", "quota", "parse", "bug"],
    )
    def test_fatal_raised_at_once(self, exc: Exception) -> None:
        """A fatal error is raised after exactly one attempt, at t=0."""

        async def main() -> tuple[int, float, LaneStatistics]:
            subject = lane()
            script = Script(exc)
            with pytest.raises(type(exc)):
                await subject.call(script, estimated_tokens=0)
            return len(script.sent), now(), subject.statistics()

        attempts, at, stats = run_in_virtual_time(main)
        assert (attempts, at, stats.fatal_errors, stats.retries) == (1, 0.0, 1, 0)


class TestLanePause:
    def test_no_thundering_herd_after_a_pause(self) -> None:
        """100 callers, 60 RPM, a 429 asking 2 s: nothing before 2 s, then about one per second."""

        async def main() -> list[float]:
            subject = lane(LaneLimits(rpm=60, max_in_flight=200))
            script = Script(RateLimited("429", retry_after_s=2.0))
            async with asyncio.TaskGroup() as tg:
                for _ in range(100):
                    tg.create_task(subject.call(script, estimated_tokens=0))
            return script.sent

        sent = run_in_virtual_time(main)
        assert sent[0] == 0.0 and len(sent) == 101
        after = sorted(sent[1:])
        assert after[0] >= 2.0
        # Burst <= 1 s of rate (1 request) plus one refill in any 1 s window.
        assert max(sum(1 for t in after if start <= t < start + 1.0) for start in after) <= 2
        # 100 sends at 1/s after a single stored unit need at least 99 s.
        assert after[-1] - after[0] >= 99.0 - 1e-6

    def test_rate_limit_drains_the_rpm_bucket(self) -> None:
        """After a 429 with Retry-After 0 at 600 RPM, the retry waits one refill (0.1 s)."""

        async def main() -> list[float]:
            subject = lane(LaneLimits(rpm=600))
            script = Script(RateLimited("429", retry_after_s=0.0))
            await subject.call(script, estimated_tokens=0)
            return script.sent

        # Without the drain 9 units would remain and the retry would leave at t=0.
        assert run_in_virtual_time(main) == pytest.approx([0.0, 0.1])

    def test_header_learning_sets_rates_and_pause(self) -> None:
        """x-ratelimit headers set RPM/TPM on an unlimited lane and pause on remaining 0."""

        async def main() -> tuple[LaneStatistics, float]:
            subject = lane()
            headers = {
                "X-RateLimit-Limit-Requests": "600",
                "x-ratelimit-limit-tokens": "150000",
                "x-ratelimit-remaining-requests": "0",
                "x-ratelimit-reset-requests": "6m0s",
                "x-ratelimit-remaining-tokens": "149000",
                "x-ratelimit-reset-tokens": "1s",
            }
            await subject.call(Script(FakeReply(headers=headers)), estimated_tokens=0)
            stats = subject.statistics()
            script = Script()
            await subject.call(script, estimated_tokens=0)
            return stats, script.sent[0]

        stats, next_sent = run_in_virtual_time(main)
        assert (stats.rpm, stats.tpm, stats.paused_until) == (600.0, 150000.0, 360.0)
        assert 360.0 <= next_sent <= 360.5

    @pytest.mark.parametrize(
        ("configured", "announced", "expected"),
        [(1000.0, "600", 600.0), (300.0, "600", 300.0), (300.0, "junk", 300.0)],
        ids=["lowered", "kept-when-lower", "ignored-junk"],
    )
    def test_header_limit_only_lowers(
        self, configured: float, announced: str, expected: float
    ) -> None:
        """A server limit replaces ours only when ours is higher."""

        async def main() -> float | None:
            subject = lane(LaneLimits(rpm=configured))
            reply = FakeReply(headers={"x-ratelimit-limit-requests": announced})
            await subject.call(Script(reply), estimated_tokens=0)
            return subject.statistics().rpm

        assert run_in_virtual_time(main) == expected

    def test_call_waiting_for_a_bucket_rechecks_the_gate(self) -> None:
        """A call queued at the RPM bucket when a 429 pauses the lane waits for the pause too."""

        async def main() -> list[float]:
            subject = lane(LaneLimits(rpm=60), rate_limit_jitter_s=0.0)
            script = Script(FakeReply(), RateLimited("429", retry_after_s=5.0))
            async with asyncio.TaskGroup() as tg:
                for _ in range(3):
                    tg.create_task(subject.call(script, estimated_tokens=0))
            return script.sent

        # t=0 first call ok; t=1 second call gets a 429 (gate closed until 6, bucket
        # drained); the third call gets its unit at t=2, finds the gate closed, hands
        # the unit back and waits. At 6 the full bucket (1 unit) lets one go, then 7.
        sent = run_in_virtual_time(main)
        assert sent[:2] == [0.0, 1.0]
        assert all(t >= 6.0 for t in sent[2:])
        assert sorted(sent[2:]) == pytest.approx([6.0, 7.0])


class TestLaneCancellation:
    def test_cancel_in_flight_returns_to_idle(self) -> None:
        """Cancelling a call mid-request frees its slot and refunds its whole reservation."""

        async def main() -> tuple[LaneStatistics, float, float]:
            subject = lane(LaneLimits(tpm=60_000, max_in_flight=1))
            started = asyncio.Event()

            async def hang() -> FakeReply:
                started.set()
                await asyncio.Event().wait()
                raise AssertionError("never answered")

            task = asyncio.create_task(subject.call(hang, estimated_tokens=1000))
            await started.wait()
            assert subject.statistics().tokens_reserved == 1000
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            stats = subject.statistics()
            assert subject.tpm_bucket is not None
            level = subject.tpm_bucket.level
            # The slot is free: the next call goes out at once.
            script = Script()
            await subject.call(script, estimated_tokens=0)
            return stats, level, script.sent[0]

        stats, level, next_sent = run_in_virtual_time(main)
        assert idle_view(stats) == IDLE
        assert (stats.requests, stats.successes, stats.fatal_errors) == (1, 0, 0)
        assert level == 1000.0
        assert next_sent == 0.0

    def test_cancel_while_waiting_returns_to_idle(self) -> None:
        """A call cancelled while queued for TPM gives its RPM unit back."""

        async def main() -> tuple[LaneStatistics, float]:
            # 60 RPM (1/s, capacity 1) and 3000 TPM (50/s, capacity 50).
            subject = lane(LaneLimits(rpm=60, tpm=3000))
            # A: t=0, reserves 50 but uses 200 -> TPM level 50 - 200 = -150.
            await subject.call(Script(FakeReply(usage_tokens=200)), estimated_tokens=50)
            # B: RPM unit at t=1, then TPM needs 50 from -100: would wait until t=4.
            waiting = asyncio.create_task(subject.call(Script(), estimated_tokens=50))
            await asyncio.sleep(1.5)
            assert subject.statistics().waiting == 1
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            stats = subject.statistics()
            # C needs only RPM: refill 0.5 + refunded 1 -> full at t=1.5 (t=2.0 without refund).
            script = Script()
            await subject.call(script, estimated_tokens=0)
            return stats, script.sent[0]

        stats, next_sent = run_in_virtual_time(main)
        assert idle_view(stats) == IDLE
        assert stats.requests == 1
        assert next_sent == 1.5

    def test_cancel_during_backoff_returns_to_idle(self) -> None:
        """A call cancelled while backing off after a 503 leaves nothing behind."""

        async def main() -> LaneStatistics:
            subject = lane(base_s=10.0, cap_s=10.0)
            task = asyncio.create_task(
                subject.call(Script(TransientAPIError("503")), estimated_tokens=0)
            )
            await asyncio.sleep(0.001)
            assert subject.statistics().waiting == 1
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return subject.statistics()

        assert idle_view(run_in_virtual_time(main)) == IDLE


class TestLaneRepr:
    def test_repr_explains_state(self) -> None:
        """repr shows the key, limits, slots, queue and gate."""
        subject = Lane("https://api.example.com/v1|k1|m", LaneLimits(rpm=600))
        assert repr(subject) == (
            "<Lane 'https://api.example.com/v1|k1|m' rpm=600 tpm=unlimited "
            "in_flight=0/64 waiting=0 gate=open requests=0 retries=0>"
        )


class TestLanePool:
    def test_normalizes_base_urls(self) -> None:
        """Scheme and host are lowercased and the trailing slash dropped; the path keeps case."""
        assert normalize_base_url("HTTPS://API.OpenAI.com/v1/") == "https://api.openai.com/v1"
        assert normalize_base_url("http://localhost:8000/V1") == "http://localhost:8000/V1"

    def test_rejects_a_non_url(self) -> None:
        """A base URL without scheme and host is a ConfigError."""
        with pytest.raises(ConfigError):
            normalize_base_url("api.openai.com")

    def test_same_endpoint_shares_a_lane(self) -> None:
        """Two spellings of one endpoint, key and model give the same lane."""
        pool = LanePool()
        a = pool.get("https://API.openai.com/v1/", "key1", "gpt-4o-mini", LaneLimits(rpm=500))
        b = pool.get("https://api.openai.com/v1", "key1", "gpt-4o-mini", LaneLimits(rpm=500))
        assert a is b
        assert a.key == "https://api.openai.com/v1|key1|gpt-4o-mini"

    def test_models_and_keys_are_separate(self) -> None:
        """A different model or key identity gets its own lane."""
        pool = LanePool()
        limits = LaneLimits()
        base = pool.get("https://api.openai.com/v1", "key1", "gpt-4o-mini", limits)
        other_model = pool.get("https://api.openai.com/v1", "key1", "gpt-4o", limits)
        other_key = pool.get("https://api.openai.com/v1", "key2", "gpt-4o-mini", limits)
        assert len({id(base), id(other_model), id(other_key)}) == 3
        assert sorted(pool.statistics()) == [
            "https://api.openai.com/v1|key1|gpt-4o",
            "https://api.openai.com/v1|key1|gpt-4o-mini",
            "https://api.openai.com/v1|key2|gpt-4o-mini",
        ]

    def test_first_limits_win(self) -> None:
        """A later get() with other limits returns the existing lane unchanged."""
        pool = LanePool()
        first = pool.get("https://x.test/v1", "k", "m", LaneLimits(rpm=100))
        again = pool.get("https://x.test/v1", "k", "m", LaneLimits(rpm=900))
        assert again is first
        assert again.limits.rpm == 100
