"""The DAHL CSV answer format: a header row, then one answer per row.

Columns: ``question`` (required), ``category`` (default ``"all"``), a response column
(``response`` or ``response_column``), optional ``id`` and ``model`` (default: the file's stem);
other columns go to ``Answer.meta``. With several response columns each makes an answer, its
``model`` the column name and ``id`` suffixed ``/<column>``. Errors name the line a record starts on.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from dahl.errors import ConfigError, InputError
from dahl.formats._compressed import model_stem
from dahl.formats._fields import check_fields, rename_row
from dahl.formats._lines import decode_line, numbered_lines
from dahl.formats._rows import response_columns
from dahl.formats._stream import AnswerStream, skip_or_raise
from dahl.records import Answer, content_id

__all__ = ["csv_header", "csv_rows", "read_csv", "response_column_of"]

_KNOWN = frozenset({"id", "question", "category", "model"})


class _LenientLines:
    """Decoded lines for csv.reader; invalid UTF-8 is replaced and its InputError queued in
    :attr:`bad`, which the caller drains after each record."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self.bad: list[InputError] = []

    def __iter__(self) -> Iterator[str]:
        file = str(self._path)
        for number, raw in numbered_lines(self._path):
            try:
                yield decode_line(raw, file=file, line=number)
            except InputError as error:
                self.bad.append(error)
                yield raw.decode("utf-8", errors="replace")


def csv_header(path: Path) -> list[str]:
    """Return the stripped column names of the first non-blank row of ``path``.

    Raises:
        InputError: the header is not valid UTF-8 or not valid CSV.
        ConfigError: the file cannot be opened, has no header row, or names one column twice.
    """
    file = str(path)
    for number, raw in numbered_lines(path):
        text = decode_line(raw, file=file, line=number)
        if not text.strip():
            continue
        try:
            row = next(csv.reader([text], strict=True))
        except csv.Error as exc:
            raise InputError(f"cannot parse CSV header: {exc}", file=file, line=number) from exc
        header = [name.strip() for name in row]
        seen: set[str] = set()
        for name in header:
            if name in seen:
                raise ConfigError(
                    f"{file} has two columns named {name!r}; rename one so each column "
                    "is read (a row keeps only one value per name)"
                )
            seen.add(name)
        return header
    raise ConfigError(f"{path} is empty: expected a CSV header row")


def response_column_of(
    header: list[str], response_column: str | None, *, file: str, required: bool
) -> str | None:
    """Pick the response column: ``response_column`` if given, else ``"response"`` if present.

    Returns:
        The column name, or None when there is none and ``required`` is False.

    Raises:
        ConfigError: ``response_column`` is not in the header, or none exists and ``required``.
    """
    columns = ", ".join(header)
    if response_column is not None:
        if response_column not in header:
            raise ConfigError(
                f"{file} has no column {response_column!r} (columns: {columns})"
            )
        return response_column
    if "response" in header:
        return "response"
    if required:
        raise ConfigError(
            f"{file} has no response column (columns: {columns}); "
            "pass --response-column NAME to say which column holds the answers"
        )
    return None


def csv_rows(
    path: Path, *, on_error: Callable[[InputError], None] | None = None
) -> Iterator[tuple[int, dict[str, str]]]:
    """Stream ``(line, row)`` pairs after the header; ``line`` is where the record starts.

    Blank lines are skipped; a row with another field count than the header, invalid UTF-8
    or malformed CSV is bad.

    Args:
        path: the CSV file.
        on_error: called with each bad row's InputError, which is then skipped;
            when None the first bad row raises.

    Raises:
        InputError: a bad row, when ``on_error`` is None.
        ConfigError: the file cannot be opened or has no header.
    """
    file = str(path)
    source = _LenientLines(path)
    reader = csv.reader(source, strict=True)
    header: list[str] | None = None
    end = 0
    while True:
        start = end + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            end = reader.line_num
            source.bad.clear()
            error = InputError(f"malformed CSV: {exc}", file=file, line=start)
            if on_error is None:
                raise error from exc
            on_error(error)
            continue
        end = reader.line_num
        try:
            if source.bad:
                bad = source.bad[0]
                source.bad.clear()
                raise bad
            if not row:
                continue
            if header is None:
                header = [name.strip() for name in row]
                continue
            if len(row) != len(header):
                raise InputError(
                    f"expected {len(header)} fields as in the header, got {len(row)}",
                    file=file,
                    line=start,
                )
        except InputError as error:
            if on_error is None or header is None:
                raise
            on_error(error)
            continue
        yield start, dict(zip(header, row, strict=True))
    if header is None:
        raise ConfigError(f"{path} is empty: expected a CSV header row")


def _to_answer(
    row: dict[str, str],
    *,
    response_column: str,
    model: str,
    file: str,
    line: int,
    columns: Sequence[str] = (),
) -> Answer:
    """Build the Answer of one row and response column.

    Args:
        columns: all response columns when there are two or more; empty for one.

    Raises:
        InputError: empty question or response cell.
    """
    question = row["question"]
    if not question.strip():
        raise InputError("question is empty", file=file, line=line, field="question")
    response = row[response_column]
    if not response.strip():
        raise InputError("response is empty", file=file, line=line, field=response_column)
    row_model = response_column if columns else row.get("model", "").strip() or model
    given_id = row.get("id", "").strip()
    if given_id and columns:
        given_id = f"{given_id}/{response_column}"
    answer_id = given_id or content_id(row_model, question, response)
    skip = set(columns) | {response_column}
    meta = {k: v for k, v in row.items() if k not in _KNOWN and k not in skip}
    return Answer(
        id=answer_id,
        question=question,
        response=response,
        model=row_model,
        category=row.get("category", "").strip() or "all",
        meta=meta,
    )


def read_csv(
    path: Path,
    *,
    response_column: str | Sequence[str] | None = None,
    on_error: Callable[[InputError], None] | None = None,
    fields: Mapping[str, str] | None = None,
) -> AnswerStream:
    """Stream the Answers of a DAHL CSV file (constant memory); the header is checked at once.

    Args:
        path: the CSV file.
        response_column: column(s) holding the answers; default ``"response"``.
        on_error: called with each bad row's InputError, which is then skipped;
            when None the first bad row raises.
        fields: ``{dahl field: the file's column}``, applied before the checks.

    Raises:
        ConfigError: no ``question`` or response column, a column named twice, a bad
            ``fields`` mapping, or the file cannot be opened.
        InputError: a bad row, when ``on_error`` is None.
    """
    file = str(path)
    mapping = check_fields(fields or {})
    header = list(rename_row(dict.fromkeys(csv_header(path), ""), mapping))
    if "question" not in header:
        raise ConfigError(f"{file} has no 'question' column (columns: {', '.join(header)})")
    wanted: list[str | None] = list(response_columns(response_column)) or [None]
    columns: list[str] = []
    for name in wanted:
        column = response_column_of(header, name, file=file, required=True)
        assert column is not None  # required=True never returns None
        columns.append(column)
    if len(set(columns)) != len(columns):
        raise ConfigError(f"--response-column names one column twice: {', '.join(columns)}")
    return AnswerStream(_answers(path, columns=columns, mapping=mapping, on_error=on_error))


def _answers(
    path: Path,
    *,
    columns: list[str],
    mapping: dict[str, str],
    on_error: Callable[[InputError], None] | None,
) -> Iterator[tuple[int | None, Answer]]:
    file = str(path)
    several = columns if len(columns) > 1 else ()
    for line, row in csv_rows(path, on_error=on_error):
        if mapping:
            row = rename_row(row, mapping)
        for column in columns:
            try:
                answer = _to_answer(
                    row, response_column=column, model=model_stem(path), file=file, line=line, columns=several
                )
            except InputError as error:
                skip_or_raise(error, on_error)
                continue
            yield line, answer
