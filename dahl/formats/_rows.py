"""Answers of records read as dicts (JSON arrays, Parquet and Arrow rows).

A row holds dahl's record fields, possibly renamed (``fields``); each of ``response_columns``
makes one answer (with two or more, ``model`` is the column and ``id`` gets ``/<column>``).
A null value counts as absent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from dahl.errors import InputError
from dahl.formats._fields import rename_row
from dahl.formats._jsonl import RecordIn, record_answer
from dahl.formats._jsonpath import decode_json, nesting_error, validation_error
from dahl.formats._lines import decode_line, input_name, numbered_lines
from dahl.formats._needs import Needs, check_needs
from dahl.formats._stream import AnswerStream, skip_or_raise
from dahl.records import Answer

__all__ = ["RowOptions", "jsonl_rows", "record_of", "response_columns", "row_records", "stream_rows"]


_OBJECT = msgspec.json.Decoder(dict[str, Any])
_ENCODER = msgspec.json.Encoder()


class RowOptions(msgspec.Struct, frozen=True):
    """How dict rows become answers.

    Attributes:
        fields: ``{dahl field: the row's key}``, checked already.
        response_columns: keys holding the answers; empty: the ``response`` field.
    """

    fields: dict[str, str] = {}
    response_columns: tuple[str, ...] = ()


def row_records(row: Mapping[str, Any], options: RowOptions) -> list[dict[str, Any]]:
    """The records of one row, before validation: one per response column, mapped, nulls dropped,
    the column's value as ``response``."""
    record = {k: v for k, v in rename_row(row, options.fields).items() if v is not None}
    columns = options.response_columns
    if not columns:
        return [record]
    several = len(columns) > 1
    base = {k: v for k, v in record.items() if k not in columns}
    records = []
    for column in columns:
        one = {**base, "response": record.get(column)}
        if several:
            one["model"] = column
            if isinstance(one.get("id"), str) and one["id"].strip():
                one["id"] = f"{one['id']}/{column}"
        records.append(one)
    return records


def record_of(record: dict[str, Any], *, file: str, line: int, column: str | None = None) -> Answer:
    """Validate one record and build its Answer.

    Args:
        record: as from :func:`row_records`.
        file, line: where the row is, for errors (1-based row or element number).
        column: the response column it came from, named by errors on the response.

    Raises:
        InputError: a missing, empty or mistyped field, or a value nested too deeply.
    """
    if column is not None and record.get("response") is None:
        raise InputError(f"no value in response column {column!r}", file=file, line=line, field=column)
    try:
        parsed = msgspec.convert(record, RecordIn)
    except msgspec.ValidationError as exc:
        raise validation_error(exc, file=file, line=line) from exc
    except RecursionError:
        raise nesting_error(file=file, line=line) from None
    if parsed.meta:  # rows arrive parsed (ijson, pyarrow): a depth the JSON decoder refuses would fail at hashing
        try:
            _ENCODER.encode(parsed.meta)
        except RecursionError:
            raise nesting_error(file=file, line=line) from None
    return record_answer(parsed, file=file, line=line)


def jsonl_rows(
    path: Path, *, on_error: Callable[[InputError], None] | None
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line, object)`` for each non-blank line of a JSON Lines file.

    Raises:
        InputError: invalid UTF-8, malformed or too deeply nested JSON, or not an object,
            when ``on_error`` is None (else it receives them and the line is skipped).
        ConfigError: the file cannot be opened or is binary.
    """
    file = input_name(path)
    for number, raw in numbered_lines(path):
        if not raw.strip():
            continue
        try:
            value = decode_json(_OBJECT, decode_line(raw, file=file, line=number), file=file, line=number,
                                invalid="expected a JSON object: ")
        except InputError as error:
            skip_or_raise(error, on_error)
            continue
        yield number, value


def stream_rows(
    rows: Iterable[tuple[int, Mapping[str, Any]]],
    options: RowOptions,
    *,
    file: str,
    on_error: Callable[[InputError], None] | None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream the answers of ``(line, row)`` pairs in order, one per row and response column.

    Args:
        rows: ``(line, row)`` pairs, the line 1-based.
        options: field mapping and response columns.
        file: how errors name the input.
        on_error: as in :func:`dahl.formats.read_answers` (a row's other columns are still read).
        needs: what every answer must carry.

    Returns:
        An :class:`~dahl.formats._stream.AnswerStream` numbered by ``rows``' lines.

    Raises:
        InputError: a bad record, or one lacking what ``needs`` asks, when ``on_error`` is None.
    """
    return AnswerStream(_pairs(rows, options, file, on_error, needs))


def _pairs(
    rows: Iterable[tuple[int, Mapping[str, Any]]],
    options: RowOptions,
    file: str,
    on_error: Callable[[InputError], None] | None,
    needs: Needs,
) -> Iterator[tuple[int | None, Answer]]:
    columns: tuple[str | None, ...] = options.response_columns or (None,)
    checked = needs is not Needs.NOTHING
    for line, row in rows:
        for column, record in zip(columns, row_records(row, options), strict=True):
            try:
                answer = record_of(record, file=file, line=line, column=column)
                if checked:
                    check_needs(answer, needs, file=file, line=line)
            except InputError as error:
                skip_or_raise(error, on_error)
                continue
            yield line, answer


def response_columns(value: str | Sequence[str] | None) -> tuple[str, ...]:
    """Normalize a ``response_column`` argument (one name, several, or None) to a tuple."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)
