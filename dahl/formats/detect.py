"""Guess an answer file's format from its first non-blank line (or its first bytes)."""

from __future__ import annotations

import csv
from collections.abc import Collection
from pathlib import Path

import msgspec

from dahl.errors import ConfigError, InputError
from dahl.formats.compressed import binary_kind, open_bytes
from dahl.formats.lines import decode_line, numbered_lines, open_checked

__all__ = ["FORMATS", "detect_format"]

#: Format names accepted by ``read_answers(fmt=...)`` (plus ``"auto"``).
FORMATS: tuple[str, ...] = ("jsonl", "csv", "factscore", "json", "parquet", "hf", "safe", "veriscore")

_FACTSCORE_KEYS = frozenset({"input", "output", "topic"})
_VERISCORE_KEYS = frozenset({"claim_verification_result", "all_claim_lst"})
_SAFE_KEY = b'"per_prompt_data"'
_SNIFF_BYTES = 1 << 16


def _binary_format(path: Path) -> str | None:
    """``"hf"`` for a folder, ``"parquet"`` for a Parquet file; None for anything else."""
    if path.is_dir():
        return "hf"
    open_checked(path)
    if path.suffix.lower() == ".parquet" or binary_kind(path) == "Parquet":
        return "parquet"
    return None


def _starts_array(path: Path) -> bool:
    """Whether the first non-blank byte is ``[``, read from a bounded prefix.

    A one-line JSON array is the whole file on its first line: sniffing it must not
    read that line.
    """
    with open_bytes(path) as handle:
        head = handle.read(_SNIFF_BYTES).removeprefix(b"\xef\xbb\xbf").lstrip()
    return head[:1] == b"["


def _is_safe(path: Path) -> bool:
    """Whether the first 64 KiB of a (pretty-printed) JSON object name ``per_prompt_data``."""
    with open_bytes(path) as handle:
        return _SAFE_KEY in handle.read(_SNIFF_BYTES)


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


def detect_format(
    path: Path,
    *,
    response_keys: Collection[str] = ("response",),
    question_keys: Collection[str] = ("question",),
) -> str:
    """Name the format of ``path`` by sniffing its first non-blank line.

    - a folder: ``"hf"``; a ``.parquet`` name or Parquet magic bytes: ``"parquet"``;
    - a JSON object naming ``per_prompt_data`` (in its first 64 KiB): ``"safe"``;
    - a line starting with ``[``: ``"json"`` (a JSON array of records);
    - a JSON object with ``input`` + ``output`` + ``topic``, or ``annotations``: ``"factscore"``;
    - a JSON object with ``claim_verification_result`` or ``all_claim_lst``: ``"veriscore"``;
    - a JSON object with one of ``response_keys``: ``"jsonl"``;
    - a CSV header with one of ``question_keys``: ``"csv"``.

    ``.gz`` / ``.zst`` files are sniffed decompressed.

    Args:
        path: the answer file.
        response_keys: keys that hold a response (``response``, or the mapped and
            ``--response-column`` names).
        question_keys: columns that hold the question (``question``, or the mapped name).

    Returns:
        One of :data:`FORMATS`.

    Raises:
        ConfigError: the file is missing or empty, or none of the rules match
            (the message names the file and what was found).
    """
    path = Path(path)
    binary = _binary_format(path)
    if binary is not None:
        return binary
    if _starts_array(path):
        return "json"
    first = _first_line(path)
    if first.startswith("{"):
        try:
            value = msgspec.json.decode(first)
        except msgspec.DecodeError as exc:
            if _is_safe(path):
                return "safe"
            raise ConfigError(
                f"cannot detect the format of {path}: first line is not valid JSON ({exc}); "
                f"pass the format explicitly (one of {', '.join(FORMATS)})"
            ) from exc
        if isinstance(value, dict):
            keys = set(value)
            if "per_prompt_data" in keys:
                return "safe"
            if _FACTSCORE_KEYS <= keys or "annotations" in keys:
                return "factscore"
            if keys & _VERISCORE_KEYS:
                return "veriscore"
            if keys & set(response_keys):
                return "jsonl"
            found = ", ".join(sorted(keys)) or "none"
            raise ConfigError(
                f"cannot detect the format of {path}: first JSON object has keys {found}; "
                "expected 'response' (jsonl) or 'input'/'output'/'topic' (factscore)"
            )
    else:
        header = [name.strip() for name in next(csv.reader([first]), [])]
        if set(header) & set(question_keys):
            return "csv"
    raise ConfigError(
        f"cannot detect the format of {path}: first line is neither a JSON object nor a "
        f"CSV header with a 'question' column; pass the format (one of {', '.join(FORMATS)})"
    )
