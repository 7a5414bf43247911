"""Readers for answer files, in the formats people bring them.

Every reader streams its input and turns bad records into :class:`~dahl.errors.InputError`
naming the file, line and field; jsonl, csv and json may be ``.gz`` or ``.zst``. The formats
(jsonl, csv, json, parquet, hf, factscore, safe, veriscore) are described in docs/inputs.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from dahl.errors import ConfigError, InputError
from dahl.formats._arrow import is_saved_dataset, read_hf, read_parquet
from dahl.formats._detect import FORMATS, detect_format
from dahl.formats._factscore import read_factscore
from dahl.formats._fields import check_fields
from dahl.formats._inline import Records
from dahl.formats._jsonarray import read_json_array
from dahl.formats._jsonl import read_jsonl
from dahl.formats._lines import check_input_path, input_name, is_stream
from dahl.formats._needs import Needs
from dahl.formats._rows import RowOptions, jsonl_rows, response_columns, stream_rows
from dahl.formats._safe import read_safe
from dahl.formats._stats import InputStats, summarize, summarize_csv
from dahl.formats._stream import AnswerStream
from dahl.formats._table import read_csv
from dahl.formats._veriscore import read_veriscore

__all__ = ["FORMATS", "AnswerStream", "InputStats", "Needs", "Records", "describe_input", "detect_format",
           "read_answers"]

ErrorSink = Callable[[InputError], None]

#: Formats whose records are dahl's own, under any names: ``fields`` and
#: ``response_column`` apply to these only.
MAPPABLE: tuple[str, ...] = ("jsonl", "csv", "json", "parquet", "hf")

#: Formats read from a stream (``-``, a FIFO): those read line by line, in one pass.
STREAMABLE: tuple[str, ...] = ("jsonl", "factscore", "veriscore")


def _resolve(
    path: str | Path, fmt: str, options: RowOptions, needs: Needs = Needs.NOTHING
) -> tuple[Path, str]:
    """Check the format name and the input, and detect the format when ``fmt`` is ``"auto"``.

    Raises:
        ConfigError: unknown format, missing file, undetectable format, a field mapping for a
            fixed-field format, claims needed from csv, a non-:data:`STREAMABLE` format from a stream.
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise ConfigError(
            f"unknown input format {fmt!r}; valid formats: auto, {', '.join(FORMATS)}"
        )
    file = Path(path)
    if fmt == "hf" or (fmt == "auto" and is_saved_dataset(file)):
        return file, "hf"  # a folder or a hub name; read_hf checks which
    check_input_path(file)  # another folder is named as such
    if is_stream(file):  # read once: no sniffing, and csv reads its header in a pass of its own
        name = "jsonl" if fmt == "auto" else fmt
        if name not in STREAMABLE:
            fix = "save it to a file, or pipe JSONL" if name == "csv" else "save it to a file"
            raise ConfigError(f"{name} input cannot be read from standard input or a pipe ({input_name(file)}); {fix}")
    else:
        keys = {"response", *options.response_columns}
        if "response" in options.fields:
            keys.add(options.fields["response"])
        questions = {"question", options.fields.get("question", "question")}
        name = detect_format(file, response_keys=keys, question_keys=questions) if fmt == "auto" else fmt
    if name not in MAPPABLE:
        for given, flag in ((options.response_columns, "response_column"), (options.fields, "fields")):
            if given:
                raise ConfigError(
                    f"{flag} applies to {', '.join(MAPPABLE)} input; {input_name(file)} is read as {name}, "
                    "whose fields are fixed"
                )
    if Needs.CLAIMS in needs and name == "csv":
        raise ConfigError(
            f"csv input carries no claims ({file}); --splitter given needs jsonl with claims or factscore"
        )
    return file, name


def _options(response_column: str | Sequence[str] | None, fields: Mapping[str, str] | None) -> RowOptions:
    return RowOptions(fields=check_fields(fields or {}), response_columns=response_columns(response_column))


def _read(
    file: Path, name: str, options: RowOptions, on_error: ErrorSink | None, needs: Needs = Needs.NOTHING
) -> AnswerStream:
    if name == "csv":  # no claims, so nothing ``needs`` could ask (_resolve refuses CLAIMS)
        return read_csv(file, response_column=options.response_columns or None, fields=options.fields,
                        on_error=on_error)
    if name == "factscore":
        return read_factscore(file, on_error=on_error, needs=needs)
    if name == "safe":
        return read_safe(file, on_error=on_error, needs=needs)
    if name == "veriscore":
        return read_veriscore(file, on_error=on_error, needs=needs)
    if name == "json":
        return read_json_array(file, options=options, on_error=on_error, needs=needs)
    if name == "parquet":
        return read_parquet(file, options=options, on_error=on_error, needs=needs)
    if name == "hf":
        return read_hf(file, options=options, on_error=on_error, needs=needs)
    if options.response_columns:
        return stream_rows(jsonl_rows(file, on_error=on_error), options, file=input_name(file), on_error=on_error,
                           needs=needs)
    return read_jsonl(file, fields=options.fields, on_error=on_error, needs=needs)


def read_answers(
    path: str | Path | Records,
    fmt: str = "auto",
    *,
    response_column: str | Sequence[str] | None = None,
    fields: Mapping[str, str] | None = None,
    on_error: ErrorSink | None = None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream the answers of ``path`` in file order, one record in memory at a time.

    The format, the file and (for csv) the header are checked now; records are read lazily.
    ``path`` may be ``-`` (standard input) or a FIFO: read once, as jsonl unless ``fmt`` says
    factscore or veriscore.

    Args:
        path: the answer file (for ``hf``: a ``save_to_disk`` folder or a cached hub name),
            or in-memory :class:`~dahl.formats._inline.Records` (read as they are, whatever ``fmt``).
        fmt: ``"auto"`` (see :func:`detect_format`) or one of :data:`FORMATS`.
        response_column: the column (field) holding the answers (default ``"response"``),
            or several: one answer per record and column, ``model`` = the column name.
        fields: ``{dahl field: the file's field}``, e.g. ``{"question": "prompt"}``.
        on_error: called with each bad record's InputError, which is then skipped;
            when None the first bad record raises.
        needs: what every answer must carry; a record without it is a bad record.

    Returns:
        An :class:`AnswerStream` of :class:`~dahl.records.Answer`.

    Raises:
        ConfigError: unknown format, missing file, undetectable format, binary input to a
            text format, an unknown field target, a missing optional extra, csv without a
            response column or with one named twice, claims needed from csv, a format that
            cannot be read from a stream.
        InputError: while iterating, a bad record, when ``on_error`` is None.
    """
    if isinstance(path, Records):  # the Python API's in-memory answers
        return AnswerStream.unnumbered(path.answers(on_error, needs))
    options = _options(response_column, fields)
    file, name = _resolve(path, fmt, options, needs)
    return _read(file, name, options, on_error, needs)


def describe_input(
    path: str | Path,
    fmt: str = "auto",
    *,
    response_column: str | Sequence[str] | None = None,
    fields: Mapping[str, str] | None = None,
) -> InputStats:
    """Count what an answer file holds (``dahl inspect``), streaming it once.

    Arguments as :func:`read_answers`; a csv file needs no response column, and bad records
    are counted in ``InputStats.invalid`` instead of raised.

    Raises:
        ConfigError: as :func:`read_answers`.
    """
    options = _options(response_column, fields)
    file, name = _resolve(path, fmt, options)
    if name == "csv" and len(options.response_columns) < 2:  # a questions-only csv is described too
        return summarize_csv(file, response_column=options.response_columns[0] if options.response_columns else None,
                             fields=options.fields)
    return summarize(lambda sink: _read(file, name, options, sink))
