"""The cache directory on disk: its lock, its diskcache database, and batched row reads.

- :class:`DirectoryLock`: one dahl run per cache directory (``flock`` on a lock file;
  released on close and by the OS when the process dies).
- :func:`open_database`: opens diskcache with eviction off; a corrupt database is moved
  aside and replaced by an empty one.
- :class:`RowReader`: looks many names up with one ``key IN (...)`` query instead of
  one ``Cache.get`` per name (the cache-hit path).
"""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import diskcache  # type: ignore[import-untyped]

from dahl.locking import FolderLock
from dahl.errors import CacheError

__all__ = ["DB_NAME", "LOCK_NAME", "DirectoryLock", "RowReader", "open_database"]

log = logging.getLogger(__name__)

#: diskcache's database file name inside the cache directory.
DB_NAME = "cache.db"
#: The lock file inside the cache directory; holds the pid of the run using it.
LOCK_NAME = "dahl.lock"

#: Far above diskcache's 1 GiB default; with eviction off it is only a guard, bytes.
_SIZE_LIMIT = 2**40
#: Names per ``key IN (...)`` query (below SQLite's 999-variable limit of old builds).
_SQL_CHUNK = 500
#: How long a read waits for a SQLite lock, seconds (reads rarely wait: WAL mode).
_READ_TIMEOUT_S = 10.0
#: Memory-map size of the reader's connection, bytes (diskcache: 64 MiB; mapped pages count in RSS).
_READ_MMAP_BYTES = 2**28
#: Page cache of the reader's connection, KiB.
_READ_CACHE_KIB = 65536
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


class RowReader:
    """Batched lookups in a diskcache database, for ONE thread (it owns a SQLite connection).

    Reads diskcache's ``Cache`` table directly (its on-disk schema: ``key``, ``raw``,
    ``mode``, ``filename``, ``value``) with ``key IN (...)`` on its unique
    ``(key, raw)`` index: one query per 500 names instead of one ``Cache.get`` per
    name. Inline values are taken from the row; file-backed ones are read by
    diskcache's public ``Disk.fetch``. Other modes (e.g. a pickle) are ignored, never
    unpickled.

    Args:
        cache: the open diskcache (its directory and ``disk`` are used).
    """

    def __init__(self, cache: diskcache.Cache) -> None:
        self._path = Path(cache.directory) / DB_NAME
        self._disk = cache.disk
        self._con: sqlite3.Connection | None = None

    def fetch(self, names: list[str]) -> dict[str, object]:
        """Return ``{name: stored value}`` (bytes or str) for the ``names`` present.

        Raises:
            sqlite3.Error, OSError: the database or a value file cannot be read.
        """
        con = self._con
        if con is None:
            con = sqlite3.connect(self._path, timeout=_READ_TIMEOUT_S, isolation_level=None)
            # Random-key lookups: map the file and keep a large page cache (as diskcache does).
            con.execute(f"PRAGMA mmap_size = {_READ_MMAP_BYTES}")
            con.execute(f"PRAGMA cache_size = -{_READ_CACHE_KIB}")
            self._con = con
        out: dict[str, object] = {}
        for start in range(0, len(names), _SQL_CHUNK):
            chunk = names[start : start + _SQL_CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = con.execute(
                f"SELECT key, mode, filename, value FROM Cache WHERE raw = 1 AND key IN ({marks})",
                chunk,
            )
            for name, mode, filename, value in rows:
                if mode == _MODE_INLINE:
                    out[name] = value  # bytes (BLOB) or str (TEXT), stored in the row
                elif mode in _FILE_MODES:
                    out[name] = self._disk.fetch(mode, filename, value, False)
        return out

    def close(self) -> None:
        """Close the connection (call from the thread that used it)."""
        if self._con is not None:
            self._con.close()
            self._con = None
