"""Fixed-window request and token budgets of the mock server, with OpenAI-style headers."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Admission", "RateWindow", "format_duration", "format_seconds"]


def format_seconds(seconds: float) -> str:
    """Render seconds with at most 3 decimals and no trailing zeros, e.g. ``"0.35"``, ``"2"``."""
    text = f"{max(seconds, 0.0):.3f}".rstrip("0").rstrip(".")
    return text or "0"


def format_duration(seconds: float) -> str:
    """Render a duration the way OpenAI's ``x-ratelimit-reset-*`` headers do.

    Args:
        seconds: non-negative duration in seconds.

    Returns:
        ``"350ms"`` below one second (milliseconds rounded up), ``"1.5s"`` below a
        minute, ``"6m0s"`` from a minute on.
    """
    seconds = max(seconds, 0.0)
    if seconds < 1.0:
        return f"{math.ceil(seconds * 1000)}ms"
    if seconds < 60.0:
        return f"{format_seconds(seconds)}s"
    minutes = int(seconds // 60)
    return f"{minutes}m{format_seconds(seconds - 60 * minutes)}s"


@dataclass(frozen=True)
class Admission:
    """Outcome of asking a :class:`RateWindow` to admit one request.

    Attributes:
        admitted: True when the request fits both budgets (and was charged).
        reason: ``"requests"`` or ``"tokens"`` when refused, else None.
        too_large: True when the request's tokens exceed a whole window's budget.
        reset_s: seconds until the current window ends.
        headers: ``x-ratelimit-*`` headers describing the budgets after this decision.
    """

    admitted: bool
    reason: str | None
    too_large: bool
    reset_s: float
    headers: dict[str, str]


class RateWindow:
    """Request and token budgets that refill at fixed window boundaries.

    Windows are aligned to the instant the object is created: window ``k`` spans
    ``[t0 + k * window_s, t0 + (k + 1) * window_s)``. A refused request is not charged.

    Args:
        requests: requests admitted per window, or None for no request limit.
        tokens: tokens admitted per window, or None for no token limit.
        window_s: window length in seconds (> 0).
        clock: monotonic clock in seconds; injectable for tests.
    """

    def __init__(
        self,
        requests: int | None,
        tokens: int | None,
        window_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._requests = requests
        self._tokens = tokens
        self._window_s = window_s
        self._clock = clock
        self._t0 = clock()
        self._index = 0
        self._used_requests = 0
        self._used_tokens = 0

    def __repr__(self) -> str:
        return (
            f"RateWindow(requests {self._used_requests}/{self._requests}, "
            f"tokens {self._used_tokens}/{self._tokens} per {self._window_s} s window)"
        )

    def _roll(self) -> float:
        """Start a new window if the clock passed the boundary; return seconds to the next one."""
        now = self._clock()
        index = math.floor((now - self._t0) / self._window_s)
        if index != self._index:
            self._index = index
            self._used_requests = 0
            self._used_tokens = 0
        return self._t0 + (index + 1) * self._window_s - now

    def admit(self, tokens: int) -> Admission:
        """Charge one request of ``tokens`` tokens if both budgets allow it.

        Args:
            tokens: prompt estimate + max_tokens of the request.

        Returns:
            The decision with the headers to send on the reply.
        """
        reset_s = self._roll()
        reason: str | None = None
        too_large = False
        if self._requests is not None and self._used_requests >= self._requests:
            reason = "requests"
        elif self._tokens is not None and self._used_tokens + tokens > self._tokens:
            reason = "tokens"
            too_large = tokens > self._tokens
        if reason is None:
            self._used_requests += 1
            self._used_tokens += tokens
        return Admission(reason is None, reason, too_large, reset_s, self._headers(reset_s))

    def _per_minute(self, per_window: int) -> int:
        return round(per_window * 60.0 / self._window_s)

    def headers(self) -> dict[str, str]:
        """Current ``x-ratelimit-*`` headers without charging anything."""
        return self._headers(self._roll())

    def _headers(self, reset_s: float) -> dict[str, str]:
        out: dict[str, str] = {}
        reset = format_duration(reset_s)
        if self._requests is not None:
            # Like OpenAI, the limit header is per minute; remaining/reset describe this window.
            out["x-ratelimit-limit-requests"] = str(self._per_minute(self._requests))
            out["x-ratelimit-remaining-requests"] = str(max(self._requests - self._used_requests, 0))
            out["x-ratelimit-reset-requests"] = reset
        if self._tokens is not None:
            out["x-ratelimit-limit-tokens"] = str(self._per_minute(self._tokens))
            out["x-ratelimit-remaining-tokens"] = str(max(self._tokens - self._used_tokens, 0))
            out["x-ratelimit-reset-tokens"] = reset
        return out
