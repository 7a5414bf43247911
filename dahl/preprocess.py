"""DAHL step 0: clean a response before it is split into claims.

Seo et al. 2024 (DAHL, arXiv 2411.09255, §3.3 and Table 1) remove, with regular expressions:

1. **Echo.** The question, verbatim up to case and whitespace (optional "Question:"/"Q:"/"Prompt:"
   label, final ?/./! optional), at the start, with an "Answer:"/"A:" label after it; else a first
   sentence equal to the question after dropping case, punctuation and labels.
2. **Duplicate.** A sentence whose case-folded words equal an earlier kept sentence's.
3. **Truncated.** The last of at least two sentences, when it ends with a dangling ``, - – ( / & :``
   or (not a list item) with no terminal mark; a list item only when it ends with a dangling mark
   or a function word. A given ``finish_reason`` decides instead: ``"length"`` removes a last
   sentence without a terminal mark, any other reason none.
4. **Abstained** (dahl's addition). A sentence is noncommittal when it opens, after an optional
   apology or "As an AI" preamble, with one of :data:`NONCOMMITTAL_PATTERNS` and does not go on
   with "but"/"however"/"although". Questions and requests back to the user are neither content
   nor noncommittal. The answer is abstained when it has a noncommittal sentence and under half its
   words in content sentences, or when nothing is left after cleaning.

Kept sentences are joined by one space, or a newline where the original had a line break.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Literal

import msgspec

from dahl.sentences import LIST_MARKER, split_sentences

__all__ = ["NONCOMMITTAL_PATTERNS", "Preprocessed", "Removal", "is_noncommittal", "may_abstain", "preprocess"]

RemovalKind = Literal["echo", "duplicate", "truncated"]


class Removal(msgspec.Struct, frozen=True, kw_only=True):
    """One piece of the response that preprocessing removed.

    Attributes:
        kind: ``"echo"``, ``"duplicate"`` or ``"truncated"`` (module docstring, rules 1-3).
        text: the removed text, verbatim.
        span: ``(start, end)`` character offsets of ``text`` in the original response.
    """

    kind: RemovalKind
    text: str
    span: tuple[int, int]


class Preprocessed(msgspec.Struct, frozen=True, kw_only=True):
    """A response after DAHL step 0.

    Attributes:
        text: the cleaned response (what the Splitter sees).
        abstained: True when the answer is noncommittal (see module docstring, rule 4).
        removed: what was removed, in response order.
    """

    text: str
    abstained: bool
    removed: tuple[Removal, ...] = ()


_LABEL = r"(?:question|q|prompt|user|input)\s*[:.\-]\s*"
_QUESTION_LABEL = re.compile(r"\A\s*" + _LABEL, re.IGNORECASE)
_ANSWER_LABEL = re.compile(r"\s*(?:answer|a|response|assistant)\s*:", re.IGNORECASE)
_END_PUNCT = re.compile(r"[?.!]+\Z")
_WORD = re.compile(r"\w+")

_TERMINAL = frozenset(".!?)]\"'”’»…*`|")
_DANGLING = frozenset(",-–—(/&:")
_FUNCTION_WORDS = frozenset(
    "a an and are as at but by for from has have in into is of on or such than that the "
    "their to was were which who whose with".split()
)

#: Noncommittal openings (matched case-insensitively at the start of a sentence,
#: after an optional apology / "As an AI" preamble, see ``_PREAMBLE``).
NONCOMMITTAL_PATTERNS: tuple[str, ...] = (
    r"i (?:do not|don't|did not|didn't) know\b",
    r"i(?:'m| am) (?:not sure|not certain|unsure|uncertain|not able to|unable to|not aware of)\b",
    r"i (?:cannot|can't|can not|could not|couldn't|was unable to|was not able to|am unable to)"
    r" (?:answer|provide|find|give|say|determine|help|assist|tell|comment|access|browse|verify"
    r"|confirm|locate|offer|predict|know|be sure)\b",
    r"i (?:do not|don't|did not|didn't) have (?:enough|sufficient|any|access|specific|real-time"
    r"|information|the (?:information|ability|answer))\b",
    r"i have no (?:information|knowledge|data|way)\b",
    r"i would need more (?:information|context|details)\b",
    r"(?:it|this|that|the question|this question) (?:cannot|can't|can not|could not) be"
    r" (?:answered|determined|known)\b",
    r"(?:it is|it's) (?:not possible|impossible) (?:for me )?to (?:answer|say|determine|know|tell)\b",
    r"there (?:is|was) (?:not enough|insufficient|no|limited|no relevant|no specific)"
    r" (?:information|data) (?:available|to answer|about|on|regarding|in)\b",
    r"no (?:relevant )?information (?:is |was )?(?:available|found)\b",
    r"(?:the )?(?:provided )?search results? (?:do|does|did) not (?:contain|provide|mention|include"
    r"|have)\b",
    r"(?:no answer|n/?a|unknown|none)\W*\Z",
)
_PREAMBLE = (
    r"(?:(?:(?:i'm|i am) (?:very |so )?sorry|sorry|i apologi[sz]e|unfortunately|regrettably"
    r"|as an ai(?: language)?(?: model| assistant)?|as a language model"
    r"|without (?:additional|more|further|specific) (?:information|context|details))[,.!]?\s*"
    r"(?:but\s+)?)*"
)
_NONCOMMITTAL = re.compile(
    r"\A\W*" + _PREAMBLE + r"(?:" + "|".join(NONCOMMITTAL_PATTERNS) + r")", re.IGNORECASE
)
# Any opening at a word start anywhere (the sentence end anchor loosened to a word end). The
# lookahead holds every letter an opening can start with (keep it so when adding one): it only
# skips positions where no alternative can match, 2.5x faster on an 800-character answer.
_FIRST_LETTERS = "inpstu"
_ANYWHERE = re.compile(rf"(?=[{_FIRST_LETTERS}])(?<!\w)(?:"
                       + "|".join(NONCOMMITTAL_PATTERNS).replace(r"\W*\Z", r"\b") + ")", re.IGNORECASE)
_CONTRAST = re.compile(r"(?:,|;|\s)\s*(?:but|however|although|though|yet)\b", re.IGNORECASE)
_REQUEST = re.compile(
    r"\A\W*(?:please|kindly|feel free|could you|can you|would you|if you)\b", re.IGNORECASE
)


def _fold(text: str) -> str:
    """NFKC, case-folded, apostrophes unified: the form patterns and keys are compared in."""
    return unicodedata.normalize("NFKC", text).casefold().replace("’", "'")


def _loose_key(text: str) -> str:
    """Words only, case-folded: two sentences with equal keys say the same thing."""
    return " ".join(_WORD.findall(_fold(text)))


def is_noncommittal(sentence: str) -> bool:
    """Return True when one ``sentence`` is a noncommittal statement (module docstring, rule 4)."""
    folded = _fold(sentence)
    match = _NONCOMMITTAL.match(folded)
    return match is not None and _CONTRAST.search(folded, match.end()) is None


def may_abstain(response: str) -> bool:
    """Return False when ``preprocess("", response).abstained`` is surely False (cheap, no sentence
    split): ``response`` is not blank and no noncommittal opening starts a word anywhere in it (a
    preamble run into the opening with no space or mark between is not seen)."""
    return not response.strip() or _ANYWHERE.search(_fold(response)) is not None


def _is_question_or_request(sentence: str) -> bool:
    return sentence.rstrip().endswith("?") or _REQUEST.match(_fold(sentence)) is not None


def _echo_prefix(question: str, response: str) -> int:
    """End offset of the question echoed at the start of ``response``; 0 when none."""
    q = _QUESTION_LABEL.sub("", unicodedata.normalize("NFC", question)).strip()
    q = _END_PUNCT.sub("", q)
    tokens = q.split()
    if not tokens:
        return 0
    pattern = (
        r"\A\s*(?:" + _LABEL + r")?" + r"\s+".join(map(re.escape, tokens)) + r"[?.!]*(?!\w)"
    )
    match = re.match(pattern, response, re.IGNORECASE)
    if match is None:
        return 0
    end = match.end()
    label = _ANSWER_LABEL.match(response, end)
    return label.end() if label else end


def _is_truncated(sentence: str) -> bool:
    """True when ``sentence`` (the last of several) looks cut off by the token limit."""
    body = sentence.rstrip()
    if not body:
        return False
    if body[-1] in _DANGLING:
        return True
    marker = LIST_MARKER.match(body)
    if marker is not None:
        words = _WORD.findall(_fold(body[marker.end() :]))
        return bool(words) and words[-1] in _FUNCTION_WORDS
    return body[-1] not in _TERMINAL


def _cut_off(sentence: str, finish_reason: str | None) -> bool:
    """Rule 3 for the last of several sentences: the generator's ``finish_reason`` decides when given."""
    if finish_reason is None:
        return _is_truncated(sentence)
    body = sentence.rstrip()
    return finish_reason == "length" and bool(body) and body[-1] not in _TERMINAL


def _is_abstained(sentences: list[str]) -> bool:
    """Rule 4: a noncommittal sentence and under half of the words in content sentences."""
    noncommittal = False
    content_words = other_words = 0
    for sentence in sentences:
        words = len(_WORD.findall(sentence))
        if is_noncommittal(sentence):
            noncommittal = True
            other_words += words
        elif _is_question_or_request(sentence):
            other_words += words
        else:
            content_words += words
    return noncommittal and content_words * 2 < content_words + other_words


def preprocess(question: str, response: str, *, finish_reason: str | None = None) -> Preprocessed:
    """Apply DAHL step 0 to one response (pure, no I/O).

    Args:
        question: the prompt the model answered (may be empty: no echo removal).
        response: the model's raw answer.
        finish_reason: why generation ended, when known (``"length"``: cut at the token
            limit); None judges truncation from the text alone (rule 3).

    Returns:
        The cleaned text, the abstention flag and every removal with its span in ``response``.
    """
    removed: list[Removal] = []
    start = _echo_prefix(question, response)
    if start:
        removed.append(Removal(kind="echo", text=response[:start], span=(0, start)))

    spans = [(start + a, start + b) for a, b in split_sentences(response[start:])]
    if spans and not removed:
        q_key = _loose_key(_QUESTION_LABEL.sub("", question))
        first = response[spans[0][0] : spans[0][1]]
        if q_key and _loose_key(_QUESTION_LABEL.sub("", first)) == q_key:
            removed.append(Removal(kind="echo", text=first, span=spans[0]))
            spans = spans[1:]

    kept: list[tuple[int, int]] = []
    seen: set[str] = set()
    for a, b in spans:
        key = _loose_key(response[a:b])
        if key and key in seen:
            removed.append(Removal(kind="duplicate", text=response[a:b], span=(a, b)))
            continue
        seen.add(key)
        kept.append((a, b))

    if len(kept) >= 2 and _cut_off(response[kept[-1][0] : kept[-1][1]], finish_reason):
        a, b = kept.pop()
        removed.append(Removal(kind="truncated", text=response[a:b], span=(a, b)))

    parts: list[str] = []
    for i, (a, b) in enumerate(kept):
        if i:
            gap = response[kept[i - 1][1] : a]
            parts.append("\n" if "\n" in gap else " ")
        parts.append(response[a:b])
    sentences = [response[a:b] for a, b in kept]
    removed.sort(key=lambda r: r.span)
    text = "".join(parts)
    abstained = not text.strip() or _is_abstained(sentences)
    return Preprocessed(text=text, abstained=abstained, removed=tuple(removed))
