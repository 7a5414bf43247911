"""Tests for dahl.cache.store: batched writer thread, batched reads, lock, corruption."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio
import platformdirs
import pytest

from dahl.cache.store import CachedEntry, CacheStore, default_cache_dir
from dahl.errors import CacheError
from dahl.records import Claim, Evidence, Label, Usage, Verdict

VERDICT = Verdict(
    label=Label.SUPPORTED,
    checker="stub/v1",
    raw="Supported. Ada was a mathematician.",
    evidence=(Evidence(text="Ada Lovelace ...", source="https://example.org/ada", score=0.75),),
    usage=Usage(prompt_tokens=120, completion_tokens=4),
)
CLAIMS = [
    Claim(text="Ada was a mathematician.", index=0, span=(0, 24), sentence=0),
    Claim(text="Ada was born in 1815.", index=1, given_label=Label.UNSUPPORTED),
]
KEY = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CacheStore]:
    """A store in a fresh directory, closed after the test."""
    s = CacheStore(tmp_path / "cache")
    yield s
    s.close()


def _key(i: int) -> str:
    return f"{i:032x}"


class TestRoundTrip:
    async def test_values_survive_reopen(self, tmp_path: Path) -> None:
        """A Verdict and a claim list read back equal to what was put, from a new store."""
        with CacheStore(tmp_path / "c") as first:
            first.put(KEY, VERDICT, VERDICT.raw)
            first.put(_key(2), CLAIMS, "raw split reply")
        with CacheStore(tmp_path / "c") as second:
            assert await second.get(KEY) == CachedEntry(VERDICT, None)
            assert await second.get(_key(2)) == CachedEntry(CLAIMS, None)

    async def test_miss(self, store: CacheStore) -> None:
        """An absent key is None."""
        assert await store.get(KEY) is None
        assert store.stats()["misses"] == 1

    async def test_new_parser_version_gets_raw(self, store: CacheStore) -> None:
        """Under another parser version only the raw reply is found (value None)."""
        store.put(KEY, VERDICT, "Supported.", parser_version="1")
        await store.flush()
        assert await store.get(KEY, parser_version="2") == CachedEntry(None, "Supported.")
        assert await store.get(KEY, parser_version="1") == CachedEntry(VERDICT, None)

    async def test_no_raw_no_raw_entry(self, store: CacheStore) -> None:
        """put with raw=None writes only the value: a new parser version then misses."""
        store.put(KEY, VERDICT, None)
        await store.flush()
        assert await store.get(KEY, parser_version="2") is None
        assert store.stats()["entries"] == 1

    async def test_unflushed_put_is_a_hit(self, store: CacheStore) -> None:
        """A value put but not yet committed is served from memory, without a thread call."""
        store.put(KEY, VERDICT, None)
        assert await store.get(KEY) == CachedEntry(VERDICT, None)
        assert store.read_batches == 0

    async def test_close_flushes(self, tmp_path: Path) -> None:
        """close() commits everything queued, without an explicit flush."""
        first = CacheStore(tmp_path / "c", flush_items=10_000, flush_interval_s=60)
        for i in range(250):
            first.put(_key(i), VERDICT, None)
        first.close()
        with CacheStore(tmp_path / "c") as second:
            assert second.stats()["entries"] == 250
            assert await second.get(_key(249)) == CachedEntry(VERDICT, None)


class TestWriter:
    async def test_batches_by_count(self, store: CacheStore, tmp_path: Path) -> None:
        """1,200 puts with flush_items=500 are committed in 3 transactions (500, 500, 200)."""
        s = CacheStore(tmp_path / "batched", flush_items=500, flush_interval_s=60)
        try:
            for i in range(1200):
                s.put(_key(i), VERDICT, "raw")
            await s.flush()
            stats = s.stats()
            assert s.transactions == 3
            assert stats["writes"] == 1200
            assert stats["entries"] == 2400  # value + raw per key
        finally:
            s.close()

    async def test_batches_by_time(self, tmp_path: Path) -> None:
        """A lone put is committed after flush_interval_s, without flush()."""
        s = CacheStore(tmp_path / "timed", flush_items=500, flush_interval_s=0.05)
        try:
            s.put(KEY, VERDICT, None)
            for _ in range(100):  # up to 2 s
                if s.transactions:
                    break
                await anyio.sleep(0.02)
            assert s.transactions == 1
        finally:
            s.close()

    async def test_failed_batch_is_dropped_and_writer_survives(
        self, store: CacheStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A batch that cannot be written is dropped with one warning; later batches are written."""
        with caplog.at_level(logging.WARNING, logger="dahl.cache.writer"):
            store.put(_key(1), object(), None)  # type: ignore[arg-type]  # not encodable
            await store.flush()
            store.put(_key(2), object(), None)  # type: ignore[arg-type]
            await store.flush()
        store.put(KEY, VERDICT, None)
        await store.flush()
        stats = store.stats()
        assert (stats["write_errors"], stats["writes"], stats["entries"]) == (2, 1, 1)
        assert len(caplog.records) == 1

    async def test_put_after_close_raises(self, tmp_path: Path) -> None:
        """put on a closed store raises CacheError; close is idempotent."""
        s = CacheStore(tmp_path / "c")
        s.close()
        s.close()
        with pytest.raises(CacheError, match="closed"):
            s.put(KEY, VERDICT, None)


class TestReader:
    async def test_concurrent_gets_are_batched(self, store: CacheStore) -> None:
        """1,000 concurrent gets are served by at most 1000/32 + 1 reader-thread calls."""
        for i in range(1000):
            store.put(_key(i), VERDICT, None)
        await store.flush()
        found: list[CachedEntry | None] = [None] * 1000

        async def one(i: int) -> None:
            found[i] = await store.get(_key(i))

        async with anyio.create_task_group() as tg:
            for i in range(1000):
                tg.start_soon(one, i)
        assert found == [CachedEntry(VERDICT, None)] * 1000
        assert 1 <= store.read_batches <= 32

    async def test_cancelled_getter_leaves_others(self, store: CacheStore) -> None:
        """Cancelling one waiting get does not disturb the others in its batch."""
        store.put(KEY, VERDICT, None)
        await store.flush()
        doomed = asyncio.ensure_future(store.get(KEY))
        kept = asyncio.ensure_future(store.get(KEY))
        await asyncio.sleep(0)
        doomed.cancel()
        assert await kept == CachedEntry(VERDICT, None)
        with pytest.raises(asyncio.CancelledError):
            await doomed

    async def test_read_error_is_miss_with_one_warning(
        self, store: CacheStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A database that fails mid-run gives misses and exactly one warning."""
        store.put(KEY, VERDICT, None)
        await store.flush()
        con = sqlite3.connect(store.directory / "cache.db")
        con.execute("ALTER TABLE Cache RENAME TO Gone")
        con.commit()
        con.close()
        with caplog.at_level(logging.WARNING, logger="dahl.cache.store"):
            assert await store.get(KEY) is None
            assert await store.get(_key(1)) is None
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "treated as a miss" in warnings[0].getMessage()
        assert store.stats()["read_errors"] == 2

    async def test_undecodable_value_is_miss(
        self, store: CacheStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A stored value that does not decode as a Verdict or claim list is a miss."""
        con = sqlite3.connect(store.directory / "cache.db")
        con.execute(
            "INSERT INTO Cache (key, raw, store_time, expire_time, access_time, access_count,"
            " tag, size, mode, filename, value) VALUES (?, 1, 0, NULL, 0, 0, NULL, 0, 1, NULL, ?)",
            (f"{KEY}:v1", b"\xc1not msgpack"),
        )
        con.commit()
        con.close()
        with caplog.at_level(logging.WARNING, logger="dahl.cache.store"):
            assert await store.get(KEY) is None
        assert len(caplog.records) == 1


class TestLock:
    def test_second_store_same_dir_raises(self, store: CacheStore) -> None:
        """A second store on a directory in use raises CacheError naming the holder's pid."""
        with pytest.raises(CacheError, match=rf"in use by another dahl run \(pid {os.getpid()}\)"):
            CacheStore(store.directory)

    def test_lock_released_on_close(self, tmp_path: Path) -> None:
        """After close, the directory can be opened again."""
        CacheStore(tmp_path / "c").close()
        CacheStore(tmp_path / "c").close()

    def test_other_directory_is_independent(self, store: CacheStore, tmp_path: Path) -> None:
        """Two stores on two directories coexist."""
        CacheStore(tmp_path / "other").close()


class TestCorruption:
    @pytest.mark.parametrize("damage", ["truncate", "garbage"])
    async def test_corrupt_db_moved_aside(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
    ) -> None:
        """A truncated or garbage cache.db is moved aside with a warning; the new store works."""
        directory = tmp_path / "c"
        with CacheStore(directory) as s:
            for i in range(2000):
                s.put(_key(i), VERDICT, VERDICT.raw)
        db = directory / "cache.db"
        for leftover in directory.glob("cache.db-*"):
            leftover.unlink()
        if damage == "truncate":
            size = db.stat().st_size
            with db.open("r+b") as f:
                f.truncate(size // 2)
        else:
            db.write_bytes(b"this is not a database" * 100)
        with caplog.at_level(logging.WARNING, logger="dahl.cache.database"):
            s = CacheStore(directory)
        try:
            assert any("is corrupt" in r.getMessage() for r in caplog.records)
            aside = [p for p in directory.iterdir() if re.fullmatch(r"cache\.db\.corrupt-\d{8}T\d{6}", p.name)]
            assert len(aside) == 1
            assert await s.get(_key(1)) is None
            s.put(KEY, VERDICT, None)
            await s.flush()
            assert s.stats()["entries"] == 1
        finally:
            s.close()
        with CacheStore(directory) as again:
            assert await again.get(KEY) == CachedEntry(VERDICT, None)


class TestMaintenance:
    async def test_stats_and_clear(self, store: CacheStore) -> None:
        """stats counts entries, hits, misses and writes; clear empties the store."""
        store.put(_key(1), VERDICT, "raw 1")
        store.put(_key(2), CLAIMS, None)
        await store.flush()
        assert await store.get(_key(1)) is not None
        assert await store.get(_key(3)) is None
        stats = store.stats()
        assert stats["entries"] == 3
        assert (stats["hits"], stats["misses"], stats["writes"]) == (1, 1, 2)
        assert stats["directory"] == str(store.directory)
        assert stats["size_bytes"] > 0
        assert store.clear() == 3
        assert store.stats()["entries"] == 0
        assert await store.get(_key(1)) is None


class TestDefaultDir:
    def test_env_overrides(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """$DAHL_CACHE_DIR wins over the platform directory."""
        monkeypatch.setenv("DAHL_CACHE_DIR", str(tmp_path / "mine"))
        assert default_cache_dir() == tmp_path / "mine"

    def test_platform_default(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the variable, the platform user cache directory for dahl is used."""
        monkeypatch.delenv("DAHL_CACHE_DIR", raising=False)
        assert default_cache_dir() == Path(platformdirs.user_cache_dir("dahl"))
