"""The on-disk result store: one SQLite table behind one writer thread and one reader thread.

Layout per cache key ``k`` (see :mod:`dahl.cache._keys`): ONE row of the ``entries``
table (:mod:`dahl.cache._schema`, dahl's own schema) keyed ``k`` (32 hex digits)
holding a :class:`~dahl.cache._envelope.Stored` envelope, msgpack-encoded with msgspec: the parser version, the value (a :class:`~dahl.records.Verdict`, a
``list[Claim]``, or opaque bytes) and the model's raw reply when it is not the
Verdict's own ``raw``. One row per result halves the writer's rows and lets a batch
of lookups, misses included, take one query.

A lookup with the stored ``parser_version`` gets the value; with another one it gets
the raw reply alone, so the caller re-parses without calling the model again,
and its put of the re-parsed value keeps the raw reply. Rows of another layout
(``k:v1``, ``k:raw``) are never read: they are misses.

Threads (the event loop never touches SQLite):

- Writes: :meth:`CacheStore.put` only enqueues. ONE writer thread commits batches in a
  single transaction when ``flush_items`` are queued or ``flush_interval_s`` has
  passed since the batch's first item, whichever comes first. Until committed, a put
  value is served from memory, so a repeat right after a put is a hit, not a miss.
- Reads: :meth:`CacheStore.get_many` answers keys put and not yet committed from
  memory and hands the rest, as one group, to ONE reader thread
  (:class:`~dahl.cache._reader.BatchReader`) that serves every pending group in one
  call: N hits cost about N / 256 thread hops.

Failure policy: a read error (SQLite, decode) is a miss plus one warning per store; a
write error drops that batch plus one warning per store; a damaged database found on
open is renamed ``cache.db.corrupt-<timestamp>`` and a fresh one is created; a
directory or database that cannot be used at all raises
:class:`~dahl.cache._schema.CacheUnusable` (the run goes on without a cache). A lock
file (:mod:`dahl.locking`) makes one directory usable by one run at a time.
The pieces live in :mod:`dahl.cache._database`, :mod:`dahl.cache._reader` and
:mod:`dahl.cache._writer`.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import platformdirs

from dahl.cache._database import DirectoryLock, RowReader, delete_rows, row_count
from dahl.cache._envelope import CachedEntry, Value
from dahl.cache._reader import BatchReader
from dahl.cache._schema import DB_NAME, CacheUnusable, open_database
from dahl.cache._writer import BatchWriter
from dahl.errors import CacheError

__all__ = ["CACHE_DIR_ENV", "CacheStore", "CachedEntry", "Store", "default_cache_dir"]

log = logging.getLogger(__name__)

#: Environment variable overriding the default cache directory.
CACHE_DIR_ENV = "DAHL_CACHE_DIR"

class Store(Protocol):
    """The store interface the caching wrapper (:class:`~dahl.cache._cached.Cached`) uses.

    :class:`CacheStore` implements it. Keys come from :mod:`dahl.cache._keys`; a value
    is stored with the parser version that produced it and its raw reply.
    """

    async def get_many(self, keys: Sequence[str], *, parser_version: str = "1") -> list[CachedEntry | None]:
        """One entry per key, in order: the value put by ``parser_version``, else the raw reply
        alone, else None (a miss; a failed read is a miss too).

        Raises:
            CacheError: the store is closed.
        """
        ...

    def put_many(self, items: Iterable[tuple[str, Value, str | None]], *, parser_version: str = "1") -> None:
        """Queue ``(key, value, raw)`` entries; never blocks, never stores errors (the caller's rule).

        Raises:
            CacheError: the store is closed.
        """
        ...

    def recent(self, key: str, *, parser_version: str = "1") -> Value | None:
        """The value put under ``key`` by ``parser_version`` and not yet written (memory only)."""
        ...


def default_cache_dir() -> Path:
    """Return ``$DAHL_CACHE_DIR`` if set, else the platform user cache dir for ``dahl``.

    The only place dahl reads :data:`CACHE_DIR_ENV`. Linux default:
    ``~/.cache/dahl`` (``platformdirs.user_cache_dir``).
    """
    env = os.environ.get(CACHE_DIR_ENV, "").strip()
    return Path(env) if env else Path(platformdirs.user_cache_dir("dahl"))


class CacheStore:
    """Split and check results on disk, keyed by content hash.

    Args:
        directory: cache directory (created if missing).
        flush_items: queued entries that trigger a write transaction.
        flush_interval_s: longest an entry waits in the queue before it is written,
            seconds. 0.15 by default: a commit itself takes tens of milliseconds while
            the loop keeps working, so an entry is on disk within ~0.25 s of its put and
            a killed run loses at most that much (batches of ≤ 250 ms).

    Attributes:
        directory: the cache directory.

    Raises:
        CacheError: (on construction) another dahl run holds the directory.
        CacheUnusable: (on construction) the directory cannot be created or locked, or
            its database cannot be opened or created (a damaged one is moved aside).
        ValueError: ``flush_items < 1`` or ``flush_interval_s <= 0``.
    """

    def __init__(
        self, directory: Path, *, flush_items: int = 500, flush_interval_s: float = 0.15
    ) -> None:
        if flush_items < 1 or flush_interval_s <= 0:
            raise ValueError("flush_items must be >= 1 and flush_interval_s > 0 seconds")
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheUnusable(f"cannot create cache directory {self.directory}: {exc}") from exc
        self._lock = DirectoryLock(self.directory)
        try:
            self._path = open_database(self.directory)
        except BaseException:
            self._lock.release()
            raise
        self._closed = False
        self._memory_hits = 0  # written by the event loop thread only
        self._reader = BatchReader(RowReader(self._path), self.directory)
        self._writer = BatchWriter(self._path, flush_items=flush_items, flush_interval_s=flush_interval_s)

    def __repr__(self) -> str:
        """Show the directory and this session's counts."""
        return (
            f"<CacheStore {self.directory} hits={self._reader.hits + self._memory_hits} "
            f"misses={self._reader.misses} writes={self._writer.writes} queued={self._writer.queued()}>"
        )

    def __enter__(self) -> CacheStore:
        """Return the store; :meth:`close` runs on exit."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the store (drains the write queue)."""
        self.close()

    @property
    def transactions(self) -> int:
        """Write transactions committed so far (each holds up to ``flush_items`` entries)."""
        return self._writer.transactions

    @property
    def read_batches(self) -> int:
        """Reader-thread calls made so far (each serves every get pending at that moment)."""
        return self._reader.read_batches

    def _check_open(self) -> None:
        if self._closed:
            raise CacheError(f"cache {self.directory} is closed")

    # -- writes ---------------------------------------------------------------------

    def put(self, key: str, value: Value, raw: str | None, *, parser_version: str = "1") -> None:
        """Queue ``value`` with its ``raw`` reply as ``key``'s one row; never blocks.

        A later put of ``key`` replaces the row, whatever its parser version.

        Args:
            key: a key from :mod:`dahl.cache._keys`.
            value: a non-error Verdict, a complete claim list (the caller guarantees
                errors and partial outputs are never put), or an opaque blob (bytes,
                returned as is to a caller with the same ``parser_version``).
            raw: the model's raw reply, or None. A Verdict's own ``raw`` is its reply
                when ``raw`` is None or equal to it (stored once); a claim list or a
                blob put with None has no reply to re-parse.
            parser_version: version of the parser that produced ``value``.

        Raises:
            CacheError: the store is closed.
        """
        if self._closed:  # _check_open inlined: a put is made for every result
            raise CacheError(f"cache {self.directory} is closed")
        self._writer.put(key, value, raw, parser_version)

    def put_many(self, items: Iterable[tuple[str, Value, str | None]], *, parser_version: str = "1") -> None:
        """Queue ``(key, value, raw)`` entries as :meth:`put` does, in one step; never blocks.

        Raises:
            CacheError: the store is closed.
        """
        if self._closed:
            raise CacheError(f"cache {self.directory} is closed")
        self._writer.put_many(items, parser_version)

    async def flush(self) -> None:
        """Wait until every entry queued before this call is committed to disk.

        Raises:
            CacheError: the store is closed.
        """
        self._check_open()
        await self._writer.flush()

    # -- reads ----------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Write transactions committed so far; read it before a lookup (see :meth:`get_many`).

        If it is unchanged later, nothing was written to disk in between: a key the
        lookup missed, and that :meth:`recent` does not hold now, is still absent.
        """
        return self._writer.generation

    def after_miss(self, key: str, generation: int, *, parser_version: str = "1") -> Value | None | Literal[False]:
        """A lookup missed ``key`` at write ``generation``: is it still a miss? (memory only, never blocks)

        Exact for the last 128 write transactions (beyond them: False). With the cache
        directory locked by this run nothing else writes to it, so None means: not on
        disk unless it already was at ``generation``. A first run asks this for every
        claim.

        Returns:
            The value put since by ``parser_version``; None: still a miss, the disk
            need not be read again; False: the key may have been written since (or the
            writer cannot tell): look it up with :meth:`get`.
        """
        return self._writer.after_miss(key, generation, parser_version)

    def recent(self, key: str, *, parser_version: str = "1") -> Value | None:
        """The value put under ``key`` by ``parser_version`` and not yet committed (memory only, never blocks)."""
        writer = self._writer
        if not writer.has_recent:
            return None
        return writer.recent(key, parser_version)

    async def get(self, key: str, *, parser_version: str = "1") -> CachedEntry | None:
        """Look ``key`` up (batched with every other pending get, off the event loop).

        Args:
            key: a key from :mod:`dahl.cache._keys`.
            parser_version: the caller's parser version.

        Returns:
            The stored value if it was put by ``parser_version``; else its raw reply
            alone (value None); else None (a miss: nothing stored, or no raw reply).
            A read or decode error is a miss.

        Raises:
            CacheError: the store is closed.
        """
        return (await self.get_many([key], parser_version=parser_version))[0]

    async def get_many(self, keys: Sequence[str], *, parser_version: str = "1") -> list[CachedEntry | None]:
        """Look all ``keys`` up at once; one future for the group, batched with other gets.

        Values put by ``parser_version`` and not yet committed are answered from memory.
        The rest joins the pending lookups that go to the reader thread as one call (one
        SQL query per 500 keys, hits and misses alike).

        Args:
            keys: keys from :mod:`dahl.cache._keys` (e.g. every claim of one answer).
            parser_version: the caller's parser version.

        Returns:
            One entry per key, in order, as :meth:`get` returns it (None = miss).

        Raises:
            CacheError: the store is closed.
        """
        if self._closed:
            raise CacheError(f"cache {self.directory} is closed")
        found: list[CachedEntry | None] = [None] * len(keys)
        in_memory = 0
        if self._writer.has_recent:  # values put and not committed yet: not on disk
            for i, value in enumerate(self._writer.recent_many(keys, parser_version)):
                if value is not None:
                    in_memory += 1
                    found[i] = CachedEntry(value, None)
        self._memory_hits += in_memory
        wanted = [(i, key, parser_version) for i, key in enumerate(keys) if found[i] is None]
        if not wanted:
            return found
        for (i, _, _), entry in zip(wanted, await self._reader.read(wanted), strict=True):
            found[i] = entry
        return found

    # -- lifecycle and maintenance ----------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Size of the cache and this session's counts (blocking: reads SQLite).

        Returns:
            ``directory`` (str); ``entries`` (stored rows: one per result, its raw
            reply included; rows of the former two-row layout count too);
            ``size_bytes`` (the database and its write-ahead log on disk, bytes); and
            since open: ``hits`` (value of the caller's parser version found),
            ``raw_hits`` (only the raw reply usable: another parser version),
            ``misses``, ``read_errors``, ``read_batches``, ``writes`` (results
            committed), ``write_errors``, ``transactions``, ``queued``.

        Raises:
            CacheError: the database cannot be read.
        """
        try:
            entries = row_count(self._path)
            size = sum(p.stat().st_size for p in (self._path, self._path.with_name(f"{DB_NAME}-wal")) if p.exists())
        except (sqlite3.Error, OSError) as exc:
            raise CacheError(f"cannot read cache statistics in {self.directory}: {exc}") from exc
        return {
            "directory": str(self.directory),
            "entries": entries,
            "size_bytes": size,
            "hits": self._reader.hits + self._memory_hits,
            "raw_hits": self._reader.raw_hits,
            "misses": self._reader.misses,
            "read_errors": self._reader.read_errors,
            "read_batches": self._reader.read_batches,
            "writes": self._writer.writes,
            "write_errors": self._writer.write_errors,
            "transactions": self._writer.transactions,
            "queued": self._writer.queued(),
        }

    def clear(self) -> int:
        """Remove every entry, after committing queued writes (blocking).

        Returns:
            Number of items removed.

        Raises:
            CacheError: the store is closed or the database cannot be written.
        """
        self._check_open()
        self._writer.drain()
        try:
            return delete_rows(self._path)
        except sqlite3.Error as exc:
            raise CacheError(f"cannot clear cache {self.directory}: {exc}") from exc

    def close(self) -> None:
        """Commit everything queued, stop both threads, close the database and unlock.

        Idempotent. Blocks until the writer thread has drained the queue.
        """
        if self._closed:
            return
        self._closed = True
        try:
            # The writer's connection closes last: SQLite checkpoints the WAL into the database
            # only when the last connection to close can write (the reader's is read-only).
            self._reader.close()
            self._writer.stop()
        finally:
            self._lock.release()
