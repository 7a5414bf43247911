"""VeriScore outputs (Song et al. 2024, Yixiao-Song/VeriScore), one JSON object per line.

Each line becomes one Answer (``model`` from the line, else the file stem; ``meta.prompt_source``
kept) whose claims are ``claim_verification_result`` with their labels, or, not yet verified,
``all_claim_lst`` without labels.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import msgspec

from dahl.errors import InputError
from dahl.formats._compressed import model_stem
from dahl.formats._jsonlines import read_records
from dahl.formats._needs import Needs
from dahl.formats._stream import AnswerStream
from dahl.formats._verdict_labels import scorer_label
from dahl.records import Answer, GivenClaim, content_id

__all__ = ["read_veriscore"]


class _Verified(msgspec.Struct):
    claim: str
    verification_result: str


class _Line(msgspec.Struct):
    question: str
    response: str
    model: str | None = None
    abstained: bool = False
    prompt_source: str | None = None
    all_claim_lst: list[str] | None = None
    claim_verification_result: list[_Verified] | None = None


_DECODER = msgspec.json.Decoder(_Line)


def _to_answer(record: _Line, *, model: str, file: str, line: int) -> Answer:
    """Build the Answer of one line.

    Raises:
        InputError: empty question or response (unless abstained), unknown label.
    """
    if not record.question.strip():
        raise InputError("question is empty", file=file, line=line, field="question")
    if not record.response.strip() and not record.abstained:
        raise InputError("response is empty", file=file, line=line, field="response")
    claims: list[GivenClaim] = []
    if record.claim_verification_result is not None:
        for i, verified in enumerate(record.claim_verification_result):
            try:
                label = scorer_label(verified.verification_result)
            except ValueError as exc:
                raise InputError(
                    str(exc), file=file, line=line,
                    field=f"$.claim_verification_result[{i}].verification_result",
                ) from exc
            claims.append(GivenClaim(text=verified.claim, label=label))
    else:
        claims = [GivenClaim(text=text) for text in record.all_claim_lst or ()]
    name = record.model or model
    meta = {"prompt_source": record.prompt_source} if record.prompt_source else {}
    return Answer(
        id=content_id(name, record.question, record.response),
        question=record.question,
        response=record.response,
        model=name,
        claims=tuple(claims),
        abstained=record.abstained,
        meta=meta,
    )


def read_veriscore(
    path: Path, *, on_error: Callable[[InputError], None] | None = None, needs: Needs = Needs.NOTHING
) -> AnswerStream:
    """Stream the Answers of a VeriScore output file, one line at a time.

    Args:
        path: the JSONL file (``.gz`` / ``.zst`` are decompressed as read); its stem is
            the model name of lines without ``model``.
        on_error, needs: as in :func:`dahl.formats.read_answers`.

    Raises:
        InputError: a bad line, when ``on_error`` is None.
        ConfigError: the file cannot be opened or is binary.
    """
    stem = model_stem(path)
    return read_records(
        path, _DECODER, lambda record, file, line: _to_answer(record, model=stem, file=file, line=line), on_error, needs
    )
