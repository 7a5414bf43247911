"""Lane, LaneLimits and LanePool on virtual time (no real sleeping)."""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from dahl.lanes._clock import run_in_virtual_time
from dahl.lanes._lane import Lane, LaneLimits, LanePool, LaneStatistics, normalize_base_url
from dahl.lanes._limits import RateBucket
from dahl.lanes._memory import MemoryLimiter
from dahl.lanes._retry import RetryPolicy
from dahl.records import Usage
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
    """A reply as adapters return it: usage (total, and split for metered lanes) and headers."""

    usage_tokens: int | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    usage: Usage | None = None


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


def tpm_bucket(subject: Lane) -> RateBucket | None:
    """The TPM bucket of the lane's (default, in-memory) limiter."""
    assert isinstance(subject.limiter, MemoryLimiter)
    return subject.limiter.tpm_bucket


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
        """Default limits: no RPM, no TPM, 64 in flight, tokens charged at admission."""
        assert LaneLimits() == LaneLimits(
            rpm=None, tpm=None, max_in_flight=64, refund_tokens=False
        )

    def test_rejects_a_non_bool_refund_flag(self) -> None:
        """refund_tokens must be a bool (a string "no" is truthy)."""
        with pytest.raises(ConfigError):
            LaneLimits(refund_tokens="no")  # type: ignore[arg-type]


class TestLaneRates:
    def test_rpm_cold_start_is_paced(self) -> None:
        """At 600 RPM, 15 calls from cold go at 0.0, 0.1, ..., 1.4 s: one at once, no burst."""

        async def main() -> list[float]:
            subject = lane(LaneLimits(rpm=600))
            script = Script()
            async with asyncio.TaskGroup() as tg:
                for _ in range(15):
                    tg.create_task(subject.call(script, estimated_tokens=0))
            return script.sent

        sent = run_in_virtual_time(main)
        assert sent == pytest.approx([0.1 * k for k in range(15)])

    def test_in_flight_cap(self) -> None:
        """max_in_flight 2, 1 s calls: the ramp sends at 0 and 0.5, then each freed slot at once."""

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
        # Sent at 0, 0.5 (ramp: 2 per second), then 1.0, 1.5, 2.0, 2.5 as slots free.
        assert done == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
        assert peak == 2


class TestLaneTokens:
    def test_reserve_then_refund_to_usage(self) -> None:
        """With refund_tokens, reserving 1000 of a 1000-token bucket with usage 300 gives 700 back."""

        async def main() -> tuple[int, float, float, LaneStatistics]:
            # 1000 tokens/s, capacity 1000, empty at start: the call leaves at t=1.
            subject = lane(LaneLimits(tpm=60_000, refund_tokens=True))
            bucket = tpm_bucket(subject)
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

    def test_admission_accounting_keeps_the_reservation(self) -> None:
        """By default (charged at admission, like OpenAI) usage 300 of 1000 reserved refunds nothing."""

        async def main() -> tuple[float, float, int]:
            subject = lane(LaneLimits(tpm=60_000))
            script = Script(FakeReply(usage_tokens=300))
            await subject.call(script, estimated_tokens=1000)
            assert tpm_bucket(subject) is not None
            return script.sent[0], tpm_bucket(subject).level, subject.statistics().tokens_used

        assert run_in_virtual_time(main) == (1.0, 0.0, 300)

    def test_unknown_usage_keeps_the_reservation(self) -> None:
        """Without reported usage the whole reservation stays spent, even with refund_tokens."""

        async def main() -> float:
            subject = lane(LaneLimits(tpm=60_000, refund_tokens=True))
            await subject.call(Script(FakeReply(usage_tokens=None)), estimated_tokens=400)
            assert tpm_bucket(subject) is not None
            return tpm_bucket(subject).level

        # Empty start: 400 tokens are there at t=0.4 and all taken.
        assert run_in_virtual_time(main) == 0.0

    def test_usage_over_reservation_is_charged(self) -> None:
        """Reserved 500 (taken at t=0.5) but used 800: the extra 300 puts the bucket at -300."""

        async def main() -> float:
            subject = lane(LaneLimits(tpm=60_000))
            await subject.call(Script(FakeReply(usage_tokens=800)), estimated_tokens=500)
            assert tpm_bucket(subject) is not None
            return tpm_bucket(subject).level

        assert run_in_virtual_time(main) == -300.0

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

    @pytest.mark.parametrize(
        ("refund", "expected"), [(True, 1000.0), (False, 0.0)], ids=["refund", "admission"]
    )
    def test_failed_attempt_reservation(self, refund: bool, expected: float) -> None:
        """A fatal error after sending refunds the reservation only with refund_tokens."""

        async def main() -> float:
            subject = lane(LaneLimits(tpm=60_000, refund_tokens=refund))
            with pytest.raises(PermanentAPIError):
                await subject.call(Script(PermanentAPIError("400")), estimated_tokens=1000)
            assert tpm_bucket(subject) is not None
            return tpm_bucket(subject).level

        assert run_in_virtual_time(main) == expected


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

    def test_a_request_above_the_announced_tpm_fails_at_once(self) -> None:
        """A 429 announcing 1,000 tokens/min to a 5,600-token request: PermanentAPIError naming both sizes, 1 attempt, no wait."""

        async def main() -> tuple[int, float, LaneStatistics]:
            subject = Lane("http://api.test/v1|key|m", LaneLimits(), rng=random.Random(3))
            script = Script(RateLimited("HTTP 429: Number of tokens has exceeded your rate limit.",
                                        headers={"x-ratelimit-limit-tokens": "1000"}))
            with pytest.raises(PermanentAPIError) as info:
                await subject.call(script, estimated_tokens=5600)
            assert str(info.value) == (
                "request of 5600 tokens (prompt estimate + max_tokens) exceeds the token budget of 1000 tokens "
                "per minute of http://api.test/v1 (model m): no window can fit it (the server said: HTTP 429: "
                "Number of tokens has exceeded your rate limit.)")
            assert info.value.status == 429 and isinstance(info.value.__cause__, RateLimited)
            return len(script.sent), now(), subject.statistics()

        sent, elapsed, stats = run_in_virtual_time(main)
        assert (sent, elapsed) == (1, 0.0)
        assert (stats.rate_limited, stats.retries, stats.fatal_errors) == (1, 0, 1)

    def test_a_429_to_a_request_within_the_announced_tpm_is_retried(self) -> None:
        """A 429 announcing 1,000 tokens/min to a 900-token request: a rate limit, retried after the pause."""

        async def main() -> int:
            script = Script(RateLimited("429", retry_after_s=1.0, headers={"x-ratelimit-limit-tokens": "1000"}))
            await lane().call(script, estimated_tokens=900)
            return len(script.sent)

        assert run_in_virtual_time(main) == 2

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
        # The held bucket restarts empty at 2 s: the first unit is there at 3 s.
        assert after[0] == pytest.approx(3.0)
        # Never more than 1 s of rate (1 request) in any 1 s window.
        assert max(sum(1 for t in after if start <= t < start + 1.0 - 1e-9) for start in after) == 1
        assert after[-1] == pytest.approx(102.0)

    def test_rate_limit_empties_a_full_rpm_bucket(self) -> None:
        """A 429 (Retry-After 0) on a full 600 RPM bucket: the next 5 sends are paced 0.1 s apart."""

        async def main() -> list[float]:
            subject = lane(LaneLimits(rpm=600))
            script = Script(FakeReply(), RateLimited("429", retry_after_s=0.0))
            await subject.call(script, estimated_tokens=0)
            await asyncio.sleep(2.0)  # the bucket refills to 10
            async with asyncio.TaskGroup() as tg:
                for _ in range(4):
                    tg.create_task(subject.call(script, estimated_tokens=0))
            return script.sent

        # 2.0 gets the 429; the bucket restarts from 1 unit (not 9): 2.0, then paced;
        # the retry queues behind the other three. Without the hold all would go at 2.0.
        assert run_in_virtual_time(main) == pytest.approx([0.0, 2.0, 2.0, 2.1, 2.2, 2.3])

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
        # Gate spread <= 0.5 s; the learnt RPM bucket restarts empty: +0.1 s at least.
        assert 360.1 - 1e-9 <= next_sent <= 360.6 + 1e-9

    def test_learnt_token_limit_is_charged_with_requests_in_flight(self) -> None:
        """3 calls of 100 tokens in flight when the first reply says 60,000 TPM: the bucket owes 300."""

        async def main() -> tuple[float, float]:
            subject = lane()
            headers = {"x-ratelimit-limit-tokens": "60000"}

            async def slow() -> FakeReply:
                await asyncio.sleep(0.2)
                return FakeReply(headers=headers)

            levels: list[float] = []

            async def first() -> None:
                await subject.call(slow, estimated_tokens=100)
                assert tpm_bucket(subject) is not None
                levels.append(tpm_bucket(subject).level)

            async with asyncio.TaskGroup() as tg:
                tg.create_task(first())
                for _ in range(2):
                    tg.create_task(subject.call(slow, estimated_tokens=100))
            script = Script()
            await subject.call(script, estimated_tokens=100)
            return levels[0], script.sent[0]

        level, next_sent = run_in_virtual_time(main)
        # Sent at 0, 1/64, 2/64 s; at 0.2 s the reply charges 3 x 100 tokens (2 in flight + its
        # own): level -300, refilling at 1,000/s, so the next 100 are there at 0.2 + 0.4 s.
        assert level == pytest.approx(-300.0)
        assert next_sent == pytest.approx(0.6)

    def test_other_headers_learn_nothing(self) -> None:
        """Replies without x-ratelimit-* headers leave an unlimited lane unlimited and open."""

        async def main() -> tuple[LaneStatistics, list[float]]:
            subject = lane()
            headers = {"Content-Type": "application/json", "X-Request-Id": "abc", "Retry-After": "5"}
            script = Script(FakeReply(headers=headers), FakeReply(headers=headers))
            await subject.call(script, estimated_tokens=10)
            await subject.call(script, estimated_tokens=10)
            return subject.statistics(), script.sent

        stats, sent = run_in_virtual_time(main)
        assert (stats.rpm, stats.tpm, stats.paused_until, stats.requests) == (None, None, None, 2)
        assert sent == [0.0, 0.0]

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
        # held until 6 and emptied); the third call, queued at the bucket, gets the
        # first unit after the hold (t=7); the retry queues behind it (t=8).
        sent = run_in_virtual_time(main)
        assert sent == pytest.approx([0.0, 1.0, 7.0, 8.0])


class TestLaneCancellation:
    def test_cancel_in_flight_returns_to_idle(self) -> None:
        """Cancelling a call mid-request frees its slot and (refund_tokens) its whole reservation."""

        async def main() -> tuple[LaneStatistics, float, float]:
            subject = lane(LaneLimits(tpm=60_000, max_in_flight=1, refund_tokens=True))
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
            assert tpm_bucket(subject) is not None
            level = tpm_bucket(subject).level
            # The slot is free: the next call goes out at once.
            script = Script()
            await subject.call(script, estimated_tokens=0)
            return stats, level, script.sent[0]

        stats, level, next_sent = run_in_virtual_time(main)
        assert idle_view(stats) == IDLE
        assert (stats.requests, stats.successes, stats.fatal_errors) == (1, 0, 0)
        assert level == 1000.0
        # Sent at t=1 (empty bucket, 1000 tokens/s); the freed slot is used at once.
        assert next_sent == 1.0

    def test_cancel_while_waiting_returns_to_idle(self) -> None:
        """A call cancelled while queued for TPM gives its RPM unit back."""

        async def main() -> tuple[LaneStatistics, float]:
            # 60 RPM (1/s, capacity 1, starts with 1) and 3000 TPM (50/s, starts empty).
            subject = lane(LaneLimits(rpm=60, tpm=3000))
            # A: RPM unit at 0, TPM 50 at t=1; uses 200 -> TPM level 0 - 150 = -150.
            await subject.call(Script(FakeReply(usage_tokens=200)), estimated_tokens=50)
            # B: RPM unit at t=1, then TPM needs 50 from -150: would wait until t=5.
            waiting = asyncio.create_task(subject.call(Script(), estimated_tokens=50))
            await asyncio.sleep(0.5)
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


class WindowServer:
    """A virtual-time server like bench/mock_window.py: fixed windows, charged at admission.

    Windows start at ``phase_s`` (so sends on the 0.1 s grid never sit exactly on a
    boundary); a refused request is not charged and gets 429 + Retry-After (the
    rest of the window); an admitted one is charged ``cost`` tokens, never refunded,
    and answered ``latency_s`` later with ``usage`` tokens and x-ratelimit headers.
    """

    def __init__(
        self,
        *,
        requests: int | None = None,
        tokens: int | None = None,
        latency_s: float = 0.2,
        phase_s: float = 0.05,
    ) -> None:
        self.requests, self.tokens = requests, tokens
        self.latency_s, self.phase_s = latency_s, phase_s
        self.window = -1
        self.used_requests = self.used_tokens = 0
        self.admitted: list[float] = []
        self.refused = 0

    async def call(self, cost: int, usage: int) -> FakeReply:
        """One request of ``cost`` tokens (prompt estimate + max_tokens)."""
        t = now()
        window = math.floor(t - self.phase_s)
        if window != self.window:
            self.window, self.used_requests, self.used_tokens = window, 0, 0
        reset_s = window + 1 + self.phase_s - t
        if (self.requests is not None and self.used_requests >= self.requests) or (
            self.tokens is not None and self.used_tokens + cost > self.tokens
        ):
            self.refused += 1
            raise RateLimited("429", retry_after_s=reset_s)
        self.used_requests += 1
        self.used_tokens += cost
        self.admitted.append(t)
        headers: dict[str, str] = {}
        if self.requests is not None:
            headers = {
                "x-ratelimit-limit-requests": str(self.requests * 60),
                "x-ratelimit-remaining-requests": str(self.requests - self.used_requests),
                "x-ratelimit-reset-requests": f"{math.ceil(reset_s * 1000)}ms",
            }
        await asyncio.sleep(self.latency_s)
        return FakeReply(usage_tokens=usage, headers=headers)


def most_in_any_second(times: list[float]) -> int:
    """Most of ``times`` in any half-open 1 s span starting at one of them."""
    ordered = sorted(times)
    return max(sum(1 for u in ordered if t - 1e-9 <= u < t + 1.0 - 1e-9) for t in ordered)


def run_against(
    server: WindowServer, limits: LaneLimits, calls: int, costs: list[int], usage: int
) -> tuple[float, LaneStatistics]:
    """Run ``calls`` calls through one lane with 64 workers; return (end time, stats)."""

    async def main() -> tuple[float, LaneStatistics]:
        subject = lane(limits)
        todo = iter(range(calls))

        async def worker() -> None:
            for i in todo:
                cost = costs[i % len(costs)]
                await subject.call(lambda: server.call(cost, usage), estimated_tokens=cost)

        async with asyncio.TaskGroup() as tg:
            for _ in range(64):
                tg.create_task(worker())
        return now(), subject.statistics()

    return run_in_virtual_time(main)


class TestLaneAgainstAFixedWindowServer:
    def test_configured_rpm_from_cold_gets_no_429(self) -> None:
        """600 RPM on client and server (10 per 1 s window), 300 calls: no 429, 10 in any 1 s."""
        server = WindowServer(requests=10)
        end, stats = run_against(server, LaneLimits(rpm=600), 300, [100], 50)
        assert server.refused == 0
        assert most_in_any_second(server.admitted) == 10
        # 0.0 .. 29.9 paced, plus the last reply's 0.2 s latency.
        assert end == pytest.approx(30.1)
        assert stats.requests == 300

    def test_configured_tpm_matches_admission_accounting(self) -> None:
        """TPM = 10 requests' worth per 1 s window, usage far below reservation: no 429, >= 88 %."""
        costs = [330, 360, 390]  # mean 360, like B3(b)
        server = WindowServer(tokens=3600)
        end, stats = run_against(server, LaneLimits(tpm=3600 * 60), 300, costs, 60)
        assert server.refused == 0
        assert stats.tokens_used == 300 * 60
        # Bound: 3600 tokens/s / 360 per request = 10 requests/s -> 300 calls in 30 s.
        # The window cap leaves a window's tail unused when the next request does
        # not fit (up to one request in ten here): at least 88 % of the bound.
        assert 30.0 <= end <= 30.0 / 0.88

    def test_learnt_limits_are_charged_with_the_ramp(self) -> None:
        """Nothing configured: 13 ramp sends by the first reply, which charges them to the learnt 600 RPM."""

        async def main() -> tuple[list[float], LaneStatistics, int]:
            server = WindowServer(requests=10)
            subject = lane()
            sent: list[float] = []

            async def attempt() -> FakeReply:
                sent.append(now())
                return await server.call(100, 50)

            async with asyncio.TaskGroup() as tg:
                for _ in range(40):
                    tg.create_task(subject.call(attempt, estimated_tokens=100))
            return sent, subject.statistics(), server.refused

        sent, stats, refused = run_in_virtual_time(main)
        # Ramp 64/s: 0, 1/64, ..., 12/64 s before the first reply (0.2 s). Windows start at
        # 0.05: 4 fall in the window before, 9 in the first one, so the server refuses none.
        # The reply's 600/min is charged with the 13 sent (12 in flight + its own):
        # 1.3 s of rate -> the next send at 0.2 + 1.4 = 1.6, then every 0.1 s.
        assert sent == pytest.approx([k / 64 for k in range(13)] + [1.6 + 0.1 * i for i in range(27)])
        assert (stats.rpm, stats.rate_limited, refused) == (600.0, 0, 0)

    def test_a_small_window_refuses_one_request_at_start(self) -> None:
        """5 per 1 s window, nothing configured: the ramp's 10th send gets the only 429, then pacing."""

        async def main() -> tuple[list[float], LaneStatistics, int]:
            server = WindowServer(requests=5)
            subject = lane()
            sent: list[float] = []

            async def attempt() -> FakeReply:
                sent.append(now())
                return await server.call(100, 50)

            async with asyncio.TaskGroup() as tg:
                for _ in range(40):
                    tg.create_task(subject.call(attempt, estimated_tokens=100))
            return sent, subject.statistics(), server.refused

        sent, stats, refused = run_in_virtual_time(main)
        # Ramp sends k/64 s: k = 0-3 fit the window before 0.05, k = 4-8 the first window;
        # k = 9 (0.14 s) is refused and pauses the lane until the window ends (1.05 s).
        # The first reply (0.2 s) brings 300/min, charged with the 9 sent (8 in flight + its
        # own): level -9. At 0.325 k = 8's reply (remaining 0) pauses until 1.05 again and
        # holds the bucket, whose debt (-9 + 0.125 * 5) then accrues nothing until 1.05: the
        # 31 calls left (the refused one's retry included) go from 1.05 + 9.375/5 = 2.925 s.
        assert sent == pytest.approx([k / 64 for k in range(10)] + [2.925 + 0.2 * i for i in range(31)])
        assert (stats.rpm, stats.rate_limited, refused) == (300.0, 1, 1)

    def test_the_lane_opens_at_once(self) -> None:
        """No limits: calls leave 1/64 s apart until the first reply (0.2 s), then all at once."""

        async def main() -> list[float]:
            subject = lane()
            script = Script()

            async def slow() -> FakeReply:
                reply = await script()
                await asyncio.sleep(0.2)
                return reply

            async with asyncio.TaskGroup() as tg:
                for _ in range(64):
                    tg.create_task(subject.call(slow, estimated_tokens=0))
            return script.sent

        sent = run_in_virtual_time(main)
        # The 13th would be due at 13/64 = 0.203 s; the reply at 0.2 s without limits opens the lane.
        assert sent == pytest.approx([k / 64 for k in range(13)] + [0.2] * 51)

    def test_reset_counts_from_the_send_time(self) -> None:
        """remaining 0 with reset 100ms in a reply that took 0.2 s does not pause the lane."""

        async def main() -> tuple[float | None, float | None]:
            subject = lane(LaneLimits(rpm=600))
            headers = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "100ms"}

            async def stale() -> FakeReply:
                await asyncio.sleep(0.2)
                return FakeReply(headers=headers)

            await subject.call(stale, estimated_tokens=0)
            stale_pause = subject.statistics().paused_until
            headers["x-ratelimit-reset-requests"] = "1s"
            await subject.call(stale, estimated_tokens=0)  # sent at 0.2, answered at 0.4
            return stale_pause, subject.statistics().paused_until

        stale_pause, pause = run_in_virtual_time(main)
        assert stale_pause is None
        assert pause == pytest.approx(1.2)


class TestLaneAgainstTheMock:
    """The lane over HTTP to bench.mockserver on loopback (real time, in this event loop)."""

    @staticmethod
    async def check_all(config: object, claims: int, limits: LaneLimits) -> tuple[dict[str, object], Lane, int]:
        """Check ``claims`` claims through one lane; return (mock stats, lane, claims labelled error)."""
        mockserver = pytest.importorskip("bench.mockserver")
        from dahl.adapters._http import make_session
        from dahl.adapters._openai import OpenAIChecker
        from dahl.config import EndpointConfig
        from dahl.records import Answer, Claim, Label

        answer = Answer(id="a1", question="Tell me about metformin.", response="Metformin treats diabetes.")
        server = await mockserver.start_mock(config)
        session = make_session(limits.max_in_flight, 30.0)
        try:
            subject = Lane("mock", limits, rng=random.Random(3))
            cfg = EndpointConfig(base_url=server.url, model="mock", api_key_env="")
            checker = OpenAIChecker(cfg, session, subject)
            async with asyncio.TaskGroup() as tg:
                tasks = [
                    tg.create_task(checker.check(Claim(text=f"Metformin fact {i}.", index=i), answer))
                    for i in range(claims)
                ]
            errors = sum(task.result().label == Label.ERROR for task in tasks)
            return server.stats(), subject, errors
        finally:
            await session.close()
            await server.close()

    async def test_second_request_leaves_before_the_first_reply(self) -> None:
        """Unknown limits, 1 s latency, 50 slots: both checks are at the mock at once (not 1 then 1)."""
        mockserver = pytest.importorskip("bench.mockserver")
        config = mockserver.MockConfig(latency=mockserver.Latency(median_ms=1000.0))
        stats, _, errors = await self.check_all(config, 2, LaneLimits(max_in_flight=50))
        # The ramp sends the second 20 ms after the first; its reply takes 1 s.
        assert (stats["requests"], stats["in_flight_max"], errors) == (2, 2, 0)

    async def test_a_429_burst_at_start_stays_small(self) -> None:
        """Unknown 300 RPM in 1 s windows, 64 slots, 20 checks: a few 429s at most, none lost."""
        mockserver = pytest.importorskip("bench.mockserver")
        config = mockserver.MockConfig(
            rpm=300, window_s=1.0, latency=mockserver.Latency(median_ms=300.0)
        )
        stats, subject, errors = await self.check_all(config, 20, LaneLimits(max_in_flight=64))
        refused = sum(stats["rate_limited"].values())  # type: ignore[union-attr]
        lane_stats = subject.statistics()
        # Sent all at once, 59 of 64 would be refused. The ramp sends one per 1/64 s, the
        # first 429 pauses the lane and the first reply's limit (charged with what went
        # out) paces the rest; a refused request is retried, so nothing is lost.
        assert refused <= 5
        assert (lane_stats.rate_limited, lane_stats.rpm, errors) == (refused, 300.0, 0)
        assert stats["requests"] == 20 + refused
