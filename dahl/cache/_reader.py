"""The cache's reader thread: batched lookups off the event loop.

:meth:`BatchReader.read` parks a group of keys with one future. Pending groups go to
ONE reader-thread call (``loop.run_in_executor``) when they hold 256 keys; else, when
the thread is idle, once the loop's current round of ready tasks has run
(``call_soon``); and while it is busy, as soon as its call returns. The loop keeps
computing keys while the thread looks up the previous batch, and N hits cost about
N / batch thread hops. A dedicated single thread (not anyio's pool) is used because
it owns one SQLite connection, which must be closed by the thread that used it.

Each key is one row holding a :class:`~dahl.cache._envelope.Stored` envelope; a call
reads every key of its batch, hits and misses alike, with ONE query per 500 keys
(:meth:`~dahl.cache._database.RowReader.fetch_packed`) and resolves each envelope for
the caller's parser version (:func:`~dahl.cache._envelope.entry_of`). Only a batch
holding a damaged row takes a second query.

Failure policy: a read error (SQLite, decode) is a miss plus one warning per reader.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import logging
import sqlite3
from pathlib import Path

import msgspec

from dahl.cache._database import RowReader
from dahl.cache._envelope import ENVELOPE_DECODER, ENVELOPES_DECODER, CachedEntry, Stored, entry_of

__all__ = ["BatchReader", "CachedEntry"]

log = logging.getLogger(__name__)

#: Pending keys handed to the reader thread at once, without waiting for the thread.
_READ_BATCH = 256

# A group of reads: (index in the caller's list, key, parser version) each, and its future.
_Pending = tuple[list[tuple[int, str, str]], "asyncio.Future[list[CachedEntry | None]]"]


class BatchReader:
    """ONE thread that looks up groups of keys in batches.

    Args:
        rows: the database reader (used, and closed, by the thread only).
        directory: the cache directory (named in warnings).

    Attributes:
        hits, raw_hits, misses, read_errors: keys found with a parsed value, with a raw
            reply only, not found, and failed (also counted as misses).
        read_batches: reader-thread calls made.
    """

    def __init__(self, rows: RowReader, directory: Path) -> None:
        self._rows = rows
        self._directory = directory
        self.hits = 0  # written by the reader thread only
        self.raw_hits = 0
        self.misses = 0
        self.read_errors = 0
        self.read_batches = 0
        self._warned = False
        self._closed = False
        self._pending: list[_Pending] = []
        self._pending_keys = 0
        self._reads_in_flight = 0
        self._dispatch_scheduled = False
        self._thread = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="dahl-cache-read"
        )

    async def read(self, wanted: list[tuple[int, str, str]]) -> list[CachedEntry | None]:
        """Look ``wanted`` (index, key, parser version) up; one entry per item, in order.

        Returns:
            Per item: the parsed value for its parser version; else the raw reply alone
            (value None); else None (a miss). A read or decode error is a miss; after
            :meth:`close`, everything is a miss.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[CachedEntry | None]] = loop.create_future()
        self._pending.append((wanted, future))
        self._pending_keys += len(wanted)
        if self._pending_keys >= _READ_BATCH:
            self._dispatch(loop)  # full: hand it over now, so the thread works while we go on
        elif not self._dispatch_scheduled and not self._reads_in_flight:
            # The reader is idle: go once the ready tasks have run (they may add keys).
            # While it is busy, keys wait and go when its call returns (_deliver).
            self._dispatch_scheduled = True
            loop.call_soon(self._dispatch_soon, loop)
        return await future

    def close(self) -> None:
        """Close the database connection in the thread that used it, then end the thread (blocking)."""
        self._closed = True
        try:
            self._thread.submit(self._rows.close).result()
        finally:
            self._thread.shutdown(wait=True)

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
        done = loop.run_in_executor(self._thread, self._lookup, keys)
        done.add_done_callback(functools.partial(self._deliver, batch))

    def _deliver(self, batch: list[_Pending], done: asyncio.Future[list[CachedEntry | None]]) -> None:
        """Resolve a batch's futures (on the event loop) with what the reader thread found."""
        self._reads_in_flight -= 1
        if self._pending and not self._reads_in_flight and not self._dispatch_scheduled:
            self._dispatch_scheduled = True  # what gathered meanwhile goes next
            loop = asyncio.get_running_loop()
            loop.call_soon(self._dispatch_soon, loop)
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
        """Reader thread: look every key up with one SQL query per chunk; errors are misses."""
        self.read_batches += 1
        try:
            stored, undecodable = self._envelopes([key for key, _ in keys])  # a repeated key matches once
        except sqlite3.Error as exc:
            self._read_failed(exc)
            return [None] * len(keys)
        found: list[CachedEntry | None] = []
        hits = raw_hits = misses = 0
        for key, version in keys:
            envelope = stored.get(key)
            if envelope is not None and envelope.parser_version == version:  # the common hit, inline
                hits += 1
                found.append(CachedEntry(envelope.value, None))
                continue
            entry = None if envelope is None else entry_of(envelope, version)
            if entry is not None:
                raw_hits += 1
            elif key not in undecodable:  # an undecodable row was counted by _read_failed
                misses += 1
            found.append(entry)
        self.hits += hits
        self.raw_hits += raw_hits
        self.misses += misses
        return found

    def _envelopes(self, keys: list[str]) -> tuple[dict[str, Stored], set[str]]:
        """Reader thread: the envelopes stored under ``keys``, and the keys whose row is undecodable.

        The envelopes come back concatenated from one query and are decoded by one
        msgspec call as a msgpack array; only if that fails (a damaged row) are they
        read and decoded one by one, so the damaged ones alone become misses.
        """
        found, packed = self._rows.fetch_packed(keys)
        if not found:
            return {}, set()
        try:
            decoded = ENVELOPES_DECODER.decode(b"\xdd" + len(found).to_bytes(4, "big") + packed)
        except msgspec.DecodeError:
            pass
        else:
            return dict(zip(found, decoded, strict=True)), set()
        out: dict[str, Stored] = {}
        undecodable: set[str] = set()
        for key, blob in self._rows.fetch(found).items():
            try:
                out[key] = ENVELOPE_DECODER.decode(blob)
            except msgspec.DecodeError as exc:
                self._read_failed(exc)
                undecodable.add(key)
        return out, undecodable

    def _read_failed(self, exc: BaseException) -> None:
        self.read_errors += 1
        self.misses += 1
        if not self._warned:
            self._warned = True
            log.warning(
                "cache read from %s failed (%s: %s); treated as a miss "
                "(further read errors are counted, not logged)",
                self._directory,
                type(exc).__name__,
                exc,
            )
