"""Readers for answer files: dahl JSONL, DAHL CSV and FActScore labelled JSONL.

Every reader streams its file line by line (memory is one record, not the file)
and turns bad records into :class:`~dahl.errors.InputError` naming the file,
line and field. Format overview:

========== =====================================================================
jsonl      one JSON object per line: question, response, optional id, model,
           category, claims, abstained, meta (:mod:`dahl.formats.jsonl`)
csv        header with question, category and a response column
           (:mod:`dahl.formats.table`)
factscore  FActScore ``data/labeled/<Model>.jsonl`` (:mod:`dahl.formats.factscore`)
========== =====================================================================
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from dahl.errors import ConfigError, InputError
from dahl.formats.detect import FORMATS, detect_format
from dahl.formats.factscore import read_factscore
from dahl.formats.inline import Records
from dahl.formats.jsonl import read_jsonl
from dahl.formats.lines import input_name, is_stream, open_checked
from dahl.formats.needs import Needs
from dahl.formats.stats import InputStats, summarize, summarize_csv
from dahl.formats.stream import AnswerStream
from dahl.formats.table import read_csv

__all__ = ["FORMATS", "AnswerStream", "InputStats", "Needs", "Records", "describe_input", "detect_format",
           "read_answers"]

ErrorSink = Callable[[InputError], None]


def _resolve(
    path: str | Path, fmt: str, response_column: str | None, needs: Needs = Needs.NOTHING
) -> tuple[Path, str]:
    """Check the format name and the file, and detect the format when ``fmt`` is ``"auto"``.

    Raises:
        ConfigError: unknown format (lists the valid ones), missing file, undetectable
            format, ``response_column`` given for a format other than csv, claims
            needed from csv input (which has none), csv from a stream.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise ConfigError(
            f"unknown input format {fmt!r}; valid formats: auto, {', '.join(FORMATS)}"
        )
    file = open_checked(Path(path))
    if is_stream(file):  # read once: no sniffing, and csv reads its header in a pass of its own
        name = "jsonl" if fmt == "auto" else fmt
        if name == "csv":
            raise ConfigError(f"csv input cannot be read from standard input or a pipe ({input_name(file)}); "
                              "save it to a file, or pipe JSONL")
        return file, name
    name = detect_format(file) if fmt == "auto" else fmt
    if response_column is not None and name != "csv":
        raise ConfigError(
            f"response_column applies to csv input only; {file} is read as {name}"
        )
    if Needs.CLAIMS in needs and name == "csv":
        raise ConfigError(
            f"csv input carries no claims ({file}); --splitter given needs jsonl with claims or factscore"
        )
    return file, name


def read_answers(
    path: str | Path | Records,
    fmt: str = "auto",
    *,
    response_column: str | None = None,
    on_error: ErrorSink | None = None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream the answers of ``path`` in file order, one record in memory at a time.

    The format, the file and (for csv) the header are checked when this is called;
    records are read lazily as the returned iterator is consumed. ``path`` may be
    ``-`` (standard input) or a FIFO: read once, as jsonl unless ``fmt`` says
    factscore (``"auto"`` does not sniff a stream).

    Args:
        path: the answer file, or in-memory :class:`~dahl.formats.inline.Records`
            (read as they are, whatever ``fmt``).
        fmt: ``"auto"`` (see :func:`detect_format`) or one of :data:`FORMATS`.
        response_column: csv only: the column holding the answers (default ``"response"``).
        on_error: called with each bad record's InputError, which is then skipped;
            when None the first bad record raises.
        needs: what every answer must carry (:class:`~dahl.formats.needs.Needs`); a
            record without it is a bad record.

    Returns:
        An iterator of :class:`~dahl.records.Answer` whose ``line`` is the input
        line of the answer it gave last (see :class:`AnswerStream`).

    Raises:
        ConfigError: unknown format (lists the valid ones), missing file (names the
            path), undetectable format, csv without a response column (lists the
            columns and suggests --response-column), claims needed from csv.
        InputError: while iterating, a bad record (invalid UTF-8, malformed JSON or
            CSV, missing or wrong field, empty response, lacking what ``needs`` asks)
            when ``on_error`` is None.
    """
    if isinstance(path, Records):  # the Python API's in-memory answers
        return AnswerStream.unnumbered(path.answers(on_error, needs))
    file, name = _resolve(path, fmt, response_column, needs)
    if name == "csv":
        return read_csv(file, response_column=response_column, on_error=on_error)
    if name == "factscore":
        return read_factscore(file, on_error=on_error, needs=needs)
    return read_jsonl(file, on_error=on_error, needs=needs)


def describe_input(
    path: str | Path, fmt: str = "auto", *, response_column: str | None = None
) -> InputStats:
    """Count what an answer file holds (``dahl inspect``), streaming it once.

    Unlike :func:`read_answers`, a csv file needs no response column here, and bad
    records are counted in ``InputStats.invalid`` instead of raised. Memory is
    O(distinct questions) (16 bytes each) plus the category and model tables.

    Args:
        path: the answer file.
        fmt: ``"auto"`` or one of :data:`FORMATS`.
        response_column: csv only: the column holding the answers (default ``"response"``).

    Returns:
        The file's :class:`InputStats`.

    Raises:
        ConfigError: unknown format, missing file, undetectable format, or a
            ``response_column`` that the csv header lacks.
    """
    file, name = _resolve(path, fmt, response_column)
    if name == "csv":
        return summarize_csv(file, response_column=response_column)
    if name == "factscore":
        return summarize(lambda sink: read_factscore(file, on_error=sink))
    return summarize(lambda sink: read_jsonl(file, on_error=sink))
