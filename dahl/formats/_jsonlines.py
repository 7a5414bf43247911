"""The record loop shared by the JSON Lines readers: decode, validate, convert, report."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import msgspec

from dahl.errors import InputError
from dahl.formats._jsonpath import decode_json
from dahl.formats._lines import decode_line, input_name, numbered_lines
from dahl.formats._needs import Needs, check_needs
from dahl.formats._stream import AnswerStream, skip_or_raise
from dahl.records import Answer

__all__ = ["read_records"]

R = TypeVar("R")


def read_records(
    path: Path,
    decoder: msgspec.json.Decoder[R],
    convert: Callable[[R, str, int], Answer],
    on_error: Callable[[InputError], None] | None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream ``convert(record, file, line)`` for each non-blank line of ``path``.

    Args:
        path: a JSON Lines file.
        decoder: decodes and validates one line into a record.
        convert: turns a record into an Answer; may raise InputError.
        on_error, needs: as in :func:`dahl.formats.read_answers`.

    Raises:
        InputError: a bad line, when ``on_error`` is None.
        ConfigError: the file cannot be opened.
    """
    return AnswerStream(_numbered(path, decoder, convert, on_error, needs))


def _numbered(
    path: Path,
    decoder: msgspec.json.Decoder[R],
    convert: Callable[[R, str, int], Answer],
    on_error: Callable[[InputError], None] | None,
    needs: Needs,
) -> Iterator[tuple[int | None, Answer]]:
    """The ``(line, answer)`` pairs of :func:`read_records`."""
    file = input_name(path)
    checked = needs is not Needs.NOTHING  # a Flag's truth is a Python call: test it once
    for number, raw in numbered_lines(path):
        if not raw.strip():
            continue
        try:
            record = decode_json(decoder, decode_line(raw, file=file, line=number), file=file, line=number)
            answer = convert(record, file, number)
            if checked:
                check_needs(answer, needs, file=file, line=number)
        except InputError as error:
            skip_or_raise(error, on_error)
            continue
        yield number, answer
