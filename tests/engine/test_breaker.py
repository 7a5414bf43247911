"""The lane's breaker on virtual time: dead endpoints cost a bounded number of requests."""

from __future__ import annotations

import asyncio
import random

import pytest

from dahl.lanes._breaker import NOT_FOUND_LIMIT, Breaker, BreakerSettings
from dahl.lanes._clock import run_in_virtual_time
from dahl.lanes._lane import Lane, LaneLimits
from dahl.lanes._retry import RetryPolicy
from dahl.errors import (
    ConfigError,
    ConnectError,
    FatalAPIError,
    PermanentAPIError,
    TransientAPIError,
)


def now() -> float:
    """Virtual time of the running loop, in seconds."""
    return asyncio.get_running_loop().time()


class Reply:
    """A reply with no usage and no headers."""

    usage_tokens = None
    headers: dict[str, str] = {}


class Endpoint:
    """An attempt function: after ``latency_s``, raises ``error`` until virtual time ``healthy_at`` (never by default)."""

    def __init__(self, error: Exception, healthy_at: float = float("inf"), latency_s: float = 0.0) -> None:
        self.error = error
        self.healthy_at = healthy_at
        self.latency_s = latency_s
        self.sent: list[float] = []

    async def __call__(self) -> Reply:
        self.sent.append(now())
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if now() >= self.healthy_at:
            return Reply()
        raise self.error


def make_lane(breaker: BreakerSettings | None = None, **policy: float) -> Lane:
    """A lane with rpm set (no start-up probe), a seeded rng and the given policy overrides."""
    return Lane(
        "http://api.test/v1|key-1a2b|m",
        LaneLimits(rpm=600_000, max_in_flight=8),
        policy=RetryPolicy(**policy),  # type: ignore[arg-type]
        rng=random.Random(5),
        breaker=breaker,
    )


async def workers(lane: Lane, endpoint: Endpoint, n_workers: int, n_calls: int) -> tuple[int, int, BaseException | None]:
    """``n_workers`` claim workers sharing ``n_calls`` calls, as the pipeline runs them.

    A call failing with an AdapterError other than FatalAPIError is a claim labelled
    error (the worker takes the next); FatalAPIError stops every worker.

    Returns:
        (calls that succeeded, calls that failed, the FatalAPIError that stopped the run or None).
    """
    todo = list(range(n_calls))
    done = [0, 0]
    stopped: list[BaseException] = []

    async def worker() -> None:
        while todo and not stopped:
            todo.pop()
            try:
                await lane.call(endpoint, estimated_tokens=0)
            except FatalAPIError as exc:
                stopped.append(exc)
                return
            except (TransientAPIError, PermanentAPIError):
                done[1] += 1
            else:
                done[0] += 1

    async with asyncio.TaskGroup() as tg:
        for _ in range(n_workers):
            tg.create_task(worker())
    return done[0], done[1], stopped[0] if stopped else None


class TestBreakerSettings:
    @pytest.mark.parametrize(
        "kwargs",
        [{"permanent_limit": 0}, {"transient_limit": 1.5}, {"cooldown_s": 0}, {"max_outage_s": float("nan")},
         {"cooldown_s": 10, "cooldown_cap_s": 5}, {"max_outage_s": True}],
        ids=["permanent-0", "transient-float", "cooldown-0", "outage-nan", "cap-below-cooldown", "outage-bool"],
    )
    def test_rejects_nonsense(self, kwargs: dict[str, object]) -> None:
        """Limits below 1 and times not finite and > 0 are ConfigErrors."""
        with pytest.raises(ConfigError):
            BreakerSettings(**kwargs)  # type: ignore[arg-type]

    def test_defaults(self) -> None:
        """Defaults: trip after 20 permanent failures, open after 10 transient ones, 1-30 s cool-down, 120 s outage."""
        s = BreakerSettings()
        assert (s.permanent_limit, s.transient_limit, s.cooldown_s, s.cooldown_cap_s, s.max_outage_s) == (
            20, 10, 1.0, 30.0, 120.0)


class TestPermanentFailures:
    def test_twenty_permanent_failures_in_a_row_trip(self) -> None:
        """A 400 on every call: 20 calls fail one by one, the 20th raises FatalAPIError with the last message; nothing more is sent."""
        endpoint = Endpoint(PermanentAPIError("HTTP 400: bad parameter 'x'", status=400))

        async def main() -> tuple[int, int, BaseException | None, int]:
            lane = make_lane()
            ok, failed, fatal = await workers(lane, endpoint, 1, 500)
            with pytest.raises(FatalAPIError):
                await lane.call(endpoint, estimated_tokens=0)  # a later call sends nothing
            return ok, failed, fatal, len(endpoint.sent)

        ok, failed, fatal, sent = run_in_virtual_time(main)
        assert (ok, failed, sent) == (0, 19, 20)
        assert isinstance(fatal, FatalAPIError)
        assert str(fatal) == (
            "http://api.test/v1 (model m): 20 calls in a row failed with a permanent error and none "
            "succeeded; stopping. Last error: HTTP 400: bad parameter 'x'"
        )
        assert fatal.status == 400

    def test_five_404s_in_a_row_trip(self) -> None:
        """A 404 on every call: the 5th (NOT_FOUND_LIMIT) raises FatalAPIError naming the URL and the server's message."""
        endpoint = Endpoint(PermanentAPIError("HTTP 404 from http://api.test/v1/chat/completions: Not Found", status=404))

        async def main() -> tuple[int, int, BaseException | None, int]:
            lane = make_lane()
            ok, failed, fatal = await workers(lane, endpoint, 1, 50)
            return ok, failed, fatal, len(endpoint.sent)

        ok, failed, fatal, sent = run_in_virtual_time(main)
        assert NOT_FOUND_LIMIT == 5
        assert (ok, failed, sent) == (0, 4, 5)
        assert isinstance(fatal, FatalAPIError) and fatal.status == 404
        assert str(fatal) == (
            "http://api.test/v1 (model m): 5 calls in a row were answered 404 Not Found; stopping. Check the "
            "base URL and the model. Last error: HTTP 404 from http://api.test/v1/chat/completions: Not Found"
        )

    def test_another_permanent_error_between_404s_resets_their_count(self) -> None:
        """4 404s, a 400, 4 more 404s: 9 permanent failures and no trip."""
        class Mixed:
            def __init__(self) -> None:
                self.n = 0

            async def __call__(self) -> Reply:
                self.n += 1
                if self.n == 5:
                    raise PermanentAPIError("HTTP 400", status=400)
                raise PermanentAPIError("HTTP 404 from http://api.test/v1/x: Not Found", status=404)

        async def main() -> tuple[int, int, BaseException | None]:
            return await workers(make_lane(), Mixed(), 1, 9)

        assert run_in_virtual_time(main) == (0, 9, None)

    def test_a_success_between_resets_the_count(self) -> None:
        """19 permanent failures, a success, 19 more: no trip (the count restarts at a success)."""
        class Alternating:
            def __init__(self) -> None:
                self.n = 0

            async def __call__(self) -> Reply:
                self.n += 1
                if self.n == 20:
                    return Reply()
                raise PermanentAPIError("HTTP 400", status=400)

        async def main() -> int:
            lane = make_lane()
            attempt = Alternating()
            failures = 0
            for _ in range(39):
                try:
                    await lane.call(attempt, estimated_tokens=0)
                except PermanentAPIError:
                    failures += 1
            return failures

        assert run_in_virtual_time(main) == 38


class TestFatalErrors:
    def test_auth_error_stops_the_lane_at_once(self) -> None:
        """A FatalAPIError (401) from one attempt is raised at once and every later call sends nothing."""
        endpoint = Endpoint(
            FatalAPIError("HTTP 401 from http://api.test/v1/chat/completions: bad key", status=401), latency_s=0.1
        )

        async def main() -> tuple[int, int, BaseException | None, int]:
            lane = make_lane()
            ok, failed, fatal = await workers(lane, endpoint, 8, 1000)
            return ok, failed, fatal, len(endpoint.sent)

        ok, failed, fatal, sent = run_in_virtual_time(main)
        assert (ok, failed) == (0, 0)
        assert sent == 8  # the first attempt of each worker, in flight together; nothing after
        assert isinstance(fatal, FatalAPIError) and fatal.status == 401

    def test_refused_connection_is_fatal_after_the_retry_budget(self) -> None:
        """ConnectError on every attempt: the first call's 6 attempts, then FatalAPIError 'cannot connect'; nothing more."""
        endpoint = Endpoint(ConnectError("cannot connect to http://127.0.0.1:9/v1/chat/completions: refused"))

        async def main() -> tuple[int, int, BaseException | None, int, float]:
            lane = make_lane()
            ok, failed, fatal = await workers(lane, endpoint, 1, 1000)
            return ok, failed, fatal, len(endpoint.sent), now()

        ok, failed, fatal, sent, ended = run_in_virtual_time(main)
        assert (ok, failed, sent) == (0, 0, 6)
        assert str(fatal).startswith("cannot connect to http://127.0.0.1:9/v1/chat/completions: refused (6 attempts in ")
        assert ended < 0.5 + 1 + 2 + 4 + 8  # the backoff ceilings of 5 retries: no breaker pause on top


class TestOutage:
    def test_outage_pauses_the_lane_and_stops_after_the_bound(self) -> None:
        """500 on every call, 8 workers: requests are bounded (open after 10, probes 1, 2, 4, ... 30 s apart) and the run stops at 120 s."""
        endpoint = Endpoint(TransientAPIError("HTTP 500: Mock fault 500.", status=500))

        async def main() -> tuple[BaseException | None, list[float], float]:
            lane = make_lane()
            _, _, fatal = await workers(lane, endpoint, 8, 100_000)
            return fatal, endpoint.sent, now()

        fatal, sent, ended = run_in_virtual_time(main)
        assert isinstance(fatal, FatalAPIError) and fatal.status == 500
        assert str(fatal).startswith("http://api.test/v1 (model m): no successful reply for 121 s (")
        assert str(fatal).endswith("; stopping. Last error: HTTP 500: Mock fault 500.")
        # Before the breaker opens: the 10 failures that open it and the attempts already
        # past it (8 workers); then one probe per cool-down: 1+2+4+8+16+30+30+30 s = 121 s.
        opened = sent[9]
        probes = [t for t in sent if t > opened + 0.5]
        assert len(probes) == 8
        gaps = [b - a for a, b in zip(probes, probes[1:])]
        assert gaps == pytest.approx([2, 4, 8, 16, 30, 30, 30], abs=1e-6)
        assert len(sent) <= 10 + 8 + 8
        assert ended == pytest.approx(probes[-1])

    def test_probes_keep_their_schedule_with_one_call_at_a_time(self) -> None:
        """One call at a time: its retry backoff does not delay the probes; the run stops 121 s after the first failure."""
        endpoint = Endpoint(TransientAPIError("HTTP 500", status=500))

        async def main() -> tuple[BaseException | None, list[float], float]:
            lane = make_lane()
            _, _, fatal = await workers(lane, endpoint, 1, 100)
            return fatal, endpoint.sent, now()

        fatal, sent, ended = run_in_virtual_time(main)
        assert isinstance(fatal, FatalAPIError)
        opened = sent[9]
        gaps = [b - a for a, b in zip(sent[9:], sent[10:])]
        assert gaps == pytest.approx([1, 2, 4, 8, 16, 30, 30, 30], abs=1e-6)
        assert ended == pytest.approx(opened + 121)

    def test_outage_ends_when_a_probe_succeeds(self) -> None:
        """500s until t=5 s: the lane pauses, the probe after the outage succeeds and every call then succeeds."""
        endpoint = Endpoint(TransientAPIError("HTTP 500", status=500), healthy_at=5.0)

        async def main() -> tuple[int, int, BaseException | None, int, str]:
            lane = make_lane()
            ok, failed, fatal = await workers(lane, endpoint, 8, 200)
            return ok, failed, fatal, len(endpoint.sent), lane.limiter.snapshot().breaker

        ok, failed, fatal, sent, state = run_in_virtual_time(main)
        assert fatal is None and state == "closed"
        assert ok + failed == 200
        assert failed == 0  # the calls held during the pause kept their retries
        # 200 successes plus the failures before t=5 s: the 10 that opened the breaker,
        # those already admitted, and the probes at ~1, 3 s.
        assert 200 < sent <= 200 + 10 + 8 + 3

    def test_a_60_s_outage_costs_a_few_requests_and_no_claim(self) -> None:
        """500s for 60 s, then healthy, 2 calls at a time: 15 failed requests (not thousands), and no call fails."""
        endpoint = Endpoint(TransientAPIError("HTTP 500", status=500), healthy_at=60.0, latency_s=0.01)

        async def main() -> tuple[int, int, BaseException | None, list[float]]:
            lane = make_lane()
            ok, failed, fatal = await workers(lane, endpoint, 2, 200)
            return ok, failed, fatal, endpoint.sent

        ok, failed, fatal, sent = run_in_virtual_time(main)
        assert (ok, failed, fatal) == (200, 0, None)  # calls out of retries wait for the outage to end
        during = [t for t in sent if t < 60.0]
        # 10 failures open the breaker (5 attempts of each of the 2 calls), then probes at ~1, 3, 7, 15, 31 s.
        assert len(during) == 10 + 5
        assert len(sent) == len(during) + 200

    def test_outage_bound_is_a_setting(self) -> None:
        """max_outage_s=10: a 500 on every call stops at the first failure 10 s or more after the first."""
        endpoint = Endpoint(TransientAPIError("HTTP 503", status=503))

        async def main() -> tuple[BaseException | None, float]:
            lane = make_lane(BreakerSettings(max_outage_s=10.0))
            _, _, fatal = await workers(lane, endpoint, 4, 100_000)
            return fatal, now()

        fatal, ended = run_in_virtual_time(main)
        assert isinstance(fatal, FatalAPIError)
        assert 10.0 <= ended <= 10.0 + 8.0  # at most one cool-down (1+2+4+8 s probes) past the bound


class TestBreakerDirect:
    def test_probe_cancelled_lets_another_probe_go(self) -> None:
        """A probe whose attempt is cancelled releases its turn: the next waiter becomes the probe."""
        async def main() -> tuple[bool, bool, str]:
            breaker = Breaker("e", BreakerSettings(transient_limit=1, cooldown_s=1.0))
            breaker.failed_transient(TransientAPIError("500"), probe=False)
            first = await breaker.admit()  # after 1 s
            breaker.released(first)
            second = await breaker.admit()
            return first, second, breaker.state

        assert run_in_virtual_time(main) == (True, True, "open")
