"""Answers given in memory (the Python API's ``inputs``), checked as dahl JSONL lines are.

A bad item is an :class:`~dahl.errors.InputError` naming ``<records>[i]`` (0-based) and its field.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import msgspec

from dahl.errors import ConfigError, InputError
from dahl.formats._jsonl import RecordIn, record_answer
from dahl.formats._jsonpath import NESTED_TOO_DEEPLY, decode_json
from dahl.formats._needs import Needs, check_needs
from dahl.formats._stream import skip_or_raise
from dahl.records import Answer

__all__ = ["RECORDS_NAME", "Input", "Records", "as_inputs"]

#: How in-memory inputs are named in errors, the summary and the manifest.
RECORDS_NAME = "<records>"

_ENCODER = msgspec.json.Encoder(order="deterministic")
_DECODER = msgspec.json.Decoder(RecordIn)


class Records:
    """In-memory answers, kept so that the run can read them more than once.

    Args:
        items: :class:`~dahl.records.Answer` objects or dicts shaped like dahl JSONL lines.

    Raises:
        TypeError: an item is neither an Answer nor a mapping.
    """

    def __init__(self, items: Iterable[Answer | Mapping[str, Any]]) -> None:
        kept: list[Answer | Mapping[str, Any]] = []
        for i, item in enumerate(items):
            if not isinstance(item, (Answer, Mapping)):
                raise TypeError(f"{RECORDS_NAME}[{i}] is a {type(item).__name__}, not an Answer or a dict")
            kept.append(item)
        self._items = tuple(kept)

    def __len__(self) -> int:
        """Number of items (bad ones included)."""
        return len(self._items)

    def __str__(self) -> str:
        return RECORDS_NAME

    def __repr__(self) -> str:
        return f"Records({len(self._items)} items)"

    def answers(
        self, on_error: Callable[[InputError], None] | None = None, needs: Needs = Needs.NOTHING
    ) -> Iterator[Answer]:
        """The items as Answers, in order.

        Args:
            on_error, needs: as in :func:`dahl.formats.read_answers`.

        Raises:
            InputError: a bad item, when ``on_error`` is None.
        """
        for i, item in enumerate(self._items):
            try:
                where = f"{RECORDS_NAME}[{i}]"
                answer = item if isinstance(item, Answer) else _answer_of(item, where)
                _check_needs(answer, needs, where)
            except InputError as error:
                skip_or_raise(error, on_error)
                continue
            yield answer

    def content_hash(self) -> str:
        """Hex blake2b-128 of the items' canonical JSON (sorted keys), one per line."""
        hasher = hashlib.blake2b(digest_size=16)
        for item in self._items:
            try:
                hasher.update(_ENCODER.encode(item) + b"\n")
            except (TypeError, msgspec.EncodeError):  # not JSON-encodable: reported when read
                hasher.update(repr(item).encode("utf-8", "backslashreplace") + b"\n")
            except RecursionError:  # nested too deeply even for repr: reported when read
                hasher.update(b"<nested too deeply>\n")
        return hasher.hexdigest()


def _answer_of(item: Mapping[str, Any], where: str) -> Answer:
    """One dict checked as a JSONL line is (decoded from its JSON, so the same rules apply)."""
    try:
        raw = _ENCODER.encode(item)
    except (TypeError, msgspec.EncodeError) as exc:
        raise InputError(f"not JSON data: {exc}", file=where) from None
    except RecursionError:
        raise InputError(NESTED_TOO_DEEPLY, file=where) from None
    try:
        return record_answer(decode_json(_DECODER, raw, file=where, line=None), file=where, line=0)
    except InputError as error:  # an item has no line: name it by its index alone
        raise InputError(error.message, file=where, field=error.field) from None


def _check_needs(answer: Answer, needs: Needs, where: str) -> None:
    """:func:`~dahl.formats._needs.check_needs` for an item, named by its index alone."""
    try:
        check_needs(answer, needs, file=where, line=0)
    except InputError as error:
        raise InputError(error.message, file=where, field=error.field) from None


Input = Path | Records


def as_inputs(inputs: Any) -> tuple[Input, ...]:
    """The Python API's ``inputs`` as a tuple of files and :class:`Records`.

    Accepts a path, a :class:`Records`, a sequence of those, or an iterable of Answers and dicts.

    Raises:
        ConfigError: paths and records mixed in one sequence, or an item that is none of these.
    """
    if isinstance(inputs, (str, os.PathLike, Records)):
        inputs = (inputs,)
    items = list(inputs)
    if items and all(isinstance(x, (Answer, Mapping)) for x in items):
        return (Records(items),)
    out: list[Input] = []
    for i, item in enumerate(items):
        if isinstance(item, Records):
            out.append(item)
        elif isinstance(item, (str, os.PathLike)):
            out.append(Path(item))
        else:
            raise ConfigError(
                f"inputs[{i}] is a {type(item).__name__}: give paths, Records, or an iterable of Answers or dicts "
                "(wrap records mixed with paths in dahl.Records)"
            )
    return tuple(out)
