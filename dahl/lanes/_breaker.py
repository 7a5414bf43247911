"""A lane's circuit breaker: pause on an outage, stop when the endpoint cannot work.

``permanent_limit`` permanent failures in a row, :data:`NOT_FOUND_LIMIT` replies in a row
answered 404 (a wrong base URL or model), an outage past ``max_outage_s`` or a
``FatalAPIError`` trip it; ``transient_limit`` transient failures in a row open it (one probe per
cool-down). Rate limits and connection failures are not counted.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import Literal

from dahl.lanes._clock import Clock, SystemClock
from dahl.errors import ConfigError, FatalAPIError

__all__ = ["NOT_FOUND_LIMIT", "Breaker", "BreakerSettings", "BreakerState"]

logger = logging.getLogger(__name__)

BreakerState = Literal["closed", "open", "tripped"]

#: Calls in a row whose reply was 404 Not Found that trip the breaker: every request of a lane
#: goes to one URL, so repeated 404s mean the base URL (or the model) is wrong, not one request.
NOT_FOUND_LIMIT = 5


@dataclass(frozen=True, slots=True)
class BreakerSettings:
    """Thresholds of a lane's breaker. Immutable; validates itself.

    Args:
        permanent_limit: calls in a row ending in a permanent error that trip the breaker.
        transient_limit: failed attempts in a row (transient errors) that open it.
        cooldown_s: seconds the breaker stays open before the first probe.
        cooldown_cap_s: seconds; a failed probe doubles the cool-down up to this.
        max_outage_s: seconds without a success, from the first transient failure after the last
            success, after which it trips.

    Raises:
        ConfigError: a limit not an int >= 1, or a time not a finite number > 0 (or
            ``cooldown_cap_s < cooldown_s``).
    """

    permanent_limit: int = 20
    transient_limit: int = 10
    cooldown_s: float = 1.0
    cooldown_cap_s: float = 30.0
    max_outage_s: float = 120.0

    def __post_init__(self) -> None:
        for name in ("permanent_limit", "transient_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an int >= 1, got {value!r}")
        for name in ("cooldown_s", "cooldown_cap_s", "max_outage_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not (
                math.isfinite(value) and value > 0
            ):
                raise ConfigError(f"{name} must be a finite number of seconds > 0, got {value!r}")
        if self.cooldown_cap_s < self.cooldown_s:
            raise ConfigError(f"cooldown_cap_s ({self.cooldown_cap_s}) must be >= cooldown_s ({self.cooldown_s})")


class Breaker:
    """The breaker of one lane.

    Every attempt awaits :meth:`admit`, then reports one outcome with the flag it returned:
    :meth:`succeeded`, :meth:`failed_transient`, :meth:`failed_permanent`, :meth:`tripped_by` or
    :meth:`released`.

    Args:
        name: the endpoint as named in messages (URL and model; never a key).
        settings: thresholds; ``BreakerSettings()`` by default.
        clock: time source; :class:`SystemClock` by default.
    """

    def __init__(self, name: str, settings: BreakerSettings | None = None, *, clock: Clock | None = None) -> None:
        self.name = name
        self.settings = settings if settings is not None else BreakerSettings()
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._permanent = 0
        self._not_found = 0  # 404 replies in a row
        self._transient = 0
        self._outage_since: float | None = None  # first transient failure since the last success
        self._open_until: float | None = None  # None: closed
        self._cooldown_s = self.settings.cooldown_s
        self._probing = False
        self._fatal: FatalAPIError | None = None
        self._changed = asyncio.Event()
        self.probes = 0

    @property
    def state(self) -> BreakerState:
        """``closed`` (attempts go), ``open`` (paused, probing) or ``tripped`` (stopped)."""
        if self._fatal is not None:
            return "tripped"
        return "closed" if self._open_until is None else "open"

    def __repr__(self) -> str:
        return (
            f"<Breaker {self.name!r} {self.state} permanent={self._permanent} "
            f"transient={self._transient} cooldown={self._cooldown_s:g}s probes={self.probes}>"
        )

    async def admit(self) -> bool:
        """Wait until an attempt may be sent.

        Returns:
            True when this attempt is the breaker's probe (it must report its outcome).

        Raises:
            FatalAPIError: the breaker has tripped (a fresh copy of the trip's error).
            asyncio.CancelledError: the caller was cancelled while waiting.
        """
        while True:
            fatal = self._fatal
            if fatal is not None:
                raise FatalAPIError(str(fatal), status=fatal.status)
            until = self._open_until
            if until is None:
                return False
            if self._probing:
                await self._changed.wait()
                continue
            wait_s = until - self._clock.now()
            if wait_s <= 0:
                self._probing = True
                self.probes += 1
                return True
            await self._clock.sleep(wait_s)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _end_probe(self, probe: bool) -> None:
        if probe and self._probing:
            self._probing = False
            self._notify()

    def released(self, probe: bool) -> None:
        """The attempt ended without telling whether the endpoint works (429, cancel, ...)."""
        self._end_probe(probe)

    def succeeded(self, probe: bool) -> None:
        """The attempt got a reply: every count restarts and an open breaker closes."""
        self._permanent = 0
        self._not_found = 0
        self._transient = 0
        self._outage_since = None
        self._close()
        self._end_probe(probe)

    def _close(self) -> None:
        if self._open_until is not None:
            logger.info("%s: answering again; lane resumed", self.name)
            self._open_until = None
            self._cooldown_s = self.settings.cooldown_s
            self._notify()

    def failed_transient(self, exc: BaseException, probe: bool) -> FatalAPIError | None:
        """Count a transient failure; open (or re-open) the breaker; trip it after the outage bound.

        Returns:
            The ``FatalAPIError`` to raise when the outage has lasted ``max_outage_s``, else None.
        """
        settings = self.settings
        now = self._clock.now()
        self._transient += 1
        if self._outage_since is None:
            self._outage_since = now
        elapsed = now - self._outage_since
        if elapsed >= settings.max_outage_s:
            self._end_probe(probe)
            return self._trip(FatalAPIError(
                f"{self.name}: no successful reply for {elapsed:.0f} s ({self._transient} failed attempts "
                f"in a row); stopping. Last error: {exc}",
                status=getattr(exc, "status", None),
            ))
        if probe:
            self._cooldown_s = min(settings.cooldown_cap_s, 2.0 * self._cooldown_s)
            self._open_until = now + self._cooldown_s
            logger.info("%s: probe failed (%s); next probe in %.1f s", self.name, exc, self._cooldown_s)
        elif self._open_until is None and self._transient >= settings.transient_limit:
            self._open_until = now + self._cooldown_s
            logger.warning(
                "%s: %d failed attempts in a row (last: %s); pausing the lane, probing in %.1f s",
                self.name, self._transient, exc, self._cooldown_s,
            )
        self._end_probe(probe)
        return None

    def failed_permanent(self, exc: BaseException, probe: bool) -> FatalAPIError | None:
        """Count a call that ended in a permanent error; trip after ``permanent_limit`` in a row,
        or after :data:`NOT_FOUND_LIMIT` in a row whose ``status`` is 404.

        Returns:
            The ``FatalAPIError`` to raise when the breaker trips, else None.
        """
        self._permanent += 1
        self._not_found = self._not_found + 1 if getattr(exc, "status", None) == 404 else 0
        self._transient = 0
        self._outage_since = None
        self._close()
        self._end_probe(probe)
        if self._not_found >= NOT_FOUND_LIMIT:
            return self._trip(FatalAPIError(
                f"{self.name}: {self._not_found} calls in a row were answered 404 Not Found; stopping. "
                f"Check the base URL and the model. Last error: {exc}",
                status=404,
            ))
        if self._permanent < self.settings.permanent_limit:
            return None
        return self._trip(FatalAPIError(
            f"{self.name}: {self._permanent} calls in a row failed with a permanent error and none "
            f"succeeded; stopping. Last error: {exc}",
            status=getattr(exc, "status", None),
        ))

    def tripped_by(self, exc: FatalAPIError, probe: bool) -> None:
        """Trip on an error that says the endpoint cannot work (bad key, unreachable)."""
        self._end_probe(probe)
        self._trip(exc)

    def _trip(self, exc: FatalAPIError) -> FatalAPIError:
        if self._fatal is None:
            self._fatal = exc
            logger.info("%s: stopped: %s", self.name, exc)  # raised to the caller, who presents it
            self._notify()
        return exc
