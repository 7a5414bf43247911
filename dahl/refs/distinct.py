"""Duplicate reference facts of one question: exact (normalized) and near duplicates.

Two facts are the same when their keys are equal: :func:`~dahl.records.normalize_text`
(NFC, whitespace collapsed), case-folded, final ``.``/``;``/``!`` and spaces stripped.
They are near duplicates when rapidfuzz's ``fuzz.ratio`` of their keys (normalized
Indel similarity, 0-100) is at least the threshold AND they state the same numbers
(digit runs, in order): "Marie Curie was born in 1867" / "... in 1868" score 96 but
are different facts. :data:`NEAR_THRESHOLD` = 90 joins facts that differ by an article
or a letter ("The CFTR gene encodes a chloride channel" / "... the chloride channel":
95; "Insulin is secreted by beta cells" / "... by the beta cells": 94) and keeps
rewordings apart ("Metformin was approved in 1994" / "... in the year 1994": 87), a
trade-off between dropping a distinct fact and counting one fact twice in recall.
The first occurrence is kept, with its source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from dahl.records import normalize_text

__all__ = ["NEAR_THRESHOLD", "distinct", "fact_key"]

T = TypeVar("T")

_DIGITS = re.compile(r"\d+")

#: Default near-duplicate threshold (rapidfuzz ``fuzz.ratio``, 0-100); 100 keeps near duplicates.
NEAR_THRESHOLD = 90.0


def fact_key(text: str) -> str:
    """The exact-duplicate key of a fact (see the module docstring)."""
    return normalize_text(text).casefold().rstrip(" .;!")


def distinct(items: Sequence[T], text: Callable[[T], str], *, near: float = NEAR_THRESHOLD) -> list[T]:
    """``items`` without exact and near duplicates of an earlier item, in order.

    CPU: O(n · kept) similarity computations; run it in a worker thread for large sets.

    Args:
        items: facts (any type) in priority order.
        text: the fact text of an item.
        near: ``fuzz.ratio`` threshold in [0, 100]; 100 drops exact duplicates only.

    Raises:
        ValueError: ``near`` outside [0, 100].
    """
    from rapidfuzz import fuzz, process  # here: the CLI imports this module for its default

    if not 0.0 <= near <= 100.0:
        raise ValueError(f"near-duplicate threshold must be in [0, 100], got {near}")
    kept: list[T] = []
    keys: list[str] = []
    numbers: list[list[str]] = []
    seen: set[str] = set()
    for item in items:
        key = fact_key(text(item))
        if not key or key in seen:
            continue
        digits = _DIGITS.findall(key)
        if near < 100.0 and keys:
            close = process.extract(key, keys, scorer=fuzz.ratio, score_cutoff=near, limit=None)
            if any(numbers[index] == digits for _, _, index in close):
                continue
        seen.add(key)
        keys.append(key)
        numbers.append(digits)
        kept.append(item)
    return kept
