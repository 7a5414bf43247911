"""Guess an answer file's format from its first good record.

A CSV file is told by its header, which must be its first non-blank line. A JSON
Lines file is told by its first line that decodes to an object with known keys,
looked for among the first :data:`SNIFF_LINES` lines: a bad record at the top
(malformed, not UTF-8, nested too deeply, a required key missing) is then skipped
by the reader as it would be on any other line, not taken as the file's format.
"""

from __future__ import annotations

import csv
from contextlib import closing
from pathlib import Path

import msgspec

from dahl.errors import ConfigError, InputError
from dahl.formats.jsonpath import NESTED_TOO_DEEPLY
from dahl.formats.lines import decode_line, numbered_lines, open_checked

__all__ = ["FORMATS", "SNIFF_LINES", "detect_format"]

#: Format names accepted by ``read_answers(fmt=...)`` (plus ``"auto"``).
FORMATS: tuple[str, ...] = ("jsonl", "csv", "factscore")

#: Lines (blank ones included) read at most to find a record that names the format.
SNIFF_LINES = 100

_FACTSCORE_KEYS = frozenset({"input", "output", "topic"})


def _classify(text: str) -> tuple[str | None, str]:
    """The format one decoded JSON Lines line names, or None and why it names none."""
    try:
        value = msgspec.json.decode(text)
    except msgspec.DecodeError as exc:
        return None, f"not valid JSON ({exc})"
    except RecursionError:
        return None, NESTED_TOO_DEEPLY
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    keys = set(value)
    if _FACTSCORE_KEYS <= keys or "annotations" in keys:
        return "factscore", ""
    if "response" in keys:
        return "jsonl", ""
    found = ", ".join(sorted(keys)) or "none"
    return None, (
        f"first JSON object has keys {found}; "
        "expected 'response' (jsonl) or 'input'/'output'/'topic' (factscore)"
    )


def _is_csv_header(text: str) -> bool:
    header = [name.strip() for name in next(csv.reader([text]), [])]
    return "question" in header


def detect_format(path: Path) -> str:
    """Name the format of ``path`` from its first good record.

    - the first non-blank line is a CSV header with a ``question`` column: ``"csv"``;
    - else the first of the first :data:`SNIFF_LINES` lines that is a JSON object with
      ``input`` + ``output`` + ``topic``, or ``annotations``: ``"factscore"``; with
      ``response``: ``"jsonl"``. Lines before it are bad records of that format.

    Args:
        path: the answer file.

    Returns:
        One of :data:`FORMATS`.

    Raises:
        ConfigError: the file is missing or empty, or no line within the bound names
            a format (the message names the file and the first line's problem).
    """
    path = Path(path)
    first_problem: str | None = None
    seen = 0
    with closing(numbered_lines(open_checked(path))) as lines:
        for number, raw in lines:
            if number > SNIFF_LINES:
                break
            if not raw.strip():
                continue
            seen += 1
            try:
                text = decode_line(raw, file=str(path), line=number).strip()
            except InputError as exc:
                first_problem = first_problem or str(exc)
                continue
            if seen == 1 and not text.startswith("{") and _is_csv_header(text):
                return "csv"
            name, problem = _classify(text) if text.startswith("{") else (None, "")
            if name is not None:
                return name
            first_problem = first_problem or problem or (
                "first line is neither a JSON object nor a CSV header with a 'question' column"
            )
    if first_problem is None:
        raise ConfigError(f"cannot detect the format of {path}: the file is empty")
    bound = f"; no good record in the first {SNIFF_LINES} lines" if seen > 1 else ""
    raise ConfigError(
        f"cannot detect the format of {path}: {first_problem}{bound}; "
        f"pass the format explicitly (one of {', '.join(FORMATS)})"
    )
