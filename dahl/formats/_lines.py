"""Numbered lines of an input, read in binary and decoded one line at a time.

One invalid UTF-8 byte costs one record, named by its line. An input is a regular file, or a
stream read once: ``-`` (standard input) or a FIFO.
"""

from __future__ import annotations

import contextlib
import stat
import sys
from collections.abc import Generator
from pathlib import Path

from dahl.errors import ConfigError, InputError
from dahl.formats._compressed import open_bytes, open_stream

__all__ = ["STDIN", "check_input_path", "decode_line", "input_name", "is_stream", "numbered_lines"]

#: The input path that means standard input.
STDIN = Path("-")

_BOM = b"\xef\xbb\xbf"


def is_stream(path: Path) -> bool:
    """True for an input read once, from start to end: standard input (``-``) or a FIFO."""
    if path == STDIN:
        return True
    try:
        return stat.S_ISFIFO(path.stat().st_mode)
    except OSError:
        return False


def input_name(path: object) -> str:
    """How messages name an input: its path, ``<stdin>``, or the ``str`` of in-memory records."""
    return "<stdin>" if path == STDIN else str(path)


def check_input_path(path: Path) -> Path:
    """Return ``path`` if it can be read as an input: a regular file, ``-`` (stdin) or a FIFO.

    Raises:
        ConfigError: the path does not exist, is a directory, or is another kind of file.
    """
    if path == STDIN or is_stream(path):
        return path
    if not path.exists():
        raise ConfigError(f"input file not found: {path}")
    if path.is_dir():
        raise ConfigError(f"input path is a directory, not a file: {path} (pass the files in it, e.g. {path}/*.jsonl; "
                          "a folder is read only when datasets' save_to_disk wrote it)")
    if not path.is_file():
        raise ConfigError(f"input path is not a regular file: {path}")
    return path


def numbered_lines(path: Path) -> Generator[tuple[int, bytes], None, None]:
    """Yield ``(line_number, raw_bytes)`` for every line of ``path``, 1-based.

    Lines keep their terminator; a leading UTF-8 byte-order mark is dropped. ``-`` reads standard
    input. ``.gz`` / ``.zst`` files (a stream: by its first bytes) are decompressed as read.

    Raises:
        ConfigError: the file cannot be opened, or is binary.
        InputError: compressed data that is damaged or cut short.
    """
    name = input_name(path)
    with contextlib.ExitStack() as stack:
        if path == STDIN:  # left open: not ours to close
            handle = open_stream(sys.stdin.buffer, name)
        elif is_stream(path):
            try:
                fifo = stack.enter_context(path.open("rb"))
            except OSError as exc:
                raise ConfigError(f"cannot open input file {path}: {exc.strerror or exc}") from exc
            handle = stack.enter_context(open_stream(fifo, name))
        else:
            handle = stack.enter_context(open_bytes(path))
        number = 0
        try:
            for number, raw in enumerate(handle, start=1):
                if number == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                yield number, raw
        except InputError as exc:  # damaged compressed data: on the line being read
            raise InputError(exc.message, file=name, line=number + 1) from None


def decode_line(raw: bytes, *, file: str, line: int) -> str:
    """Decode one line as strict UTF-8.

    Raises:
        InputError: the bytes are not valid UTF-8.
    """
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"invalid UTF-8 byte 0x{raw[exc.start]:02x} at byte {exc.start} of the line",
            file=file,
            line=line,
        ) from exc
