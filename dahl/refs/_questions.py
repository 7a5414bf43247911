"""The questions of ``dahl refs build``: a questions file, or the distinct questions of answers.

A questions file is JSONL or CSV with ``question``, optional ``question_id`` (default
:func:`~dahl.records.content_id` of the question), ``doc_ids`` (CSV: ``;``-separated) and, JSON
only, ``documents`` ``[{"id", "title"?, "text"}]``. Any answers input gives its distinct questions.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import msgspec

from dahl.errors import InputError
from dahl.formats import read_answers
from dahl.formats._jsonpath import decode_json
from dahl.records import content_id, normalize_text

__all__ = ["Document", "RefQuestion", "read_questions"]


class Document(msgspec.Struct, frozen=True, kw_only=True):
    """A document to extract reference facts from.

    Attributes:
        id: its id (``FactSource.doc_id`` of its facts).
        text: its text.
        title: its title ("" when none).
    """

    id: str
    text: str
    title: str = ""


class RefQuestion(msgspec.Struct, frozen=True, kw_only=True):
    """One question to build a reference set for.

    Attributes:
        question_id: the set's ``question_id``.
        question: the question text.
        doc_ids: corpus documents given for it, or None (retrieve).
        documents: documents given inline, or None.
        line: 1-based line (CSV: row) of the question in its file.
    """

    question_id: str
    question: str
    doc_ids: tuple[str, ...] | None = None
    documents: tuple[Document, ...] | None = None
    line: int = 0


class _DocIn(msgspec.Struct, kw_only=True):
    id: str | int
    text: str
    title: str | None = None


class _QuestionIn(msgspec.Struct, kw_only=True):
    question: str
    question_id: str | int | None = None
    doc_ids: list[str | int] | None = None
    documents: list[_DocIn] | None = None


_PROBE = msgspec.json.Decoder(dict[str, object])
_DECODER = msgspec.json.Decoder(_QuestionIn)

#: A UTF-8 byte-order mark, as an editor may start a file with (skipped, as the answers readers do).
_BOM = b"\xef\xbb\xbf"


def _question(raw: _QuestionIn, path: Path, line: int) -> RefQuestion:
    text = normalize_text(raw.question)
    if not text:
        raise InputError("the question is empty", file=str(path), line=line, field="question")
    documents = None
    if raw.documents is not None:
        if not raw.documents:
            raise InputError("no inline documents: give one or more, or leave documents out", file=str(path),
                             line=line, field="documents")
        documents = tuple(Document(id=str(d.id), text=d.text, title=d.title or "") for d in raw.documents)
        for i, document in enumerate(documents):
            if not document.text.strip():
                raise InputError(f"inline document {document.id!r} has empty text", file=str(path), line=line,
                                 field=f"$.documents[{i}].text")
        ids = [d.id for d in documents]
        if len(set(ids)) != len(ids):
            raise InputError("two inline documents share an id", file=str(path), line=line, field="documents")
    return RefQuestion(
        question_id=str(raw.question_id) if raw.question_id is not None else content_id(text),
        question=text,
        doc_ids=tuple(str(d) for d in raw.doc_ids) if raw.doc_ids is not None else None,
        documents=documents,
        line=line,
    )


def _first_object(path: Path) -> dict[str, object] | None:
    """The first non-blank line of ``path`` as a JSON object, or None when it is not one."""
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                try:
                    return decode_json(_PROBE, line.removeprefix(_BOM), file=str(path), line=None)
                except InputError:  # not an object: read as another format, which reports it
                    return None
    return None


def _jsonl(path: Path) -> Iterator[RefQuestion]:
    with path.open("rb") as handle:
        for n, line in enumerate(handle, 1):
            if n == 1:
                line = line.removeprefix(_BOM)
            if not line.strip():
                continue
            raw = decode_json(_DECODER, line, file=str(path), line=n, invalid="not a question record: ")
            yield _question(raw, path, n)


def _csv(path: Path) -> Iterator[RefQuestion]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        for n, row in enumerate(csv.DictReader(handle), 2):
            ids = (row.get("doc_ids") or "").strip()
            raw = _QuestionIn(
                question=row.get("question") or "",
                question_id=(row.get("question_id") or "").strip() or None,
                doc_ids=[i.strip() for i in ids.split(";") if i.strip()] if ids else None,
            )
            yield _question(raw, path, n)


def _csv_header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return next(csv.reader(handle), [])


def _from_answers(path: Path, fmt: str) -> Iterator[RefQuestion]:
    for answer in read_answers(path, fmt):
        text = normalize_text(answer.question)
        if text:
            yield RefQuestion(question_id=content_id(text), question=text)


def read_questions(path: str | Path, fmt: str = "auto") -> Iterator[RefQuestion]:
    """Yield the distinct questions of ``path`` in file order (streamed; blocking).

    Args:
        path: a questions file (``.jsonl``/``.csv``) or any answers input.
        fmt: ``"auto"``, ``"questions"`` or an answers format of :func:`dahl.formats.read_answers`.

    Raises:
        InputError: the file cannot be read, or a record is bad (file, line and field named).
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("questions file not found", file=str(path))
    source: Iterator[RefQuestion]
    if fmt == "questions" or fmt == "auto" and path.suffix == ".csv" and "response" not in _csv_header(path) \
            and "question" in _csv_header(path):
        source = _csv(path) if path.suffix == ".csv" else _jsonl(path)
    elif fmt == "auto" and path.suffix in (".jsonl", ".json", ".ndjson"):
        first = _first_object(path)
        is_questions = first is not None and "question" in first and "response" not in first
        source = _jsonl(path) if is_questions else _from_answers(path, fmt)
    else:
        source = _from_answers(path, fmt)
    seen: set[str] = set()
    for question in source:
        if question.question_id not in seen:
            seen.add(question.question_id)
            yield question
