"""The Redis store backend and its leases against a real redis-server (tests/conftest.py ``redis_server``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from dahl import AdapterSettings, EndpointConfig, ScoreConfig
from dahl.run._score import score_async


def config(tmp_path: Path, url: str, name: str, coord: str | None) -> ScoreConfig:
    answers = tmp_path / "a.jsonl"
    if not answers.exists():
        with answers.open("w") as f:
            for i in range(12):
                f.write(json.dumps({"id": f"a{i}", "question": f"What does drug {i // 2} do?", "response":
                                    f"Drug {i // 2} lowers blood pressure. It was approved in {1990 + i}."}) + "\n")
    cfg = EndpointConfig(base_url=url, model="mock", api_key_env="", max_in_flight=4)
    return ScoreConfig(inputs=(answers,), out_dir=tmp_path / name / "out", cache_dir=tmp_path / name / "cache",
                       coord=coord, adapters=AdapterSettings(splitter="openai", checker="openai",
                                                             split_endpoint=cfg, check_endpoint=cfg))


@pytest.mark.parametrize("coord", [False, True])
def test_a_claim_in_two_shards_is_checked_once(coord: bool, tmp_path: Path, mocks: Any, redis_server: Any) -> None:
    """Two runs at once over the same answers, each with its own cache folder: through Redis (store and
    leases) they make the calls of one run between them, no more; alone, each makes them all."""
    alone_url, url = mocks.start("--latency-ms", "20"), mocks.start("--latency-ms", "20")
    asyncio.run(score_async(config(tmp_path, alone_url, "alone", None)))
    one_run = mocks.stats(alone_url)
    assert one_run["check"] > 12

    async def both() -> list[Any]:
        return await asyncio.gather(*(score_async(config(tmp_path, url, f"shard{i}", redis_server.url if coord
                                                         else None)) for i in range(2)))

    reports = asyncio.run(both())
    stats = mocks.stats(url)
    calls = (stats["split"], stats["check"])
    assert calls == ((one_run["split"], one_run["check"]) if coord else (2 * one_run["split"], 2 * one_run["check"]))
    assert [r.counters.answers_done for r in reports] == [12, 12]
    def verdicts(name: str) -> list[Any]:  # the input hash names the mock's URL
        lines = [json.loads(line) for line in (tmp_path / name / "out" / "answers.jsonl").read_text().splitlines()]
        return sorted(({k: v for k, v in line.items() if k != "input_hash"} for line in lines), key=str)

    assert verdicts("shard0") == verdicts("shard1") == verdicts("alone")


async def test_a_lease_left_by_a_dead_shard_is_taken_over(tmp_path: Path, redis_server: Any) -> None:
    """A lease whose holder stopped renewing it: the next shard waits for it to expire, then runs the call."""
    from dahl.cache._redis import RedisStore

    dead, live = (RedisStore(tmp_path / n, redis_server.url, lease_s=0.3, poll_s=0.02) for n in ("dead", "live"))
    try:
        await dead._claim("k")
        dead._heartbeat.cancel()  # type: ignore[union-attr]  # the shard dies holding the lease
        calls: list[int] = []

        async def work() -> int:
            calls.append(1)
            return 7

        assert await live.flight().run("k", work, lambda: None) == 7
        assert calls == [1]
    finally:
        for store in (dead, live):
            await store.aclose()
            store.close()


async def test_a_lost_redis_is_tried_again_and_rejoined(tmp_path: Path, redis_server: Any,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    """Redis killed: the store goes on locally (nothing raised); started again, the next call after the
    retry wait (0 s here) reads what another shard put there, and this shard's puts and leases reach it
    again; one warning for the loss, one for the return."""
    from redis.asyncio import Redis

    from dahl.cache._redis import RedisStore

    store = RedisStore(tmp_path / "a", redis_server.url, retry_s=0.0, lease_s=0.3)
    other = RedisStore(tmp_path / "b", redis_server.url)
    client = Redis.from_url(redis_server.url)
    try:
        store.put_many([("before", b"1", None)])
        await asyncio.gather(*store._writes)
        redis_server.kill()
        assert await store.get_many(["k"]) == [None]
        assert store.lost is not None  # retry_s=0: the next call tries Redis again
        redis_server.start()  # empty: nothing persists
        other.put_many([("k", b"from b", None)])
        await asyncio.gather(*other._writes)
        [entry] = await store.get_many(["k"])
        assert entry is not None and entry.value == b"from b"
        assert store.lost is None
        store.put_many([("after", b"2", None)])
        await asyncio.gather(*store._writes)
        assert await client.exists("dahl:store:after", "dahl:store:before") == 1  # "before" went with the old server
        async with store.lease("new"):
            assert await client.get("dahl:lease:new") == store._held["dahl:lease:new"].encode()
        messages = [r.getMessage() for r in caplog.records if r.name == "dahl.cache._redis"]
        assert len(messages) == 2 and "is lost" in messages[0] and "answers again" in messages[1]
    finally:
        await client.aclose()
        for s in (store, other):
            await s.aclose()
            s.close()


def test_workers_with_coord_make_the_calls_of_one_process(tmp_path: Path, mocks: Any, redis_server: Any) -> None:
    """dahl score --workers 2 --coord: the merged answers of one process, for the calls of one process."""
    import subprocess
    import sys

    alone_url, url = mocks.start("--latency-ms", "20"), mocks.start("--latency-ms", "20")
    asyncio.run(score_async(config(tmp_path, alone_url, "alone", None)))
    args = [sys.executable, "-m", "dahl", "score", str(tmp_path / "a.jsonl"), "--splitter", "openai", "--checker",
            "openai", "--base-url", url, "--model", "mock", "--api-key-env", "", "--max-in-flight", "4",
            "--rpm", "6000", "--cache-dir", str(tmp_path / "workers" / "cache"), "--no-progress"]
    proc = subprocess.run([*args, "-o", str(tmp_path / "workers" / "out"), "--workers", "2", "--coord",
                           redis_server.url], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr
    one, two = mocks.stats(alone_url), mocks.stats(url)
    assert (two["split"], two["check"]) == (one["split"], one["check"])
    assert [line.pop("input_hash") and line for line in map(json.loads, (tmp_path / "workers" / "out" /
            "answers.jsonl").read_text().splitlines())] == [line.pop("input_hash") and line for line in map(
            json.loads, (tmp_path / "alone" / "out" / "answers.jsonl").read_text().splitlines())]
