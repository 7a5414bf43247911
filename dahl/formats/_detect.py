"""Guess an answer file's format from its first bytes or its first good record.

A JSON Lines file is told by its first line, among the first :data:`SNIFF_LINES`, that is an
object with known keys: bad records above it are the reader's to skip, not the file's format.
"""

from __future__ import annotations

import csv
from collections.abc import Collection
from contextlib import closing
from pathlib import Path


from dahl.errors import ConfigError, InputError
from dahl.formats._arrow import is_saved_dataset
from dahl.formats._compressed import binary_kind, open_bytes
from dahl.formats._jsonarray import starts_array
from dahl.formats._jsonpath import ANY_JSON, decode_json
from dahl.formats._lines import check_input_path, decode_line, numbered_lines

__all__ = ["FORMATS", "SNIFF_LINES", "detect_format"]

#: Format names accepted by ``read_answers(fmt=...)`` (plus ``"auto"``).
FORMATS: tuple[str, ...] = ("jsonl", "csv", "factscore", "json", "parquet", "hf", "safe", "veriscore")

#: Lines (blank ones included) read at most to find a record that names the format.
SNIFF_LINES = 100

_FACTSCORE_KEYS = frozenset({"input", "output", "topic"})
_VERISCORE_KEYS = frozenset({"claim_verification_result", "all_claim_lst"})
_SAFE_KEY = b'"per_prompt_data"'
_SNIFF_BYTES = 1 << 16


def _binary_format(path: Path) -> str | None:
    """``"hf"`` for a ``save_to_disk`` folder, ``"parquet"`` for a Parquet file, else None."""
    if is_saved_dataset(path):
        return "hf"
    check_input_path(path)
    if path.suffix.lower() == ".parquet" or binary_kind(path) == "Parquet":
        return "parquet"
    return None


def _is_safe(path: Path) -> bool:
    """Whether the first 64 KiB of a (pretty-printed) JSON object name ``per_prompt_data``."""
    with open_bytes(path) as handle:
        return _SAFE_KEY in handle.read(_SNIFF_BYTES)


def _classify(text: str, response_keys: Collection[str]) -> tuple[str | None, str]:
    """The format one decoded JSON Lines line names, or None and why it names none."""
    try:
        value = decode_json(ANY_JSON, text, file="", line=None)
    except InputError as exc:
        return None, exc.message
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    keys = set(value)
    if "per_prompt_data" in keys:
        return "safe", ""
    if _FACTSCORE_KEYS <= keys or "annotations" in keys:
        return "factscore", ""
    if keys & _VERISCORE_KEYS:
        return "veriscore", ""
    if keys & set(response_keys):
        return "jsonl", ""
    found = ", ".join(sorted(keys)) or "none"
    return None, (
        f"first JSON object has keys {found}; "
        "expected 'response' (jsonl) or 'input'/'output'/'topic' (factscore)"
    )


def _is_csv_header(text: str, question_keys: Collection[str]) -> bool:
    try:
        header = [name.strip() for name in next(csv.reader([text]), [])]
    except csv.Error:  # e.g. a quoted field over csv's 128 KiB limit: no header
        return False
    return bool(set(header) & set(question_keys))


def _named_jsonl(path: Path) -> bool:
    """Whether the name says JSON Lines: ``*.jsonl`` or ``*.ndjson``, before any ``.gz`` / ``.zst``."""
    suffixes = [x.lower() for x in path.suffixes]
    while suffixes and suffixes[-1] in (".gz", ".zst"):
        suffixes.pop()
    return bool(suffixes) and suffixes[-1] in (".jsonl", ".ndjson")


def detect_format(
    path: Path,
    *,
    response_keys: Collection[str] = ("response",),
    question_keys: Collection[str] = ("question",),
) -> str:
    """Name the format of ``path`` from its first bytes or its first good record.

    - a ``save_to_disk`` folder: ``"hf"``; a ``.parquet`` name or Parquet magic bytes: ``"parquet"``;
    - a first non-blank byte ``[``: ``"json"`` (a JSON array of records);
    - a first line that is not JSON and a file naming ``per_prompt_data`` in its
      first 64 KiB: ``"safe"`` (a pretty-printed results object);
    - the first non-blank line is a CSV header with one of ``question_keys``: ``"csv"``;
    - else the first of the first :data:`SNIFF_LINES` lines that is a JSON object
      with ``per_prompt_data``: ``"safe"``; ``input`` + ``output`` + ``topic``, or
      ``annotations``: ``"factscore"``; ``claim_verification_result`` or
      ``all_claim_lst``: ``"veriscore"``; one of ``response_keys``: ``"jsonl"``.
      Lines before it are bad records of that format.

    A ``*.jsonl`` / ``*.ndjson`` file in which no line names a format is ``"jsonl"`` (of bad
    records). ``.gz`` / ``.zst`` files are sniffed decompressed.

    Args:
        path: the answer file.
        response_keys: keys that hold a response (``response``, or mapped names).
        question_keys: columns that hold the question (``question``, or the mapped name).

    Returns:
        One of :data:`FORMATS`.

    Raises:
        ConfigError: the file is missing or empty, or (not named ``*.jsonl``) no line within
            the bound names a format.
    """
    path = Path(path)
    binary = _binary_format(path)
    if binary is not None:
        return binary
    if starts_array(path):
        return "json"
    first_problem: str | None = None
    seen = 0
    with closing(numbered_lines(path)) as lines:
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
            if seen == 1 and not text.startswith("{") and _is_csv_header(text, question_keys):
                return "csv"
            name, problem = _classify(text, response_keys) if text.startswith("{") else (None, "")
            if name is not None:
                return name
            if seen == 1 and problem.startswith("malformed JSON") and _is_safe(path):
                return "safe"
            first_problem = first_problem or problem or (
                "first line is neither a JSON object nor a CSV header with a 'question' column"
            )
    if _named_jsonl(path):
        return "jsonl"
    if first_problem is None:
        raise ConfigError(f"cannot detect the format of {path}: the file is empty")
    bound = f"; no good record in the first {SNIFF_LINES} lines" if seen > 1 else ""
    raise ConfigError(
        f"cannot detect the format of {path}: {first_problem}{bound}; "
        f"pass the format explicitly (one of {', '.join(FORMATS)})"
    )
