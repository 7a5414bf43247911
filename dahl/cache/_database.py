"""The cache directory on disk: its lock, and batched reads and writes of the ``entries`` table.

- :class:`DirectoryLock`: one dahl run per cache directory (see :mod:`dahl.locking`).
- :class:`RowReader`: looks many keys up with one ``key IN (...)`` query instead of
  one query per key (the cache-hit path).
- :class:`RowWriter`: writes a batch with multi-row upserts in one transaction.
- :func:`row_count`, :func:`delete_rows`: for ``dahl cache stats`` and ``clear``.

The table and how a database is opened, checked and migrated are in
:mod:`dahl.cache._schema` (the schema is dahl's own).
"""

from __future__ import annotations

import contextlib
import functools
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from dahl.cache._schema import DB_NAME, WRITE_TIMEOUT_S, CacheUnusable, connect
from dahl.errors import CacheError
from dahl.locking import FolderLock

__all__ = ["DB_NAME", "LOCK_NAME", "DirectoryLock", "RowReader", "RowWriter", "delete_rows", "row_count"]

#: The lock file inside the cache directory; holds the pid of the run using it.
LOCK_NAME = "dahl.lock"

#: Keys per ``key IN (...)`` query (below SQLite's 999-variable limit of old builds).
_SQL_CHUNK = 500
#: ``IN`` list lengths used (a chunk is padded up to the next one).
_IN_SIZES = (8, 32, 128, _SQL_CHUNK)
#: How long a read waits for a SQLite lock, seconds (reads rarely wait: WAL mode).
_READ_TIMEOUT_S = 10.0
#: Memory-map size of the reader's connection, bytes (mapped pages count in RSS).
_READ_MMAP_BYTES = 2**28
#: Page cache of the reader's connection, KiB.
_READ_CACHE_KIB = 65536
#: Page cache of the writer's connection, KiB (SQLite's default is 2 MiB; with 64 MiB the
#: index pages of a 200,000-row cache stay cached: ~10 % less writer CPU, measured).
_WRITE_CACHE_KIB = 65536
#: WAL pages after which the writer's commit copies the WAL into the database, pages of 4 KiB
#: (SQLite's default is 1,000). A checkpoint writes every page changed since the last one;
#: spacing them 10x wider lets a page changed by many batches be copied once: 22,000 rows of a
#: first run cost 6.2 µs of writer CPU a row instead of 8.0-9.4 (measured). The WAL file may
#: grow to ~40 MiB; it is checkpointed and removed when the last connection closes.
_WAL_CHECKPOINT_PAGES = 10_000


class DirectoryLock(FolderLock):
    """Exclusive lock of a cache directory, taken on construction.

    Args:
        directory: an existing cache directory.

    Raises:
        CacheError: another dahl run (or another store in this process) holds it;
            the message names the holder's pid.
        CacheUnusable: the lock file cannot be created or locked (e.g. a read-only folder).
    """

    def __init__(self, directory: Path) -> None:
        super().__init__(
            directory,
            name=LOCK_NAME,
            what="cache directory",
            hint="wait for it, or give this run its own --cache-dir (or --no-cache)",
            error=CacheError,
            unusable=CacheUnusable,
        )


def _padded_chunks(names: list[str]) -> Iterator[tuple[int, list[str]]]:
    """``names`` in chunks of at most 500, each padded to a length of :data:`_IN_SIZES`.

    Few distinct ``IN`` list lengths mean SQLite's prepared statements are reused (a
    new length is a new statement to compile); ``""`` is never a stored key.
    """
    for start in range(0, len(names), _SQL_CHUNK):
        chunk = names[start : start + _SQL_CHUNK]
        size = next(b for b in _IN_SIZES if b >= len(chunk))
        yield size, chunk + [""] * (size - len(chunk))


@functools.lru_cache(maxsize=len(_IN_SIZES))
def _select(size: int) -> str:
    marks = ",".join("?" * size)
    return f"SELECT key, value FROM entries WHERE key IN ({marks})"


@functools.lru_cache(maxsize=len(_IN_SIZES))
def _select_packed(size: int) -> str:
    # One result row for the whole list: SQLite steps over the matches in C, and
    # both group_concat calls walk the same rows in the same order.
    marks = ",".join("?" * size)
    return (
        "SELECT group_concat(key, char(10)), CAST(group_concat(value, '') AS BLOB)"
        f" FROM entries WHERE key IN ({marks})"
    )


class RowReader:
    """Batched lookups in the cache database, for ONE thread (it owns a SQLite connection).

    Reads the ``entries`` table (:mod:`dahl.cache._schema`) with ``key IN (...)`` on its
    primary key: one query per 500 keys.

    Args:
        path: the database file (``DB_NAME`` inside the cache directory).
        read_only: open the database read-only (a missing file is an error, never
            created empty).
    """

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self._path = path
        self._read_only = read_only
        self._con: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        con = self._con
        if con is None:
            if self._read_only:
                uri = f"{self._path.resolve().as_uri()}?mode=ro"
                con = sqlite3.connect(uri, uri=True, timeout=_READ_TIMEOUT_S, isolation_level=None)
            else:
                con = connect(self._path, timeout_s=_READ_TIMEOUT_S)
            # Random-key lookups: map the file and keep a large page cache.
            con.execute(f"PRAGMA mmap_size = {_READ_MMAP_BYTES}")
            con.execute(f"PRAGMA cache_size = -{_READ_CACHE_KIB}")
            self._con = con
        return con

    def fetch(self, names: list[str]) -> dict[str, bytes]:
        """Return ``{key: stored value}`` for the ``names`` present.

        Raises:
            sqlite3.Error: the database cannot be read.
        """
        con = self._connection()
        out: dict[str, bytes] = {}
        for size, params in _padded_chunks(names):
            for name, value in con.execute(_select(size), params):
                out[name] = bytes(value)
        return out

    def fetch_packed(self, names: list[str]) -> tuple[list[str], bytes]:
        """Look ``names`` up and return the values concatenated, in one step per query.

        For values that are self-delimiting (msgpack): the caller splits ``packed`` by
        decoding it. Each query returns ONE row, so the thread releases and retakes
        the GIL once per 500 names, not once per found row (each retake competes with
        the event loop thread). Names must not contain a newline.

        Returns:
            ``(found, packed)``: the names found, in the order of their values in
            ``packed``, and the concatenated values.

        Raises:
            sqlite3.Error: the database cannot be read.
        """
        con = self._connection()
        found: list[str] = []
        packed: list[bytes] = []
        for size, params in _padded_chunks(names):
            row = con.execute(_select_packed(size), params).fetchone()
            keys, values = row if row is not None else (None, None)
            if keys and isinstance(values, bytes):
                found += keys.split("\n")
                packed.append(values)
        return found, b"".join(packed)

    def close(self) -> None:
        """Close the connection (call from the thread that used it)."""
        if self._con is not None:
            self._con.close()
            self._con = None


def row_count(path: Path) -> int:
    """Rows stored in the database at ``path`` (blocking: one index scan).

    Raises:
        sqlite3.Error: the database cannot be read.
    """
    con = connect(path, timeout_s=_READ_TIMEOUT_S)
    try:
        return int(con.execute("SELECT count(*) FROM entries").fetchone()[0])
    finally:
        con.close()


def delete_rows(path: Path) -> int:
    """Delete every row of the database at ``path``; return how many there were (blocking).

    Raises:
        sqlite3.Error: the database cannot be written.
    """
    con = connect(path)
    try:
        return int(con.execute("DELETE FROM entries").rowcount)
    finally:
        con.close()


#: Rows per multi-row upsert (3 parameters each, below SQLite's 32,766 variables): a batch of
#: 500 results is one statement.
_ROWS_PER_STATEMENT = 1000


def _upsert(rows: int) -> str:
    return (
        "INSERT INTO entries (key, value, stored_at) VALUES " + ",".join(["(?, ?, ?)"] * rows)
        + " ON CONFLICT(key) DO UPDATE SET value = excluded.value, stored_at = excluded.stored_at"
    )


class RowWriter:
    """Batched writes into the cache database, for ONE thread.

    Multi-row upserts of 1,000 rows inside one ``BEGIN IMMEDIATE ... COMMIT``, about
    10 µs per value. One statement per 1,000 rows (not ``executemany``, one step per
    row) also matters for the event loop: each SQLite step releases and retakes the
    GIL, and every retake competes with the loop thread. A key already stored is
    overwritten.

    Args:
        path: the database file, made ready by :func:`dahl.cache._schema.open_database`.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._rows_per_statement = _ROWS_PER_STATEMENT
        self._con: sqlite3.Connection | None = None

    def write(self, rows: list[tuple[str, bytes]]) -> None:
        """Store every ``(key, value)`` of ``rows`` in one transaction (all or nothing).

        Raises:
            sqlite3.Error: the database cannot be written; nothing of the batch is kept.
        """
        con = self._con
        if con is None:
            con = connect(self._path, timeout_s=WRITE_TIMEOUT_S)
            # WAL (set on the file) with synchronous=NORMAL: durable across a killed process.
            con.execute("PRAGMA synchronous = 1")
            con.execute(f"PRAGMA cache_size = -{_WRITE_CACHE_KIB}")
            con.execute(f"PRAGMA wal_autocheckpoint = {_WAL_CHECKPOINT_PAGES}")
            # Old SQLite builds allow 999 variables per statement, newer ones 32,766.
            limit = con.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            self._rows_per_statement = max(1, min(_ROWS_PER_STATEMENT, limit // 3))
            self._con = con
        now = time.time()
        con.execute("BEGIN IMMEDIATE")
        try:
            step = self._rows_per_statement
            for start in range(0, len(rows), step):
                chunk = rows[start : start + step]
                params: list[object] = []
                for name, value in chunk:
                    params += (name, value, now)
                con.execute(_upsert(len(chunk)), params)
        except BaseException:
            with contextlib.suppress(sqlite3.Error):  # a broken connection has nothing to undo
                con.execute("ROLLBACK")
            raise
        con.execute("COMMIT")

    def close(self) -> None:
        """Close the connection (call from the thread that used it)."""
        if self._con is not None:
            self._con.close()
            self._con = None
