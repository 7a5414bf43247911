"""Open an input file as a byte stream: ``.gz`` and ``.zst`` are decompressed as read; another
binary file is refused with a message naming what it is and how to read it. Damaged or cut
compressed data is an :class:`~dahl.errors.InputError` naming the file and the byte offsets,
whichever reader meets it."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Any, BinaryIO, cast

import zstandard

from dahl.errors import ConfigError, InputError

__all__ = ["MAGIC", "binary_kind", "model_stem", "open_bytes", "open_stream"]

#: Leading bytes of binary files people pass as answer files -> what they are.
MAGIC: dict[bytes, str] = {
    b"\x1f\x8b": "gzip",
    b"\x28\xb5\x2f\xfd": "zstd",
    b"PAR1": "Parquet",
    b"ARROW1": "Arrow",
    b"\xff\xff\xff\xff": "Arrow",  # IPC stream continuation marker (save_to_disk files)
    b"PK\x03\x04": "zip",
    b"BZh": "bzip2",
    b"\xfd7zXZ\x00": "xz",
    b"\xff\xfe": "UTF-16",  # byte-order marks of Excel's "Unicode text" exports
    b"\xfe\xff": "UTF-16",
}

_HINTS: dict[str, str] = {
    "gzip": "name it .gz (e.g. answers.jsonl.gz) so dahl decompresses it",
    "zstd": "name it .zst (e.g. answers.jsonl.zst) so dahl decompresses it",
    "Parquet": "use --format parquet",
    "Arrow": "pass the folder saved by datasets' save_to_disk with --format hf",
    "zip": "unzip it first (an Excel workbook: save it as CSV UTF-8)",
    "bzip2": "decompress it first (or recompress it as .gz or .zst)",
    "xz": "decompress it first (or recompress it as .gz or .zst)",
    "UTF-16": "save it as UTF-8",
}

_SUFFIXES = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
_READ_SIZE = 1 << 16


def model_stem(path: Path) -> str:
    """The file's stem without a compression suffix: ``ChatGPT`` for ``ChatGPT.jsonl.gz``."""
    if path.suffix.lower() in _SUFFIXES:
        path = path.with_suffix("")
    return path.stem


def binary_kind(path: Path) -> str | None:
    """Name the binary format whose magic bytes ``path`` starts with, or None.

    Raises:
        ConfigError: the file cannot be opened.
    """
    try:
        with path.open("rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        raise ConfigError(f"cannot open input file {path}: {exc.strerror or exc}") from exc
    for magic, kind in MAGIC.items():
        if head.startswith(magic):
            return kind
    return None


def open_bytes(path: Path) -> io.BufferedIOBase:
    """Open ``path`` for binary line reading, decompressing ``.gz`` / ``.zst`` as it streams.

    Raises:
        ConfigError: the file cannot be opened; its suffix says gzip or zstd and its bytes are
            not; or it is binary without such a suffix.
    """
    expected = _SUFFIXES.get(path.suffix.lower())
    kind = binary_kind(path)
    if expected is None and kind is not None:
        what = "UTF-16 text, not UTF-8" if kind == "UTF-16" else f"a {kind} file, not text"
        raise ConfigError(f"{path} looks like {what}; {_HINTS[kind]}")
    if expected is not None and kind != expected:
        raise ConfigError(
            f"{path} is named {path.suffix} but is not {expected}-compressed; rename it"
        )
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise ConfigError(f"cannot open input file {path}: {exc.strerror or exc}") from exc
    if expected is not None:
        return io.BufferedReader(_Decompressed(raw, expected, str(path), close_source=True), buffer_size=_READ_SIZE)
    return raw


def open_stream(handle: BinaryIO, name: str) -> io.BufferedIOBase:
    """Read a stream (standard input, a FIFO) once, decompressing it if its first bytes say gzip or zstd.

    The first bytes are peeked, not consumed; closing the returned reader does not close ``handle``.

    Args:
        handle: the stream (``sys.stdin.buffer`` or a FIFO opened ``"rb"``).
        name: how messages name it (``<stdin>`` or the FIFO's path).

    Raises:
        ConfigError: the stream is binary but not gzip or zstd.
    """
    buffered = handle if isinstance(handle, io.BufferedReader) else io.BufferedReader(cast(io.RawIOBase, handle))
    head = buffered.peek(8)[:8]
    kind = next((kind for magic, kind in MAGIC.items() if head.startswith(magic)), None)
    if kind in ("gzip", "zstd"):
        return io.BufferedReader(_Decompressed(buffered, kind, name, close_source=False), buffer_size=_READ_SIZE)
    if kind is not None:
        what = "UTF-16 text, not UTF-8" if kind == "UTF-16" else f"a {kind} file, not text"
        raise ConfigError(f"{name} looks like {what}; save it to a file and read that ({_HINTS[kind]})")
    return buffered


#: Exceptions a decompressor raises on damaged or cut data.
_CORRUPT_ERRORS: tuple[type[Exception], ...] = (EOFError, zlib.error, gzip.BadGzipFile, zstandard.ZstdError)


class _Counted:
    """A byte source that counts the bytes read from it (the compressed offset of damage)."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.source.read(size)
        self.count += len(data)
        return data


class _Decompressed(io.RawIOBase):
    """The decompressed bytes of a gzip stream (members in sequence) or a zstd stream (frames in
    sequence), read from ``source`` as needed.

    A zstd frame cut short is an error here (zstandard's stream reader ends there silently), as a
    gzip member cut short is in :mod:`gzip`. Damaged or cut data raises :class:`InputError`
    naming ``name``, the decompressed byte offset reached and the compressed bytes read so far.
    """

    def __init__(self, source: BinaryIO, kind: str, name: str, *, close_source: bool) -> None:
        super().__init__()
        self._source = _Counted(source)
        self._name = name
        self._close_source = close_source
        self._gzip = gzip.GzipFile(fileobj=cast(Any, self._source), mode="rb") if kind == "gzip" else None
        self._zstd = zstandard.ZstdDecompressor()
        self._frame: Any = None  # the zstd frame under way, None between frames
        self._pending = memoryview(b"")
        self._offset = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        try:
            n = self._gzip.readinto1(buffer) if self._gzip is not None else self._zstd_into(buffer)
        except _CORRUPT_ERRORS as exc:
            raise InputError(
                f"compressed data is damaged or cut short after decompressed byte {self._offset:,} "
                f"(compressed byte {self._source.count:,} read): {exc}",
                file=self._name,
            ) from None
        self._offset += n
        return n

    def _zstd_into(self, buffer: Any) -> int:
        while not self._pending:
            chunk = self._source.read(_READ_SIZE)
            if not chunk:
                if self._frame is not None:
                    raise EOFError("the stream ends inside a zstd frame")
                return 0
            out = []
            while chunk:
                if self._frame is None:
                    self._frame = self._zstd.decompressobj()
                out.append(self._frame.decompress(chunk))
                chunk = b""
                if self._frame.eof:
                    chunk, self._frame = self._frame.unused_data, None
            self._pending = memoryview(b"".join(out))
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n

    def close(self) -> None:
        if not self.closed:
            if self._gzip is not None:
                self._gzip.close()
            if self._close_source:
                self._source.source.close()
        super().close()
