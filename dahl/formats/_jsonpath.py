"""Translate msgspec validation errors into :class:`~dahl.errors.InputError`, moving msgspec's
JSON path into ``field``: top-level fields by bare name, nested ones as the path."""

from __future__ import annotations

import re

import msgspec

from dahl.errors import InputError

__all__ = ["NESTED_TOO_DEEPLY", "field_of", "nesting_error", "validation_error"]

#: Message of a record deeper than the JSON decoder goes (a RecursionError).
NESTED_TOO_DEEPLY = "nested too deeply (JSON arrays/objects more than ~1,000 levels deep)"

_AT_PATH = re.compile(r" - at `(?P<path>[^`]*)`$")
_MISSING = re.compile(r"missing required field `(?P<name>[^`]*)`")
_TOP_LEVEL = re.compile(r"^\$\.(?P<name>[A-Za-z_][A-Za-z0-9_-]*)$")


def field_of(path: str | None) -> str | None:
    """Map a JSON path to an InputError field: ``"$.question"`` -> ``"question"``, ``"$"`` -> None,
    nested paths unchanged."""
    if path is None or path == "$":
        return None
    top = _TOP_LEVEL.match(path)
    return top.group("name") if top else path


def validation_error(exc: msgspec.ValidationError, *, file: str, line: int) -> InputError:
    """Return an InputError for ``exc`` naming ``file``, ``line`` and the failing field (a missing
    field by its own path)."""
    message = str(exc)
    at = _AT_PATH.search(message)
    path = at.group("path") if at else "$"
    if at:
        message = message[: at.start()]
    missing = _MISSING.search(message)
    if missing:
        path = f"{path}.{missing.group('name')}"
    return InputError(message, file=file, line=line, field=field_of(path))


def nesting_error(*, file: str, line: int) -> InputError:
    """Return the InputError of a record too deeply nested to decode (a RecursionError)."""
    return InputError(NESTED_TOO_DEEPLY, file=file, line=line)
