"""The dahl JSONL answer format: one JSON object per line.

Fields: ``question``, ``response`` (required; empty only with ``abstained``), ``id`` (default:
content_id(model, question, response)), ``model`` ("unknown"), ``category`` ("all"), ``claims``
(``[{"text", "label"?}]`` or ``[str]``), ``claim_labels`` (parallel to claims, overriding theirs),
``abstained``, ``meta``. Labels: :data:`LABEL_ALIASES` or booleans, case-insensitive. Unknown
fields are ignored; blank lines skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

import msgspec

from dahl.errors import InputError
from dahl.formats._fields import renamed_struct
from dahl.formats._jsonlines import read_records
from dahl.formats._needs import Needs
from dahl.formats._stream import AnswerStream
from dahl.records import Answer, GivenClaim, Label, content_id

__all__ = ["LABEL_ALIASES", "RecordIn", "parse_label", "read_jsonl", "record_answer"]

#: Accepted spellings of a given claim label (lower-cased) -> Label.
LABEL_ALIASES: dict[str, Label] = {
    "supported": Label.SUPPORTED,
    "s": Label.SUPPORTED,
    "true": Label.SUPPORTED,
    "unsupported": Label.UNSUPPORTED,
    "ns": Label.UNSUPPORTED,
    "false": Label.UNSUPPORTED,
    "irrelevant": Label.IRRELEVANT,
    "ir": Label.IRRELEVANT,
    "unknown": Label.UNKNOWN,
}


class _ClaimIn(msgspec.Struct, forbid_unknown_fields=True):
    text: str
    label: bool | str | None = None


class RecordIn(msgspec.Struct):
    """One dahl record as read, before validation (see the module docstring)."""

    question: str
    response: str
    id: str | None = None
    model: str = "unknown"
    category: str = "all"
    claims: list[_ClaimIn | str] | None = None
    claim_labels: list[bool | str | None] | None = None
    abstained: bool = False
    meta: dict[str, Any] = {}


_DECODER = msgspec.json.Decoder(RecordIn)

def parse_label(value: bool | str | None) -> Label | None:
    """Map a given label spelling to a :class:`Label` (None stays None).

    Raises:
        ValueError: the spelling is not one of :data:`LABEL_ALIASES` (or a bool).
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return Label.SUPPORTED if value else Label.UNSUPPORTED
    label = LABEL_ALIASES.get(value.strip().lower())
    if label is None:
        raise ValueError(
            f"unknown label {value!r}; expected one of {', '.join(sorted(LABEL_ALIASES))}"
        )
    return label


def _object_claims(claims: list[_ClaimIn], *, file: str, line: int) -> tuple[GivenClaim, ...]:
    """Claims given as ``{"text", "label"}`` objects (the common case, kept lean).

    Raises:
        InputError: an empty claim text or an unknown label (names its JSON path).
    """
    given = []
    for i, claim in enumerate(claims):
        if not claim.text.strip():
            raise InputError("claim text is empty", file=file, line=line, field=f"$.claims[{i}].text")
        try:
            label = parse_label(claim.label)
        except ValueError as exc:
            raise InputError(str(exc), file=file, line=line, field=f"$.claims[{i}].label") from exc
        given.append(GivenClaim(text=claim.text, label=label))
    return tuple(given)


def _listed_claims(
    claims: list[_ClaimIn | str], labels: list[bool | str | None] | None, *, file: str, line: int
) -> tuple[GivenClaim, ...]:
    """Claims given as strings or objects, with their labels in ``labels`` when it is not None.

    Raises:
        InputError: an empty claim text or an unknown label (names its JSON path).
    """
    given = []
    for i, claim in enumerate(claims):
        text, value = (claim, None) if isinstance(claim, str) else (claim.text, claim.label)
        if not text.strip():
            where = f"$.claims[{i}]" if isinstance(claim, str) else f"$.claims[{i}].text"
            raise InputError("claim text is empty", file=file, line=line, field=where)
        if labels is not None:
            value = labels[i]
        try:
            label = parse_label(value)
        except ValueError as exc:
            where = f"$.claim_labels[{i}]" if labels is not None else f"$.claims[{i}].label"
            raise InputError(str(exc), file=file, line=line, field=where) from exc
        given.append(GivenClaim(text=text, label=label))
    return tuple(given)


def record_answer(record: RecordIn, *, file: str, line: int) -> Answer:
    """Validate what msgspec cannot express and build the Answer.

    Raises:
        InputError: empty question or response, empty claim text, unknown label,
            ``claim_labels`` of another length than ``claims``.
    """
    if not record.question.strip():
        raise InputError("question is empty", file=file, line=line, field="question")
    if not record.response.strip() and not record.abstained:
        raise InputError("response is empty", file=file, line=line, field="response")
    claims: tuple[GivenClaim, ...] | None = None
    labels = record.claim_labels
    if labels is not None and len(labels) != len(record.claims or ()):
        raise InputError(
            f"claim_labels has {len(labels)} labels for {len(record.claims or ())} claims",
            file=file, line=line, field="claim_labels",
        )
    if record.claims is not None:
        if labels is None and str not in map(type, record.claims):
            claims = _object_claims(cast("list[_ClaimIn]", record.claims), file=file, line=line)
        else:
            claims = _listed_claims(record.claims, labels, file=file, line=line)
    answer_id = record.id
    if answer_id is None or not answer_id.strip():
        answer_id = content_id(record.model, record.question, record.response)
    return Answer(
        id=answer_id,
        question=record.question,
        response=record.response,
        model=record.model,
        category=record.category,
        claims=claims,
        abstained=record.abstained,
        meta=record.meta,
    )


def read_jsonl(
    path: Path,
    *,
    on_error: Callable[[InputError], None] | None = None,
    fields: Mapping[str, str] | None = None,
    needs: Needs = Needs.NOTHING,
) -> AnswerStream:
    """Stream the Answers of a dahl JSONL file, one line at a time (constant memory).

    Args:
        path: the file (``.gz``/``.zst`` are decompressed as they stream).
        fields: ``{dahl field: the file's key}``.
        on_error, needs: as in :func:`dahl.formats.read_answers`.

    Raises:
        InputError: a bad line, when ``on_error`` is None.
        ConfigError: the file cannot be opened, or a bad ``fields`` mapping.
    """
    decoder = msgspec.json.Decoder(renamed_struct(RecordIn, fields)) if fields else _DECODER
    return read_records(
        path, decoder, lambda record, file, line: record_answer(record, file=file, line=line), on_error, needs
    )
