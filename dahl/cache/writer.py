"""The cache's single writer thread: batched transactions off the event loop (DESIGN.md §1)."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import diskcache  # type: ignore[import-untyped]
import msgspec

from dahl.records import Claim, Verdict

__all__ = ["BatchWriter", "Value", "value_name"]

log = logging.getLogger(__name__)

#: What the cache stores as a parsed value.
Value = Verdict | list[Claim]
_ENCODER = msgspec.msgpack.Encoder()


def value_name(key: str, parser_version: str) -> str:
    """Stored name of the parsed value of ``key``: ``f"{key}:v{parser_version}"``."""
    return f"{key}:v{parser_version}"


class _Put(NamedTuple):
    key: str
    value: Value
    raw: str | None
    parser_version: str


class _Flush(NamedTuple):
    done: Callable[[], None]


_STOP = object()


class BatchWriter:
    """ONE thread that commits queued entries in batches, each in one transaction.

    A batch is committed when ``flush_items`` entries are queued or ``flush_interval_s``
    has passed since its first entry, whichever comes first. Until committed, an
    entry is served from memory (:meth:`recent`), so a repeat right after a put is
    a hit. A failed commit drops that batch and logs one warning per writer.

    Args:
        cache: the open diskcache; the thread uses (and closes) its own connection.
        flush_items: entries per transaction, at most.
        flush_interval_s: longest an entry waits before it is written, seconds.

    Attributes:
        transactions: transactions committed.
        writes: entries committed.
        write_errors: entries dropped by failed commits.
    """

    def __init__(self, cache: diskcache.Cache, *, flush_items: int, flush_interval_s: float) -> None:
        self._cache = cache
        self._directory = Path(cache.directory)
        self._flush_items = flush_items
        self._flush_interval_s = flush_interval_s
        self._queue: queue.Queue[object] = queue.Queue()
        self._recent: dict[str, Value] = {}
        self._recent_lock = threading.Lock()
        self._warned = False
        self.transactions = 0
        self.writes = 0
        self.write_errors = 0
        self._thread = threading.Thread(target=self._run, name="dahl-cache-write", daemon=False)
        self._thread.start()

    def queued(self) -> int:
        """Entries (and markers) waiting in the queue now."""
        return self._queue.qsize()

    def put(self, key: str, value: Value, raw: str | None, parser_version: str) -> None:
        """Queue one entry; returns at once (the queue is unbounded)."""
        with self._recent_lock:
            self._recent[value_name(key, parser_version)] = value
        self._queue.put(_Put(key, value, raw, parser_version))

    @property
    def has_recent(self) -> bool:
        """Whether any value is put and not yet committed (a lock-free hint)."""
        return bool(self._recent)

    def recent(self, name: str) -> Value | None:
        """The value put under ``name`` (see :func:`value_name`) and not yet committed."""
        with self._recent_lock:
            return self._recent.get(name)

    async def flush(self) -> None:
        """Wait (without blocking the loop) until everything queued before is committed."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def signal() -> None:
            try:
                loop.call_soon_threadsafe(_resolve, done)
            except RuntimeError:  # the loop closed meanwhile; nobody is waiting
                pass

        self._queue.put(_Flush(signal))
        await done

    def drain(self) -> None:
        """Block until everything queued before is committed."""
        event = threading.Event()
        self._queue.put(_Flush(event.set))
        event.wait()

    def stop(self) -> None:
        """Commit everything queued, then end the thread and wait for it (blocking)."""
        self._queue.put(_STOP)
        self._thread.join()

    def _run(self) -> None:
        try:
            while True:
                batch, waiters, stop = self._collect()
                if batch:
                    self._commit(batch)
                    self._forget(batch)
                for waiter in waiters:
                    waiter()
                if stop:
                    return
        finally:
            self._cache.close()  # this thread's connection

    def _collect(self) -> tuple[list[_Put], list[Callable[[], None]], bool]:
        """Wait for the next batch: up to flush_items entries, a flush marker, or the stop."""
        op = self._queue.get()
        batch: list[_Put] = []
        deadline = time.monotonic() + self._flush_interval_s
        while True:
            if op is _STOP:
                return batch, [], True
            if isinstance(op, _Flush):
                return batch, [op.done], False
            assert isinstance(op, _Put)
            batch.append(op)
            remaining = deadline - time.monotonic()
            if len(batch) >= self._flush_items or remaining <= 0:
                return batch, [], False
            try:
                op = self._queue.get(timeout=remaining)
            except queue.Empty:
                return batch, [], False

    def _forget(self, batch: list[_Put]) -> None:
        """Drop committed (or failed) entries from memory, unless put again since."""
        with self._recent_lock:
            for put in batch:
                name = value_name(put.key, put.parser_version)
                if self._recent.get(name) is put.value:
                    del self._recent[name]

    def _commit(self, batch: list[_Put]) -> None:
        cache = self._cache
        try:
            with cache.transact(retry=True):
                for put in batch:
                    cache.set(value_name(put.key, put.parser_version), _ENCODER.encode(put.value))
                    if put.raw is not None:
                        cache.set(f"{put.key}:raw", put.raw)
        except Exception as exc:  # noqa: BLE001 - the writer thread must survive any failed batch
            self.write_errors += len(batch)
            if not self._warned:
                self._warned = True
                log.warning(
                    "cache write to %s failed (%s: %s); %d results not cached "
                    "(further write errors are counted, not logged)",
                    self._directory,
                    type(exc).__name__,
                    exc,
                    len(batch),
                )
            return
        self.transactions += 1
        self.writes += len(batch)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
