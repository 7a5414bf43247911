"""The retry policy: a typed decision per error, full-jitter backoff, attempt and wall-time caps.

Backoff is "Full Jitter" from M. Brooker, *Exponential Backoff And Jitter*, AWS Architecture
Blog, 2015: ``sleep = uniform(0, min(cap, base * 2 ** attempt))``.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Literal

from dahl.lanes._limits import check_positive
from dahl.errors import ConfigError, RateLimited, TransientAPIError

__all__ = ["RetryDecision", "RetryKind", "RetryPolicy", "classify", "parse_duration_s"]

RetryKind = Literal["rate_limit", "transient", "fatal"]


@dataclass(frozen=True, slots=True)
class RetryDecision:
    """What to do after one failed attempt.

    Attributes:
        kind: ``"rate_limit"`` (wait for the server's reset), ``"transient"`` (back off) or
            ``"fatal"`` (raise now).
        retry_after_s: seconds the server asked to wait (rate limits only), else ``None``.
    """

    kind: RetryKind
    retry_after_s: float | None = None


def classify(exc: BaseException) -> RetryDecision:
    """Classify an exception raised by one attempt.

    Returns:
        ``rate_limit`` for :class:`~dahl.errors.RateLimited` (with its ``retry_after_s``),
        ``transient`` for :class:`~dahl.errors.TransientAPIError`, ``fatal`` for anything else.
    """
    if isinstance(exc, RateLimited):
        after = exc.retry_after_s
        if after is not None and not (math.isfinite(after) and after >= 0):
            after = None
        return RetryDecision("rate_limit", after)
    if isinstance(exc, TransientAPIError):
        return RetryDecision("transient")
    return RetryDecision("fatal")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Caps and backoff parameters for retrying one call. Immutable; validates itself.

    Args:
        max_attempts: attempts in total, the first one included (1 = never retry).
        max_wall_s: seconds from the first attempt after which no retry is started.
        base_s: seconds; backoff ceiling of the first retry.
        cap_s: seconds; the backoff ceiling never exceeds this.
        retry_after_default_s: seconds to pause after a 429 without Retry-After.
        rate_limit_jitter_s: seconds; waiters held by a 429 pause leave a further
            ``uniform(0, rate_limit_jitter_s)`` after it.

    Raises:
        ConfigError: a value is not a positive finite number (``max_attempts`` not an int >= 1,
            ``cap_s < base_s``, negative jitter).
    """

    max_attempts: int = 6
    max_wall_s: float = 120.0
    base_s: float = 0.5
    cap_s: float = 30.0
    retry_after_default_s: float = 1.0
    rate_limit_jitter_s: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int):
            raise ConfigError(f"max_attempts must be an int, got {self.max_attempts!r}")
        if self.max_attempts < 1:
            raise ConfigError(f"max_attempts must be >= 1, got {self.max_attempts}")
        for name in ("max_wall_s", "base_s", "cap_s", "retry_after_default_s"):
            check_positive(name, getattr(self, name))
        if self.cap_s < self.base_s:
            raise ConfigError(f"cap_s ({self.cap_s}) must be >= base_s ({self.base_s})")
        jitter = self.rate_limit_jitter_s
        if isinstance(jitter, bool) or not isinstance(jitter, int | float):
            raise ConfigError(f"rate_limit_jitter_s must be a number, got {jitter!r}")
        if not math.isfinite(jitter) or jitter < 0:
            raise ConfigError(f"rate_limit_jitter_s must be finite and >= 0, got {jitter!r}")

    def backoff_s(self, attempt: int, rng: random.Random) -> float:
        """Seconds to wait before retry ``attempt + 1`` of a transient error (full jitter, Brooker 2015).

        Args:
            attempt: 0 for the first retry, 1 for the second, ...
            rng: the random source.

        Returns:
            Seconds in ``[0, min(cap_s, base_s * 2 ** attempt)]``.

        Raises:
            ValueError: ``attempt`` is negative.
        """
        if attempt < 0:
            raise ValueError(f"attempt must be >= 0, got {attempt}")
        # The exponent is clamped so huge attempt numbers cannot overflow a float.
        ceiling = min(self.cap_s, self.base_s * 2.0 ** min(attempt, 64))
        return rng.uniform(0.0, ceiling)

    def rate_limit_pause_s(self, retry_after_s: float | None) -> float:
        """Seconds to pause after a 429: ``retry_after_s`` if given, else ``retry_after_default_s``."""
        return self.retry_after_default_s if retry_after_s is None else retry_after_s


_UNIT_S = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_NUMBER = r"\d+(?:\.\d*)?|\.\d+"
_PART = re.compile(rf"({_NUMBER})(ms|us|µs|ns|h|m|s)")
_DURATION = re.compile(rf"(?:(?:{_NUMBER})(?:ms|us|µs|ns|h|m|s))+")
_BARE = re.compile(_NUMBER)


def parse_duration_s(text: str) -> float | None:
    """Parse a rate-limit reset duration into seconds.

    Accepts Go-style durations (``x-ratelimit-reset-*``: "350ms", "6m0s", "1h2m3.5s") and bare
    numbers of seconds (``Retry-After``: "0.5", "20").

    Returns:
        Seconds (>= 0), or ``None`` when ``text`` is not a duration (HTTP dates, negatives, empty).
    """
    value = text.strip().lower()
    if _BARE.fullmatch(value):
        return float(value)
    if not _DURATION.fullmatch(value):
        return None
    return sum(float(number) * _UNIT_S[unit] for number, unit in _PART.findall(value))
