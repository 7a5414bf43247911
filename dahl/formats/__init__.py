"""Readers for answer files, in the formats people bring them.

Every reader streams its input (memory is one record or one batch, not the
file) and turns bad records into :class:`~dahl.errors.InputError` naming the
file, line and field. JSON Lines, CSV and JSON inputs may be ``.gz`` or ``.zst``
compressed. Format overview:

========== =====================================================================
jsonl      one JSON object per line: question, response, optional id, model,
           category, claims, claim_labels, abstained, meta (:mod:`dahl.formats.jsonl`)
csv        header with question, category and one or more response columns
           (:mod:`dahl.formats.table`)
json       a JSON array of jsonl records (:mod:`dahl.formats.jsonarray`)
parquet    a Parquet file of jsonl records (:mod:`dahl.formats.arrow`, ``dahl[arrow]``)
hf         a datasets ``save_to_disk`` folder, or a hub name in the local cache
           (:mod:`dahl.formats.arrow`, ``dahl[hf]``)
factscore  FActScore ``data/labeled/<Model>.jsonl`` (:mod:`dahl.formats.factscore`)
safe       SAFE / LongFact result JSON (:mod:`dahl.formats.safe`)
veriscore  VeriScore output JSONL (:mod:`dahl.formats.veriscore`)
========== =====================================================================

``fields`` (``--field question=prompt``) maps dahl's field names to the file's
for jsonl, csv, json, parquet and hf (:mod:`dahl.formats.fields`);
``response_column`` names one or more response columns in the same formats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from dahl.errors import ConfigError, InputError
from dahl.formats.arrow import read_hf, read_parquet
from dahl.formats.detect import FORMATS, detect_format
from dahl.formats.factscore import read_factscore
from dahl.formats.fields import check_fields
from dahl.formats.jsonarray import read_json_array
from dahl.formats.jsonl import read_jsonl
from dahl.formats.lines import open_checked
from dahl.formats.rows import RowOptions, jsonl_rows, response_columns, stream_rows
from dahl.formats.safe import read_safe
from dahl.formats.stats import InputStats, summarize, summarize_csv
from dahl.formats.table import read_csv
from dahl.formats.veriscore import read_veriscore
from dahl.records import Answer

__all__ = ["FORMATS", "InputStats", "describe_input", "detect_format", "read_answers"]

ErrorSink = Callable[[InputError], None]

#: Formats whose records are dahl's own, under any names: ``fields`` and
#: ``response_column`` apply to these only.
MAPPABLE: tuple[str, ...] = ("jsonl", "csv", "json", "parquet", "hf")


def _resolve(
    path: str | Path, fmt: str, options: RowOptions
) -> tuple[Path, str]:
    """Check the format name and the input, and detect the format when ``fmt`` is ``"auto"``.

    Raises:
        ConfigError: unknown format (lists the valid ones), missing file, undetectable
            format, or ``fields`` / ``response_column`` given for a format that has
            fixed fields (factscore, safe, veriscore).
    """
    if fmt != "auto" and fmt not in FORMATS:
        raise ConfigError(
            f"unknown input format {fmt!r}; valid formats: auto, {', '.join(FORMATS)}"
        )
    file = Path(path)
    if fmt == "hf" or (fmt == "auto" and file.is_dir()):
        return file, "hf"  # a folder or a hub name; read_hf checks which
    open_checked(file)
    keys = {"response", *options.response_columns}
    if "response" in options.fields:
        keys.add(options.fields["response"])
    questions = {"question", options.fields.get("question", "question")}
    name = detect_format(file, response_keys=keys, question_keys=questions) if fmt == "auto" else fmt
    if name not in MAPPABLE:
        for given, flag in ((options.response_columns, "response_column"), (options.fields, "fields")):
            if given:
                raise ConfigError(
                    f"{flag} applies to {', '.join(MAPPABLE)} input; {file} is read as {name}, "
                    "whose fields are fixed"
                )
    return file, name


def _options(response_column: str | Sequence[str] | None, fields: Mapping[str, str] | None) -> RowOptions:
    return RowOptions(fields=check_fields(fields or {}), response_columns=response_columns(response_column))


def _read(file: Path, name: str, options: RowOptions, on_error: ErrorSink | None) -> Iterator[Answer]:
    if name == "csv":
        return read_csv(file, response_column=options.response_columns or None, fields=options.fields,
                        on_error=on_error)
    if name == "factscore":
        return read_factscore(file, on_error=on_error)
    if name == "safe":
        return read_safe(file, on_error=on_error)
    if name == "veriscore":
        return read_veriscore(file, on_error=on_error)
    if name == "json":
        return read_json_array(file, options=options, on_error=on_error)
    if name == "parquet":
        return read_parquet(file, options=options, on_error=on_error)
    if name == "hf":
        return read_hf(file, options=options, on_error=on_error)
    if options.response_columns:
        return stream_rows(jsonl_rows(file, on_error=on_error), options, file=str(file), on_error=on_error)
    return read_jsonl(file, fields=options.fields, on_error=on_error)


def read_answers(
    path: str | Path,
    fmt: str = "auto",
    *,
    response_column: str | Sequence[str] | None = None,
    fields: Mapping[str, str] | None = None,
    on_error: ErrorSink | None = None,
) -> Iterator[Answer]:
    """Stream the answers of ``path`` in file order, one record in memory at a time.

    The format, the file and (for csv) the header are checked when this is called;
    records are read lazily as the returned iterator is consumed.

    Args:
        path: the answer file (for ``hf``: a ``save_to_disk`` folder or a cached hub name).
        fmt: ``"auto"`` (see :func:`detect_format`) or one of :data:`FORMATS`.
        response_column: the column (field) holding the answers (default ``"response"``),
            or several: one answer per record and column, ``model`` = the column name.
        fields: ``{dahl field: the file's field}``, e.g. ``{"question": "prompt"}``.
        on_error: called with each bad record's InputError, which is then skipped;
            when None the first bad record raises.

    Returns:
        An iterator of :class:`~dahl.records.Answer`.

    Raises:
        ConfigError: unknown format (lists the valid ones), missing file (names the
            path), undetectable format, binary input to a text format (names the
            format and the fix), an unknown field mapping target, a missing optional
            extra (gives the pip command), csv without a response column (lists the
            columns and suggests --response-column) or with a column named twice.
        InputError: while iterating, a bad record (invalid UTF-8, malformed JSON or
            CSV, missing or wrong field, empty response) when ``on_error`` is None.
    """
    options = _options(response_column, fields)
    file, name = _resolve(path, fmt, options)
    return _read(file, name, options, on_error)


def describe_input(
    path: str | Path,
    fmt: str = "auto",
    *,
    response_column: str | Sequence[str] | None = None,
    fields: Mapping[str, str] | None = None,
) -> InputStats:
    """Count what an answer file holds (``dahl inspect``), streaming it once.

    Unlike :func:`read_answers`, a csv file needs no response column here, and bad
    records are counted in ``InputStats.invalid`` instead of raised. Memory is
    O(distinct questions) (16 bytes each) plus the category and model tables.

    Args:
        path: the answer file.
        fmt: ``"auto"`` or one of :data:`FORMATS`.
        response_column: as in :func:`read_answers`.
        fields: as in :func:`read_answers`.

    Returns:
        The file's :class:`InputStats`.

    Raises:
        ConfigError: as :func:`read_answers`, except that a csv file may lack a
            response column.
    """
    options = _options(response_column, fields)
    file, name = _resolve(path, fmt, options)
    if name == "csv" and not options.fields and len(options.response_columns) < 2:
        return summarize_csv(file, response_column=options.response_columns[0] if options.response_columns else None)
    return summarize(lambda sink: _read(file, name, options, sink))
