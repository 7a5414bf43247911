"""SAFE / LongFact result JSON (Wei et al. 2024, google-deepmind/long-form-factuality).

``per_prompt_data`` (streamed with ijson) holds prompts with ``sideN_response`` and, once rated,
``sideN_posthoc_eval_data.checked_statements``. Each rated side becomes one Answer: ``model`` =
``side_N`` (else ``"sideN"``), ``id = f"{model}/{n}"`` (1-based prompt position, also the error
line), claims = the self-contained facts with SAFE's labels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ijson
import msgspec

from dahl.errors import InputError
from dahl.formats._compressed import open_bytes
from dahl.formats._jsonarray import json_items
from dahl.formats._jsonpath import validation_error
from dahl.formats._needs import Needs, check_needs
from dahl.formats._stream import AnswerStream, skip_or_raise
from dahl.formats._verdict_labels import scorer_label
from dahl.records import Answer, GivenClaim

__all__ = ["read_safe"]

_SIDES = ("side1", "side2")


class _Statement(msgspec.Struct):
    annotation: str
    self_contained_atomic_fact: str | None = None
    atomic_fact: str | None = None


class _Eval(msgspec.Struct):
    checked_statements: list[_Statement]


def _side_names(path: Path) -> dict[str, str]:
    """The top-level ``side_1`` / ``side_2`` strings, found by one event-only pass (no objects built)."""
    names: dict[str, str] = {}
    with open_bytes(path) as handle:
        try:
            for prefix, event, value in ijson.parse(handle):
                if prefix in ("side_1", "side_2") and event == "string":
                    names[prefix.replace("_", "")] = value
                    if len(names) == 2:
                        break
        except ijson.JSONError:
            pass  # reported by the item pass, with a position
    return names


def _answer(item: dict[str, Any], side: str, model: str, *, file: str, line: int) -> Answer | None:
    """The Answer of one side of one prompt, or None when SAFE did not rate that side.

    Raises:
        InputError: missing prompt or response, malformed eval data, unknown label.
    """
    raw = item.get(f"{side}_posthoc_eval_data")
    if raw is None:
        return None
    try:
        rated = msgspec.convert(raw, _Eval)
    except msgspec.ValidationError as exc:
        error = validation_error(exc, file=file, line=line)
        error.field = f"$.{side}_posthoc_eval_data{(error.field or '').removeprefix('$')}"
        raise InputError(error.message, file=file, line=line, field=error.field) from exc
    question, response = item.get("prompt"), item.get(f"{side}_response")
    for name, value in (("prompt", question), (f"{side}_response", response)):
        if not isinstance(value, str) or not value.strip():
            raise InputError(f"{name} is missing or empty", file=file, line=line, field=name)
    assert isinstance(question, str) and isinstance(response, str)
    claims = []
    for i, statement in enumerate(rated.checked_statements):
        where = f"$.{side}_posthoc_eval_data.checked_statements[{i}]"
        text = statement.self_contained_atomic_fact or statement.atomic_fact
        if not text or not text.strip():
            raise InputError("statement has no fact text", file=file, line=line, field=where)
        try:
            label = scorer_label(statement.annotation)
        except ValueError as exc:
            raise InputError(str(exc), file=file, line=line, field=f"{where}.annotation") from exc
        claims.append(GivenClaim(text=text, label=label))
    return Answer(
        id=f"{model}/{line}",
        question=question,
        response=response,
        model=model,
        claims=tuple(claims),
    )


def read_safe(
    path: Path, *, on_error: Callable[[InputError], None] | None = None, needs: Needs = Needs.NOTHING
) -> AnswerStream:
    """Stream the Answers of a SAFE result file, one prompt in memory at a time.

    Args:
        path: the result JSON (``.gz`` / ``.zst`` are decompressed as read).
        on_error, needs: as in :func:`dahl.formats.read_answers`.

    Returns:
        Side 1's answer, then side 2's, of each rated prompt, in file order.

    Raises:
        ConfigError: the file cannot be opened or is binary.
        InputError: a bad prompt or malformed JSON, when ``on_error`` is None.
    """
    return AnswerStream(_pairs(path, on_error, needs))


def _pairs(
    path: Path, on_error: Callable[[InputError], None] | None, needs: Needs
) -> Iterator[tuple[int | None, Answer]]:
    file = str(path)
    names = _side_names(path)
    for line, item in json_items(path, "per_prompt_data.item", on_error=on_error):
        for side in _SIDES:
            try:
                if not isinstance(item, dict):
                    raise InputError("expected a JSON object", file=file, line=line)
                answer = _answer(item, side, names.get(side, side), file=file, line=line)
                if answer is not None:
                    check_needs(answer, needs, file=file, line=line)
            except InputError as error:
                skip_or_raise(error, on_error)
                break
            if answer is not None:
                yield line, answer
