"""Retry decisions, the backoff policy and reset-duration parsing."""

from __future__ import annotations

import math
import random

import pytest

from dahl.lanes._retry import RetryDecision, RetryPolicy, classify, parse_duration_s
from dahl.errors import (
    AdapterError,
    CacheError,
    ConfigError,
    OutputParseError,
    PermanentAPIError,
    QuotaExhausted,
    RateLimited,
    TransientAPIError,
)


class TestClassify:
    def test_rate_limited_carries_retry_after(self) -> None:
        """A 429 with Retry-After 2.5 s is a rate_limit decision waiting 2.5 s."""
        assert classify(RateLimited("slow down", retry_after_s=2.5)) == RetryDecision(
            "rate_limit", 2.5
        )

    def test_rate_limited_without_retry_after(self) -> None:
        """A 429 without Retry-After leaves retry_after_s None (the policy default applies)."""
        assert classify(RateLimited("slow down")) == RetryDecision("rate_limit", None)

    def test_negative_retry_after_is_ignored(self) -> None:
        """A nonsense negative Retry-After is treated as absent."""
        assert classify(RateLimited("x", retry_after_s=-3.0)).retry_after_s is None

    def test_transient(self) -> None:
        """TransientAPIError (5xx, timeout, reset) is a transient decision."""
        assert classify(TransientAPIError("502", status=502)) == RetryDecision("transient")

    @pytest.mark.parametrize(
        "exc",
        [
            PermanentAPIError("400", status=400),
            QuotaExhausted("insufficient_quota"),
            OutputParseError("not JSON", raw="{"),
            AdapterError("other"),
            CacheError("locked"),
            ValueError("bug"),
            KeyboardInterrupt(),
        ],
        ids=["permanent", "quota", "parse", "adapter", "cache", "valueerror", "keyboard"],
    )
    def test_everything_else_is_fatal(self, exc: BaseException) -> None:
        """Permanent, quota, parse and unknown errors are fatal."""
        assert classify(exc).kind == "fatal"


class TestRetryPolicy:
    def test_defaults(self) -> None:
        """Defaults: 6 attempts, 120 s wall, base 0.5 s, cap 30 s."""
        policy = RetryPolicy()
        assert (policy.max_attempts, policy.max_wall_s, policy.base_s, policy.cap_s) == (
            6,
            120.0,
            0.5,
            30.0,
        )

    @pytest.mark.parametrize(
        "kwargs",
        [
            {"max_attempts": 0},
            {"max_attempts": 2.5},
            {"max_attempts": True},
            {"max_wall_s": 0},
            {"base_s": -1},
            {"cap_s": math.inf},
            {"base_s": 10, "cap_s": 5},
            {"retry_after_default_s": math.nan},
            {"rate_limit_jitter_s": -0.1},
        ],
        ids=[
            "zero-attempts",
            "float-attempts",
            "bool-attempts",
            "zero-wall",
            "negative-base",
            "infinite-cap",
            "cap-below-base",
            "nan-default",
            "negative-jitter",
        ],
    )
    def test_rejects_nonsense(self, kwargs: dict[str, float]) -> None:
        """Invalid caps or backoff parameters raise ConfigError."""
        with pytest.raises(ConfigError):
            RetryPolicy(**kwargs)  # type: ignore[arg-type]

    def test_is_frozen(self) -> None:
        """A policy cannot be changed after it is built."""
        policy = RetryPolicy()
        with pytest.raises(AttributeError):
            policy.max_attempts = 10  # type: ignore[misc]

    @pytest.mark.parametrize(
        ("attempt", "ceiling"),
        [(0, 0.5), (1, 1.0), (3, 4.0), (5, 16.0), (6, 30.0), (10_000, 30.0)],
        ids=["first", "second", "fourth", "sixth", "capped", "huge"],
    )
    def test_backoff_stays_under_the_ceiling(self, attempt: int, ceiling: float) -> None:
        """Full jitter draws from [0, min(30, 0.5 * 2**attempt)] and reaches most of it."""
        rng = random.Random(1)
        draws = [RetryPolicy().backoff_s(attempt, rng) for _ in range(2000)]
        assert min(draws) >= 0.0
        assert max(draws) <= ceiling
        assert max(draws) > 0.99 * ceiling
        # Uniform on [0, c] has mean c/2; 2000 draws give a standard error of c/155.
        assert sum(draws) / len(draws) == pytest.approx(ceiling / 2, rel=0.05)

    def test_backoff_is_reproducible_with_a_seed(self) -> None:
        """The same seed gives the same backoff sequence."""
        policy = RetryPolicy()
        first = [policy.backoff_s(i, random.Random(42)) for i in range(5)]
        again = [policy.backoff_s(i, random.Random(42)) for i in range(5)]
        assert first == again

    def test_negative_attempt_is_an_error(self) -> None:
        """backoff_s(-1) is a ValueError."""
        with pytest.raises(ValueError):
            RetryPolicy().backoff_s(-1, random.Random(0))

    def test_rate_limit_pause(self) -> None:
        """The 429 pause is the server's Retry-After, else the 1 s default."""
        policy = RetryPolicy()
        assert policy.rate_limit_pause_s(7.0) == 7.0
        assert policy.rate_limit_pause_s(None) == 1.0


class TestParseDuration:
    @pytest.mark.parametrize(
        ("text", "seconds"),
        [
            ("1s", 1.0),
            ("350ms", 0.35),
            ("20ms", 0.02),
            ("6m0s", 360.0),
            ("1h2m3.5s", 3723.5),
            ("0.5s", 0.5),
            ("0.5", 0.5),
            ("20", 20.0),
            (" 2s ", 2.0),
            ("1.5m", 90.0),
            ("100us", 1e-4),
        ],
    )
    def test_parses(self, text: str, seconds: float) -> None:
        """Go-style durations and bare seconds parse to seconds."""
        assert parse_duration_s(text) == pytest.approx(seconds)

    @pytest.mark.parametrize(
        "text", ["", "-1", "5x", "s", "1s2", "Wed, 21 Oct 2015 07:28:00 GMT"]
    )
    def test_rejects(self, text: str) -> None:
        """Anything that is not a non-negative duration gives None."""
        assert parse_duration_s(text) is None
