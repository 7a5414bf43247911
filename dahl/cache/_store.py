"""The result store: its interface (:class:`Store`), single flight, the SQLite backend, open_store."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Iterable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Generic, Literal, Protocol, TypeVar

import anyio
import platformdirs

from dahl.cache._table import (DB_NAME, READ_TIMEOUT_S, BatchReader, CachedEntry, CacheUnusable, Value,
                               Wanted, Writer, connect, open_database)
from dahl.errors import CacheError

__all__ = ["CACHE_DIR_ENV", "CacheStore", "CachedEntry", "SingleFlight", "Store", "default_cache_dir",
           "open_store"]

log = logging.getLogger(__name__)

CACHE_DIR_ENV = "DAHL_CACHE_DIR"  #: Environment variable overriding the default cache directory.

T = TypeVar("T")


class SingleFlight(Generic[T]):
    """One call per key at a time; callers meanwhile share its outcome (a cancelled owner's waiters retry)."""

    def __init__(self) -> None:
        self._calls: dict[str, asyncio.Future[T] | None] = {}  # keys in flight; a future once one waits

    def __len__(self) -> int:
        """Number of keys in flight now."""
        return len(self._calls)

    def __contains__(self, key: object) -> bool:
        """Whether a call for ``key`` is in flight now."""
        return key in self._calls

    async def run(self, key: str, work: Callable[[], Awaitable[T]], on_shared: Callable[[], None]) -> T:
        """``await work()``, or the outcome of the identical call in flight (then ``on_shared()``)."""
        calls = self._calls
        while key in calls:
            future = calls[key]
            if future is None:
                future = calls[key] = asyncio.get_running_loop().create_future()
            try:
                result = await asyncio.shield(future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if future.cancelled() and (task is None or task.cancelling() == 0):
                    continue  # the owner was cancelled, not this caller: try again
                raise
            except BaseException:
                on_shared()
                raise
            on_shared()
            return result
        calls[key] = None
        try:
            result = await work()
        except BaseException as exc:
            future = calls.pop(key)
            if future is not None:
                if isinstance(exc, asyncio.CancelledError):
                    future.cancel()
                else:
                    future.set_exception(exc)
                    future.exception()  # retrieved: asyncio would log it at GC
            raise
        future = calls.pop(key)
        if future is not None:
            future.set_result(result)
        return result


class Store(Protocol):
    """The store interface :class:`~dahl.cache._wrap.Cached` uses; :class:`CacheStore` is the local one."""

    async def get_many(self, keys: Sequence[str], *, parser_version: str = "1") -> list[CachedEntry | None]:
        """Per key: the value put by ``parser_version``, else its raw reply alone, else None."""
        ...

    def put_many(self, items: Iterable[tuple[str, Value, str | None]], *, parser_version: str = "1") -> None:
        """Queue ``(key, value, raw)`` entries (never errors); never blocks; CacheError if closed."""
        ...

    def flight(self) -> SingleFlight[Any]:
        """A single flight for one stage: identical keys in flight share one call."""
        ...


def default_cache_dir() -> Path:
    """``$DAHL_CACHE_DIR`` if set, else ``platformdirs.user_cache_dir("dahl")``."""
    env = os.environ.get(CACHE_DIR_ENV, "").strip()
    return Path(env) if env else Path(platformdirs.user_cache_dir("dahl"))


class CacheStore:
    """Results on disk by content hash in ``directory`` (shareable by processes): the local :class:`Store`.

    A transaction commits ``flush_items`` entries, or those that waited ``flush_interval_s`` seconds. Raises
    CacheUnusable (the directory or database cannot be created or opened) or ValueError (a bad size).
"""

    def __init__(self, directory: Path, *, flush_items: int = 500, flush_interval_s: float = 0.15) -> None:
        if flush_items < 1 or flush_interval_s <= 0:
            raise ValueError("flush_items must be >= 1 and flush_interval_s > 0 seconds")
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheUnusable(f"cannot create cache directory {self.directory}: {exc}") from exc
        self._path = open_database(self.directory)
        self._closed = False
        self._memory_hits = 0
        self._reader = BatchReader(self._path)
        self._writer = Writer(self._path, flush_items, flush_interval_s)

    def __repr__(self) -> str:
        """Show the directory and this session's counts."""
        r, w = self._reader, self._writer
        return (f"<CacheStore {self.directory} hits={r.hits + self._memory_hits} misses={r.misses} "
                f"writes={w.writes} queued={w.queued}>")

    def __enter__(self) -> CacheStore:
        """Return the store; :meth:`close` runs on exit."""
        return self

    def __exit__(self, *exc_info: object) -> None:
        """Close the store (commits the queue)."""
        self.close()

    @property
    def transactions(self) -> int:
        """Write transactions committed so far."""
        return self._writer.transactions

    @property
    def read_batches(self) -> int:
        """Reader-thread calls made so far."""
        return self._reader.read_batches

    @property
    def generation(self) -> int:
        """Write batches finished so far; read it before a lookup (see :meth:`after_miss`)."""
        return self._writer.generation

    def _check_open(self) -> None:
        if self._closed:
            raise CacheError(f"cache {self.directory} is closed")

    def flight(self) -> SingleFlight[Any]:
        """A new single flight within this process."""
        return SingleFlight()

    def put(self, key: str, value: Value, raw: str | None, *, parser_version: str = "1") -> None:
        """Queue ``value`` and its ``raw`` reply as ``key``'s one row; never blocks; CacheError if closed."""
        self.put_many(((key, value, raw),), parser_version=parser_version)

    def put_many(self, items: Iterable[tuple[str, Value, str | None]], *, parser_version: str = "1") -> None:
        """Queue ``(key, value, raw)`` entries as :meth:`put` does, in one step."""
        self._check_open()
        self._writer.put_many([(key, value, raw, parser_version) for key, value, raw in items])

    async def flush(self) -> None:
        """Wait (off the loop) until every entry queued before is committed; CacheError if closed."""
        self._check_open()
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def resolve() -> None:
            if not done.done():
                done.set_result(None)

        def signal() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(resolve)

        self._writer.send(signal)
        await done

    def recent(self, key: str, *, parser_version: str = "1") -> Value | None:
        """The value put under ``key`` by ``parser_version`` and not yet committed (memory only)."""
        return self._writer.recent(key, parser_version)

    def after_miss(self, key: str, generation: int, *, parser_version: str = "1") -> Value | None | Literal[False]:
        """A miss at ``generation`` still? The value put since; None (no write here); False (re-read)."""
        return self._writer.after_miss(key, generation, parser_version)

    async def get(self, key: str, *, parser_version: str = "1") -> CachedEntry | None:
        """:meth:`get_many` of one key."""
        return (await self.get_many([key], parser_version=parser_version))[0]

    async def get_many(self, keys: Sequence[str], *, parser_version: str = "1") -> list[CachedEntry | None]:
        """Per key: the value put by ``parser_version``, else its raw reply alone, else None (a miss)."""
        self._check_open()
        recent = self._writer.recent if self._writer.queued else None
        found: list[CachedEntry | None] = [None] * len(keys)
        wanted: Wanted = []
        for i, key in enumerate(keys):
            value = recent(key, parser_version) if recent is not None else None
            if value is None:
                wanted.append((i, key, parser_version))
            else:
                self._memory_hits += 1
                found[i] = CachedEntry(value, None)
        if wanted:
            for (i, _, _), entry in zip(wanted, await self._reader.read(wanted), strict=True):
                found[i] = entry
        return found

    def stats(self) -> dict[str, Any]:
        """Size and counts (blocking; CacheError if unreadable): directory, entries, size_bytes, hits,
        raw_hits, misses, read_errors, read_batches, writes, write_errors, transactions, queued."""
        try:
            with contextlib.closing(connect(self._path, timeout_s=READ_TIMEOUT_S)) as con:
                entries = int(con.execute("SELECT count(*) FROM entries").fetchone()[0])
            size = sum(p.stat().st_size for p in (self._path, self._path.with_name(f"{DB_NAME}-wal")) if p.exists())
        except (sqlite3.Error, OSError) as exc:
            raise CacheError(f"cannot read cache statistics in {self.directory}: {exc}") from exc
        r, w = self._reader, self._writer
        return {"directory": str(self.directory), "entries": entries, "size_bytes": size,
                "hits": r.hits + self._memory_hits, "raw_hits": r.raw_hits, "misses": r.misses,
                "read_errors": r.read_errors, "read_batches": r.read_batches, "writes": w.writes,
                "write_errors": w.write_errors, "transactions": w.transactions, "queued": w.queued}

    def clear(self) -> int:
        """Remove every entry after committing the queue (blocking); how many there were."""
        self._check_open()
        event = threading.Event()
        self._writer.send(event.set)
        event.wait()
        try:
            with contextlib.closing(connect(self._path)) as con:
                return int(con.execute("DELETE FROM entries").rowcount)
        except sqlite3.Error as exc:
            raise CacheError(f"cannot clear cache {self.directory}: {exc}") from exc

    def close(self) -> None:
        """Commit the queue, stop both threads and close the database (blocking, idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._reader.close()  # the writer's connection closes last: only it can checkpoint
        self._writer.stop()


async def open_store(stack: AsyncExitStack, cache_dir: Path | None, *,
                     opener: Callable[[Path], CacheStore] = CacheStore) -> tuple[CacheStore | None, CacheUnusable | None]:
    """Open the cache at ``cache_dir`` off the loop (``opener(directory)``), closed with ``stack``: (store or
    None, why)."""
    directory = cache_dir if cache_dir is not None else default_cache_dir()
    try:
        store = await anyio.to_thread.run_sync(opener, directory)
    except CacheUnusable as exc:
        log.warning("%s; running without the cache", exc)
        return None, exc
    stack.push_async_callback(_close, store)
    return store, None


async def _close(store: CacheStore) -> None:
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(store.close)
