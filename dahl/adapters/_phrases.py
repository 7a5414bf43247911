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

from dahl.adapters._clauses import (
    COPULAS,
    PARTICIPLES,
    PREPOSITIONS,
    WORD,
    is_verb,
    paren_depth,
)
from dahl.sentences import NON_FINAL

__all__ = ["MARKERS", "added_words", "begins", "own_claim", "phrase_claims"]

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
    for (cut_start, seg_start), seg_end in zip(boundaries, ends, strict=True):
        own = claim[seg_start:seg_end].strip(_TRIM)
        if not own:
            continue
        adjunct = _ADJUNCT.match(own) is not None
        # A time, place or cause gets the head restored; any other phrase modifies the noun before it.
        text = f"{head} {own}" if adjunct else claim[:seg_end].strip(_TRIM)
        if any(begins(text, earlier) for earlier, _ in out):
            text = own_claim(head if adjunct else claim[:cut_start].strip(_TRIM), own) or text
        out.append((text, own))
    return out


def begins(longer: str, shorter: str) -> bool:
    """True when the words (``\\w+``) of ``shorter`` begin ``longer`` and ``longer`` has more."""
    a, b = _WORDS.findall(shorter), _WORDS.findall(longer)
    return len(b) > len(a) and b[: len(a)] == a


def added_words(longer: str, shorter: str) -> str:
    """The text of ``longer`` from its first word (``\\w+``) past the words of ``shorter``, trimmed
    of spaces, commas and semicolons; ``shorter`` must begin ``longer`` (:func:`begins`)."""
    start = [m.start() for m in _WORDS.finditer(longer)][len(_WORDS.findall(shorter))]
    return longer[start:].strip(" ,;")


_WORDS = re.compile(r"\w+")
_INTRO = re.compile(r"(?:including|such as)\s+")
_RELATIVE = re.compile(r"(who|which|that)\s+")
_CONTRAST = re.compile(r"(?:while|whereas|although|though)\s+")
_POSSESSIVES = frozenset("his her its their our my your".split())
_NOT_NOUN_HEAD = frozenset(
    "some many several numerous few all most both each any other others one two three four five six "
    "seven eight nine ten dozens hundreds thousands millions".split()
)


def own_claim(before: str, own: str) -> str | None:
    """The claim a phrase ``own`` makes on its own, about what it modifies, or None.

    ``before`` is the claim the phrase would extend. "She earned a Ph.D." + "in physics" ->
    "The Ph.D. was in physics"; "... an actress" + "who works in Tamil films" -> "<subject> works
    in Tamil films";
    "... remains a figure" + "while others see him as a terrorist" -> "Others see him as a
    terrorist". None when no such claim reads naturally (a number, a quantity, a copula's
    predicate or a time phrase on a prepositional object): the caller keeps the extended claim.
    """
    adjunct = _ADJUNCT.match(own) is not None
    if _INTRO.match(own):
        return None  # "films such as A": the list rule writes "A is among films"
    contrast = _CONTRAST.match(own)
    if contrast is not None:
        clause = own[contrast.end() :]
        first = words_of(clause)[:1]
        if len(first) < 1 or len(words_of(clause)) < 3 or is_verb(first[0]) or first[0] in PREPOSITIONS:
            return None  # "while in Rome", "while working": no clause of its own
        return clause[:1].upper() + clause[1:]
    relative = _RELATIVE.match(own)
    rest = own[relative.end() :] if relative is not None else own
    if relative is not None:
        following = [w for w in words_of(rest)[:2] if not w.endswith("ly")][:1]
        if not following or not is_verb(following[0]):
            return None  # "that he wrote": the antecedent is the object; keep the claim whole
    if adjunct and relative is None:
        passive = _passive_end(before)
        if passive:
            return f"{before[:passive]} {own}"  # "X was inducted into Y" + "in 1992" -> "X was inducted in 1992"
    found = _object(before)
    if found is None:
        return None
    subject, verb, noun_phrase, direct, definite = found
    if relative is not None:
        if verb in COPULAS:
            return f"{subject} {rest}" if subject else None  # "X is an actress who works in Y"
        return f"{noun_phrase} {rest}"
    if not adjunct and not _PLACED.match(own):
        return None  # "combines X with antibiotics": "with", "for", "by" may attach to the verb
    if verb in COPULAS or (adjunct and not (direct and not definite and noun_phrase.rsplit(None, 1)[-1].lower() in _EVENTS)):
        return None  # "He married his wife in 1990": the time is the marrying's, not the wife's
    plural = _plural(noun_phrase)
    tense = words_of(subject_and_verb(before))[-1:]
    past = bool(tense) and tense[0] not in _PRESENT and not (tense[0].endswith("s") and not tense[0].endswith("ss"))
    be = ("were" if plural else "was") if past else ("are" if plural else "is")
    return f"{noun_phrase} {be} {rest}"


_BE = frozenset("is are was were be been being".split())


def _passive_end(text: str) -> int:
    """End offset of a passive verb ("was inducted", "has been honored", "was born") that
    words follow in ``text``, or 0: a time or place phrase attaches to it without them."""
    matches = list(WORD.finditer(text))
    first = next((i for i, m in enumerate(matches) if is_verb(m.group().lower())), None)
    if first is None:
        return 0
    i = first
    while i < len(matches) and matches[i].group().lower() in ("has", "have", "had", *_BE):
        i += 1
    while i < len(matches) and matches[i].group().lower().endswith("ly"):
        i += 1  # "was formally inducted"
    if i == first or i >= len(matches) - 1 or not any(m.group().lower() in _BE for m in matches[first:i]):
        return 0
    word = matches[i].group().lower()
    participle = word in PARTICIPLES or (word.endswith("ed") and is_verb(word))
    return matches[i].end() if participle else 0


def words_of(text: str) -> list[str]:
    """The lowercased words of ``text`` (:data:`WORD`)."""
    return [w.lower() for w in WORD.findall(text)]


def subject_and_verb(text: str) -> str:
    """``text`` up to the end of its first verb ("She has earned a Ph.D." -> "She has")."""
    for match in WORD.finditer(text):
        if is_verb(match.group().lower()):
            return text[: match.end()]
    return text


_PRESENT = frozenset("is are has have do does can may might must will should remains".split())


def _object(before: str) -> tuple[str, str, str, bool, bool] | None:
    """(subject, last verb, "The"-led noun phrase, whether it is the verb's direct object,
    whether it was led by "the") of the noun phrase ``before`` ends in, or None when it ends in
    no determiner-led or plain noun phrase."""
    matches = list(WORD.finditer(before))
    verb_at = next((i for i in range(len(matches) - 1, -1, -1) if is_verb(matches[i].group().lower())), None)
    if verb_at is None:
        return None
    start = verb_at + 1
    for i in range(len(matches) - 1, verb_at, -1):
        if matches[i].group().lower() in PREPOSITIONS and matches[i].group().lower() != "of":
            start = i + 1
            break
    if start >= len(matches) or matches[start - 1].group().lower() == "as":
        return None  # "played as a forward": a role of the subject, like a copula's predicate
    phrase = before[matches[start].start() :].rstrip(" ,;")
    if phrase.endswith(".") and "." not in phrase.rsplit(None, 1)[-1][:-1]:
        phrase = phrase[:-1]  # a full stop, not an abbreviation's ("Ph.D.")
    found = words_of(phrase)
    if not 0 < len(found) <= 6 or re.search(r"\d", phrase) or found[0] in _NOT_NOUN_HEAD or found[0] in PREPOSITIONS:
        return None
    if "," in phrase:
        return None
    if any(is_verb(w) for w in found) or found[-1].endswith("ing") or not found[-1].isalpha() or phrase[:1].isupper() and found[0] not in _DETERMINERS:
        return None  # a name or a clause, not a noun phrase to restate
    if len(found) > 1 and found[1] in _QUANTITIES:
        return None  # "a number of clubs"
    head = phrase.split(None, 1)
    if found[0] not in _DETERMINERS and not _plural(phrase):
        return None  # "gained recognition": no thing to name with "The"
    if found[0] in ("a", "an", "the"):
        noun_phrase = "The " + (head[1] if len(head) > 1 else "")
    elif found[0] in _POSSESSIVES:
        noun_phrase = phrase[:1].upper() + phrase[1:]
    else:
        noun_phrase = "The " + phrase
    if len(head) < 2 and found[0] in ("a", "an", "the"):
        return None
    first_verb = next(i for i, m in enumerate(matches) if is_verb(m.group().lower()))
    subject = before[: matches[first_verb].start()].rsplit(",", 1)[-1].strip()  # "In 1990, she" -> "she"
    direct = start == verb_at + 1
    return subject, matches[verb_at].group().lower(), noun_phrase.strip(), direct, found[0] == "the"


_DETERMINERS = frozenset("a an the his her its their our my your".split())
_PLACED = re.compile(r"(?:in|on|at|from)\s")
_QUANTITIES = frozenset("number lot lots variety range series couple dozen handful host majority few".split())
#: Nouns naming an event: a time or place phrase after one is the event's ("Her debut was in 2010").
_EVENTS = frozenset(
    "debut premiere release appearance marriage wedding injury election tour visit performance "
    "victory win defeat concert match".split()
)


def _plural(noun_phrase: str) -> bool:
    """True when the noun phrase's last word looks plural ("receptors", not "physics", "virus")."""
    last = noun_phrase.rsplit(None, 1)[-1].lower()
    return last.endswith("s") and not last.endswith(("ss", "us", "is", "ics", "'s"))
