"""Rule 5 of the rule Splitter (rules/v5): one claim per phrase boundary, growing.

A sentence often packs several checkable facts into phrases hung one after
another on its head: "Insulin is secreted by beta cells in the pancreas during
fasting". Human annotators of FActScore (Min et al. 2023) write such a sentence
as several atomic facts. This rule cuts the claim before each marker of a closed
list and emits every prefix of the claim that ends at a cut, then the whole
claim:

* subordinators: because, although, though, whereas, while, since, despite, unless;
* relatives and complementizers: which, that, who, where, when, if;
* linking phrases: by, due to, through, via, compared with/to, leading to,
  resulting in, particularly, especially, including, such as;
* prepositions: with, without, in, during, after, before, among, for, at, on,
  from, than, versus, as well as.

"Insulin is secreted by beta cells", "Insulin is secreted by beta cells in the
pancreas", then the whole sentence. A prefix keeps every earlier phrase, so a
phrase stays attached to the noun it modifies ("known for her work in
genetics", never "known in genetics"). A claim's own text is the phrase it
adds (the first prefix's own text is the whole prefix): the Splitter points
the claim's span at it, and the evidence Checker judges only those words.

* conjunctions: and, or, but (not inside a phrase opened by "between" or "both":
  "between 1985 and 2014" stays whole).

Not cut: inside parentheses; before a capitalized marker (a title: "Turn On");
before the first word. A prefix whose last word is a verb, auxiliary or
participle ("He was born", "He has", "a disease caused") says nothing on its
own and is not emitted ("written and arranged by X" gives no "written" claim);
nor is a prefix without a letter.

Measured with ``python -m bench.splitter_eval`` (FActScore human atomic-fact
counts, 352 answers): see :mod:`dahl.adapters.rules` for the figures.
"""

from __future__ import annotations

import re

from dahl.adapters.clauses import WORD, is_verb

__all__ = ["MARKERS", "phrase_claims"]

#: Words and phrases before which a claim is cut (rule 5), as one regex alternation.
MARKERS = (
    "because|although|though|whereas|while|since|despite|unless"
    "|which|that|who|where|when|if"
    "|by|due to|through|via|compared (?:with|to)|leading to|resulting in|particularly"
    "|especially|including|such as"
    "|with|without|in|during|after|before|among|for|at|on|from|than|versus|as well as"
    "|and|or|but"
)
# Case-sensitive on purpose: a capitalized marker mid-claim belongs to a name or title.
_CUT = re.compile(rf"[,;]?\s+(?=(?:{MARKERS})\b)")
_TRIM = " ,;."


def _depth_at(text: str, end: int) -> int:
    """Parenthesis depth of ``text`` just before ``end``."""
    return text.count("(", 0, end) - text.count(")", 0, end)


# Reporting verbs in their base form (the closed verb lists hold only "suggests", "shows").
_REPORTING = frozenset("suggest indicate show demonstrate reveal imply confirm".split())
# A phrase opened by these takes an "and" of its own: "between 1985 and 2014".
_PAIRED = frozenset({"between", "both"})
_CONJUNCTION = frozenset({"and", "or", "but"})


def _says_something(prefix: str) -> bool:
    """A prefix is a claim when it has a word and does not stop on a verb."""
    found = WORD.findall(prefix)
    if not found:
        return False
    last = found[-1].lower()
    return not is_verb(last) and last not in _REPORTING


def _cuts(claim: str) -> list[tuple[int, int]]:
    """(start, end) of each cut: outside parentheses, not first, not inside "between A and B"."""
    cuts: list[tuple[int, int]] = []
    phrase_start = 0
    for match in _CUT.finditer(claim):
        if match.start() == 0 or _depth_at(claim, match.start()) > 0:
            continue
        marker = WORD.match(claim, match.end())
        if marker is not None and marker.group() in _CONJUNCTION:
            phrase = {w.lower() for w in WORD.findall(claim, phrase_start, match.start())}
            if phrase & _PAIRED:
                continue
        cuts.append((match.start(), match.end()))
        phrase_start = match.end()
    return cuts


def phrase_claims(claim: str) -> list[tuple[str, str]]:
    """Cut ``claim`` at its phrase markers and return its growing prefixes.

    Args:
        claim: one claim's text.

    Returns:
        ``(claim_text, own_text)`` pairs in text order: one per prefix ending
        at a cut (dropped when it stops on a verb), then ``(claim, last
        phrase)``; ``own_text`` is the phrase the prefix adds to the one
        before. A claim without a cut gives ``[(claim, claim)]``. Texts are
        stripped of surrounding spaces, commas, semicolons and periods, except the
        whole claim, returned as given.
    """
    cuts = _cuts(claim)
    if not cuts:
        return [(claim, claim)]
    out: list[tuple[str, str]] = []
    start = 0  # where the words not yet in an emitted claim begin
    for cut_start, cut_end in cuts:
        prefix = claim[:cut_start].strip(_TRIM)
        own = claim[start:cut_start].strip(_TRIM)
        if own and _says_something(prefix):
            out.append((prefix, own))
            start = cut_end
    last = claim[start:].strip(_TRIM)
    out.append((claim, last or claim))
    return out
