"""The cache's single writer thread: batched transactions off the event loop.

Each put becomes ONE row named by its bare key, holding a
:class:`~dahl.cache._envelope.Stored` envelope (parser version, value, raw reply).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Literal, NamedTuple

from dahl.cache._database import RowWriter
from dahl.cache._envelope import Value, encode_envelope

__all__ = ["BatchWriter", "Value"]

log = logging.getLogger(__name__)


class _Put(NamedTuple):
    key: str
    value: Value
    raw: str | None
    parser_version: str


#: Builds a _Put from a tuple in C: NamedTuple's generated ``__new__`` is Python code,
#: and a put is made for every result (~0.3 µs saved each).
_new_put = tuple.__new__


class _Flush(NamedTuple):
    done: Callable[[], None]


class _Opened(NamedTuple):
    """A new batch got its first entry at ``at`` (time.monotonic(), seconds)."""

    at: float


class _Sealed(NamedTuple):
    """A batch handed over whole (full, or sealed by a flush or stop)."""

    items: list[_Put]


_STOP = object()

#: Batches whose written names are remembered (see BatchWriter.after_miss).
_HISTORY = 128


class BatchWriter:
    """ONE thread that commits queued entries in batches, each in one transaction.

    A batch is committed when ``flush_items`` entries are queued or ``flush_interval_s``
    has passed since its first entry, whichever comes first. Until committed, an
    entry is served from memory (:meth:`recent`, for its own parser version only),
    so a repeat right after a put is a hit. Each entry is one row: its key, holding
    the encoded :class:`~dahl.cache._envelope.Stored` envelope. A failed commit drops
    that batch and logs one warning per writer. Rows go in through
    :class:`~dahl.cache._database.RowWriter` (multi-row upserts).

    :meth:`put` only appends to the open batch under a lock; the thread is woken
    twice per batch (when it opens, to arm the deadline, and when it is full), not
    per entry: a wake-up per entry would make the thread take the GIL from the event
    loop thread hundreds of times a second.

    Args:
        path: the cache database (:func:`dahl.cache._schema.open_database`); the thread
            uses (and closes) its own connection.
        flush_items: entries per transaction, at most.
        flush_interval_s: longest an entry waits before it is written, seconds.

    Attributes:
        transactions: transactions committed.
        generation: batches finished (committed or failed); see ``CacheStore.generation``.
        writes: entries committed.
        write_errors: entries dropped by failed commits.
    """

    def __init__(
        self,
        path: Path,
        *,
        flush_items: int,
        flush_interval_s: float,
    ) -> None:
        self._rows = RowWriter(path)
        self._directory = path.parent
        self._flush_items = flush_items
        self._flush_interval_s = flush_interval_s
        self._queue: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()  # guards changes to _open, _recent, _uncommitted, _written
        self._open: list[_Put] = []
        self._recent: dict[str, _Put] = {}  # key -> its newest put not yet committed
        self._uncommitted = 0
        # Names written by the last _HISTORY batches: name -> generation that wrote it.
        self._written: dict[str, int] = {}
        self._history: collections.deque[tuple[int, list[str]]] = collections.deque()
        self._warned = False
        self.transactions = 0
        self.generation = 0
        self.writes = 0
        self.write_errors = 0
        self._thread = threading.Thread(target=self._run, name="dahl-cache-write", daemon=False)
        self._thread.start()

    def queued(self) -> int:
        """Entries put and not yet committed (or dropped) now."""
        return self._uncommitted

    def put(self, key: str, value: Value, raw: str | None, parser_version: str) -> None:
        """Queue one entry; returns at once (memory is unbounded, batches are not)."""
        entry = _new_put(_Put, (key, value, raw, parser_version))
        with self._lock:
            self._queue_entry(entry)

    def put_many(self, items: Iterable[tuple[str, Value, str | None]], parser_version: str) -> None:
        """Queue ``(key, value, raw)`` entries under one lock; returns at once."""
        entries = [_new_put(_Put, (key, value, raw, parser_version)) for key, value, raw in items]
        with self._lock:
            for entry in entries:
                self._queue_entry(entry)

    def _queue_entry(self, entry: _Put) -> None:
        """Add one entry to the open batch (the lock held); seal the batch when full."""
        self._recent[entry.key] = entry
        self._uncommitted += 1
        batch = self._open
        batch.append(entry)
        if len(batch) == 1:
            self._queue.put(_Opened(time.monotonic()))
        if len(batch) >= self._flush_items:
            self._queue.put(_Sealed(batch))
            self._open = []

    @property
    def has_recent(self) -> bool:
        """Whether any value is put and not yet committed (a lock-free hint)."""
        return bool(self._recent)

    def recent(self, key: str, parser_version: str) -> Value | None:
        """The value put under ``key`` by parser ``parser_version`` and not yet committed.

        None also when the newest put of ``key`` came from another parser version.
        Reads take no lock: a single dict read is atomic, and an entry leaves memory
        only after its batch is committed and counted (see :meth:`after_miss`).
        """
        put = self._recent.get(key)
        return put.value if put is not None and put.parser_version == parser_version else None

    def recent_many(self, keys: Sequence[str], parser_version: str) -> list[Value | None]:
        """:meth:`recent` of every key, in order."""
        get = self._recent.get
        puts = [get(key) for key in keys]
        return [None if put is None or put.parser_version != parser_version else put.value for put in puts]

    def after_miss(self, key: str, generation: int, parser_version: str) -> Value | None | Literal[False]:
        """What a lookup that missed ``key`` at ``generation`` should do now, without a lock.

        Returns:
            The value put since by ``parser_version`` (memory); None: still a miss (not
            in memory, and not committed since ``generation``); False: it may have
            been committed since (or this writer cannot tell): read the disk.

        Memory is read first: an entry leaves it only after its batch has counted a
        new generation and recorded its names, so a key that is gone from memory is
        then seen as written since.
        """
        put = self._recent.get(key)
        if put is not None:
            return put.value if put.parser_version == parser_version else None
        current = self.generation
        if current == generation:
            return None
        if current - generation > _HISTORY:
            return False
        written = self._written.get(key)
        if written is not None and written > generation:
            return False
        # The history may have been trimmed past ``generation`` meanwhile.
        return None if self.generation - generation <= _HISTORY else False

    def _enqueue(self, marker: object) -> None:
        """Hand the open batch over, then ``marker``, keeping their order."""
        with self._lock:
            if self._open:
                self._queue.put(_Sealed(self._open))
                self._open = []
            self._queue.put(marker)

    async def flush(self) -> None:
        """Wait (without blocking the loop) until everything queued before is committed."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def signal() -> None:
            try:
                loop.call_soon_threadsafe(_resolve, done)
            except RuntimeError:  # the loop closed meanwhile; nobody is waiting
                pass

        self._enqueue(_Flush(signal))
        await done

    def drain(self) -> None:
        """Block until everything queued before is committed."""
        event = threading.Event()
        self._enqueue(_Flush(event.set))
        event.wait()

    def stop(self) -> None:
        """Commit everything queued, then end the thread and wait for it (blocking)."""
        self._enqueue(_STOP)
        self._thread.join()

    def _run(self) -> None:
        deadline: float | None = None  # when the open batch must be written
        try:
            while True:
                timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
                try:
                    op = self._queue.get(timeout=timeout)
                except queue.Empty:  # the open batch is due
                    deadline = None
                    with self._lock:
                        batch, self._open = self._open, []
                    self._write(batch)
                    continue
                if isinstance(op, _Opened):
                    due = op.at + self._flush_interval_s
                    deadline = due if deadline is None else min(deadline, due)
                elif isinstance(op, _Sealed):
                    self._write(op.items)
                    if not self._open:
                        deadline = None
                elif isinstance(op, _Flush):
                    op.done()
                elif op is _STOP:
                    return
        finally:
            self._rows.close()

    def _write(self, batch: list[_Put]) -> None:
        if not batch:
            return
        self._commit(batch)
        names = [put.key for put in batch]
        with self._lock:
            # Counted before the entries leave memory: a reader that finds an entry
            # neither in memory nor (by an older lookup) on disk sees a new generation
            # and finds the name in _written.
            self.generation += 1
            generation = self.generation
            for name in names:
                self._written[name] = generation
            self._history.append((generation, names))
            while self._history[0][0] <= generation - _HISTORY:
                old, old_names = self._history.popleft()
                for name in old_names:
                    if self._written.get(name) == old:
                        del self._written[name]
        self._forget(batch)

    def _forget(self, batch: list[_Put]) -> None:
        """Drop committed (or failed) entries from memory, unless put again since."""
        with self._lock:
            self._uncommitted -= len(batch)
            for put in batch:
                if self._recent.get(put.key) is put:
                    del self._recent[put.key]

    def _commit(self, batch: list[_Put]) -> bool:
        """Write ``batch`` in one transaction; False (and one warning per writer) if it failed."""
        try:
            self._rows.write([(put.key, encode_envelope(put.value, put.raw, put.parser_version)) for put in batch])
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
            return False
        self.transactions += 1
        self.writes += len(batch)
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
