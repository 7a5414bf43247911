"""Where a claim's own words begin in the response (the rule Splitter's source spans)."""

from __future__ import annotations

import re

from dahl.adapters._clauses import Span

__all__ = ["find", "locate"]


def locate(text: str, window: Span, claim: str, previous: str) -> int | None:
    """Where the words of its own that ``claim`` adds begin in ``text[window]``, or None.

    When ``claim`` extends ``previous`` (the claim before it in the piece, "" for none), the
    longest word prefix of the added words found verbatim gives the offset; otherwise the
    longest word suffix of ``claim`` found verbatim. Returns an offset inside ``window``.
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
    """Offset of ``probe`` (closing punctuation dropped) in ``text[window]``, or None (also
    when it has no word or number)."""
    probe = probe.rstrip(".,;:")
    if not re.search(r"\w", probe):
        return None
    hit = text.find(probe, window[0], window[1])
    return hit if hit >= 0 else None
