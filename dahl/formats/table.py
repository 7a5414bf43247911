"""The DAHL CSV answer format: a header row, then one answer per row.

Columns: ``question`` (required), ``category`` (default ``"all"``), a response
column (``response`` unless ``response_column`` names another), and optionally
``id`` and ``model`` (default: the file's stem, e.g. ``llama-3-8b`` for
``llama-3-8b.csv``). Any other columns are carried into ``Answer.meta`` as strings.
DAHL's own ``questions.csv`` has no response column; it can be described but
not scored.

Rows stream through :mod:`csv` one at a time; quoted fields may span lines, and
errors name the line on which the offending record starts.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Iterator
from pathlib import Path

from dahl.errors import ConfigError, InputError
from dahl.formats.lines import decode_line, numbered_lines
from dahl.formats.stream import AnswerStream
from dahl.records import Answer, content_id

__all__ = ["csv_header", "csv_rows", "read_csv", "response_column_of"]

_KNOWN = frozenset({"id", "question", "category", "model"})


class _LenientLines:
    """Decoded lines for csv.reader; invalid UTF-8 is replaced and its InputError queued.

    The caller drains :attr:`bad` after each record so the record that holds the bad
    byte is reported (with the bad line's number) instead of parsed.
    """

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
        ConfigError: the file cannot be opened or has no header row.
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
        return [name.strip() for name in row]
    raise ConfigError(f"{path} is empty: expected a CSV header row")


def response_column_of(
    header: list[str], response_column: str | None, *, file: str, required: bool
) -> str | None:
    """Pick the response column: ``response_column`` if given, else ``"response"`` if present.

    Returns:
        The column name, or None when there is none and ``required`` is False.

    Raises:
        ConfigError: ``response_column`` is not in the header, or no response column
            exists and ``required`` is True (the message lists the columns).
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

    Blank lines are skipped. A row whose field count differs from the header's, or
    that holds invalid UTF-8 or malformed CSV, is an InputError.

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
    row: dict[str, str], *, response_column: str, model: str, file: str, line: int
) -> Answer:
    """Build the Answer of one row.

    Raises:
        InputError: empty question or response cell.
    """
    question = row["question"]
    if not question.strip():
        raise InputError("question is empty", file=file, line=line, field="question")
    response = row[response_column]
    if not response.strip():
        raise InputError("response is empty", file=file, line=line, field=response_column)
    row_model = row.get("model", "").strip() or model
    answer_id = row.get("id", "").strip() or content_id(row_model, question, response)
    meta = {k: v for k, v in row.items() if k not in _KNOWN and k != response_column}
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
    response_column: str | None = None,
    on_error: Callable[[InputError], None] | None = None,
) -> AnswerStream:
    """Stream the Answers of a DAHL CSV file (constant memory).

    The header is checked before the first row is read, so a missing column fails
    at once with a ConfigError rather than per row.

    Args:
        path: the CSV file.
        response_column: column holding the answers; default ``"response"``.
        on_error: called with each bad row's InputError, which is then skipped;
            when None the first bad row raises.

    Raises:
        ConfigError: no ``question`` column, or no response column (message lists
            the columns and suggests --response-column); file cannot be opened.
        InputError: a bad row, when ``on_error`` is None.
    """
    file = str(path)
    header = csv_header(path)
    if "question" not in header:
        raise ConfigError(f"{file} has no 'question' column (columns: {', '.join(header)})")
    column = response_column_of(header, response_column, file=file, required=True)
    assert column is not None  # required=True never returns None
    return AnswerStream(_answers(path, column=column, on_error=on_error))


def _answers(
    path: Path, *, column: str, on_error: Callable[[InputError], None] | None
) -> Iterator[tuple[int | None, Answer]]:
    file = str(path)
    for line, row in csv_rows(path, on_error=on_error):
        try:
            answer = _to_answer(row, response_column=column, model=path.stem, file=file, line=line)
        except InputError as error:
            if on_error is None:
                raise
            on_error(error)
            continue
        yield line, answer
