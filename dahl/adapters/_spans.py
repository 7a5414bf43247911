"""Where a claim's own words begin in the response (the rule Splitter's source spans).

Used by :mod:`dahl.adapters._rules`, whose docstring defines a claim's source
span; this module finds its start.
"""

from __future__ import annotations

import re

from dahl.adapters._clauses import Span

__all__ = ["find", "locate"]


def locate(text: str, window: Span, claim: str, previous: str) -> int | None:
    """Where the words of its own that ``claim`` adds begin in ``text[window]``, or None.

    When ``claim`` extends ``previous`` ("X is known for her work in genetics"
    after "X is known for her work"), its own words are the ones after it: the
    longest word prefix of them found verbatim gives the offset. Otherwise
    (a restored head: "He was born in 1990" after "He was born in Rome"; a
    conjugated verb: "X died in 1988" from "X (1907-1988)") it is the
    longest word suffix of ``claim`` found verbatim.

    Args:
        text: the (masked) response.
        window: ``(start, end)`` character offsets of ``text`` to search.
        claim: the claim's text.
        previous: the text of the claim before it in the same piece ("" for none).

    Returns:
        A character offset into ``text`` inside ``window``, or None when no
        word of the claim is found there. Raises nothing.
    """
    a, b = window
    if a >= b:
        return None
    starts = [m.start() for m in re.finditer(r"\S+", claim)]
    mine, theirs = claim.split(), previous.rstrip(".").split()
    extends = bool(theirs) and len(mine) > len(theirs) and [w.rstrip(".,;:") for w in mine[: len(theirs)]] == [
        w.rstrip(".,;:") for w in theirs
    ]
    if extends:
        added = claim[starts[len(theirs)] :]
        for end in reversed([m.end() for m in re.finditer(r"\S+", added)]):
            hit = find(text, (a, b), added[:end])
            if hit is not None:
                return hit
    for start in starts[1:]:
        hit = find(text, (a, b), claim[start:])
        if hit is not None:
            return hit
    return None


def find(text: str, window: Span, probe: str) -> int | None:
    """Offset of ``probe`` (closing punctuation dropped) in ``text[window]``, when it has a word or number.

    Returns:
        The character offset of the first occurrence in ``window``, or None.
    """
    probe = probe.rstrip(".,;:")
    if not re.search(r"\w", probe):
        return None
    hit = text.find(probe, window[0], window[1])
    return hit if hit >= 0 else None
