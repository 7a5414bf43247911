"""The limiter protocol: the state a lane shares with every process calling its endpoint.

Every method but :meth:`Limiter.snapshot` is async, so a shared backend may do I/O. Times are
seconds on the lane's clock.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol

from dahl.lanes._breaker import BreakerSettings, BreakerState
from dahl.lanes._clock import Clock
from dahl.lanes._limits import LaneLimits
from dahl.lanes._retry import parse_duration_s
from dahl.errors import FatalAPIError

__all__ = [
    "Announced",
    "Limiter",
    "LimiterFactory",
    "LimiterSnapshot",
    "Outcome",
    "Reservation",
    "endpoint_name",
]

#: What one attempt told the breaker: a reply (``success``), a transient or permanent
#: failure, or nothing either way (``released``: a 429, a refused connection, a cancel).
Outcome = Literal["success", "transient", "permanent", "released"]


class Reservation(NamedTuple):
    """Units one attempt took from the buckets; :meth:`Limiter.settle` gives it back.

    Attributes:
        requests: requests taken from the RPM bucket (0 while it has no RPM limit).
        tokens: tokens taken from the TPM bucket (0 while it has no TPM limit, or none asked for).
    """

    requests: int = 0
    tokens: int = 0


class Announced(NamedTuple):
    """What a reply's ``x-ratelimit-*`` headers said.

    Attributes:
        rpm: ``x-ratelimit-limit-requests``, requests per minute; ``None`` when absent or not > 0.
        tpm: ``x-ratelimit-limit-tokens``, tokens per minute; likewise.
        requests_reset_at: clock time (seconds) the request budget resets, when none is left and
            the reset is still ahead; else ``None``.
        tokens_reset_at: likewise for the token budget.
    """

    rpm: float | None = None
    tpm: float | None = None
    requests_reset_at: float | None = None
    tokens_reset_at: float | None = None

    @classmethod
    def read(cls, headers: Mapping[str, str], *, sent_at: float, now: float) -> Announced | None:
        """Read the ``x-ratelimit-*`` headers of a reply; ``None`` when it has none.

        Args:
            headers: the reply's headers (any case).
            sent_at: clock time (seconds) the request was sent; resets are counted from it.
            now: clock time (seconds) now.
        """
        lower: dict[str, str] = {}
        for name, value in headers.items():
            name = name.lower()
            if name.startswith("x-ratelimit-"):
                lower[name] = value
        if not lower:
            return None
        read: list[float | None] = []
        for limit_name, remaining_name, reset_name in _RATELIMIT_HEADERS:
            limit = _number(lower.get(limit_name))
            read.append(limit if limit is not None and limit > 0 else None)
            remaining = _number(lower.get(remaining_name))
            reset = lower.get(reset_name)
            reset_at = None
            if remaining is not None and remaining <= 0 and reset is not None:
                reset_s = parse_duration_s(reset)
                if reset_s is not None and sent_at + reset_s > now:
                    reset_at = sent_at + reset_s
            read.append(reset_at)
        rpm, requests_reset_at, tpm, tokens_reset_at = read
        return cls(rpm, tpm, requests_reset_at, tokens_reset_at)


#: (limit, remaining, reset) header names read by ``Announced.read``, requests first.
_RATELIMIT_HEADERS = tuple(
    (f"x-ratelimit-limit-{kind}", f"x-ratelimit-remaining-{kind}", f"x-ratelimit-reset-{kind}")
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


@dataclass(frozen=True, slots=True)
class LimiterSnapshot:
    """The limiter's state as last seen (no I/O).

    Attributes:
        paused_until: clock time (seconds) the pause gate opens; ``None`` when open.
        rpm: requests per minute, ``None`` while unlimited.
        tpm: tokens per minute, ``None`` while unlimited.
        breaker: ``closed``, ``open`` (an outage: paused, probing) or ``tripped`` (stopped).
    """

    paused_until: float | None
    rpm: float | None
    tpm: float | None
    breaker: BreakerState


class Limiter(Protocol):
    """The limits, pause gate, breaker state and spend cap of one lane."""

    async def acquire(self, requests: int, tokens: int) -> Reservation:
        """Wait at the pause gate and the buckets (FIFO), then take the units of one attempt.

        Args:
            requests: requests for the RPM bucket (1 per attempt).
            tokens: tokens for the TPM bucket: prompt estimate + ``max_tokens``.

        Returns:
            What was taken (nothing from an unlimited bucket); pass it to :meth:`settle`.

        Raises:
            PermanentAPIError: ``tokens`` exceed the per-minute token budget (at once).
            asyncio.CancelledError: the caller was cancelled; nothing is held.
        """
        ...

    async def settle(
        self,
        reserved: Reservation,
        used_tokens: int | None,
        *,
        announced: Announced | None = None,
        unmetered: Reservation | None = None,
    ) -> None:
        """Account the tokens of the attempt sent with ``reserved`` and what its reply said.

        Usage above the reservation is charged; below it is given back only with
        ``LaneLimits.refund_tokens``.

        Args:
            reserved: what :meth:`acquire` returned.
            used_tokens: tokens the server reported; ``None`` when it did not say; 0 for an attempt
                that failed or was cancelled.
            announced: the reply's limits (a lower one replaces the lane's) and resets (an exhausted
                budget pauses the lane until its reset).
            unmetered: units sent before any limit was known, charged to the limits just learnt.
        """
        ...

    async def pause_until(self, t: float) -> None:
        """Hold every acquire until clock time ``t`` (seconds; a later pause is kept), buckets included."""
        ...

    async def admit(self) -> bool:
        """Wait until the breaker lets an attempt go.

        Returns:
            True when this attempt is the breaker's probe (it must report its outcome).

        Raises:
            FatalAPIError: the breaker has tripped.
            asyncio.CancelledError: the caller was cancelled while waiting.
        """
        ...

    async def report(
        self, outcome: Outcome, *, probe: bool, error: BaseException | None = None
    ) -> FatalAPIError | None:
        """Tell the breaker how an admitted attempt ended (``probe``: what :meth:`admit` returned).

        Returns:
            The ``FatalAPIError`` to raise when this outcome tripped the breaker, else ``None``.
        """
        ...

    async def trip(self, error: FatalAPIError, *, probe: bool = False) -> None:
        """Stop the lane: every later :meth:`admit` raises a copy of ``error``."""
        ...

    async def reserve_spend(self, usd: float, cap_usd: float | None) -> None:
        """Reserve a call's upper-bound price (USD) under the run's cap before it is sent.

        A call that does not fit waits for the calls in flight to settle; one that does not fit with
        nothing in flight stops the run.

        Raises:
            CostCapReached: the call cannot fit under ``cap_usd``, or an earlier one could not.
        """
        ...

    async def settle_spend(self, reserved_usd: float, spent_usd: float) -> None:
        """Release a reservation of ``reserved_usd``; charge ``spent_usd`` (USD) against the cap."""
        ...

    def snapshot(self) -> LimiterSnapshot:
        """The state as last seen, for statistics and ``repr`` (no I/O)."""
        ...


class LimiterFactory(Protocol):
    """Builds the limiter of one lane; :class:`~dahl.lanes._lane.LanePool` calls it once per lane."""

    def __call__(
        self,
        key: str,
        limits: LaneLimits,
        *,
        breaker: BreakerSettings,
        spread_s: float,
        clock: Clock,
        rng: random.Random,
    ) -> Limiter:
        """Return the limiter of lane ``key`` (``URL|key id|model``; never an API key).

        Args:
            key: the lane key.
            limits: its configured limits.
            breaker: its breaker's thresholds.
            spread_s: seconds; callers held by a pause leave a further ``uniform(0, spread_s)`` after it.
            clock: the lane's time source.
            rng: random source for the spread.
        """
        ...


def endpoint_name(key: str) -> str:
    """``"URL (model M)"`` of a lane key ``URL|key id|M``, as messages name the endpoint."""
    url, _, rest = key.partition("|")
    model = rest.rpartition("|")[2]
    return f"{url} (model {model})" if rest else url
