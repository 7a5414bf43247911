"""A JSON file holding one top-level array of dahl records, parsed incrementally (ijson).

Errors name the element's 1-based position as the line; broken JSON ends the file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ijson

from dahl.errors import InputError
from dahl.formats._compressed import open_bytes
from dahl.formats._needs import Needs
from dahl.formats._rows import RowOptions, stream_rows
from dahl.formats._stream import AnswerStream, skip_or_raise

__all__ = ["json_items", "read_json_array", "starts_array"]

_SNIFF_BYTES = 1 << 16


def json_items(
    path: Path, prefix: str, *, on_error: Callable[[InputError], None] | None
) -> Iterator[tuple[int, Any]]:
    """Yield ``(position, value)`` for each item under ``prefix`` (ijson syntax, e.g. ``"item"``).

    Args:
        path: a JSON file (``.gz`` / ``.zst`` are decompressed as read).
        prefix: ijson prefix of the items: ``"item"`` for a top-level array.
        on_error: receives the InputError of broken JSON (then iteration ends); None: raised.

    Raises:
        ConfigError: the file cannot be opened or is binary.
        InputError: malformed JSON, when ``on_error`` is None.
    """
    position = 0
    with open_bytes(path) as handle:
        try:
            for position, value in enumerate(ijson.items(handle, prefix, use_float=True), start=1):
                yield position, value
        except ijson.JSONError as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            error = InputError(f"malformed JSON: {detail}", file=str(path), line=position + 1)
            if on_error is None:
                raise error from exc
            on_error(error)


def starts_array(path: Path) -> bool:
    """Whether the first non-blank byte of ``path`` is ``[`` (a bounded read of 64 KiB, after a
    byte-order mark; ``.gz`` / ``.zst`` decompressed).

    Raises:
        ConfigError: the file cannot be opened or is binary.
    """
    with open_bytes(path) as handle:
        head = handle.read(_SNIFF_BYTES).removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[:1] == b"["


def read_json_array(
    path: Path,
    *,
    options: RowOptions = RowOptions(),
    on_error: Callable[[InputError], None] | None = None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream the Answers of a JSON array file, one element in memory at a time.

    Arguments as :func:`~dahl.formats._arrow.read_hf`; answers are numbered by element position.

    Raises:
        ConfigError: the file cannot be opened or is binary.
        InputError: the file does not hold an array (raised here, whatever ``on_error``); a bad
            or non-object element, or malformed JSON, when ``on_error`` is None.
    """
    file = str(path)
    if not starts_array(path):
        raise InputError("expected a JSON array of records at the top level (JSON Lines: --format jsonl)", file=file)

    def objects() -> Iterator[tuple[int, dict[str, Any]]]:
        for position, value in json_items(path, "item", on_error=on_error):
            if isinstance(value, dict):
                yield position, value
                continue
            error = InputError(f"expected a JSON object, got {type(value).__name__}", file=file, line=position)
            skip_or_raise(error, on_error)

    return stream_rows(objects(), options, file=file, on_error=on_error, needs=needs)
