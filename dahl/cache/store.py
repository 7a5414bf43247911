"""The on-disk result store: diskcache behind one writer thread and one reader thread.

Layout per cache key ``k`` (see :mod:`dahl.cache.keys`):

- ``f"{k}:v{parser_version}"``: the parsed value (a :class:`~dahl.records.Verdict` or a
  ``list[Claim]``), msgpack-encoded with msgspec;
- ``f"{k}:raw"``: the model's raw reply (str), when the adapter produced one.

A new ``parser_version`` misses the parsed entry but finds the raw one, so the
caller re-parses without calling the model again (DESIGN.md §5).

Threads (the event loop never touches SQLite, DESIGN.md §1):

- Writes: :meth:`CacheStore.put` only enqueues. ONE writer thread commits batches in a
  single transaction when ``flush_items`` are queued or ``flush_interval_s`` has
  passed since the batch's first item, whichever comes first. Until committed, a put
  value is served from memory, so a repeat right after a put is a hit, not a miss.
- Reads: :meth:`CacheStore.get` parks ``(key, future)`` in a pending list. The list
  goes to ONE reader-thread call (``loop.run_in_executor``) when it holds 256 keys,
  or else, when the reader is idle, once the loop's current round of ready tasks has
  run (``call_soon``), and when it is busy, as soon as its call returns; the
  call's result resolves the futures. The loop keeps computing keys while the thread
  looks up the previous batch, and N hits cost about N / batch thread hops. A
  dedicated single thread (not anyio's pool) is used because diskcache keeps one
  SQLite connection per thread, and this one can be closed on :meth:`close`.

Failure policy: a read error (SQLite, diskcache, decode) is a miss plus one warning
per store; a write error drops that batch plus one warning per store; a corrupt
database found on open is renamed ``cache.db.corrupt-<timestamp>`` and a fresh one
is created. A lock file (``flock``) makes one directory usable by one run at a time.
The pieces live in :mod:`dahl.cache.database` and :mod:`dahl.cache.writer`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import platformdirs

from dahl.cache.database import DirectoryLock, RowReader, open_database
from dahl.cache.writer import BatchWriter, Value, value_name
from dahl.errors import CacheError

__all__ = ["CACHE_DIR_ENV", "CacheStore", "CachedEntry", "default_cache_dir"]

log = logging.getLogger(__name__)

#: Environment variable overriding the default cache directory.
CACHE_DIR_ENV = "DAHL_CACHE_DIR"

#: Pending gets handed to the reader thread at once, without waiting for the loop's
#: current round of ready tasks to end.
_READ_BATCH = 256

_DECODER: msgspec.msgpack.Decoder[Value] = msgspec.msgpack.Decoder(Value)
_LIST_DECODER: msgspec.msgpack.Decoder[list[Value]] = msgspec.msgpack.Decoder(list[Value])
#: Marks a stored value that cannot be decoded (a miss, counted as a read error).
_UNDECODABLE = object()


def default_cache_dir() -> Path:
    """Return ``$DAHL_CACHE_DIR`` if set, else the platform user cache dir for ``dahl``.

    The only place dahl reads :data:`CACHE_DIR_ENV`. Linux default:
    ``~/.cache/dahl`` (``platformdirs.user_cache_dir``).
    """
    env = os.environ.get(CACHE_DIR_ENV, "").strip()
    return Path(env) if env else Path(platformdirs.user_cache_dir("dahl"))


class CachedEntry(NamedTuple):
    """What a lookup found.

    Attributes:
        value: the parsed value for the requested parser version, or None when only
            the raw reply is stored (the caller re-parses it).
        raw: the raw reply; only filled when ``value`` is None.
    """

    value: Value | None
    raw: str | None


# A group of gets: (index in the caller's list, key, parser version) each, and its future.
_Pending = tuple[list[tuple[int, str, str]], "asyncio.Future[list[CachedEntry | None]]"]


class CacheStore:
    """Split and check results on disk, keyed by content hash.

    Args:
        directory: cache directory (created if missing).
        flush_items: queued entries that trigger a write transaction.
        flush_interval_s: longest an entry waits in the queue before it is written,
            seconds. 0.15 by default: a commit itself takes tens of milliseconds while
            the loop keeps working, so an entry is on disk within ~0.25 s of its put and
            a killed run loses at most that much (issue 4: batches of ≤ 250 ms).

    Attributes:
        directory: the cache directory.

    Raises:
        CacheError: (on construction) the directory cannot be created, is locked by
            another dahl run, or its database cannot be opened.
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
            raise CacheError(f"cannot create cache directory {self.directory}: {exc}") from exc
        self._lock = DirectoryLock(self.directory)
        try:
            self._cache = open_database(self.directory)
        except BaseException:
            self._lock.release()
            raise
        self._cache.close()  # this thread's connection; reopened lazily by stats()/clear()
        self._closed = False
        self._hits = 0  # written by the reader thread only
        self._memory_hits = 0  # written by the event loop thread only
        self._raw_hits = 0
        self._misses = 0
        self._read_errors = 0
        self._read_batches = 0
        self._warned_read = False
        self._pending: list[_Pending] = []
        self._pending_keys = 0
        self._reads_in_flight = 0
        self._dispatch_scheduled = False
        self._rows = RowReader(self._cache)
        self._reader = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="dahl-cache-read"
        )
        self._writer = BatchWriter(
            self._cache, flush_items=flush_items, flush_interval_s=flush_interval_s
        )

    def __repr__(self) -> str:
        """Show the directory and this session's counts."""
        return (
            f"<CacheStore {self.directory} hits={self._hits + self._memory_hits} "
            f"misses={self._misses} writes={self._writer.writes} queued={self._writer.queued()}>"
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
        return self._read_batches

    def _check_open(self) -> None:
        if self._closed:
            raise CacheError(f"cache {self.directory} is closed")

    # -- writes ---------------------------------------------------------------------

    def put(self, key: str, value: Value, raw: str | None, *, parser_version: str = "1") -> None:
        """Queue ``value`` (and ``raw``, when not None) for writing under ``key``; never blocks.

        Args:
            key: a key from :mod:`dahl.cache.keys`.
            value: a non-error Verdict, or a complete claim list (the caller guarantees
                errors and partial outputs are never put).
            raw: the model's raw reply, or None (then no raw entry is written).
            parser_version: version of the parser that produced ``value``.

        Raises:
            CacheError: the store is closed.
        """
        self._check_open()
        self._writer.put(key, value, raw, parser_version)

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

    def written_since(self, key: str, generation: int, *, parser_version: str = "1") -> bool | None:
        """Whether this store committed ``key`` after write ``generation``; None if it cannot tell.

        A lookup that missed ``key`` at ``generation`` stays a miss on disk while this is
        False (the directory lock keeps other runs out). Exact for the last 128 write
        transactions; None beyond.
        """
        return self._writer.written_since(value_name(key, parser_version), generation)

    def recent(self, key: str, *, parser_version: str = "1") -> Value | None:
        """The value put under ``key`` and not yet committed (memory only, never blocks)."""
        writer = self._writer
        if not writer.has_recent:
            return None
        return writer.recent(value_name(key, parser_version))

    async def get(self, key: str, *, parser_version: str = "1") -> CachedEntry | None:
        """Look ``key`` up (batched with every other pending get, off the event loop).

        Args:
            key: a key from :mod:`dahl.cache.keys`.
            parser_version: the caller's parser version.

        Returns:
            The parsed value for ``parser_version``; else the raw reply alone (value
            None); else None (a miss). A read or decode error is a miss.

        Raises:
            CacheError: the store is closed.
        """
        return (await self.get_many([key], parser_version=parser_version))[0]

    async def get_many(self, keys: Sequence[str], *, parser_version: str = "1") -> list[CachedEntry | None]:
        """Look all ``keys`` up at once; one future for the group, batched with other gets.

        Values put and not yet committed are answered from memory. The rest joins the
        pending lookups that go to the reader thread as one call.

        Args:
            keys: keys from :mod:`dahl.cache.keys` (e.g. every claim of one answer).
            parser_version: the caller's parser version.

        Returns:
            One entry per key, in order, as :meth:`get` returns it (None = miss).

        Raises:
            CacheError: the store is closed.
        """
        if self._closed:
            raise CacheError(f"cache {self.directory} is closed")
        found: list[CachedEntry | None] = [None] * len(keys)
        wanted: list[tuple[int, str, str]] = []
        writer = self._writer
        recent = writer.has_recent
        for i, key in enumerate(keys):
            if recent:
                value = writer.recent(value_name(key, parser_version))
                if value is not None:
                    self._memory_hits += 1
                    found[i] = CachedEntry(value, None)
                    continue
            wanted.append((i, key, parser_version))
        if not wanted:
            return found
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[CachedEntry | None]] = loop.create_future()
        pending = self._pending
        pending.append((wanted, future))
        self._pending_keys += len(wanted)
        if self._pending_keys >= _READ_BATCH:
            self._dispatch(loop)  # full: hand it over now, so the thread works while we go on
        elif not self._dispatch_scheduled and not self._reads_in_flight:
            # The reader is idle: go once the ready tasks have run (they may add keys).
            # While it is busy, keys wait and go when its call returns (_deliver).
            self._dispatch_scheduled = True
            loop.call_soon(self._dispatch_soon, loop)
        for (i, _, _), entry in zip(wanted, await future, strict=True):
            found[i] = entry
        return found

    def _dispatch_soon(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send whatever is pending once every task that was ready has run."""
        self._dispatch_scheduled = False
        if not self._pending:
            return
        if self._closed:  # closed meanwhile: the reader thread is gone, answer misses
            pending, self._pending = self._pending, []
            self._pending_keys = 0
            for wanted, future in pending:
                if not future.done():
                    future.set_result([None] * len(wanted))
            return
        self._dispatch(loop)

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Send the pending gets to the reader thread as one call."""
        batch, self._pending = self._pending, []
        self._pending_keys = 0
        keys = [(key, version) for wanted, _ in batch for _, key, version in wanted]
        self._reads_in_flight += 1
        done = loop.run_in_executor(self._reader, self._lookup, keys)
        done.add_done_callback(functools.partial(self._deliver, batch))

    def _deliver(self, batch: list[_Pending], done: asyncio.Future[list[CachedEntry | None]]) -> None:
        """Resolve a batch's futures (on the event loop) with what the reader thread found."""
        self._reads_in_flight -= 1
        if self._pending and not self._reads_in_flight and not self._dispatch_scheduled:
            self._dispatch_scheduled = True  # what gathered meanwhile goes next
            asyncio.get_running_loop().call_soon(self._dispatch_soon, asyncio.get_running_loop())
        if done.cancelled():
            for _, future in batch:
                future.cancel()
            return
        exc = done.exception()
        if exc is not None:  # _lookup catches per key; this is the executor itself failing
            self._read_failed(exc)
            found: list[CachedEntry | None] = [None] * sum(len(wanted) for wanted, _ in batch)
        else:
            found = done.result()
        start = 0
        for wanted, future in batch:
            end = start + len(wanted)
            if not future.done():  # its getter may have been cancelled
                future.set_result(found[start:end])
            start = end

    def _lookup(self, keys: list[tuple[str, str]]) -> list[CachedEntry | None]:
        """Reader thread: look every key up with two SQL queries per chunk; errors are misses."""
        self._read_batches += 1
        names = [value_name(key, version) for key, version in keys]
        try:
            values = self._values(names)
            missing = [key for (key, _), name in zip(keys, names) if name not in values]
            raws = self._rows.fetch([f"{key}:raw" for key in missing]) if missing else {}
        except (sqlite3.Error, OSError) as exc:
            self._read_failed(exc)
            return [None] * len(keys)
        found: list[CachedEntry | None] = []
        for (key, _), name in zip(keys, names):
            value = values.get(name)
            if value is not None:
                if value is _UNDECODABLE:
                    found.append(None)
                else:
                    self._hits += 1
                    found.append(CachedEntry(value, None))  # type: ignore[arg-type]
                continue
            raw = raws.get(f"{key}:raw")
            if isinstance(raw, str):
                self._raw_hits += 1
                found.append(CachedEntry(None, raw))
            else:
                self._misses += 1
                found.append(None)
        return found

    def _values(self, names: list[str]) -> dict[str, object]:
        """Reader thread: the parsed values stored under ``names`` (undecodable ones marked).

        The in-row values come back concatenated from one query and are decoded by one
        msgspec call as a msgpack array; only if that fails (a damaged value) are they
        decoded one by one, so the damaged ones alone become misses.
        """
        inline, packed, elsewhere = self._rows.fetch_packed(names)
        out: dict[str, object] = {}
        if inline:
            try:
                decoded = _LIST_DECODER.decode(b"\xdd" + len(inline).to_bytes(4, "big") + packed)
            except msgspec.DecodeError:
                elsewhere = inline + elsewhere
            else:
                out.update(zip(inline, decoded, strict=True))
        if elsewhere:
            for name, blob in self._rows.fetch(elsewhere).items():
                try:
                    out[name] = _DECODER.decode(blob)  # type: ignore[arg-type]
                except (msgspec.DecodeError, TypeError) as exc:
                    self._read_failed(exc)
                    out[name] = _UNDECODABLE
        return out

    def _read_failed(self, exc: BaseException) -> None:
        self._read_errors += 1
        self._misses += 1
        if not self._warned_read:
            self._warned_read = True
            log.warning(
                "cache read from %s failed (%s: %s); treated as a miss "
                "(further read errors are counted, not logged)",
                self.directory,
                type(exc).__name__,
                exc,
            )

    # -- lifecycle and maintenance ----------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Size of the cache and this session's counts (blocking: reads SQLite).

        Returns:
            ``directory`` (str); ``entries`` (stored items: a parsed value and its raw
            reply count as two); ``size_bytes`` (diskcache's estimate of the size on
            disk, bytes); and since open: ``hits`` (parsed value found), ``raw_hits``
            (only the raw reply found), ``misses``, ``read_errors``, ``read_batches``,
            ``writes`` (results committed), ``write_errors``, ``transactions``, ``queued``.

        Raises:
            CacheError: the database cannot be read.
        """
        try:
            entries = len(self._cache)
            size = self._cache.volume()
        except sqlite3.Error as exc:
            raise CacheError(f"cannot read cache statistics in {self.directory}: {exc}") from exc
        return {
            "directory": str(self.directory),
            "entries": entries,
            "size_bytes": size,
            "hits": self._hits + self._memory_hits,
            "raw_hits": self._raw_hits,
            "misses": self._misses,
            "read_errors": self._read_errors,
            "read_batches": self._read_batches,
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
            removed: int = self._cache.clear(retry=True)
        except sqlite3.Error as exc:
            raise CacheError(f"cannot clear cache {self.directory}: {exc}") from exc
        return removed

    def close(self) -> None:
        """Commit everything queued, stop both threads, close the database and unlock.

        Idempotent. Blocks until the writer thread has drained the queue.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._writer.stop()
            self._reader.submit(self._rows.close).result()  # closed by the thread that used it
        finally:
            self._reader.shutdown(wait=True)
            self._cache.close()
            self._lock.release()
