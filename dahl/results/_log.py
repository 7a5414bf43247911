"""The append-only answer log (``OUTDIR/answers.jsonl``): write in completion order, resume, and
finalize (feed the summary; rewrite in input order when lines are out of order or stale)."""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import msgspec
import numpy as np

from dahl.errors import OutputWriteError
from dahl.records import Answer, AnswerResult, ResultDigest
from dahl.results._assemble import EncodedResult
from dahl.results._index import InputIndex

__all__ = ["AnswerLog", "answer_input_hash", "line_key", "writing"]

log = logging.getLogger(__name__)

_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(ResultDigest)
_ANSWER_ENCODER = msgspec.json.Encoder(order="deterministic")


@contextmanager
def writing(path: Path) -> Iterator[None]:
    """Turn an OSError raised while writing ``path`` (disk full, read-only) into OutputWriteError.

    Raises:
        OutputWriteError: naming the file and the reason, and that a re-run continues.
    """
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise OutputWriteError(
            f"cannot write {path}: {reason}. Nothing finished is lost: the answers already in "
            f"{path.parent} are kept; fix this and re-run the same command to continue",
            path=str(path),
        ) from exc


class _RecallKey(msgspec.Struct):
    reason: str | None = None


class _KeyOnly(msgspec.Struct):
    id: str
    input_hash: str
    status: str = ""
    counts: dict[str, int] = {}
    recall: _RecallKey | None = None

    def failed(self) -> bool:
        """The line records a split error, an errored claim or a failed coverage judge."""
        return (self.status == "error" or self.counts.get("error", 0) > 0
                or (self.recall is not None and self.recall.reason == "coverage_error"))


_KEY_DECODER = msgspec.json.Decoder(_KeyOnly)


def answer_input_hash(answer: Answer, run_fp: bytes) -> str:
    """An answer's input hash (its resume key with its id): hex blake2b-128 of its canonical
    JSON (deterministic key order) followed by ``run_fp``, the bytes of everything else that
    changes its result (Splitter and Checker fingerprints, γ, K)."""
    hasher = hashlib.blake2b(_ANSWER_ENCODER.encode(answer), digest_size=16)
    hasher.update(run_fp)
    return hasher.hexdigest()


def line_key(answer_id: str, input_hash: str) -> int:
    """A line's resume key as one 64-bit int (blake2b of id and input hash)."""
    digest = hashlib.blake2b(f"{answer_id}\x00{input_hash}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class AnswerLog:
    """``answers.jsonl`` at ``path`` (its folder created if missing), keyed by :func:`line_key`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: IO[bytes] | None = None
        # Lines appended since open(): the file's size then, each line's key and end offset.
        self._start: int | None = None
        self._keys = array("Q")
        self._ends = array("q")
        #: Input positions of the lines the last :meth:`finalize` kept, in file order (int64).
        self.positions: np.ndarray[tuple[int], np.dtype[np.int64]] = np.empty(0, dtype=np.int64)

    def finished_keys(self) -> set[int]:
        """Keys of the answers already finished in the file (blocking; call from a thread).

        Lines that record an error (a split error, an errored claim, a failed coverage judge)
        or do not decode are not finished: the file is rewritten without them (atomic rename).
        A torn last line is ignored (:meth:`open` cuts it off).
        """
        keys: set[int] = set()
        if not self.path.is_file():  # absent, or a device or FIFO: nothing finished to read
            return keys
        failed: set[int] = set()  # line numbers of failed lines
        unreadable: set[int] = set()
        with self.path.open("rb") as f:
            for n, raw in enumerate(f):
                if not raw.endswith(b"\n"):
                    break
                try:
                    k = _KEY_DECODER.decode(raw)
                except msgspec.DecodeError:
                    unreadable.add(n)
                    continue
                if k.failed():
                    failed.add(n)
                else:
                    keys.add(line_key(k.id, k.input_hash))
        if unreadable:
            log.warning("%s: dropping %d unreadable lines from an earlier run", self.path, len(unreadable))
        if failed:
            log.info("%s: %d answers with errors from an earlier run are scored again", self.path, len(failed))
        if failed or unreadable:
            self._drop_lines(failed | unreadable)
        return keys

    def _drop_lines(self, drop: set[int]) -> None:
        """Rewrite the file without the lines numbered in ``drop`` and a torn tail (atomic rename)."""
        tmp = self.path.with_suffix(".jsonl.tmp")
        with writing(self.path):
            with self.path.open("rb") as src, tmp.open("wb") as dst:
                for n, raw in enumerate(src):
                    if not raw.endswith(b"\n"):
                        break
                    if n not in drop:
                        dst.write(raw)
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, self.path)

    def open(self) -> None:
        """Open for appending, first cutting off a torn last line (blocking).

        Raises:
            OutputWriteError: the file or its folder cannot be written.
        """
        with writing(self.path):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if self.path.exists():
                _truncate_torn_tail(self.path)
            self._file = self.path.open("ab")
        self._start = self._file.tell()
        self._keys, self._ends = array("Q"), array("q")

    def append(self, results: Iterable[AnswerResult | EncodedResult]) -> None:
        """Append results and flush them to the OS (blocking; call from a thread).

        Raises:
            RuntimeError: the log is not open.
            OutputWriteError: the write failed (disk full); the lines written before are kept.
        """
        if self._file is None:
            raise RuntimeError("AnswerLog.append before open")
        buf = bytearray()
        keys: list[int] = []
        ends: list[int] = []
        end = self._ends[-1] if self._ends else (self._start or 0)
        for r in results:
            buf += _ENCODER.encode(r)
            keys.append(line_key(r.id, r.input_hash))
            buf += b"\n"
            ends.append(end + len(buf))
        with writing(self.path):
            self._file.write(buf)
            self._file.flush()
        self._keys.extend(keys)  # only once written: a failed write leaves the record short (see finalize)
        self._ends.extend(ends)

    def close(self) -> None:
        """Flush and close (idempotent).

        Raises:
            OutputWriteError: the last flush failed (disk full); the file is closed anyway.
        """
        if self._file is not None:
            file, self._file = self._file, None
            with writing(self.path):
                try:
                    file.flush()
                    os.fsync(file.fileno())
                finally:
                    _close_quietly(file)

    def finalize(
        self,
        index: InputIndex,
        consume: Callable[[ResultDigest], None],
    ) -> int:
        """Stream the log once, keep the lines of this input in input order, rewrite if needed.

        A line is kept when ``index`` holds its resume key, and for one key only its first line.
        Memory: the index, the record and about 60 bytes per line and per answer of ``index``
        while lines are matched (the index is released as it is read), then 24 bytes per kept
        line; the file's pages are dropped as they are read. ``index`` holds no answer once the
        lines are matched, before any is consumed, and the record of the lines appended since
        :meth:`open` is released.

        Args:
            index: every answer of the current input, with its resume key and input position.
            consume: called once per kept result, in input order, with its digest.

        Returns:
            The number of lines dropped (stale or duplicate); :attr:`positions` holds the kept lines' positions.
        """
        self.positions = np.empty(0, dtype=np.int64)
        try:
            if not self.path.exists() or self.path.stat().st_size == 0:
                return 0
            with self.path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
                view = memoryview(mapped)
                try:
                    return self._finalize_mapped(view, index, consume)
                finally:
                    view.release()
        finally:
            index.clear()
            # The record of appended lines is read once: a later finalize decodes every line.
            self._start, self._keys, self._ends = None, array("Q"), array("q")

    def _finalize_mapped(self, view: memoryview, index: InputIndex, consume: Callable[[ResultDigest], None]) -> int:
        """:meth:`finalize` over the file mapped in ``view``."""
        data = view.obj
        assert isinstance(data, mmap.mmap)
        walked = 0

        def walk(n: int) -> None:
            # Read pages of the mapping count in the resident set until dropped: drop them
            # every _RELEASE_BYTES read, so the log's size does not set the peak RSS.
            nonlocal walked
            walked += n
            if walked >= _RELEASE_BYTES:
                walked = 0
                _release(data)

        size = len(view)
        # The lines appended by this run are known, unless the record does not match the file.
        appended = self._start is not None and (self._ends[-1] if self._ends else self._start) == size
        known = self._start if appended and self._start is not None else size
        appended_keys, appended_ends = self._keys, self._ends
        self._keys, self._ends = array("Q"), array("q")
        # A file of this run's lines only is matched on the record itself (no copy).
        keys, ends = (appended_keys, appended_ends) if appended and known == 0 else (array("Q"), array("q"))
        start = 0
        while start < known:
            end = data.find(b"\n", start) + 1 or size
            k = _KEY_DECODER.decode(view[start:end])
            keys.append(line_key(k.id, k.input_hash))
            ends.append(end)
            walk(end - start)
            start = end
        if appended and known > 0:
            keys.extend(appended_keys)
            ends.extend(appended_ends)
        del appended_keys, appended_ends
        if not ends:
            return 0
        position = index.take_positions(np.frombuffer(keys, dtype=np.uint64))
        del keys
        # np.unique gives each position once, ascending, with the number of its first line.
        positions, first = np.unique(position, return_index=True)
        found = positions >= 0
        self.positions, rows = positions[found], first[found]
        dropped = int(position.size - rows.size)
        in_order = bool(np.all(rows[1:] > rows[:-1]))
        del position, positions, first, found
        line_end = np.frombuffer(ends, dtype=np.int64)
        starts = np.where(rows > 0, line_end[np.maximum(rows - 1, 0)], 0)  # a line starts where the one before ends
        ends_kept = line_end[rows]
        del line_end, rows

        def lines() -> Iterator[memoryview]:
            """The kept lines in input order (offsets converted a chunk at a time)."""
            for c in range(0, starts.size, _CHUNK_LINES):
                for a, b in zip(starts[c : c + _CHUNK_LINES].tolist(), ends_kept[c : c + _CHUNK_LINES].tolist(),
                                strict=True):
                    yield view[a:b]
                    walk(b - a)

        if in_order and not dropped:
            for line in lines():
                consume(_DECODER.decode(line))
            return 0
        tmp = self.path.with_suffix(".jsonl.tmp")
        with writing(self.path):
            with tmp.open("wb", buffering=1 << 20) as dst:
                for line in lines():
                    dst.write(line)
                    consume(_DECODER.decode(line))
                dst.flush()
                os.fsync(dst.fileno())
            os.replace(tmp, self.path)
        return dropped


#: Kept lines whose offsets become Python ints at once in :meth:`AnswerLog.finalize`.
_CHUNK_LINES = 1 << 14
_RELEASE_BYTES = 8 << 20


def _release(mapped: mmap.mmap) -> None:
    """Drop the pages of the read-only file mapping ``mapped`` from the resident set (Linux
    ``MADV_DONTNEED``; a later read faults them in again from the page cache); no-op where
    the platform has no such advice."""
    if hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED)


def _close_quietly(file: IO[bytes]) -> None:
    """Close ``file``; a second failure to flush its buffer (reported already) is dropped."""
    try:
        file.close()
    except OSError:
        pass


def _truncate_torn_tail(path: Path) -> None:
    """Cut the file back to its last newline (a crash can leave half a line)."""
    size = path.stat().st_size
    if size == 0:
        return
    with path.open("rb+") as f:
        f.seek(-1, os.SEEK_END)
        if f.read(1) == b"\n":
            return
        step = 4096
        end = size
        while end > 0:
            start = max(0, end - step)
            f.seek(start)
            chunk = f.read(end - start)
            nl = chunk.rfind(b"\n")
            if nl != -1:
                f.truncate(start + nl + 1)
                return
            end = start
        f.truncate(0)
