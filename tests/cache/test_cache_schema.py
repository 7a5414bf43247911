"""Tests for the cache database (dahl.cache._table): dahl's own table, and the one-time migration of a diskcache-format cache."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from dahl.cache import CachedEntry, CacheStore
from dahl.cache._table import SCHEMA_VERSION, encode_envelope, open_database
from dahl.records import Label, Verdict

VERDICT = Verdict(label=Label.SUPPORTED, checker="stub/v1", raw="Supported.")


def _key(i: int) -> str:
    return f"{i:032x}"


def _tables(db: Path) -> tuple[list[str], int]:
    con = sqlite3.connect(db)
    try:
        names = [row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        return names, int(con.execute("PRAGMA user_version").fetchone()[0])
    finally:
        con.close()


class TestFreshDatabase:
    def test_one_table_in_wal_mode_at_the_schema_version(self, tmp_path: Path) -> None:
        """A new cache.db holds the entries table only, in WAL mode, with user_version 1."""
        db = open_database(tmp_path)
        assert _tables(db) == (["entries"], SCHEMA_VERSION) == (["entries"], 1)
        con = sqlite3.connect(db)
        try:
            assert con.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        finally:
            con.close()

    def test_reopening_changes_nothing(self, tmp_path: Path) -> None:
        """Opening an existing database again keeps its rows."""
        with CacheStore(tmp_path) as store:
            store.put(_key(1), VERDICT, None)
        open_database(tmp_path)
        with CacheStore(tmp_path) as store:
            assert store.stats()["entries"] == 1


class TestDiskcacheMigration:
    async def test_old_cache_is_migrated_once_with_its_results(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A diskcache-format cache (rows and a 40 KB value in a file) is read by the store; its tables go."""
        diskcache = pytest.importorskip("diskcache")
        small = [encode_envelope(VERDICT, None, "1") for _ in range(3)]
        big_verdict = Verdict(label=Label.UNSUPPORTED, checker="stub/v1", raw="x" * 40_000)
        big = encode_envelope(big_verdict, None, "1")
        old = diskcache.Cache(str(tmp_path), eviction_policy="none")
        for i, value in enumerate(small):
            old.set(_key(i), value)
        old.set(_key(9), big)  # 32 KiB or more: diskcache writes it to a .val file
        old.close()
        assert len(list(tmp_path.rglob("*.val"))) == 1
        with caplog.at_level(logging.INFO, logger="dahl.cache._table"):
            store = CacheStore(tmp_path)
        try:
            assert [r.getMessage() for r in caplog.records] == [
                f"cache database {tmp_path / 'cache.db'} migrated to dahl's own schema (4 results kept)"
            ]
            found = await store.get_many([_key(0), _key(1), _key(2), _key(9), _key(5)])
            assert found == [CachedEntry(VERDICT, None)] * 3 + [CachedEntry(big_verdict, None), None]
        finally:
            store.close()
        assert _tables(tmp_path / "cache.db") == (["entries"], 1)
        assert list(tmp_path.rglob("*.val")) == []
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="dahl.cache._table"), CacheStore(tmp_path) as again:
            assert again.stats()["entries"] == 4
        assert caplog.records == []  # migrated once
