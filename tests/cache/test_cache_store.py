"""Tests for dahl.cache._store and _table: batched writer thread, batched reads, a shared directory, corruption."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import platformdirs
import pytest

from dahl.cache._store import CachedEntry, CacheStore, default_cache_dir
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
        """Without any raw reply (none given, none in the Verdict or claim list) a new parser version misses."""
        store.put(KEY, msgspec.structs.replace(VERDICT, raw=None), None)
        store.put(_key(2), CLAIMS, None)
        await store.flush()
        assert await store.get_many([KEY, _key(2)], parser_version="2") == [None, None]
        assert store.stats()["entries"] == 2
        assert store.stats()["misses"] == 2

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
    async def test_close_leaves_every_row_in_the_database_file(self, tmp_path: Path) -> None:
        """After a read and 5,000 puts, close() checkpoints the WAL: no cache.db-wal is left and the rows are
        in cache.db itself (the writer's connection closes last; a read-only one cannot checkpoint)."""
        directory = tmp_path / "c"
        with CacheStore(directory) as s:
            assert await s.get(_key(0)) is None  # opens the reader's read-only connection
            for i in range(5000):
                s.put(_key(i), VERDICT, None)
        assert not (directory / "cache.db-wal").exists()
        with sqlite3.connect(directory / "cache.db") as con:
            assert con.execute("SELECT count(*) FROM entries").fetchone() == (5000,)

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
            assert stats["entries"] == 1200  # one row per key, its raw reply inside
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
        with caplog.at_level(logging.WARNING, logger="dahl.cache._table"):
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

    async def test_a_committed_key_is_read_from_disk(self, store: CacheStore) -> None:
        """A key put is served from memory until its commit, then read from disk; an absent key is a read miss."""
        store.put(KEY, VERDICT, None)
        assert await store.get(KEY) == CachedEntry(VERDICT, None)
        assert store._memory_hits == 1
        await store.flush()
        assert await store.get(KEY) == CachedEntry(VERDICT, None)
        assert (store._memory_hits, store._reader.hits) == (1, 1)
        assert await store.get(_key(7)) is None
        assert store._reader.misses == 1

    async def test_read_error_is_miss_with_one_warning(
        self, store: CacheStore, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A database that fails mid-run gives misses and exactly one warning."""
        store.put(KEY, VERDICT, None)
        store.put(_key(1), VERDICT, None)
        await store.flush()
        con = sqlite3.connect(store.directory / "cache.db")
        con.execute("ALTER TABLE entries RENAME TO gone")
        con.commit()
        con.close()
        with caplog.at_level(logging.WARNING, logger="dahl.cache._table"):
            assert await store.get(KEY) is None
            assert await store.get(_key(1)) is None
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 1
        assert "treated as a miss" in warnings[0].getMessage()
        con = sqlite3.connect(store.directory / "cache.db")
        con.execute("ALTER TABLE gone RENAME TO entries")  # stats counts the rows
        con.commit()
        con.close()
        assert store.stats()["read_errors"] == 2

    async def test_undecodable_value_is_miss(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """A stored value that does not decode as a Verdict or claim list is a miss."""
        CacheStore(tmp_path / "c").close()
        con = sqlite3.connect(tmp_path / "c" / "cache.db")
        con.execute("INSERT INTO entries (key, value, stored_at) VALUES (?, ?, 0)", (KEY, b"\xc1not msgpack"))
        con.commit()
        con.close()
        with CacheStore(tmp_path / "c") as store, caplog.at_level(logging.WARNING, logger="dahl.cache._table"):
            assert await store.get(KEY) is None
        assert len(caplog.records) == 1


class TestSharedDirectory:
    async def test_two_stores_share_one_directory(self, store: CacheStore) -> None:
        """A second store on a directory in use opens, and each reads what the other committed."""
        with CacheStore(store.directory) as other:
            store.put(_key(1), VERDICT, None)
            other.put(_key(2), CLAIMS, None)
            await store.flush()
            await other.flush()
            assert await other.get(_key(1)) == CachedEntry(VERDICT, None)
            assert await store.get(_key(2)) == CachedEntry(CLAIMS, None)
        assert store.stats()["entries"] == 2

    async def test_two_processes_write_one_directory_at_once(self, store: CacheStore) -> None:
        """Another process putting 2,000 entries while this one puts 2,000 leaves 4,000 rows, none lost."""
        code = (
            "import sys; from dahl.cache import CacheStore; from dahl.records import Label, Verdict\n"
            "v = Verdict(label=Label.SUPPORTED, checker='stub/v1', raw='Supported.')\n"
            "with CacheStore(sys.argv[1], flush_items=100) as s:\n"
            "    for i in range(2000): s.put(f'{i + 10_000:032x}', v, None)\n"
        )
        child = await asyncio.create_subprocess_exec(sys.executable, "-c", code, str(store.directory),
                                                     cwd=Path(__file__).resolve().parents[2])
        for i in range(2000):
            store.put(_key(i), VERDICT, None)
            if i % 100 == 0:
                await asyncio.sleep(0)
        await store.flush()
        assert await child.wait() == 0
        assert (store.stats()["entries"], store.stats()["write_errors"]) == (4000, 0)
        assert await store.get(f"{10_000 + 1999:032x}") is not None

    def test_reopened_after_close(self, tmp_path: Path) -> None:
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
        with caplog.at_level(logging.WARNING, logger="dahl.cache._table"):
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
        assert stats["entries"] == 2
        assert (stats["hits"], stats["misses"], stats["writes"]) == (1, 1, 2)
        assert stats["directory"] == str(store.directory)
        assert stats["size_bytes"] > 0
        assert store.clear() == 2
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


class TestRows:
    async def test_rows_read_back_as_written(self, tmp_path: Path) -> None:
        """Blobs put in two batches read back by key, the second put of a key replacing the first."""
        with CacheStore(tmp_path / "c") as s:
            s.put_many([("a", b"\x01\x02", None), ("b", b"Supported", None), ("c", b"", None)], parser_version="b")
            await s.flush()
            s.put("b", b"Unsupported", None, parser_version="b")
            await s.flush()
            assert await s.get_many(["a", "b", "c", "d"], parser_version="b") == [
                CachedEntry(b"\x01\x02", None), CachedEntry(b"Unsupported", None), CachedEntry(b"", None), None]
        con = sqlite3.connect(tmp_path / "c" / "cache.db")
        try:
            assert con.execute("SELECT count(*) FROM entries").fetchone() == (3,)
        finally:
            con.close()

    async def test_a_megabyte_value_lives_in_its_row(self, tmp_path: Path) -> None:
        """A 1 MiB value is one row like any other (no side files) and reads back whole."""
        with CacheStore(tmp_path / "c") as s:
            s.put("big", b"x" * 2**20, None, parser_version="b")
        with CacheStore(tmp_path / "c") as s:
            assert await s.get("big", parser_version="b") == CachedEntry(b"x" * 2**20, None)
        assert sorted(p.name for p in (tmp_path / "c").iterdir() if not p.name.startswith("cache.db")) == []

    async def test_large_raw_reply_round_trip(self, tmp_path: Path) -> None:
        """A 100,000-character raw reply is stored (in a file) and found after a parser change."""
        raw = "Supported. " + "x" * 100_000
        with CacheStore(tmp_path / "c") as s:
            s.put(KEY, VERDICT, raw)
        with CacheStore(tmp_path / "c") as s:
            assert await s.get(KEY, parser_version="2") == CachedEntry(None, raw)


class TestGetMany:
    async def test_group_is_one_reader_call(self, store: CacheStore) -> None:
        """get_many of 10 keys (4 stored) answers in order with one reader-thread call."""
        for i in (1, 3, 5, 7):
            store.put(_key(i), VERDICT, None)
        await store.flush()
        found = await store.get_many([_key(i) for i in range(10)])
        assert [entry is not None for entry in found] == [i in (1, 3, 5, 7) for i in range(10)]
        assert found[3] == CachedEntry(VERDICT, None)
        assert store.read_batches == 1

    async def test_uncommitted_group_needs_no_reader(self, store: CacheStore) -> None:
        """Keys put and not yet committed are answered from memory without a reader call."""
        store.put(_key(1), VERDICT, None)
        store.put(_key(2), VERDICT, None)
        assert await store.get_many([_key(1), _key(2)]) == [CachedEntry(VERDICT, None)] * 2
        assert store.read_batches == 0

    async def test_groups_share_reader_calls(self, store: CacheStore) -> None:
        """50 concurrent groups of 10 keys (500 keys) take at most 3 reader calls (256 keys each)."""
        results: list[list[CachedEntry | None]] = []

        async def one(g: int) -> None:
            results.append(await store.get_many([_key(g * 10 + i) for i in range(10)]))

        async with anyio.create_task_group() as tg:
            for g in range(50):
                tg.start_soon(one, g)
        assert len(results) == 50 and all(r == [None] * 10 for r in results)
        assert store.read_batches <= 3


class TestAfterMiss:
    async def test_tells_what_was_written_after_a_generation(self, store: CacheStore) -> None:
        """After a miss at a generation: a key committed since means read again (False), others stay misses (None)."""
        store.put(_key(1), VERDICT, None)
        await store.flush()
        before = store.generation
        store.put(_key(2), VERDICT, None)
        await store.flush()
        assert store.generation == before + 1
        assert store.after_miss(_key(2), before) is False
        assert store.after_miss(_key(1), before) is None  # on disk before: the lookup would have found it
        assert store.after_miss(_key(3), before) is None
        assert store.after_miss(_key(2), store.generation) is None  # nothing written since

    async def test_a_value_put_since_comes_from_memory(self, tmp_path: Path) -> None:
        """A value put and not yet committed is returned for its own parser version only."""
        other = Verdict(label=Label.UNSUPPORTED, checker="stub/v1", raw="Unsupported")
        with CacheStore(tmp_path / "c", flush_interval_s=60.0) as store:  # nothing is committed during the test
            generation = store.generation
            store.put(_key(5), other, None, parser_version="2")
            assert store.after_miss(_key(5), generation, parser_version="2") == other
            assert store.after_miss(_key(5), generation, parser_version="1") is None
            assert store.generation == generation

    async def test_unknown_beyond_history(self, store: CacheStore) -> None:
        """After more than 128 write transactions, an older generation means read again (cannot tell)."""
        for i in range(130):
            store.put(_key(i), VERDICT, None)
            await store.flush()
        assert store.after_miss(_key(999), 0) is False
        assert store.after_miss(_key(129), 128) is False
        assert store.after_miss(_key(999), 128) is None


def _trace_selects(store: CacheStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """SELECT statements the store's reader thread runs from now on (SQLite trace callback)."""
    reader = store._reader
    connect = reader._connection
    statements: list[str] = []

    def traced() -> sqlite3.Connection:
        con = connect()
        con.set_trace_callback(statements.append)
        return con

    monkeypatch.setattr(reader, "_connection", traced)
    return statements


def _stored_rows(directory: Path) -> dict[str, bytes]:
    """Every row of the cache database: name -> value bytes."""
    con = sqlite3.connect(directory / "cache.db")
    try:
        return {name: bytes(value) for name, value in con.execute("SELECT key, value FROM entries")}
    finally:
        con.close()


class TestOneRowLayout:
    async def test_one_row_per_result_named_by_its_key(self, store: CacheStore) -> None:
        """300 verdicts and one claim list with raw replies are 301 rows, each named by its bare key."""
        for i in range(300):
            store.put(_key(i), VERDICT, VERDICT.raw)
        store.put(KEY, CLAIMS, "raw split reply")
        await store.flush()
        assert store.stats()["entries"] == 301
        rows = _stored_rows(store.directory)
        assert sorted(rows) == sorted([_key(i) for i in range(300)] + [KEY])

    async def test_verdict_raw_is_stored_once(self, store: CacheStore) -> None:
        """A Verdict put with its own raw reply keeps it only inside the Verdict; a claim list keeps it beside."""
        from dahl.cache._table import ENVELOPE_DECODER, Stored

        store.put(_key(1), VERDICT, VERDICT.raw)
        store.put(_key(2), CLAIMS, "raw split reply", parser_version="3")
        await store.flush()
        rows = _stored_rows(store.directory)
        assert ENVELOPE_DECODER.decode(rows[_key(1)]) == Stored("1", VERDICT, None)
        assert ENVELOPE_DECODER.decode(rows[_key(2)]) == Stored("3", CLAIMS, "raw split reply")
        # One copy of the 35-character reply: the row is shorter than the Verdict plus the reply again.
        assert len(rows[_key(1)]) < len(msgspec.msgpack.encode(VERDICT)) + len(VERDICT.raw or "")

    async def test_other_parser_version_gets_the_raw_reply(self, store: CacheStore) -> None:
        """Another parser version finds the Verdict's own raw, a raw given apart, or a claim list's raw."""
        store.put(_key(1), VERDICT, VERDICT.raw)
        store.put(_key(2), VERDICT, "Answer: SUPPORTED")
        store.put(_key(3), CLAIMS, "raw split reply")
        await store.flush()
        assert await store.get_many([_key(1), _key(2), _key(3)], parser_version="2") == [
            CachedEntry(None, "Supported. Ada was a mathematician."),
            CachedEntry(None, "Answer: SUPPORTED"),
            CachedEntry(None, "raw split reply"),
        ]
        stats = store.stats()
        assert (stats["hits"], stats["raw_hits"], stats["misses"]) == (0, 3, 0)

    async def test_bytes_value_round_trips(self, tmp_path: Path) -> None:
        """An opaque bytes value comes back as is, from memory and after reopening; another version misses."""
        blob = b"\x00\xff\xc1 pre-encoded \x92\x01\x02"
        with CacheStore(tmp_path / "c", flush_interval_s=60) as first:
            first.put(KEY, blob, None, parser_version="b1")
            assert await first.get(KEY, parser_version="b1") == CachedEntry(blob, None)
        with CacheStore(tmp_path / "c") as second:
            assert await second.get(KEY, parser_version="b1") == CachedEntry(blob, None)
            assert await second.get(KEY, parser_version="1") is None
            assert second.stats()["entries"] == 1

    async def test_a_batch_of_misses_is_one_query(self, store: CacheStore, monkeypatch: pytest.MonkeyPatch) -> None:
        """300 keys (1 hit, 1 raw reply of another version, 298 absent) take one reader call and one SELECT."""
        store.put(_key(0), VERDICT, VERDICT.raw)
        store.put(_key(1), VERDICT, VERDICT.raw, parser_version="0")
        await store.flush()
        selects = _trace_selects(store, monkeypatch)
        found = await store.get_many([_key(i) for i in range(300)])
        assert found[:3] == [CachedEntry(VERDICT, None), CachedEntry(None, VERDICT.raw), None]
        assert found.count(None) == 298
        assert store.read_batches == 1
        assert len([s for s in selects if s.lstrip().upper().startswith("SELECT")]) == 1
        stats = store.stats()
        assert (stats["hits"], stats["raw_hits"], stats["misses"]) == (1, 1, 298)

    async def test_600_keys_are_two_queries(self, store: CacheStore, monkeypatch: pytest.MonkeyPatch) -> None:
        """A reader call of 600 absent keys runs two SELECTs (500 names per IN list), not four."""
        selects = _trace_selects(store, monkeypatch)
        assert await store.get_many([_key(i) for i in range(600)]) == [None] * 600
        assert store.read_batches == 1
        assert len([s for s in selects if s.lstrip().upper().startswith("SELECT")]) == 2

    async def test_memory_respects_parser_versions(self, tmp_path: Path) -> None:
        """A value put under version 2 and not committed is no hit for version 1, which reads the disk."""
        with CacheStore(tmp_path / "c", flush_interval_s=60) as slow:  # commits on flush/close only
            slow.put(KEY, VERDICT, VERDICT.raw, parser_version="2")
            assert slow.recent(KEY, parser_version="1") is None
            assert slow.recent(KEY, parser_version="2") == VERDICT
            assert await slow.get(KEY, parser_version="2") == CachedEntry(VERDICT, None)
            assert slow.read_batches == 0
            assert await slow.get(KEY, parser_version="1") is None  # nothing on disk yet
            assert slow.read_batches == 1
            assert slow.transactions == 0

    async def test_a_later_put_replaces_the_row(self, store: CacheStore) -> None:
        """Putting a key again under another parser version leaves one row, of the new version."""
        store.put(KEY, VERDICT, VERDICT.raw, parser_version="1")
        await store.flush()
        reparsed = msgspec.structs.replace(VERDICT, label=Label.UNKNOWN)
        store.put(KEY, reparsed, VERDICT.raw, parser_version="2")
        await store.flush()
        assert store.stats()["entries"] == 1
        assert await store.get(KEY, parser_version="2") == CachedEntry(reparsed, None)
        assert await store.get(KEY, parser_version="1") == CachedEntry(None, VERDICT.raw)

    async def test_old_two_row_layout_is_a_miss(self, store: CacheStore) -> None:
        """Rows named key:v1 and key:raw (the former layout) are never read."""
        with contextlib.closing(sqlite3.connect(store.directory / "cache.db")) as con, con:
            con.executemany("INSERT INTO entries VALUES (?, ?, 0)",
                            [(f"{KEY}:v1", msgspec.msgpack.encode(VERDICT)), (f"{KEY}:raw", b"Supported.")])
        assert await store.get_many([KEY, KEY], parser_version="1") == [None, None]
        assert await store.get(KEY, parser_version="2") is None
        assert store.stats()["read_errors"] == 0
