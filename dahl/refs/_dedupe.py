"""Duplicate reference facts: one key for exact duplicates, rapidfuzz for near ones.

Exact duplicates share :func:`fact_key` (normalized text; with ``fold`` also case-folded, end
punctuation stripped). Near duplicates have a :func:`~rapidfuzz.fuzz.ratio` (0-100) of at least a
threshold; :func:`distinct` merges them at :data:`NEAR_THRESHOLD` only with the same digit runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from rapidfuzz import fuzz, process

from dahl.errors import ConfigError
from dahl.records import normalize_text

__all__ = ["NEAR_DEFAULT", "NEAR_THRESHOLD", "distinct", "fact_key", "near_groups"]

T = TypeVar("T")

_DIGITS = re.compile(r"\d+")

#: Near-duplicate threshold for facts extracted from documents (``fuzz.ratio``, 0-100).
NEAR_THRESHOLD = 90.0

#: A threshold for ``near`` when one is wanted: 95 merges tense and article
#: variants ("is" / "was", "Canadian" / "a Canadian") on FActScore.
NEAR_DEFAULT = 95.0

_END_PUNCT = ".!?;:,。 "


def fact_key(text: str, *, fold: bool = False) -> str:
    """The exact-duplicate key of a fact's ``text``: normalized, and with ``fold``
    case-folded with trailing punctuation (``.!?;:,``) stripped."""
    key = normalize_text(text)
    return key.casefold().rstrip(_END_PUNCT) if fold else key


def near_groups(texts: Sequence[str], threshold: float) -> list[list[int]]:
    """Group ``texts`` whose folded forms are near duplicates.

    Greedy in order: each text joins the most similar group representative (its first text) with
    ``fuzz.ratio >= threshold`` (the earliest on ties), else starts a group.

    Args:
        texts: fact texts, already free of exact duplicates, in file order.
        threshold: similarity in [0, 100].

    Returns:
        Groups of indices into ``texts``, each ascending, ordered by their first index.

    Raises:
        ConfigError: ``threshold`` outside [0, 100].
    """
    if not 0.0 <= threshold <= 100.0:
        raise ConfigError(f"near-duplicate threshold must be in [0, 100], got {threshold}")
    heads: list[str] = []
    groups: list[list[int]] = []
    for i, text in enumerate(texts):
        key = fact_key(text, fold=True)
        found = process.extractOne(key, heads, scorer=fuzz.ratio, score_cutoff=threshold) if heads else None
        if found is None:
            heads.append(key)
            groups.append([i])
        else:
            groups[found[2]].append(i)
    return groups


def distinct(items: Sequence[T], text: Callable[[T], str], *, near: float = NEAR_THRESHOLD) -> list[T]:
    """``items`` without exact (folded) and near duplicates of an earlier item, in order (CPU).

    Args:
        items: facts (any type) in priority order.
        text: the fact text of an item.
        near: ``fuzz.ratio`` threshold in [0, 100]; 100 drops exact duplicates only.

    Raises:
        ConfigError: ``near`` outside [0, 100].
    """
    if not 0.0 <= near <= 100.0:
        raise ConfigError(f"near-duplicate threshold must be in [0, 100], got {near}")
    kept: list[T] = []
    keys: list[str] = []
    numbers: list[list[str]] = []
    seen: set[str] = set()
    for item in items:
        key = fact_key(text(item), fold=True)
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
