"""Numbered lines of a file, read in binary and decoded one line at a time.

Reading bytes and decoding per line means one invalid UTF-8 byte costs one
record, not the whole file, and the error can name its line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from dahl.errors import ConfigError, InputError
from dahl.formats.compressed import CORRUPT_ERRORS, open_bytes

__all__ = ["decode_line", "numbered_lines", "open_checked"]

_BOM = b"\xef\xbb\xbf"


def open_checked(path: Path) -> Path:
    """Return ``path`` if it names a readable regular file.

    Raises:
        ConfigError: the path does not exist or is not a file (message names the path).
    """
    if not path.exists():
        raise ConfigError(f"input file not found: {path}")
    if not path.is_file():
        raise ConfigError(f"input path is not a file: {path}")
    return path


def numbered_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """Yield ``(line_number, raw_bytes)`` for every line of ``path``, 1-based.

    Lines keep their terminator (``b"\\n"`` or ``b"\\r\\n"``); a UTF-8 byte-order
    mark at the start of the file is dropped. Memory is one line at a time.
    ``.gz`` / ``.zst`` files are decompressed as read (:mod:`dahl.formats.compressed`).

    Raises:
        ConfigError: the file cannot be opened, or is binary (names the format and
            how to read it).
        InputError: compressed data that is damaged or cut short (names the line after
            the last good one).
    """
    handle = open_bytes(path)
    number = 0
    with handle:
        try:
            for number, raw in enumerate(handle, start=1):
                if number == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                yield number, raw
        except CORRUPT_ERRORS as exc:
            raise InputError(
                f"compressed data is damaged or cut short: {exc}", file=str(path), line=number + 1
            ) from exc


def decode_line(raw: bytes, *, file: str, line: int) -> str:
    """Decode one line as strict UTF-8.

    Raises:
        InputError: the bytes are not valid UTF-8 (names the file, line and byte offset).
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"invalid UTF-8 byte 0x{raw[exc.start]:02x} at byte {exc.start} of the line",
            file=file,
            line=line,
        ) from exc
