"""Decode one JSON record for a reader (:func:`decode_json`, the one place the readers of dahl's
inputs decode JSON), and translate msgspec's errors into :class:`~dahl.errors.InputError`, moving
msgspec's JSON path into ``field``: top-level fields by bare name, nested ones as the path."""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec

from dahl.errors import InputError

__all__ = ["ANY_JSON", "NESTED_TOO_DEEPLY", "decode_json", "field_of", "nesting_error", "validation_error"]

T = TypeVar("T")

#: A decoder of any JSON value, for :func:`decode_json` where a reader has no type to validate.
ANY_JSON: msgspec.json.Decoder[Any] = msgspec.json.Decoder()

#: Message of a record deeper than the JSON decoder goes (a RecursionError).
NESTED_TOO_DEEPLY = "nested too deeply (JSON arrays/objects more than ~1,000 levels deep)"

_AT_PATH = re.compile(r" - at `(?P<path>[^`]*)`$")
_MISSING = re.compile(r"missing required field `(?P<name>[^`]*)`")
_TOP_LEVEL = re.compile(r"^\$\.(?P<name>[A-Za-z_][A-Za-z0-9_-]*)$")
_AT_BYTE = re.compile(r"\(byte (\d+)\)$")


def field_of(path: str | None) -> str | None:
    """Map a JSON path to an InputError field: ``"$.question"`` -> ``"question"``, ``"$"`` -> None,
    nested paths unchanged."""
    if path is None or path == "$":
        return None
    top = _TOP_LEVEL.match(path)
    return top.group("name") if top else path


def validation_error(exc: msgspec.ValidationError, *, file: str, line: int | None) -> InputError:
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


def decode_json(
    decoder: msgspec.json.Decoder[T],
    data: bytes | str,
    *,
    file: str,
    line: int | None,
    field: str | None = None,
    invalid: str = "",
) -> T:
    """Decode one JSON document (a line, a cell) with ``decoder``, validating it against its type.

    Args:
        decoder: the decoder of the record's type (:data:`ANY_JSON` for any value).
        data: the JSON text, UTF-8 bytes or str.
        file, line: where it is, for errors (line None: the document has none).
        field: the field the whole document is (a JSON string cell), named by errors of
            malformed or too deeply nested JSON.
        invalid: words before msgspec's message when the value does not validate, e.g.
            ``"not a reference set: "``.

    Raises:
        InputError: naming ``file`` and ``line``: malformed JSON (with a hint for pandas' bare
            NaN / Infinity), a value that does not validate (its JSON path as the field), or
            JSON nested more than ~1,000 levels deep (which would otherwise be a RecursionError).
    """
    try:
        return decoder.decode(data)
    except msgspec.ValidationError as exc:
        error = validation_error(exc, file=file, line=line)
        raise InputError(invalid + error.message, file=file, line=line, field=error.field) from None
    except msgspec.DecodeError as exc:
        raise InputError(f"malformed JSON: {exc}{_hint(data, exc)}", file=file, line=line, field=field) from None
    except RecursionError:
        raise InputError(NESTED_TOO_DEEPLY, file=file, line=line, field=field) from None


def _hint(data: bytes | str, exc: msgspec.DecodeError) -> str:
    """A hint for the one malformed-JSON case exporters cause most: pandas' bare NaN / Infinity."""
    at = _AT_BYTE.search(str(exc))
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if at and raw[int(at.group(1)) :].startswith((b"NaN", b"Infinity", b"-Infinity")):
        return " (a bare NaN or Infinity, as pandas writes for a missing value, is not JSON; write null)"
    return ""
