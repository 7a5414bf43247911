"""Guess an answer file's format from its first non-blank line."""

from __future__ import annotations

import csv
from pathlib import Path

import msgspec

from dahl.errors import ConfigError, InputError
from dahl.formats.lines import decode_line, numbered_lines, open_checked

__all__ = ["FORMATS", "detect_format"]

#: Format names accepted by ``read_answers(fmt=...)`` (plus ``"auto"``).
FORMATS: tuple[str, ...] = ("jsonl", "csv", "factscore")

_FACTSCORE_KEYS = frozenset({"input", "output", "topic"})


def _first_line(path: Path) -> str:
    """Return the first non-blank line of ``path``, decoded.

    Raises:
        ConfigError: missing file, empty file, or a first line that is not UTF-8.
    """
    for number, raw in numbered_lines(open_checked(path)):
        if raw.strip():
            try:
                return decode_line(raw, file=str(path), line=number).strip()
            except InputError as exc:
                raise ConfigError(f"cannot detect the format of {path}: {exc}") from exc
    raise ConfigError(f"cannot detect the format of {path}: the file is empty")


def detect_format(path: Path) -> str:
    """Name the format of ``path`` by sniffing its first non-blank line.

    - a JSON object with ``input`` + ``output`` + ``topic``, or ``annotations``: ``"factscore"``;
    - a JSON object with ``response``: ``"jsonl"``;
    - a CSV header with a ``question`` column: ``"csv"``.

    Args:
        path: the answer file.

    Returns:
        One of :data:`FORMATS`.

    Raises:
        ConfigError: the file is missing or empty, or none of the rules match
            (the message names the file and what was found).
    """
    path = Path(path)
    first = _first_line(path)
    if first.startswith("{"):
        try:
            value = msgspec.json.decode(first)
        except msgspec.DecodeError as exc:
            raise ConfigError(
                f"cannot detect the format of {path}: first line is not valid JSON ({exc}); "
                f"pass the format explicitly (one of {', '.join(FORMATS)})"
            ) from exc
        if isinstance(value, dict):
            keys = set(value)
            if _FACTSCORE_KEYS <= keys or "annotations" in keys:
                return "factscore"
            if "response" in keys:
                return "jsonl"
            found = ", ".join(sorted(keys)) or "none"
            raise ConfigError(
                f"cannot detect the format of {path}: first JSON object has keys {found}; "
                "expected 'response' (jsonl) or 'input'/'output'/'topic' (factscore)"
            )
    else:
        header = [name.strip() for name in next(csv.reader([first]), [])]
        if "question" in header:
            return "csv"
    raise ConfigError(
        f"cannot detect the format of {path}: first line is neither a JSON object nor a "
        f"CSV header with a 'question' column; pass the format (one of {', '.join(FORMATS)})"
    )
