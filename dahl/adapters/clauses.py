"""Word classes and the modifier rules that cut one claim into atomic claims.

Used by :mod:`dahl.adapters.rules` (rule 4 of its docstring): :func:`refine`
takes the text of one clause-sized claim and returns the claims it holds.
The word classes (:func:`is_verb` and friends) are small closed lists, a
heuristic chosen to stay readable; see :mod:`dahl.adapters.rules`.
"""

from __future__ import annotations

import re

__all__ = [
    "COPULAS", "LIST_INTROS", "PREPOSITIONS", "WORD", "Span",
    "first_verb", "has_verb", "is_verb", "refine", "subject_of", "words",
]

#: (start, end) character offsets
Span = tuple[int, int]

_AUX = frozenset(
    "is are was were be been being has have had do does did can could will would may might "
    "must shall should am isn't aren't wasn't weren't hasn't haven't hadn't doesn't didn't "
    "can't won't".split()
)
_VERBS = frozenset(
    # Irregular pasts and frequent present-tense verbs; regular pasts are caught by "-ed".
    "became began won wrote made took went left led held gave got grew saw found built taught "
    "brought bought spent sold told ran met came fought knew rose fell drew sang lost paid kept "
    "spoke broke chose sent stood remains becomes causes includes contains reduces "
    "increases affects occurs leads plays works lives serves involves requires helps produces "
    "inhibits binds acts results appears makes takes gives shows suggests indicates means "
    "refers consists depends lowers raises prevents treats regulates blocks activates develops "
    "spreads continues holds teaches writes runs owns focuses provides allows enables "
    "supports protects controls induces promotes mediates encodes expresses include cause "
    "contain reduce increase affect occur lead involve require produce inhibit prevent treat "
    "regulate block activate develop promote".split()
)
_PARTICIPLES = frozenset("born known shown given taken written seen grown drawn".split())
_NOT_VERBS = frozenset("red bed need speed seed feed breed hundred bred shed".split())
LIST_INTROS = frozenset("including like among especially notably".split())
PREPOSITIONS = frozenset("of in on at for with by from to as into such via than about between".split())
COPULAS = frozenset("is are was were".split())

#: A word: a letter, then letters, digits, apostrophes or hyphens.
WORD = re.compile(r"[^\W\d_][\w'’-]*")


def words(text: str) -> list[str]:
    """The words of ``text`` (:data:`WORD`), lowercased, curly apostrophes made straight."""
    return [w.lower().replace("’", "'") for w in WORD.findall(text)]


def is_verb(word: str) -> bool:
    """True for a lowercased word in the closed verb lists or a regular past ("-ed")."""
    if word in _AUX or word in _VERBS or word in _PARTICIPLES:
        return True
    return len(word) > 4 and word.endswith("ed") and word not in _NOT_VERBS


def has_verb(text: str) -> bool:
    """True when some word of ``text`` is a verb (:func:`is_verb`)."""
    return any(is_verb(w) for w in words(text))


def subject_of(text: str, span: Span) -> str:
    """The words before the first verb of ``text[span]`` (after a leading adverbial), or ""."""
    a, b = span
    for match in WORD.finditer(text, a, b):
        if is_verb(match.group().lower()):
            head = text[a : match.start()]
            head = head.rsplit(",", 1)[-1].strip()  # drop "In 1990," before the subject
            n = len(words(head))
            return head if 0 < n <= 6 else ""
    return ""


def first_verb(text: str, span: Span) -> str:
    """The first verb of ``text[span]``, lowercased, or ""."""
    for match in WORD.finditer(text, span[0], span[1]):
        if is_verb(match.group().lower()):
            return match.group().lower()
    return ""



_PAST_AUX = frozenset("was were had did could would might".split())
_PP_SPLIT = frozenset("in on at during since from until after before throughout".split())
_NOT_PARTICIPLE = frozenset(
    "including according following regarding concerning during excluding notwithstanding "
    "something nothing anything everything thing king spring string morning evening".split()
)
_RELATIVE = re.compile(r",\s+(who|which|where)\s+", re.IGNORECASE)
_COMMA = re.compile(r",\s+")


def _is_past(text: str) -> bool:
    """True when the first verb of ``text`` is past tense (chooses "was" over "is")."""
    verb = first_verb(text, (0, len(text)))
    return verb in _PAST_AUX or (verb not in _AUX and verb not in _VERBS) or verb in (
        "became began won wrote made took went left led held gave got grew saw found built "
        "taught brought bought spent sold told ran met came fought knew rose fell drew sang lost "
        "paid kept spoke broke chose sent stood".split()
    )


def _last_noun_phrase(text: str) -> str:
    """The words after the last verb, preposition or comma of ``text`` (at most 6), or ""."""
    matches = list(WORD.finditer(text))
    start = 0
    for match in reversed(matches):
        word = match.group().lower()
        if is_verb(word) or word in PREPOSITIONS or "," in text[match.end() :]:
            start = match.end()
            break
    phrase = text[start:].strip(" ,;.")
    return phrase if 0 < len(words(phrase)) <= 6 else ""


def _insert_after_subject(claim: str) -> list[str] | None:
    """"X, an actor, was born in Y" -> "X is an actor", "X was born in Y" (also ", who ...,")."""
    chunks = _COMMA.split(claim)
    if len(chunks) < 3:
        return None
    subject = chunks[0]
    head = words(subject)
    if not 0 < len(head) <= 6 or has_verb(subject) or head[0] in PREPOSITIONS:
        return None
    for k in range(2, len(chunks)):
        first = words(chunks[k])[:1]
        if first and is_verb(first[0]):
            insert = ", ".join(chunks[1:k])
            rest = ", ".join(chunks[k:])
            lead = words(insert)[:1]
            if lead and lead[0] in ("who", "which"):
                side = f"{subject} {insert.split(None, 1)[-1]}"
            elif lead and (lead[0] in ("a", "an", "the") or not has_verb(insert)):
                side = f"{subject} {'was' if _is_past(rest) else 'is'} {insert}"
            else:
                return None
            return [f"{subject} {rest}", side]
    return None


def _trailing_relative(claim: str) -> list[str] | None:
    """"He moved to Rome, which is ..." -> "He moved to Rome", "Rome is ..."."""
    match = _RELATIVE.search(claim)
    if match is None or not has_verb(claim[: match.start()]):
        return None
    left, right = claim[: match.start()], claim[match.end() :]
    if not has_verb(right):
        return None
    if match.group(1).lower() == "where":
        return [left, right]
    antecedent = _last_noun_phrase(left)
    return [left, f"{antecedent} {right}"] if antecedent else None


def _trailing_participle(claim: str) -> list[str] | None:
    """"He won X, earning Y" -> "He won X", "He was earning Y"; ", known for Y" likewise."""
    for match in _COMMA.finditer(claim):
        first = words(claim[match.end() :])[:1]
        if not first or first[0] in _NOT_PARTICIPLE:
            continue
        word = first[0]
        if not ((word.endswith("ing") and len(word) > 5) or word in _PARTICIPLES or (
            word.endswith("ed") and is_verb(word)
        )):
            continue
        left = claim[: match.start()]
        subject = subject_of(left, (0, len(left)))
        if not subject or is_verb(words(left)[-1]):
            continue
        aux = "was" if _is_past(left) else "is"
        return [left, f"{subject} {aux} {claim[match.end():]}"]
    return None


def _prepositions(claim: str) -> list[str] | None:
    """"X was born on D in P" -> "X was born on D", "X was born in P" (two or more PPs)."""
    verb_end = None
    starts: list[int] = []
    for match in WORD.finditer(claim):
        word = match.group().lower()
        if verb_end is None:
            if is_verb(word):
                verb_end = match.end()
        elif word in _PP_SPLIT and match.group().islower() and claim.count('"', 0, match.start()) % 2 == 0:
            starts.append(match.start())
    if len(starts) < 2:
        return None
    core = claim[: starts[0]].rstrip(" ,")
    bounds = [*starts, len(claim)]
    return [f"{core} {claim[a:b].rstrip(' ,')}" for a, b in zip(bounds, bounds[1:])]


_SPLITS = (_insert_after_subject, _trailing_relative, _trailing_participle)


def refine(claim: str, depth: int = 0) -> list[str]:
    """Rule 4 on one claim: comma modifiers first (recursively), then PPs."""
    if depth < 4:
        for rule in _SPLITS:
            parts = rule(claim)
            if parts is not None:
                return [c for part in parts for c in refine(part.strip(" ,;"), depth + 1)]
    return _prepositions(claim) or [claim]
