"""Summary figures of an answer file, for ``dahl inspect``."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import msgspec

from dahl.errors import InputError
from dahl.formats._fields import rename_row
from dahl.formats._table import csv_header, csv_rows, response_column_of
from dahl.records import Answer, normalize_text

__all__ = ["MAX_INVALID_EXAMPLES", "InputStats", "question_key", "summarize", "summarize_csv"]

#: Invalid records listed by reason in :attr:`InputStats.invalid_examples` (the rest are counted).
MAX_INVALID_EXAMPLES = 20


class InputStats(msgspec.Struct, frozen=True, kw_only=True):
    """What an answer file holds.

    Attributes:
        rows: records read successfully (bad records are counted in ``invalid``).
        unique_questions: distinct questions after :func:`~dahl.records.normalize_text`.
        categories: category -> number of records, most common first.
        models: model -> number of records that have a response, most common first.
        with_response: records with a non-empty response.
        invalid: records skipped as bad input (InputError).
        invalid_examples: why the first :data:`MAX_INVALID_EXAMPLES` of them are invalid
            (``"FILE:LINE, field 'F': reason"``).
    """

    rows: int
    unique_questions: int
    categories: dict[str, int]
    models: dict[str, int]
    with_response: int
    invalid: int = 0
    invalid_examples: tuple[str, ...] = ()


def question_key(question: str) -> bytes:
    """16-byte digest of the normalized question: distinct-count memory stays small."""
    return hashlib.blake2b(normalize_text(question).encode("utf-8"), digest_size=16).digest()


class _Tally:
    """Running counts behind an :class:`InputStats`."""

    def __init__(self) -> None:
        self.rows = 0
        self.invalid = 0
        self.examples: list[str] = []
        self.with_response = 0
        self.questions: set[bytes] = set()
        self.categories: Counter[str] = Counter()
        self.models: Counter[str] = Counter()

    def add(self, *, question: str, category: str, model: str | None, response: str) -> None:
        self.rows += 1
        self.questions.add(question_key(question))
        self.categories[category] += 1
        if response.strip():
            self.with_response += 1
            if model is not None:
                self.models[model] += 1

    def reject(self, error: InputError) -> None:
        self.invalid += 1
        if len(self.examples) < MAX_INVALID_EXAMPLES:
            self.examples.append(str(error))

    def stats(self) -> InputStats:
        return InputStats(
            rows=self.rows,
            unique_questions=len(self.questions),
            categories=dict(self.categories.most_common()),
            models=dict(self.models.most_common()),
            with_response=self.with_response,
            invalid=self.invalid,
            invalid_examples=tuple(self.examples),
        )


def summarize_csv(
    path: Path, *, response_column: str | None, fields: Mapping[str, str] | None = None
) -> InputStats:
    """Describe a DAHL CSV file; a response column is optional here.

    Args:
        path: the CSV file.
        response_column: the column holding the answers, or None to find ``response``.
        fields: ``{dahl field: the file's column}``, applied to the header and each row.

    Raises:
        ConfigError: missing file, no header, or ``response_column`` not in the header.
    """
    mapping = dict(fields or {})
    header = list(rename_row(dict.fromkeys(csv_header(path), ""), mapping))
    column = response_column_of(header, response_column, file=str(path), required=False)
    tally = _Tally()
    for _line, row in csv_rows(path, on_error=tally.reject):
        if mapping:
            row = rename_row(row, mapping)
        response = row[column] if column is not None else ""
        tally.add(
            question=row.get("question", ""),
            category=row.get("category", "").strip() or "all",
            model=row.get("model", "").strip() or path.stem,
            response=response,
        )
    return tally.stats()


def summarize(
    read: Callable[[Callable[[InputError], None]], Iterator[Answer]],
) -> InputStats:
    """Describe the answers ``read(on_error)`` yields; bad records are counted, not raised."""
    tally = _Tally()
    for answer in read(tally.reject):
        tally.add(
            question=answer.question,
            category=answer.category,
            model=answer.model,
            response=answer.response,
        )
    return tally.stats()
