"""The Redis limiter backend against a real redis-server on loopback (tests/conftest.py ``redis_server``).

Two limiters built by two factories stand for two shards: each has its own client and connections, and
they meet only in Redis.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dahl.errors import CostCapReached
from dahl.lanes._breaker import BreakerSettings
from dahl.lanes._clock import SystemClock
from dahl.lanes._lane import Lane, LaneLimits
from dahl.lanes._limiter import LimiterFactory
from dahl.lanes._memory import MemoryLimiters

KEY = "http://127.0.0.1/v1|key-id|mock"


def limiter(factory: LimiterFactory, limits: LaneLimits | None = None) -> Any:
    limits = limits or LaneLimits()
    return factory(KEY, limits, breaker=BreakerSettings(), spread_s=0.0, clock=SystemClock(), rng=random.Random(1))


def shards(kind: str, url: str, n: int = 2) -> list[LimiterFactory]:
    """``n`` factories, as ``n`` processes of one run would build them."""
    if kind == "memory":
        return [MemoryLimiters() for _ in range(n)]
    from dahl.lanes._redis import RedisLimiters

    return [RedisLimiters(url + "?run=t", shards=n) for _ in range(n)]


async def close(factories: list[Any]) -> None:
    for factory in factories:
        if hasattr(factory, "aclose"):
            await factory.aclose()


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_two_shards_share_one_rate(kind: str, redis_server: Any) -> None:
    """Two lanes at 600 RPM each, one mock admitting 12 per 1 s window (720 RPM): in memory the two
    together go past it (429s); through Redis they share one 600 RPM pace and no request is refused."""
    from bench import mockserver
    from dahl.adapters._http import make_session
    from dahl.adapters._openai import OpenAIChecker
    from dahl.config import EndpointConfig
    from dahl.records import Answer, Claim, Label

    server = await mockserver.start_mock(mockserver.MockConfig(rpm=720, window_s=1.0))
    factories = shards(kind, redis_server.url)
    limits = LaneLimits(rpm=600, max_in_flight=8)
    session = make_session(8, 30.0)
    try:
        cfg = EndpointConfig(base_url=server.url, model="mock", api_key_env="")
        answer = Answer(id="a1", question="Tell me about metformin.", response="Metformin treats diabetes.")
        checkers = [OpenAIChecker(cfg, session, Lane(KEY, limits, rng=random.Random(i), limiter=limiter(f, limits)))
                    for i, f in enumerate(factories)]
        async with asyncio.TaskGroup() as tg:
            tasks = [tg.create_task(c.check(Claim(text=f"Metformin fact {i}.", index=i), answer))
                     for c in checkers for i in range(12)]
        stats = server.stats()
    finally:
        await session.close()
        await server.close()
        await close(factories)
    refused = sum(stats["rate_limited"].values())
    assert sum(t.result().label == Label.ERROR for t in tasks) == 0
    if kind == "memory":
        assert refused > 0
    else:
        assert (refused, stats["requests"]) == (0, 24)


async def test_admissions_are_paced_by_the_server_clock(redis_server: Any) -> None:
    """600 RPM shared by two clients: the script's admissions are 100 ms apart on Redis's clock."""
    from redis.asyncio import Redis

    factories = shards("redis", redis_server.url)
    limiters = [limiter(f, LaneLimits(rpm=600)) for f in factories]
    times: list[float] = []
    client = Redis.from_url(redis_server.url)

    async def take(lim: Any) -> None:
        for _ in range(6):
            await lim.acquire(1, 0)
            seconds, micros = await client.time()
            times.append(seconds + micros / 1e6)

    try:
        await asyncio.gather(*(take(lim) for lim in limiters))
        pace = float(await client.get(f"dahl:lane:{KEY}:requests"))
    finally:
        await client.aclose()
        await close(factories)
    times.sort()
    # 12 admissions advance the shared pace by 12 x 100 ms from the first: never more than one per 100 ms.
    assert pace / 1000 - times[0] == pytest.approx(1.2, abs=0.05)
    assert times[-1] - times[0] >= 1.1 - 0.01


@pytest.mark.parametrize(("refund", "pace_ms"), [(True, 200.0), (False, 1000.0)])
async def test_tokens_reserve_the_estimate_and_refund_from_usage(refund: bool, pace_ms: float,
                                                                 redis_server: Any) -> None:
    """60,000 TPM (1 ms per token): an attempt of 1,000 tokens moves the shared token pace 1,000 ms ahead;
    its reported usage of 200 gives 800 back when the endpoint refunds; a request over the TPM fails."""
    from redis.asyncio import Redis

    from dahl.errors import PermanentAPIError

    (factory,) = shards("redis", redis_server.url, 1)
    lim = limiter(factory, LaneLimits(tpm=60_000, refund_tokens=refund))
    client = Redis.from_url(redis_server.url)
    try:
        reserved = await lim.acquire(1, 1000)
        start = float(await client.get(f"dahl:lane:{KEY}:tokens")) - 1000.0  # the server time it was taken
        await lim.settle(reserved, 200)
        assert reserved.tokens == 1000
        assert float(await client.get(f"dahl:lane:{KEY}:tokens")) - start == pace_ms
        with pytest.raises(PermanentAPIError, match="exceeds the token budget"):
            await lim.acquire(1, 60_001)
    finally:
        await client.aclose()
        await close([factory])


async def test_a_pause_in_one_shard_holds_the_other(redis_server: Any) -> None:
    """A Retry-After seen by shard 0 pauses shard 1's next acquire (the script says: paused)."""
    a, b = shards("redis", redis_server.url)
    first, second = limiter(a, LaneLimits(rpm=600)), limiter(b, LaneLimits(rpm=600))
    try:
        await first.pause_until(SystemClock().now() + 30.0)
        wait_ms, paused = await b.run_script("acquire", second._keys, [100.0, 1, 0.0, 0])
        assert int(paused) == 1 and 29_000 < float(wait_ms) <= 30_000
    finally:
        await close([a, b])


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_the_spend_cap_is_shared(kind: str, redis_server: Any) -> None:
    """A $1 cap: shard 0 reserves $0.6; shard 1's $0.6 waits for it and, once $0.6 is spent, stops the
    run. Two in-memory ledgers each let their $0.6 through."""
    a, b = shards(kind, redis_server.url)
    first, second = limiter(a), limiter(b)
    try:
        await first.reserve_spend(0.6, 1.0)
        waiting = asyncio.create_task(second.reserve_spend(0.6, 1.0))
        await asyncio.sleep(0.1)
        if kind == "memory":
            assert waiting.done() and waiting.exception() is None
            return
        assert not waiting.done()
        await first.settle_spend(0.6, 0.6)
        with pytest.raises(CostCapReached) as stop:
            await waiting
        assert (stop.value.spent_usd, stop.value.next_usd) == (0.6, 0.6)
        with pytest.raises(CostCapReached):  # the first shard is stopped as well
            await first.reserve_spend(0.01, 1.0)
    finally:
        await close([a, b])


async def test_a_trip_in_one_shard_stops_the_other(redis_server: Any) -> None:
    """A fatal error tripping shard 0's lane: shard 1's next admit raises it."""
    from dahl.errors import FatalAPIError

    a, b = shards("redis", redis_server.url)
    try:
        await limiter(a).trip(FatalAPIError("bad key at the mock"))
        with pytest.raises(FatalAPIError, match="bad key at the mock"):
            await limiter(b).admit()
    finally:
        await close([a, b])


async def test_unreachable_redis_falls_back_to_a_share_once(redis_server: Any,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """No server at the URL: acquires go on in memory at 1/2 of 600 RPM, with one warning."""
    from dahl.lanes._redis import RedisLimiters

    redis_server.kill()
    factory = RedisLimiters(redis_server.url, shards=2)
    lim = limiter(factory, LaneLimits(rpm=600))
    with caplog.at_level(logging.WARNING, logger="dahl.lanes._redis"):
        for _ in range(3):
            await lim.acquire(1, 0)
            await lim.settle(await lim.acquire(1, 0), 5)
    await factory.aclose()
    assert [r.getMessage().count("1/2 of the limits") for r in caplog.records] == [1]
    assert lim.snapshot().rpm == 300.0


async def test_no_window_of_the_shared_token_pace_takes_more_than_its_cap(redis_server: Any) -> None:
    """60,000 TPM (1,000 tokens a second): 900 tokens, then 300 tokens wait for the first to leave the 1 s window
    although the pace alone would let them go after 0.9 s; the window log never holds more than 1,000."""
    from redis.asyncio import Redis

    from dahl.lanes._redis import RedisLimiters

    factories = [RedisLimiters(redis_server.url + "?run=t", shards=2) for _ in range(2)]
    a, b = (limiter(f, LaneLimits(tpm=60_000)) for f in factories)
    client = Redis.from_url(redis_server.url)
    log = f"dahl:lane:{KEY}:tokens:log"
    try:
        await a.acquire(0, 900)
        first = (await client.zrange(log, 0, -1, withscores=True))[0][1]
        await b.acquire(0, 50)  # the pace: 0.9 s after the first; the window: 950 of 1,000
        await b.acquire(0, 300)  # the pace would allow it at 0.95 s; the window not before the 900 leave, at 1 s
        entries = await client.zrange(log, 0, -1, withscores=True)
        assert [int(m.split(b":")[0]) for m, _ in entries] == [50, 300]  # the 900 left the window first
        assert entries[-1][1] - first >= 1000.0  # Redis milliseconds
        assert sum(int(m.split(b":")[0]) for m, _ in entries) <= 1000
        assert float(await client.get(f"dahl:lane:{KEY}:tokens:logged")) == 350.0  # the log's running total
        await client.delete(log)  # the log expired, its total not yet (their expiry times may differ)
        await a.acquire(0, 10)  # an empty window: no wait, and the total starts again from the request
        assert float(await client.get(f"dahl:lane:{KEY}:tokens:logged")) == 10.0
    finally:
        await client.aclose()
        await close(factories)


def test_a_redis_password_is_never_shown() -> None:
    """The URL in warnings and reprs hides the password; a URL of the wrong scheme is refused without it."""
    from dahl.errors import ConfigError
    from dahl.lanes._redis import RedisLimiters

    factory = RedisLimiters("redis://dahl:s3cret@127.0.0.1:6379/0?run=r")
    assert factory.url == "redis://dahl:***@127.0.0.1:6379/0" and "s3cret" not in repr(factory)
    with pytest.raises(ConfigError) as refused:
        RedisLimiters("http://:s3cret@127.0.0.1:6379/0")
    assert "s3cret" not in str(refused.value) and ":***@127.0.0.1:6379" in str(refused.value)


class TestReconnect:
    def test_one_failed_try_doubles_the_wait_once(self) -> None:
        """Failures during a wait change nothing; each failed try after it doubles the wait, to 30 s at most;
        an answer ends the outage and resets the wait."""
        from dahl.lanes._redis import Reconnect

        now = [100.0]
        link = Reconnect(retry_s=1.0, clock=lambda: now[0])
        error = ConnectionError("refused")
        assert link.usable() and link.lose(error) and link.lost is error
        assert [link.lose(error) for _ in range(63)] == [False] * 63  # the other calls in flight
        assert not link.usable() and link.wait_s == 2.0
        waits = []
        for _ in range(6):
            now[0] += link.wait_s if waits else 1.0
            assert link.usable()
            assert link.lose(error) is False  # the outage goes on: no second warning
            waits.append(link.wait_s)
        assert waits == [4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
        assert link.answered() and link.lost is None and link.wait_s == 1.0 and not link.answered()


async def test_a_lost_redis_paces_the_shards_again_after_the_retry_wait(redis_server: Any,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Redis killed: the lane paces alone at 1/2 of 600 RPM; started again, the next acquire after the
    retry wait (0 s here) advances the shared pace in Redis again; the budget stays on the share."""
    from redis.asyncio import Redis

    from dahl.lanes._redis import RedisLimiters

    factory = RedisLimiters(redis_server.url + "?run=t", shards=2, retry_s=0.0)
    lim = limiter(factory, LaneLimits(rpm=600))
    client = Redis.from_url(redis_server.url)
    pace = f"dahl:lane:{KEY}:requests"
    try:
        with caplog.at_level(logging.WARNING, logger="dahl.lanes._redis"):
            await lim.acquire(1, 0)
            assert await client.exists(pace) == 1
            redis_server.kill()
            await lim.acquire(1, 0)
            assert factory.lost is not None and lim.snapshot().rpm == 300.0
            redis_server.start()  # empty: nothing persists
            await lim.acquire(1, 0)
            assert factory.lost is None and await client.exists(pace) == 1
            await lim.reserve_spend(0.5, 10.0)
        assert factory.ledger.reserved_usd == 0.5
        assert await client.exists("dahl:run:t:spend:reserved") == 0  # spent alone since the loss
        messages = [r.getMessage() for r in caplog.records if r.name == "dahl.lanes._redis"]
        assert len(messages) == 2 and "lost" in messages[0] and "answers again" in messages[1]
    finally:
        await client.aclose()
        await factory.aclose()


def test_redis_killed_mid_run_loses_no_verdict(tmp_path: Path, mocks: Any, redis_server: Any,
                                               caplog: pytest.LogCaptureFixture) -> None:
    """dahl score --coord, redis-server killed after the first answer: the run finishes every answer with
    no error verdict and the lines of a run without --coord, and warns once."""
    from dahl import AdapterSettings, EndpointConfig, ScoreConfig
    from dahl.run._score import score_async

    url = mocks.start("--latency-ms", "20")
    answers = tmp_path / "a.jsonl"
    with answers.open("w") as f:
        for i in range(20):
            f.write(json.dumps({"id": f"a{i}", "question": "q", "response": f"Drug {i} lowers blood pressure. "
                                f"It was approved in {1990 + i}."}) + "\n")
    cfg = EndpointConfig(base_url=url, model="mock", api_key_env="", max_in_flight=2, rpm=1200)
    config = ScoreConfig(inputs=(answers,), out_dir=tmp_path / "out", coord=redis_server.url, use_cache=False,
                         adapters=AdapterSettings(splitter="openai", checker="openai", split_endpoint=cfg,
                                                  check_endpoint=cfg))
    done: list[str] = []

    def on_result(result: Any) -> None:
        done.append(result.id)
        if len(done) == 1:
            redis_server.kill()

    with caplog.at_level(logging.WARNING, logger="dahl.lanes._redis"):
        report = asyncio.run(score_async(config, on_result=on_result))
    lines = (tmp_path / "out" / "answers.jsonl").read_text().splitlines()
    labels = [c["label"] for line in lines for c in json.loads(line)["claims"]]
    assert report.counters.answers_done == 20 and len(labels) > 20 and "error" not in labels
    assert len([r for r in caplog.records if "lost" in r.getMessage()]) == 1
    alone = asyncio.run(score_async(replace(config, coord=None, out_dir=tmp_path / "alone")))
    assert alone.counters.answers_done == 20
    assert sorted(lines) == sorted((tmp_path / "alone" / "answers.jsonl").read_text().splitlines())
