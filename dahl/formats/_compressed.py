"""Open an input file as a byte stream: ``.gz`` and ``.zst`` are decompressed as read; another
binary file is refused with a message naming what it is and how to read it."""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import BinaryIO, cast

import zstandard

from dahl.errors import ConfigError

__all__ = ["CORRUPT_ERRORS", "MAGIC", "binary_kind", "model_stem", "open_bytes", "open_stream"]

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
        if expected == "gzip":
            return gzip.open(path, "rb")
        raw = path.open("rb")
    except OSError as exc:
        raise ConfigError(f"cannot open input file {path}: {exc.strerror or exc}") from exc
    if expected == "zstd":
        stream = zstandard.ZstdDecompressor().stream_reader(raw, read_size=_READ_SIZE, closefd=True)
        return io.BufferedReader(stream, buffer_size=_READ_SIZE)
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
    if kind == "gzip":
        return gzip.GzipFile(fileobj=buffered, mode="rb")
    if kind == "zstd":
        stream = zstandard.ZstdDecompressor().stream_reader(buffered, read_size=_READ_SIZE, closefd=False)
        return io.BufferedReader(stream, buffer_size=_READ_SIZE)
    if kind is not None:
        what = "UTF-16 text, not UTF-8" if kind == "UTF-16" else f"a {kind} file, not text"
        raise ConfigError(f"{name} looks like {what}; save it to a file and read that ({_HINTS[kind]})")
    return buffered


#: Exceptions a decompressing stream raises on damaged or cut data.
CORRUPT_ERRORS: tuple[type[Exception], ...] = (EOFError, zlib.error, gzip.BadGzipFile, zstandard.ZstdError)
