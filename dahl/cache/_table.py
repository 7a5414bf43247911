"""The local store's internals: the row envelope, ``cache.db`` (one table, ``entries(key, value, stored_at)``,
WAL) and its reader and writer threads (a failed read is a miss, a failed commit drops its batch)."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Literal, NamedTuple

import msgspec

from dahl.errors import CacheError
from dahl.records import Claim, Verdict

__all__ = ["DB_NAME", "ENVELOPES_DECODER", "ENVELOPE_DECODER", "READ_TIMEOUT_S", "SCHEMA_VERSION",
           "BatchReader", "CacheUnusable", "CachedEntry", "Stored", "Value", "Wanted", "Writer", "connect",
           "encode_envelope", "entry_of", "open_database"]

log = logging.getLogger(__name__)

#: What the cache stores as a result: a Verdict, a claim list, or an opaque blob (bytes).
Value = Verdict | list[Claim] | bytes


class Stored(msgspec.Struct, array_like=True, frozen=True):
    """A row's msgpack envelope: ``value`` (bytes: a blob), its ``parser_version``, the ``raw`` reply."""

    parser_version: str
    value: Value
    raw: str | None = None


class CachedEntry(NamedTuple):
    """A lookup's find: ``value`` for the caller's parser version, or None and the ``raw`` reply."""

    value: Value | None
    raw: str | None


_ENCODER = msgspec.msgpack.Encoder()
ENVELOPE_DECODER: msgspec.msgpack.Decoder[Stored] = msgspec.msgpack.Decoder(Stored)
#: Decodes a msgpack array of envelopes (concatenated rows behind an array header).
ENVELOPES_DECODER: msgspec.msgpack.Decoder[list[Stored]] = msgspec.msgpack.Decoder(list[Stored])


def encode_envelope(value: Value, raw: str | None, parser_version: str) -> bytes:
    """The row bytes of ``value`` and ``raw`` (once for a Verdict); TypeError if not encodable."""
    if raw is not None and isinstance(value, Verdict) and value.raw == raw:
        raw = None
    return _ENCODER.encode(Stored(parser_version, value, raw))


def entry_of(stored: Stored, parser_version: str) -> CachedEntry | None:
    """What ``stored`` gives ``parser_version``: its value, else its raw reply, else None."""
    if stored.parser_version == parser_version:
        return CachedEntry(stored.value, None)
    raw = stored.raw
    if raw is None and isinstance(stored.value, Verdict):
        raw = stored.value.raw
    return None if raw is None else CachedEntry(None, raw)


DB_NAME = "cache.db"  #: The database file name inside the cache directory.
SCHEMA_VERSION = 1  #: ``PRAGMA user_version`` of the layout this module creates.
WRITE_TIMEOUT_S = 60.0  #: How long a connection waits for SQLite's write lock, seconds.

_CREATE = "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL, stored_at REAL NOT NULL)"
_PROBLEM_CHARS = 200  #: Characters of SQLite's description of a damaged database kept in the warning.
#: diskcache's value modes: 1 = bytes or str in the row, 2 = bytes in a file, 3 = str in a file.
_DISKCACHE_ROW, _DISKCACHE_BYTES_FILE, _DISKCACHE_TEXT_FILE = 1, 2, 3


class CacheUnusable(CacheError):
    """The cache directory or its ``cache.db`` cannot be used at all; a run goes on without it."""


def connect(path: Path, *, timeout_s: float = WRITE_TIMEOUT_S) -> sqlite3.Connection:
    """A connection to ``path`` in autocommit mode; sqlite3.Error if it cannot open."""
    return sqlite3.connect(path, timeout=timeout_s, isolation_level=None)


def open_database(directory: Path) -> Path:
    """Make ``directory``'s cache.db ready (created, migrated from diskcache, or a damaged one moved to
    ``cache.db.corrupt-<YYYYmmddTHHMMSS>``); its path. CacheUnusable: cannot be opened, or newer."""
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
    """Check, migrate or create the database at ``path``; the problem found if it is damaged."""
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
    """Copy a diskcache cache's dahl rows into ``entries`` and drop its tables, in one transaction."""
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
    aside = directory / f"{DB_NAME}.corrupt-{time.strftime('%Y%m%dT%H%M%S')}"
    for suffix in ("", "-wal", "-shm"):
        path = directory / f"{DB_NAME}{suffix}"
        if path.exists():
            path.rename(f"{aside}{suffix}")
    return aside


#: Keys per ``key IN (...)`` query: the list lengths used (few prepared statements).
_IN_SIZES = (8, 32, 128, 500)
_READ_BATCH = 256  #: Pending keys handed to the reader thread at once, without waiting for it to be idle.
#: Reader connection: lock wait (s), memory map and page cache (bytes).
READ_TIMEOUT_S, _READ_MMAP, _CACHE_BYTES = 10.0, 2**28, 2**26
#: Rows per multi-row upsert (3 parameters each); WAL pages between checkpoints.
_ROWS_PER_STATEMENT, _WAL_CHECKPOINT_PAGES = 1000, 10_000
_HISTORY = 128  #: Write batches whose keys are remembered (see :meth:`CacheStore.after_miss`).


@functools.cache
def _select(size: int, packed: bool) -> str:
    marks = ",".join("?" * size)
    if packed:  # one row per query: both group_concat calls walk the same rows in the same order
        return (f"SELECT group_concat(key, char(10)), CAST(group_concat(value, '') AS BLOB)"
                f" FROM entries WHERE key IN ({marks})")
    return f"SELECT key, value FROM entries WHERE key IN ({marks})"


def _chunks(names: list[str]) -> Iterable[tuple[int, list[str]]]:
    # By 500, each padded with "" (never a key) to a length of _IN_SIZES.
    for start in range(0, len(names), _IN_SIZES[-1]):
        chunk = names[start : start + _IN_SIZES[-1]]
        size = next(b for b in _IN_SIZES if b >= len(chunk))
        yield size, chunk + [""] * (size - len(chunk))


Wanted = list[tuple[int, str, str]]  # (index in the caller's list, key, parser version)
_Found = list[CachedEntry | None]
_Group = tuple[Wanted, "asyncio.Future[_Found]"]


class BatchReader:
    """ONE thread that looks up, in one call, every group of keys pending at that moment, in ``path``; counts
    ``hits``, ``raw_hits``, ``misses``, ``read_errors`` (also misses), ``read_batches``."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self._path, self._read_only = path, read_only
        self._con: sqlite3.Connection | None = None
        self.hits = self.raw_hits = self.misses = self.read_errors = self.read_batches = 0
        self._warned = self._closed = self._scheduled = False
        self._pending: list[tuple[Wanted, asyncio.Future[list[CachedEntry | None]]]] = []
        self._pending_keys = self._in_flight = 0
        self._thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="dahl-cache-read")

    async def read(self, wanted: Wanted) -> list[CachedEntry | None]:
        """Per item of ``wanted``: its entry for its parser version, or None (a miss; all, after close)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[CachedEntry | None]] = loop.create_future()
        self._pending.append((wanted, future))
        self._pending_keys += len(wanted)
        if self._pending_keys >= _READ_BATCH:
            self._dispatch(loop)  # the thread starts while the loop goes on
        elif not self._scheduled and not self._in_flight:
            self._scheduled = True  # after the ready tasks have run (they may add keys)
            loop.call_soon(self._dispatch, loop)
        return await future

    def close(self) -> None:
        """Close the connection in the thread that used it, then end the thread (blocking)."""
        self._closed = True
        try:
            self._thread.submit(self._close_connection).result()
        finally:
            self._thread.shutdown(wait=True)

    def _close_connection(self) -> None:
        if self._con is not None:
            self._con.close()

    def _dispatch(self, loop: asyncio.AbstractEventLoop) -> None:
        self._scheduled = False
        batch, self._pending, self._pending_keys = self._pending, [], 0
        if not batch:
            return
        if self._closed:
            for wanted, future in batch:
                if not future.done():
                    future.set_result([None] * len(wanted))
            return
        self._in_flight += 1
        keys = [(key, version) for wanted, _ in batch for _, key, version in wanted]
        loop.run_in_executor(self._thread, self._lookup, keys).add_done_callback(
            functools.partial(self._deliver, loop, batch))

    def _deliver(self, loop: asyncio.AbstractEventLoop, batch: list[_Group], done: asyncio.Future[_Found]) -> None:
        self._in_flight -= 1
        if self._pending and not self._in_flight and not self._scheduled:
            self._scheduled = True  # what gathered meanwhile goes next
            loop.call_soon(self._dispatch, loop)
        found = done.result() if not done.cancelled() and done.exception() is None else None
        start = 0
        for wanted, future in batch:
            if not future.done():  # its getter may have been cancelled
                future.set_result(found[start : start + len(wanted)] if found is not None else [None] * len(wanted))
            start += len(wanted)

    def _connection(self) -> sqlite3.Connection:
        if self._con is None:
            ro = self._read_only  # a missing file is an error, never created
            target = f"{self._path.resolve().as_uri()}?mode=ro" if ro else self._path
            self._con = sqlite3.connect(target, uri=ro, timeout=READ_TIMEOUT_S, isolation_level=None)
            self._con.execute(f"PRAGMA mmap_size = {_READ_MMAP}")
            self._con.execute(f"PRAGMA cache_size = -{_CACHE_BYTES // 1024}")
        return self._con

    def _lookup(self, keys: list[tuple[str, str]]) -> list[CachedEntry | None]:
        self.read_batches += 1
        try:
            stored, undecodable = self._envelopes([key for key, _ in keys])
        except sqlite3.Error as exc:
            self._failed(exc, len(keys))
            return [None] * len(keys)
        found: list[CachedEntry | None] = []
        for key, version in keys:
            envelope = stored.get(key)
            entry = None if envelope is None else entry_of(envelope, version)
            if entry is None:
                self.misses += key not in undecodable  # an undecodable row was counted as failed
            elif entry.value is None:
                self.raw_hits += 1
            else:
                self.hits += 1
            found.append(entry)
        return found

    def _envelopes(self, keys: list[str]) -> tuple[dict[str, Stored], set[str]]:
        # One query per 500 keys, all rows decoded by one call; and the damaged keys.
        con = self._connection()
        found: list[str] = []
        packed: list[bytes] = []
        for size, params in _chunks(keys):
            names, values = con.execute(_select(size, True), params).fetchone() or (None, None)
            if names and isinstance(values, bytes):
                found += names.split("\n")
                packed.append(values)
        if not found:
            return {}, set()
        with contextlib.suppress(msgspec.DecodeError):
            decoded = ENVELOPES_DECODER.decode(b"\xdd" + len(found).to_bytes(4, "big") + b"".join(packed))
            return dict(zip(found, decoded, strict=True)), set()
        out: dict[str, Stored] = {}  # a damaged row: read and decode one by one
        for size, params in _chunks(found):
            for key, blob in con.execute(_select(size, False), params):
                try:
                    out[key] = ENVELOPE_DECODER.decode(bytes(blob))
                except msgspec.DecodeError as exc:
                    self._failed(exc, 1)
        return out, set(found) - set(out)

    def _failed(self, exc: BaseException, n: int) -> None:
        self.read_errors += n
        self.misses += n
        if not self._warned:
            self._warned = True
            log.warning("cache read from %s failed (%s: %s); treated as a miss (further read errors are counted, "
                        "not logged)", self._path.parent, type(exc).__name__, exc)


_Put = tuple[str, Value, "str | None", str]  # key, value, raw reply, parser version


class Writer:
    """ONE thread committing queued entries, a transaction per batch of ``flush_items`` (or after
    ``flush_interval_s``); its queue holds a batch, a batch's start time, a callback or None (stop)."""

    def __init__(self, path: Path, flush_items: int, flush_interval_s: float) -> None:
        self._path, self._flush_items, self._interval = path, flush_items, flush_interval_s
        self._queue: queue.Queue[object] = queue.Queue()
        self._lock = threading.Lock()  # guards _open, _recent, _written, _history, generation
        self._open: list[_Put] = []
        self._recent: dict[str, _Put] = {}  # key -> its newest put not yet committed
        self._written: dict[str, int] = {}  # key -> generation that wrote it, for the last _HISTORY batches
        self._history: collections.deque[tuple[int, list[str]]] = collections.deque()
        self._warned = False
        self._con: sqlite3.Connection | None = None
        self._rows = 1
        self.transactions = self.generation = self.writes = self.write_errors = self.queued = 0
        self._thread = threading.Thread(target=self._run, name="dahl-cache-write")
        self._thread.start()

    def put_many(self, entries: list[_Put]) -> None:
        with self._lock:
            for entry in entries:
                self._recent[entry[0]] = entry
                self._open.append(entry)
                if len(self._open) == 1:
                    self._queue.put(time.monotonic())
                if len(self._open) >= self._flush_items:
                    self._queue.put(self._open)
                    self._open = []
            self.queued += len(entries)

    def recent(self, key: str, parser_version: str) -> Value | None:
        put = self._recent.get(key)  # one dict read: atomic, no lock
        return put[1] if put is not None and put[3] == parser_version else None

    def after_miss(self, key: str, generation: int, parser_version: str) -> Value | None | Literal[False]:
        put = self._recent.get(key)  # read first: an entry leaves memory after its generation is counted
        if put is not None:
            return put[1] if put[3] == parser_version else None
        if self.generation == generation:
            return None
        written = self._written.get(key)
        if self.generation - generation > _HISTORY or (written is not None and written > generation):
            return False
        return None if self.generation - generation <= _HISTORY else False  # trimmed meanwhile?

    def stop(self) -> None:
        """Commit everything queued, then end the thread and wait for it (blocking)."""
        self.send(None)
        self._thread.join()

    def send(self, marker: object) -> None:
        """Hand the open batch over, then ``marker``, in order."""
        with self._lock:
            if self._open:
                self._queue.put(self._open)
                self._open = []
            self._queue.put(marker)

    def _connect(self) -> sqlite3.Connection:
        con = self._con = connect(self._path, timeout_s=WRITE_TIMEOUT_S)
        con.execute("PRAGMA synchronous = 1")  # NORMAL: with WAL, durable across a killed process
        con.execute(f"PRAGMA cache_size = -{_CACHE_BYTES // 1024}")
        con.execute(f"PRAGMA wal_autocheckpoint = {_WAL_CHECKPOINT_PAGES}")
        self._rows = max(1, min(_ROWS_PER_STATEMENT, con.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // 3))
        return con

    def _run(self) -> None:
        deadline: float | None = None  # when the open batch is due
        try:
            while True:
                try:
                    op = self._queue.get(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    deadline = None
                    with self._lock:
                        op, self._open = self._open, []
                if isinstance(op, float):
                    due = op + self._interval
                    deadline = due if deadline is None else min(deadline, due)
                elif isinstance(op, list):
                    self._write(op)
                    if not self._open:
                        deadline = None
                elif op is None:
                    return
                elif callable(op):
                    op()
        finally:
            if self._con is not None:
                self._con.close()  # the last connection to close checkpoints the WAL into the database

    def _write(self, batch: list[_Put]) -> None:
        if not batch:
            return
        try:
            con = self._con or self._connect()
            rows = self._rows
            values = [(key, encode_envelope(value, raw, version)) for key, value, raw, version in batch]
            now = time.time()
            con.execute("BEGIN IMMEDIATE")
            try:
                for start in range(0, len(values), rows):
                    chunk = values[start : start + rows]
                    con.execute("INSERT INTO entries (key, value, stored_at) VALUES "
                                + ",".join(["(?, ?, ?)"] * len(chunk))
                                + " ON CONFLICT(key) DO UPDATE SET value = excluded.value, stored_at = excluded.stored_at",
                                [p for name, value in chunk for p in (name, value, now)])
                con.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    con.execute("ROLLBACK")
                raise
            self.transactions += 1
            self.writes += len(batch)
        except Exception as exc:  # noqa: BLE001 - the writer thread must survive any failed batch
            self.write_errors += len(batch)
            if not self._warned:
                self._warned = True
                log.warning("cache write to %s failed (%s: %s); %d results not cached (further write errors are "
                            "counted, not logged)", self._path.parent, type(exc).__name__, exc, len(batch))
        names = [put[0] for put in batch]
        with self._lock:
            self.generation += 1  # counted before the entries leave memory (see after_miss)
            for name in names:
                self._written[name] = self.generation
            self._history.append((self.generation, names))
            while self._history[0][0] <= self.generation - _HISTORY:
                old, old_names = self._history.popleft()
                for name in old_names:
                    if self._written.get(name) == old:
                        del self._written[name]
            self.queued -= len(batch)
            for put in batch:
                if self._recent.get(put[0]) is put:
                    del self._recent[put[0]]
