"""The cache database, ``cache.db``: its one table and how it is opened (:func:`open_database`).

``entries(key TEXT PRIMARY KEY, value BLOB NOT NULL, stored_at REAL NOT NULL)``: a cache key
(32 hex digits), a msgpack envelope (:mod:`dahl.cache._envelope`), ``time.time()`` of the write
in seconds. WAL mode; ``PRAGMA user_version`` holds :data:`SCHEMA_VERSION`.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import time
from pathlib import Path

from dahl.errors import CacheError

__all__ = ["DB_NAME", "SCHEMA_VERSION", "CacheUnusable", "connect", "open_database"]

log = logging.getLogger(__name__)

#: The database file name inside the cache directory.
DB_NAME = "cache.db"
#: ``PRAGMA user_version`` of the layout this module creates.
SCHEMA_VERSION = 1
#: How long a connection waits for SQLite's write lock, seconds.
WRITE_TIMEOUT_S = 60.0

_CREATE = "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL, stored_at REAL NOT NULL)"
#: Characters of SQLite's description of a damaged database kept in the warning.
_PROBLEM_CHARS = 200
#: diskcache's value modes: 1 = bytes or str in the row, 2 = bytes in a file, 3 = str in a file.
_DISKCACHE_ROW, _DISKCACHE_BYTES_FILE, _DISKCACHE_TEXT_FILE = 1, 2, 3


class CacheUnusable(CacheError):
    """The cache directory or its database cannot be used at all (a folder that cannot be created, a
    ``cache.db`` that cannot be opened or created, a schema newer than this dahl's); a run goes on without it."""


def connect(path: Path, *, timeout_s: float = WRITE_TIMEOUT_S) -> sqlite3.Connection:
    """A connection to ``path`` in autocommit mode (transactions are explicit); sqlite3.Error if it cannot open."""
    return sqlite3.connect(path, timeout=timeout_s, isolation_level=None)


def open_database(directory: Path) -> Path:
    """Make the cache.db of the existing ``directory`` ready; return its path.

    No file: a fresh database is created. A cache of older dahl (diskcache's ``Cache`` table,
    ``user_version`` 0) is migrated in place, once, in one transaction (its value files are read
    into rows and deleted). A damaged one is renamed ``cache.db.corrupt-<YYYYmmddTHHMMSS>``
    (with its ``-wal`` and ``-shm`` files), with one warning, and a fresh one created.

    Raises:
        CacheUnusable: the database cannot be opened, checked or created, or a newer
            dahl wrote it.
    """
    path = directory / DB_NAME
    try:
        problem = _prepare(path)
        if problem is not None:
            aside = _move_aside(directory)
            log.warning("cache database %s is corrupt (%s); moved it to %s and started an empty cache",
                        path, problem, aside)
            if _prepare(path) is not None:
                raise CacheUnusable(f"cannot create a fresh cache database {path}: it is corrupt again")
    except sqlite3.Error as exc:
        raise CacheUnusable(f"cannot open cache database {path}: {exc}") from exc
    except OSError as exc:
        raise CacheUnusable(f"cannot use cache database {path}: {exc}") from exc
    return path


def _prepare(path: Path) -> str | None:
    """Check, migrate or create the database at ``path``; the problem found if it is damaged.

    Raises:
        sqlite3.Error: not damage (e.g. the file cannot be opened or written).
        CacheUnusable: a newer dahl's schema.
        OSError: a diskcache value file cannot be read during a migration.
    """
    con = connect(path)
    try:
        try:
            if path.stat().st_size == 0:
                _create(con)
                return None
            checked = con.execute("PRAGMA quick_check(1)").fetchone()
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError as exc:  # "file is not a database", "malformed"
            return str(exc)
        if checked is None or checked[0] != "ok":  # its first problem, on one line
            return " ".join(str(checked[0]).split())[:_PROBLEM_CHARS] if checked else "quick_check gave no answer"
        version = int(con.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            raise CacheUnusable(f"cache database {path} has schema {version}, written by a newer dahl (this one "
                                f"reads {SCHEMA_VERSION}); give this run another --cache-dir")
        if version < SCHEMA_VERSION:
            if _has_table(con, "Cache"):
                _migrate_diskcache(con, path.parent)
            else:
                _create(con)
        return None
    finally:
        con.close()


def _has_table(con: sqlite3.Connection, name: str) -> bool:
    row = con.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
    return row is not None


def _create(con: sqlite3.Connection) -> None:
    con.execute("PRAGMA journal_mode = WAL")  # persistent: every later connection uses it
    con.execute(_CREATE)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")


def _migrate_diskcache(con: sqlite3.Connection, directory: Path) -> None:
    """Copy a diskcache-format cache's results into ``entries`` and drop diskcache's tables (one
    transaction); rows of other kinds (pickled values, non-text keys) are dropped."""
    con.execute("PRAGMA journal_mode = WAL")
    files: list[Path] = []
    con.execute("BEGIN IMMEDIATE")
    try:
        if not _has_table(con, "Cache"):  # another process migrated it meanwhile
            con.execute("ROLLBACK")
            return
        con.execute(_CREATE)
        con.execute(
            "INSERT OR REPLACE INTO entries (key, value, stored_at)"
            " SELECT key, CAST(value AS BLOB), coalesce(store_time, 0) FROM Cache"
            " WHERE raw = 1 AND mode = ? AND typeof(key) = 'text' AND value IS NOT NULL",
            (_DISKCACHE_ROW,),
        )
        in_files = con.execute(
            "SELECT key, mode, filename, coalesce(store_time, 0) FROM Cache"
            " WHERE raw = 1 AND mode IN (?, ?) AND typeof(key) = 'text' AND filename IS NOT NULL",
            (_DISKCACHE_BYTES_FILE, _DISKCACHE_TEXT_FILE),
        ).fetchall()
        for key, mode, filename, stored_at in in_files:
            file = directory / filename
            value = file.read_bytes()  # mode 3 is UTF-8 text: its bytes are the value
            con.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", (key, value, stored_at))
            files.append(file)
        moved = con.execute("SELECT count(*) FROM entries").fetchone()[0]
        con.execute("DROP TABLE Cache")  # its indexes and triggers go with it
        con.execute("DROP TABLE IF EXISTS Settings")
        con.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        with contextlib.suppress(sqlite3.Error):
            con.execute("ROLLBACK")
        raise
    con.execute("COMMIT")
    for file in files:
        with contextlib.suppress(OSError):  # only disk space is at stake
            file.unlink()
            for parent in (file.parent, file.parent.parent):
                if parent != directory:
                    parent.rmdir()  # fails, harmlessly, while it holds other files
    log.info("cache database %s migrated to dahl's own schema (%d results kept)", directory / DB_NAME, moved)


def _move_aside(directory: Path) -> Path:
    """Rename cache.db (and its -wal, -shm files) to ``cache.db.corrupt-<timestamp>``; return it (OSError if not)."""
    aside = directory / f"{DB_NAME}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
    for suffix in ("", "-wal", "-shm"):
        path = directory / f"{DB_NAME}{suffix}"
        if path.exists():
            path.rename(f"{aside}{suffix}")
    return aside
