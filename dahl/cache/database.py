"""The cache directory on disk: its lock, its diskcache database, and batched row reads.

- :class:`DirectoryLock`: one dahl run per cache directory (``flock`` on a lock file;
  released on close and by the OS when the process dies).
- :func:`open_database`: opens diskcache with eviction off; a corrupt database is moved
  aside and replaced by an empty one.
- :class:`RowReader`: looks many names up with one ``key IN (...)`` query instead of
  one ``Cache.get`` per name (the cache-hit path).
- :class:`RowWriter`: writes a batch of small values with one ``executemany`` upsert in
  one transaction instead of one ``Cache.set`` (three statements) per value.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import diskcache  # type: ignore[import-untyped]

from dahl.locking import FolderLock
from dahl.errors import CacheError

__all__ = ["DB_NAME", "LOCK_NAME", "DirectoryLock", "RowReader", "RowWriter", "open_database"]

log = logging.getLogger(__name__)

#: diskcache's database file name inside the cache directory.
DB_NAME = "cache.db"
#: The lock file inside the cache directory; holds the pid of the run using it.
LOCK_NAME = "dahl.lock"

#: Far above diskcache's 1 GiB default; with eviction off it is only a guard, bytes.
_SIZE_LIMIT = 2**40
#: Names per ``key IN (...)`` query (below SQLite's 999-variable limit of old builds).
_SQL_CHUNK = 500
#: ``IN`` list lengths used (a chunk is padded up to the next one).
_IN_SIZES = (8, 32, 128, _SQL_CHUNK)
#: How long a read waits for a SQLite lock, seconds (reads rarely wait: WAL mode).
_READ_TIMEOUT_S = 10.0
#: How long a write transaction waits for the SQLite write lock, seconds.
_WRITE_TIMEOUT_S = 60.0
#: Memory-map size of the reader's connection, bytes (diskcache: 64 MiB; mapped pages count in RSS).
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
#: diskcache value mode of bytes and str stored in the row itself.
_MODE_INLINE = 1
#: diskcache value modes of values stored in a file: binary, text.
_FILE_MODES = frozenset({2, 3})


class DirectoryLock(FolderLock):
    """Exclusive lock of a cache directory, taken on construction.

    Args:
        directory: an existing cache directory.

    Raises:
        CacheError: another dahl run (or another store in this process) holds it;
            the message names the holder's pid.
    """

    def __init__(self, directory: Path) -> None:
        super().__init__(
            directory,
            name=LOCK_NAME,
            what="cache directory",
            hint="wait for it, or give this run its own --cache-dir (or --no-cache)",
            error=CacheError,
        )


def open_database(directory: Path) -> diskcache.Cache:
    """Open the diskcache in ``directory`` (eviction off), moving a corrupt database aside.

    A database SQLite reports as corrupt (``sqlite3.DatabaseError``, e.g. a truncated
    or overwritten ``cache.db``) is renamed ``cache.db.corrupt-<YYYYmmddTHHMMSS>``
    (with its ``-wal``/``-shm`` files), a warning is logged, and an empty database
    is created: the run continues without the old results.

    Raises:
        CacheError: the database cannot be opened for another reason (permissions,
            locked by a foreign process) or a fresh one cannot be created.
    """
    settings: dict[str, Any] = {
        "eviction_policy": "none",
        "size_limit": _SIZE_LIMIT,
        "cull_limit": 0,  # nothing is ever evicted: skip the per-set expiry and size scans
    }
    try:
        return diskcache.Cache(str(directory), **settings)
    except sqlite3.OperationalError as exc:  # not corruption: locked, unreadable, ...
        raise CacheError(f"cannot open cache database in {directory}: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        aside = f"{DB_NAME}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
        for suffix in ("", "-wal", "-shm"):
            path = directory / f"{DB_NAME}{suffix}"
            if path.exists():
                path.rename(directory / f"{aside}{suffix}")
        log.warning(
            "cache database %s is corrupt (%s); moved it to %s and started an empty cache",
            directory / DB_NAME,
            exc,
            directory / aside,
        )
    try:
        return diskcache.Cache(str(directory), **settings)
    except sqlite3.Error as exc:
        raise CacheError(f"cannot create a fresh cache database in {directory}: {exc}") from exc


def _padded_chunks(names: list[str]) -> Iterator[tuple[int, list[str]]]:
    """``names`` in chunks of at most 500, each padded to a length of :data:`_IN_SIZES`.

    Few distinct ``IN`` list lengths mean SQLite's prepared statements are reused (a
    new length is a new statement to compile); ``""`` is never a stored name.
    """
    for start in range(0, len(names), _SQL_CHUNK):
        chunk = names[start : start + _SQL_CHUNK]
        size = next(b for b in _IN_SIZES if b >= len(chunk))
        yield size, chunk + [""] * (size - len(chunk))


@functools.lru_cache(maxsize=len(_IN_SIZES))
def _select(size: int) -> str:
    marks = ",".join("?" * size)
    return f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})"


@functools.lru_cache(maxsize=len(_IN_SIZES))
def _select_packed(size: int) -> str:
    # One result row for the whole list: SQLite steps over the matches in C, and
    # both group_concat calls walk the same rows in the same order.
    marks = ",".join("?" * size)
    return (
        "SELECT group_concat(CASE WHEN mode = 1 THEN key END, char(10)),"
        " CAST(group_concat(CASE WHEN mode = 1 THEN value END, '') AS BLOB),"
        " group_concat(CASE WHEN mode != 1 THEN key END, char(10))"
        f" FROM Cache WHERE raw = 1 AND key IN ({marks})"
    )


class RowReader:
    """Batched lookups in a diskcache database, for ONE thread (it owns a SQLite connection).

    Reads diskcache's ``Cache`` table directly (its on-disk schema: ``key``, ``raw``,
    ``mode``, ``filename``, ``value``) with ``key IN (...)`` on its unique
    ``(key, raw)`` index: one query per 500 names instead of one ``Cache.get`` per
    name. Inline values are taken from the row; file-backed ones are read by
    diskcache's public ``Disk.fetch``. Other modes (e.g. a pickle) are ignored, never
    unpickled.

    Args:
        path: the database file (``DB_NAME`` inside the cache directory).
        disk: the open diskcache's ``disk``, which reads values kept in files; None
            (e.g. in another process): such values are reported by
            :meth:`fetch_packed` as found elsewhere and :meth:`fetch` skips them.
        read_only: open the database read-only (a missing file is an error, never
            created empty).
    """

    def __init__(self, path: Path, disk: Any | None = None, *, read_only: bool = False) -> None:
        self._path = path
        self._disk = disk
        self._read_only = read_only
        self._con: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        con = self._con
        if con is None:
            if self._read_only:
                uri = f"{self._path.resolve().as_uri()}?mode=ro"
                con = sqlite3.connect(uri, uri=True, timeout=_READ_TIMEOUT_S, isolation_level=None)
            else:
                con = sqlite3.connect(self._path, timeout=_READ_TIMEOUT_S, isolation_level=None)
            # Random-key lookups: map the file and keep a large page cache (as diskcache does).
            con.execute(f"PRAGMA mmap_size = {_READ_MMAP_BYTES}")
            con.execute(f"PRAGMA cache_size = -{_READ_CACHE_KIB}")
            self._con = con
        return con

    def fetch(self, names: list[str]) -> dict[str, object]:
        """Return ``{name: stored value}`` (bytes or str) for the ``names`` present.

        Raises:
            sqlite3.Error, OSError: the database or a value file cannot be read.
        """
        con = self._connection()
        out: dict[str, object] = {}
        for size, params in _padded_chunks(names):
            rows = con.execute(_select(size), params)
            for name, mode, filename, value in rows:
                if mode == _MODE_INLINE:
                    out[name] = value  # bytes (BLOB) or str (TEXT), stored in the row
                elif mode in _FILE_MODES and self._disk is not None:
                    out[name] = self._disk.fetch(mode, filename, value, False)
        return out

    def fetch_packed(self, names: list[str]) -> tuple[list[str], bytes, list[str]]:
        """Look ``names`` up and return the in-row values concatenated, in one step per query.

        For values that are self-delimiting (msgpack): the caller splits ``packed`` by
        decoding it. Each query returns ONE row, so the thread releases and retakes
        the GIL once per 500 names, not once per found row (each retake competes with
        the event loop thread). Names must not contain a newline.

        Returns:
            ``(found, packed, elsewhere)``: the names found with their value in the row,
            in the order of their bytes in ``packed``; the concatenated values; and the
            names found whose value is in a file (read them with :meth:`fetch`).

        Raises:
            sqlite3.Error: the database cannot be read.
        """
        con = self._connection()
        found: list[str] = []
        packed: list[bytes] = []
        elsewhere: list[str] = []
        for size, params in _padded_chunks(names):
            row = con.execute(_select_packed(size), params).fetchone()
            inline, values, other = row if row is not None else (None, None, None)
            if inline and isinstance(values, bytes):
                found += inline.split("\n")
                packed.append(values)
            if other:
                elsewhere += other.split("\n")
        return found, b"".join(packed), elsewhere

    def key_count(self) -> int:
        """Items in the database, as diskcache counts them (its ``Settings`` row ``count``).

        Raises:
            sqlite3.Error: the database cannot be read.
        """
        row = self._connection().execute("SELECT value FROM Settings WHERE key = 'count'").fetchone()
        return int(row[0]) if row is not None and row[0] is not None else 0

    def key_blocks(self, rows: int = 65536) -> Iterator[str]:
        """Every stored name of 32 characters (the length of a cache key), concatenated.

        One string per ``rows`` row ids, built by SQLite (``group_concat``): the thread
        holds the interpreter lock for a few string operations per block, not one
        object per row. A name inserted while this runs may be missed (the caller adds
        names put meanwhile itself).

        Raises:
            sqlite3.Error: the database cannot be read.
        """
        con = self._connection()
        low, high = con.execute("SELECT min(rowid), max(rowid) FROM Cache").fetchone()
        if low is None:
            return
        for start in range(int(low), int(high) + 1, rows):
            (block,) = con.execute(
                "SELECT group_concat(key, '') FROM Cache"
                " WHERE rowid >= ? AND rowid < ? AND raw = 1 AND typeof(key) = 'text' AND length(key) = 32",
                (start, start + rows),
            ).fetchone()
            if block:
                yield block

    def close(self) -> None:
        """Close the connection (call from the thread that used it)."""
        if self._con is not None:
            self._con.close()
            self._con = None


# diskcache's own row layout for a value kept in the row (``Cache.set`` of a small str or
# bytes without expiry or tag): its triggers keep the item count and size in Settings.
# A name already present is overwritten, unless its old value lives in a file (which
# only ``Cache.set`` knows how to remove); then the stored value is kept.
_ROW = "(?, 1, ?, NULL, ?, 0, NULL, 0, 1, NULL, ?)"
_UPSERT_TAIL = (
    " ON CONFLICT(key, raw) DO UPDATE SET store_time = excluded.store_time,"
    " access_time = excluded.access_time, size = 0, mode = 1, filename = NULL,"
    " value = excluded.value WHERE Cache.filename IS NULL"
)
#: Rows per multi-row INSERT (4 parameters each, below SQLite's 32,766 variables): a batch of 500
#: results is one statement.
_ROWS_PER_STATEMENT = 1000


def _upsert(rows: int) -> str:
    return (
        "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count,"
        " tag, size, mode, filename, value) VALUES " + ",".join([_ROW] * rows) + _UPSERT_TAIL
    )


class RowWriter:
    """Batched writes of small values into a diskcache database, for ONE thread.

    Writes rows exactly as ``Cache.set`` lays out a str or bytes value shorter than
    the cache's ``disk_min_file_size`` (no expiry, no tag), with multi-row upserts of
    1,000 rows inside one ``BEGIN IMMEDIATE ... COMMIT``. diskcache's ``set`` runs a
    SELECT, an INSERT or UPDATE and a cull check per value, about 40 µs each; this
    costs about 10 µs per value. One statement per 1,000 rows (not ``executemany``, one
    step per row) also matters for the event loop: each SQLite step releases and
    retakes the GIL, and every retake competes with the loop thread. Larger values
    must go through ``Cache.set`` (they are written to files); see :meth:`fits`.

    Args:
        cache: the open diskcache (its directory and ``disk.min_file_size`` are used).
    """

    def __init__(self, cache: diskcache.Cache) -> None:
        self._path = Path(cache.directory) / DB_NAME
        self._min_file_size = int(cache.disk.min_file_size)
        self._rows_per_statement = _ROWS_PER_STATEMENT
        self._con: sqlite3.Connection | None = None

    def fits(self, value: str | bytes) -> bool:
        """Whether ``value`` is small enough to live in its row (else use ``Cache.set``)."""
        return len(value) < self._min_file_size

    def write(self, rows: list[tuple[str, str | bytes]]) -> None:
        """Store every ``(name, value)`` of ``rows`` in one transaction (all or nothing).

        Raises:
            sqlite3.Error: the database cannot be written; nothing of the batch is kept.
        """
        con = self._con
        if con is None:
            con = sqlite3.connect(self._path, timeout=_WRITE_TIMEOUT_S, isolation_level=None)
            # As diskcache configures its own connections: WAL (already set on the file)
            # with synchronous=NORMAL, durable across a killed process.
            con.execute("PRAGMA synchronous = 1")
            con.execute(f"PRAGMA cache_size = -{_WRITE_CACHE_KIB}")
            con.execute(f"PRAGMA wal_autocheckpoint = {_WAL_CHECKPOINT_PAGES}")
            # Old SQLite builds allow 999 variables per statement, newer ones 32,766.
            limit = con.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            self._rows_per_statement = max(1, min(_ROWS_PER_STATEMENT, limit // 4))
            self._con = con
        now = time.time()
        con.execute("BEGIN IMMEDIATE")
        try:
            step = self._rows_per_statement
            for start in range(0, len(rows), step):
                chunk = rows[start : start + step]
                params: list[object] = []
                for name, value in chunk:
                    params += (name, now, now, value)
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
