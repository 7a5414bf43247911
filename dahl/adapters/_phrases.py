"""Rule 5 of the rule Splitter: one claim per phrase hung on a sentence's head.

"Takeo Miki died in Tokyo at the age of 81" -> "Takeo Miki died in Tokyo", "Takeo Miki died
at the age of 81", as FActScore's annotators (Min et al. 2023) write it. A claim is cut
before each of :data:`MARKERS`; the **head** is the text before the first cut, and the
**boundaries** are the cuts whose prefix says something on its own (holds a verb and does not
stop on one). A later segment attaching to the verb (a time, place or cause) gets the head
restored; any other keeps all the words before it. Not cut: inside parentheses, before a
capitalized marker, after a binding abbreviation (:data:`dahl.sentences.NON_FINAL`), between
two capitalized words, or at "and" / "or" / "but".
"""

from __future__ import annotations

import re

from dahl.adapters._clauses import WORD, is_verb, paren_depth
from dahl.sentences import NON_FINAL

__all__ = ["MARKERS", "phrase_claims"]

#: Words and phrases before which a claim is cut (rule 5), as one regex alternation.
MARKERS = (
    "because|although|though|whereas|while|since|despite|unless"
    "|which|that|who|where|when|if"
    "|by|due to|through|via|compared (?:with|to)|leading to|resulting in|particularly"
    "|especially|including|such as"
    "|with|without|in|during|after|before|among|for|at|on|from|than|versus|as well as"
)
# Case-sensitive on purpose: a capitalized marker mid-claim belongs to a name or title.
_CUT = re.compile(rf"[,;]?\s+(?=(?:{MARKERS})\b)")
_TRIM = " ,;"
# A phrase that attaches to the verb, so the head is restored before it: a time or place
# ("in Tokyo", "in 1990", "on 5 May", "at the age of 81") or a cause / concession clause.
# Any other phrase may modify the noun before it ("caused by mutations in the CFTR gene",
# "known for her work in genetics"): its claim keeps the words before it.
_ADJUNCT = re.compile(
    r"(?:(?:in|on|at|during|after|before|since|from|until)\s+(?:[A-Z0-9]|the age\b|the (?:early|late|mid)\b)"
    r"|(?:because|although|though|whereas|while|despite|unless|due to)\b)"
)


# Reporting verbs in their base form (the closed verb lists hold only "suggests", "shows").
_REPORTING = frozenset("suggest indicate show demonstrate reveal imply confirm".split())


def _says_something(prefix: str) -> bool:
    """A prefix is a claim when it has a verb and does not stop on one ("Patients" says nothing)."""
    found = [w.lower() for w in WORD.findall(prefix)]
    if not found:
        return False
    last = found[-1]
    return any(is_verb(w) for w in found[:-1]) and not is_verb(last) and last not in _REPORTING


def _cuts(claim: str) -> list[tuple[int, int]]:
    """(start, end) of each cut: outside parentheses, not first, not after a binding abbreviation."""
    cuts: list[tuple[int, int]] = []
    for match in _CUT.finditer(claim):
        if match.start() == 0 or paren_depth(claim, match.start()) > 0:
            continue
        last = claim[: match.start()].rsplit(None, 1)[-1]
        if last in NON_FINAL or last.lower() in NON_FINAL:
            continue
        if claim.startswith("since", match.end()) and _next_is_verb(claim, match.end() + 5):
            continue  # "He has since gone on to ...": an adverb here, not a clause
        if _inside_name(claim, match.start(), match.end()):
            continue  # "the Minister of State for Environment": a preposition inside a name
        cuts.append((match.start(), match.end()))
    return cuts


_NAME_AFTER = re.compile(
    r"(?:for|in|on|at|from|with|by)\s+(?:the\s+|of\s+)?"
    r"(?!(?:January|February|March|April|May|June|July|August|September|October|November|December)\b)[A-Z]"
)


def _inside_name(claim: str, start: int, end: int) -> bool:
    """True when the cut at ``claim[start:end]`` sits between two capitalized words, with no
    comma before it ("Minister of State for Environment", "Award for Investigative Reporting");
    a month after it starts a date, not a name ("London in March 1990")."""
    before = claim[:start].rsplit(None, 1)[-1:] if not claim[start:end].startswith((",", ";")) else []
    return bool(before) and before[0][:1].isupper() and _NAME_AFTER.match(claim, end) is not None


def _next_is_verb(claim: str, at: int) -> bool:
    """True when the word at or after offset ``at`` of ``claim`` is a verb."""
    word = WORD.search(claim, at)
    return word is not None and is_verb(word.group().lower())


def phrase_claims(claim: str) -> list[tuple[str, str]]:
    """Cut ``claim`` at its phrase boundaries into head-restored claims.

    Returns:
        ``(claim_text, own_text)`` pairs in text order: the first segment as written, then
        the head + each later segment; ``own_text`` is the segment, a non-overlapping
        substring of ``claim``. No boundary gives ``[(claim, claim)]``. Texts are stripped of
        surrounding spaces, commas and semicolons.
    """
    cuts = _cuts(claim)
    boundaries = [(a, b) for a, b in cuts if _says_something(claim[:a])]
    if not boundaries:
        return [(claim, claim)]
    head = claim[: cuts[0][0]].strip(_TRIM)
    first = claim[: boundaries[0][0]].strip(_TRIM)
    out = [(first, first)]
    ends = [a for a, _ in boundaries[1:]] + [len(claim)]
    for (_, seg_start), seg_end in zip(boundaries, ends, strict=True):
        own = claim[seg_start:seg_end].strip(_TRIM)
        if not own:
            continue
        if _ADJUNCT.match(own):
            out.append((f"{head} {own}", own))
        else:
            out.append((claim[:seg_end].strip(_TRIM), own))  # modifies the noun before it
    return out
