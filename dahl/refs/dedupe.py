"""Duplicate reference facts: one key for exact duplicates, rapidfuzz for near ones.

Exact duplicates share :func:`fact_key`: the text after
:func:`~dahl.records.normalize_text` (NFC, whitespace collapsed), and with ``fold``
also case-folded with end punctuation stripped. The default does not fold: FActScore's
annotators wrote "a pharaoh" and "a Pharaoh" as two facts, and the pooled human recall
figures ("Beyond Precision" acceptance on FActScore) are defined on the NFC,
whitespace-collapsed texts.

Near duplicates (opt-in, ``near``) are facts whose folded texts have a rapidfuzz
:func:`~rapidfuzz.fuzz.ratio` (normalized Indel similarity, 0–100) of at least the
threshold. Off by default because character similarity cannot tell facts apart
that differ in one word: on the 120 pooled FActScore sets, 29 pairs reach 97
("in 2014" / "in 2015", "baseball" / "basketball") and 91 reach 95.
"""

from __future__ import annotations

from collections.abc import Sequence

from rapidfuzz import fuzz, process

from dahl.errors import ConfigError
from dahl.records import normalize_text

__all__ = ["NEAR_DEFAULT", "fact_key", "near_groups"]

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

    Greedy in order: each text joins the group whose representative (its first
    text) is most similar to it with ``fuzz.ratio >= threshold`` (the earliest on
    ties), else starts a group. O(n · groups) comparisons, done by rapidfuzz in C.

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
