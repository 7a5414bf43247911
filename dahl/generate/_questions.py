"""The questions of ``dahl generate``: CSV/TSV or JSONL files with ``question`` (or LongFact's
``prompt``), optionally ``category`` and ``question_id`` (or ``id``).
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from dahl.errors import InputError

__all__ = ["GenQuestion", "read_questions"]

_TEXT_FIELDS = ("question", "prompt")


@dataclasses.dataclass(frozen=True)
class GenQuestion:
    """One question to answer.

    Attributes:
        question: the question text, verbatim.
        category: its category, ``"all"`` when the file gives none.
        question_id: the file's id for it, or None.
        line: 1-based line (CSV: row after the header) in its file.
    """

    question: str
    category: str
    question_id: str | None
    line: int


def _record(raw: dict[str, Any], where: str, line: int) -> GenQuestion:
    field = next((name for name in _TEXT_FIELDS if name in raw), None)
    if field is None:
        raise InputError("no question: needs a 'question' (or LongFact 'prompt') field", file=where, line=line,
                         field="question")
    text = raw[field]
    if not isinstance(text, str) or not text.strip():
        raise InputError("must be a non-empty string", file=where, line=line, field=field)
    category = raw.get("category")
    if category is not None and not isinstance(category, str):
        raise InputError("must be a string", file=where, line=line, field="category")
    qid = raw.get("question_id", raw.get("id"))
    if qid is not None and not isinstance(qid, (str, int)):
        raise InputError("must be a string or an integer", file=where, line=line, field="question_id")
    return GenQuestion(text, category or "all", None if qid is None or qid == "" else str(qid), line)


def read_questions(path: Path) -> Iterator[GenQuestion]:
    """The questions of ``path`` in file order (``.csv``/``.tsv`` tables, else JSONL; blocking).

    Raises:
        InputError: the file cannot be read, is malformed CSV, or a record is not valid (file, line
            and field named).
    """
    where = str(path)
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=where) from None
    with handle:
        try:
            if path.suffix.lower() in (".csv", ".tsv"):
                reader = csv.DictReader(handle, delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
                try:
                    for row in reader:
                        yield _record(dict(row), where, reader.line_num)
                except csv.Error as exc:  # e.g. a field over csv's 131,072-character limit
                    # line_num counts the lines of the rows read whole: the bad row starts at the next.
                    raise InputError(f"malformed CSV: {exc}", file=where, line=reader.line_num + 1) from None
                return
            for n, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    raw = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise InputError(f"not valid JSON ({exc})", file=where, line=n) from None
                if not isinstance(raw, dict):
                    raise InputError("not a JSON object", file=where, line=n)
                yield _record(raw, where, n)
        except UnicodeDecodeError:
            raise InputError("not UTF-8 text", file=where) from None
