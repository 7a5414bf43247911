"""The offline rule Splitter: sentences, then clauses, then list items, modifiers and phrases.

Rules, applied to each sentence of :func:`dahl.sentences.split_sentences`:

1. **Non-claims are dropped**: questions, headings, chatter ("Sure!", "I hope this helps") and
   sentences without letters; an intro ending with ":" that has a verb is carried into the
   verbless list items that follow it.
2. **Clauses**: cut at ";" and ", and/but/while/whereas/so/yet" when both sides have a verb,
   and at "and/but [adverb] <verb>" ("and later moved") and "who <verb>" after a copula, the
   subject carried over.
3. **Lists**: "A causes X, Y, and Z" gives one claim per short, verbless item, the head (up to
   the last verb / "including" / "such as") carried into each.
4. **Modifiers** (:mod:`dahl.adapters._clauses`): a leading "Born ...," phrase ("Born in 1948,
   X studied ..." -> "X was born in 1948"), inserts after a subject, trailing relatives
   and participles, time/place phrases, "A and B" conjuncts, "(born ...)" and life spans,
   dated titles and place chains.
5. **Phrases** (:mod:`dahl.adapters._phrases`): cut before subordinators, relatives, linking
   phrases and prepositions, the head restored for time, place and cause phrases.
6. **Kinds and names**: "including" / "such as" after a noun gives "A is among <noun>" per
   item, and a title right after "the ... <noun>" gives "The <noun> is <title>".
7. **Extensions stated on their own**: a claim that another claim of its sentence begins ("She
   earned a Ph.D." ... "She earned a Ph.D. from Harvard") says only what it adds, about what it
   modifies ("The Ph.D. was from Harvard"), where such a claim reads naturally
   (:func:`dahl.adapters._phrases.own_claim`); otherwise it stays whole.

**Source span.** Every claim has a ``(start, end)`` span into the response where its own words
begin, up to where the next claim of its sentence begins, trimmed of spaces, separators and a
trailing conjunction: the spans of a response's claims are non-empty, disjoint and in text
order. Words a claim carries from elsewhere lie outside its span; a claim with no words of
its own left in its piece is dropped. List markers, "**" and citation marks like "[1]" are
removed from claim text.
"""

from __future__ import annotations

import re

import anyio.to_thread

from dahl.adapters._clauses import COPULAS as _COPULAS
from dahl.adapters._clauses import LIST_INTROS as _LIST_INTROS
from dahl.adapters._clauses import PARTICIPLES as _PARTICIPLES
from dahl.adapters._clauses import PREPOSITIONS as _PREPOSITIONS
from dahl.adapters._clauses import WORD as _WORD
from dahl.adapters._clauses import Span
from dahl.adapters._clauses import first_verb as _first_verb
from dahl.adapters._clauses import has_verb as _has_verb
from dahl.adapters._clauses import is_finite as _is_finite
from dahl.adapters._clauses import is_verb as _is_verb
from dahl.adapters._clauses import needs_article as _needs_article
from dahl.adapters._clauses import opens_with_verb as _opens_with_verb
from dahl.adapters._clauses import refine as _refine
from dahl.adapters._clauses import subject_of as _subject
from dahl.adapters._clauses import words as _words
from dahl.adapters._phrases import added_words as _added_words
from dahl.adapters._phrases import begins as _begins
from dahl.adapters._phrases import own_claim as _own_claim
from dahl.adapters._phrases import phrase_claims as _phrase_claims
from dahl.adapters._spans import locate as _locate
from dahl.records import Answer, Claim, normalize_text
from dahl.sentences import LIST_MARKER, split_sentences

__all__ = ["RuleSplitter", "split_claims"]

_CITATION = re.compile(r"\s*\[\d+(?:[,–-]\s*\d+)*\]")
_EMPHASIS = re.compile(r"\*\*|__")
_CHATTER = re.compile(
    r"\A\W*(?:here(?:'s| is| are)\b|i hope (?:this|that) helps|let me know\b|feel free\b"
    r"|(?:sure|certainly|of course|absolutely|great question|good question)"
    r"(?:\W*\Z|[,!.]\s*(?:here|i can|i'd|i will|i'll|let me)\b))",
    re.IGNORECASE,
)
_CLAUSE_CUT = re.compile(r";\s+|,\s+(?:and|but|while|whereas|so|yet)\s+", re.IGNORECASE)
_DETERMINERS = frozenset("the a an his her its their this these".split())
_TRAILING_CONJUNCTION = re.compile(r",?\s+(?:and|but|or|while|whereas|so|yet|who)\Z", re.IGNORECASE)
_AND_VERB = re.compile(r",?\s+(?:and|but|who)\s+(?=\w)", re.IGNORECASE)

#: (claim text, (start, end) span in the text, sentence index)
ClaimTuple = tuple[str, tuple[int, int], int]


def _strip(text: str, span: Span) -> Span:
    """Shrink ``span`` to exclude surrounding whitespace and separators."""
    a, b = span
    while a < b and (text[a].isspace() or text[a] in ",;"):
        a += 1
    while b > a and (text[b - 1].isspace() or text[b - 1] in ",;("):
        b -= 1
    return a, b


def _clauses(text: str, span: Span) -> list[tuple[str, Span]]:
    """Rule 2: cut ``text[span]`` into clauses, each as (carried subject, span)."""
    pieces: list[Span] = []
    start = span[0]
    for cut in _CLAUSE_CUT.finditer(text, span[0], span[1]):
        left, right = (start, cut.start()), (cut.end(), span[1])
        if _has_verb(text[left[0] : left[1]]) and _has_verb(text[right[0] : right[1]]) and not _relative_first(
            text[right[0] : right[1]]
        ):
            pieces.append(left)
            start = cut.end()
    pieces.append((start, span[1]))

    subject = _subject(text, pieces[0])
    out: list[tuple[str, Span]] = []
    for n, piece in enumerate(pieces):
        start = piece[0]
        first = _words(text[start : piece[1]])[:1]
        # A clause that opens with its verb shares the sentence's subject.
        carried = subject if n and first and _is_verb(first[0]) else ""
        for cut in _AND_VERB.finditer(text, piece[0], piece[1]):
            following = _words(text[cut.end() : piece[1]])[:3]
            left = (start, cut.start())
            left_words = _words(text[left[0] : left[1]])
            if not _opens_with_verb(following) or not _has_verb(text[left[0] : left[1]]):
                continue
            if _is_verb(left_words[-1]):
                continue  # "has written and arranged songs": two verbs, one predicate
            who = cut.group().strip(", ").lower() == "who"
            if who and _first_verb(text, left) not in _COPULAS:
                continue  # "He married Jane, who was ..." is about Jane, not the subject
            colon = text.rfind(":", left[0], left[1])
            # "There was an impact: graduates ... and often had influence": the subject after the colon
            after_colon = _subject(text, (colon + 1, left[1])) if colon >= 0 else ""
            then = subject if not after_colon or any(q in after_colon for q in "\"“”") else after_colon
            if not _is_verb(following[0]):  # "and later moved": an adverb first
                named = _words(then)
                if (who and "," in cut.group()) or not named or named[0] in _RELATIVES or all(
                        w in _DETERMINERS for w in named):
                    continue  # "a student of Freud, who later moved": about Freud; no subject to carry
                shared = _shared_copula(text, left, following[1])
                then = f"{then} {shared}" if shared else then
            out.append((carried, left))
            carried, start = then, cut.end()
        out.append((carried, (start, piece[1])))
    stripped = [(subj, _strip(text, s)) for subj, s in out]
    return [(subj, s) for subj, s in stripped if _WORD.search(text, s[0], s[1])]


def _shared_copula(text: str, left: Span, verb: str) -> str:
    """The copula a later "-ed" predicate shares with the clause ``text[left]`` ("The theory was
    controversial and later abandoned" -> "was"), or "": none when ``verb`` is finite ("later
    became") or the copula's predicate is a noun phrase ("He is a doctor and later moved")."""
    if _is_finite(verb):
        return ""
    for match in _WORD.finditer(text, left[0], left[1]):
        word = match.group().lower()
        if _is_verb(word):
            if word not in _COPULAS:
                return ""
            following = _words(text[match.end() : left[1]])[:1]
            return match.group() if following and following[0] not in _DETERMINERS else ""
    return ""


def _relative_first(clause: str) -> bool:
    """True when the clause cannot stand alone: a relative word before its first verb
    ("businessman who was born ..."), or a participle as its first verb ("actor born on ...")."""
    for word in _words(clause):
        if _is_verb(word):
            return word in _PARTICIPLES
        if word in _RELATIVES:
            return True
    return False


_RELATIVES = frozenset("who whom whose which that where".split())
_QUOTED = re.compile(r'"[^"]*"|“[^”]*”')


def _is_item(item: str, max_words: int) -> bool:
    """A list item: 1..max_words words, no verb, not led by a preposition, not a bare number,
    nor led by a possible verb outside the closed lists ("improves insulin sensitivity")."""
    count = len(_words(item))
    # A quoted title is a name: its words are no verb or preposition ("The Blue Rose", "Like a Boss").
    words = _words(_QUOTED.sub(" Title ", item))
    return (
        0 < count <= max_words
        and not any(_is_verb(w) for w in words)
        and not (len(words) > 1 and re.fullmatch(r"[a-z]{3,}[^su]s", words[0]) and item[:1].islower())
        and not (len(words) > 1 and words[0].endswith("ing") and words[1] in _DETERMINERS)
        and words[0] not in _PREPOSITIONS
        and words[0] not in _LIST_INTROS
        and re.fullmatch(r"[\d\s.,–-]*", item) is None
    )


def _pair(text: str, span: Span) -> tuple[str, list[Span]] | None:
    """Rule 3, two items: "is an inventor and entrepreneur" when both items are short."""
    a, b = span
    inner = re.search(r"\s(?:and|or)\s", text[a:b])
    if inner is None:
        return None
    cut = a + inner.start()
    anchor_end = _anchor(text, (a, cut))
    if anchor_end is None:
        return None
    items = [_strip(text, (anchor_end, cut)), _strip(text, (cut + len(inner.group()), b))]
    limit = 8 if _introduced(text, anchor_end) else 3
    if not all(_is_item(text[s:e], limit) for s, e in items):
        return None
    return text[a:anchor_end].strip(), items


def _introduced(text: str, anchor_end: int) -> bool:
    """True when the list anchor ending at ``anchor_end`` is "including", "such as", "like" ..."""
    last = _words(text[max(0, anchor_end - 12) : anchor_end])[-1:]
    return bool(last) and (
        last[0] in _LIST_INTROS or last[0] == "as" and _SUCH_AS.search(text, 0, anchor_end) is not None
    )


_SUCH_AS = re.compile(r"\bsuch(?:\s+[^\s,;()]+){0,4}?\s+as\Z")


def _anchor(text: str, head: Span) -> int | None:
    """End offset of the last verb / "including" / "such as" in ``head`` and its prepositions."""
    anchor_end = None
    such = False
    for match in _WORD.finditer(text, head[0], head[1]):
        word = match.group().lower()
        if text.count('"', head[0], match.start()) % 2 or text.count("“", head[0], match.start()) > text.count(
            "”", head[0], match.start()
        ):
            continue  # inside a quoted title: "The Blue Rose"
        if word == "such":
            such = True
        if _is_verb(word) or word in _LIST_INTROS or (word == "as" and such):
            anchor_end = match.end()  # "such as", "such classic films as"
            such = False
        elif anchor_end is not None and word in _PREPOSITIONS:
            if not text[anchor_end : match.start()].strip():
                anchor_end = match.end()  # "characterized by", "such as"
    return anchor_end


# A chunk that opens a list after a comma: ", including A, B and C", ", such as A, B and C".
_INTRO_START = re.compile(r"(?:including|such as|like|especially|notably)\s+")


def _list_items(text: str, span: Span) -> tuple[str, list[Span]] | None:
    """Rule 3: (shared prefix, item spans) when ``text[span]`` ends in a clear list, else None."""
    a, b = span
    delim = ";" if ";" in text[a:b] else ","
    chunks: list[Span] = []
    start = a
    for i in range(a, b):
        if text[i] == delim and i + 1 < b and text[i + 1].isspace():
            chunks.append((start, i))
            start = i + 1
        elif text[i] == delim and text[i + 1 : i + 2] in ('"', "”") and i + 2 < b and text[i + 2].isspace():
            chunks.append((start, i + 2))  # '"Eega," "Theri"': the item keeps its closing quote
            start = i + 2
    chunks.append((start, b))
    if len(chunks) < 2:
        return _pair(text, span)
    last = _strip(text, chunks[-1])
    conj = re.match(r"(?:and|or)\s+", text[last[0] : last[1]], re.IGNORECASE)
    if conj is not None:
        items = [(last[0] + conj.end(), last[1])]
    else:
        inner = re.search(r"\s(?:and|or)\s", text[last[0] : last[1]])
        if inner is not None:
            cut = last[0] + inner.start()
            items = [(last[0], cut), (cut + len(inner.group()), last[1])]
        elif len(chunks) >= 4:
            items = [last]  # "A, B, C, D": four or more items need no final "and"
        else:
            return None
    # Walk back over the middle items.
    k = len(chunks) - 2
    middle: list[Span] = []
    intro = None
    while k > 0 and len(_words(text[chunks[k][0] : chunks[k][1]])) <= 8:
        if re.match(r"\s*(?:and|or)\s", text[chunks[k][0] : chunks[k][1]], re.IGNORECASE):
            return None  # an earlier "and": nested or two lists, not one clear list
        intro = _INTRO_START.match(text, _strip(text, chunks[k])[0], chunks[k][1])
        if intro is not None:
            break  # ", including A, B and C": the list starts after the intro word
        middle.insert(0, _strip(text, chunks[k]))
        k -= 1
    if intro is not None:
        head, anchor_end = (a, intro.end()), intro.end()
        first = _strip(text, (anchor_end, chunks[k][1]))
    else:
        head = chunks[k]
        found_anchor = _anchor(text, head)
        if found_anchor is None:
            return None
        anchor_end = found_anchor
        first = _strip(text, (anchor_end, head[1]))
    every = [first, *middle, *items]
    limit = 8 if middle else 4  # "X, Y and Z" without a middle comma item: short items only
    if _introduced(text, anchor_end):
        limit = 10  # after "including" / "such as" every item is a list item
    if not all(_is_item(text[s:e], 10 if s == first[0] else limit) for s, e in every):
        return None
    return text[head[0] : anchor_end].strip(), every


_HIDDEN = "\x00"
_HIDDEN_SEMICOLON = "\x01"
_BRACKETED = re.compile(r'\([^()]*\)|"[^"]*"|“[^”]*”')


def _mask(text: str) -> str:
    """Hide commas and semicolons inside parentheses and quotes (same length, so spans stay valid)."""
    return _BRACKETED.sub(_hide, text)


def _hide(match: re.Match[str]) -> str:
    inner = match.group().replace(",", _HIDDEN).replace(";", _HIDDEN_SEMICOLON)
    # '"Dookudu," "Eega," and "Theri"': a comma just inside a closing quote separates list items.
    if inner[-1] in "\"”" and inner[-2:-1] == _HIDDEN:
        inner = inner[:-2] + "," + inner[-1]
    return inner


def _clean(text: str) -> str:
    text = _CITATION.sub("", text)
    text = _EMPHASIS.sub("", text)
    return normalize_text(text).strip(" ,;")


def _is_non_claim(sentence: str) -> bool:
    body = _EMPHASIS.sub("", sentence).strip()
    return (
        not _WORD.search(body)
        or body.endswith("?")
        or body.endswith(":")
        or sentence.lstrip().startswith("#")
        or (sentence.strip().startswith("**") and sentence.strip().endswith("**"))
        or _CHATTER.match(body) is not None
    )


_INTRO_END = re.compile(r"[,\s]*\b(including|like|such(?:\s+([^\s,;()]+(?:\s+[^\s,;()]+){0,3}?))?\s+as)\s*\Z")
_KIND_CUT = re.compile(r"\b(?:with|for|by|on|at|from|to|about|as|than|via|between|among)\s+")
_ITEM_PAREN = re.compile(r"\s*\([^()]*\)")


def _add_membership(
    text: str, span: Span, listed: tuple[str, list[Span]], found: list[tuple[str, int]], seen: set[str]
) -> set[str]:
    """"films such as A, B and C" -> also "A is among films", ... (in place, on ``found``).

    Each membership claim comes just before its item's claim, its span the connector before
    the item ("such as", ",", "and"); an item whose connector already holds a claim gets none.

    Returns:
        The membership claims added.
    """
    items = listed[1]
    intro = _INTRO_END.search(text, span[0], items[0][0])
    if intro is None:
        return set()
    head = text[span[0] : intro.start()]
    anchor = _anchor(head, (0, len(head)))
    kind = _clean(head[anchor:]) if anchor is not None else ""
    # The kind is the noun right before the intro: "a proton pump inhibitor with antibiotics such
    # as A" -> "antibiotics"; "of" and "in" stay inside it ("a number of clubs in Italy").
    after = list(_KIND_CUT.finditer(kind))
    if after and _words(kind[after[-1].end() :]):
        kind = kind[after[-1].end() :]
    if intro.group(2):
        kind = intro.group(2)  # "such classic films as A, B and C"
    if not _words(kind) or _has_verb(kind):
        return set()
    added: set[str] = set()
    for k, (a, b) in enumerate(items):
        name = re.sub(r'[,.](["”])', r"\1", _clean(_ITEM_PAREN.sub("", text[a:b]).replace(_HIDDEN, ","))).rstrip(".,")
        claim = f"{name} is among {kind}"
        if not _words(name) or claim in seen:
            continue
        gap_start = intro.start(1) if k == 0 else items[k - 1][1]
        if k and text[gap_start - 2 : gap_start] in (',"', ",”"):
            gap_start -= 2  # '"A," "B"': the comma inside the closing quote is the separator
        gap = text[gap_start:a]
        connector = gap_start + len(gap) - len(gap.lstrip())
        if connector >= a:
            continue
        if k == 0:
            j = next((i for i, (_, where) in enumerate(found) if where == connector), None)
            if j is None:
                # The claim before owns the head and the item: the intro words and the item go to
                # this claim ("such classic films as The Sea Hawk"), the head stays with it.
                j = sum(1 for _, where in found if where < connector)
                if j == 0 or (j < len(found) and found[j][1] <= a):
                    continue
            elif j + 1 < len(found) and found[j + 1][1] <= a:
                continue
            else:
                found[j] = (found[j][0], a)  # the first item's claim moves past the intro words
        else:
            inside = [i for i, (_, where) in enumerate(found) if connector <= where < b]
            if not inside or found[inside[0]][1] < a:
                continue  # a claim already begins in the connector
            j = inside[0]
        found.insert(j, (claim, connector))
        seen.add(claim)
        added.add(claim)
    return added


def split_claims(text: str) -> list[ClaimTuple]:
    """Split ``text`` into atomic claims with the rules of the module docstring (pure, blocking).

    Args:
        text: a preprocessed response.

    Returns:
        ``(claim_text, (start, end), sentence_index)`` per claim, in text order: the
        normalized claim text, the span in ``text`` of its own words, and the 0-based index of
        its sentence.
    """
    claims: list[ClaimTuple] = []
    intro = ""
    text = _mask(text)
    for index, (s_start, s_end) in enumerate(split_sentences(text)):
        sentence = text[s_start:s_end]
        marker = LIST_MARKER.match(sentence)
        if _is_non_claim(sentence):
            body = _EMPHASIS.sub("", sentence).strip()
            intro = body[:-1] if body.endswith(":") and _has_verb(body) else ""
            continue
        start = s_start + (marker.end() if marker else 0)
        carried = intro if marker and not _has_verb(text[start:s_end]) else ""
        if not marker:
            intro = ""
        seen: set[str] = set()
        connectors: set[str] = set()  # membership claims: their span is a list connector
        found: list[tuple[str, int]] = []  # (claim text, where its own words begin)
        for subject, span in _clauses(text, (start, s_end)):
            prefix = " ".join(p for p in (carried, subject) if p)
            listed = _list_items(text, span)
            article = None
            if listed is None:
                parts = [(prefix, span)]
            else:
                shared, items = listed
                parts = [(" ".join(p for p in (prefix, shared) if p), item) for item in items]
                article = re.match(r"(?:a|an)\s", text[items[0][0] : items[0][1]])
            for n, (lead, (a, b)) in enumerate(parts):
                body = text[a:b]
                lead_word = _words(body)[:1]
                if n and lead_word == ["etc"]:
                    continue  # "X, Y, etc.": no item of its own; its words join the item before
                if n and article and _needs_article(_words(body)[:2]):
                    body = f"{'an' if body[:1].lower() in 'aeiou' else 'a'} {body}"  # "an actress, a writer"
                claim = _clean(f"{lead} {body}" if lead else body)
                # The first item of a list owns the list's head too; later items only their own words.
                window_start = span[0] if n == 0 else a
                previous = ""
                for refined in _refine(claim) if claim else []:
                    for masked, _own in _phrase_claims(refined):
                        part = masked.replace(_HIDDEN, ",").replace(_HIDDEN_SEMICOLON, ";")
                        if not _WORD.search(part) or part in seen:
                            continue
                        if n == 0 and not previous:
                            at = window_start
                        else:
                            located = _locate(text, (window_start, b), part, previous)
                            if located is None:
                                continue  # no words of its own left in the piece: nothing to point at
                            at = located
                        window_start = at + 1
                        seen.add(part)
                        found.append((part, at))
                        previous = part
            if listed is not None:
                connectors |= _add_membership(text, span, listed, found, seen)
        found = _restate_extensions(found)
        ends = [at for _, at in found[1:]] + [s_end]
        for n, ((part, at), end) in enumerate(zip(found, ends, strict=True)):
            if part in connectors:
                piece = text[at:end].rstrip().rstrip("(").rstrip()
                claims.append((part, (at, at + len(piece)), index))  # "such as", ",", "and"
                continue
            span = _strip(text, (start if n == 0 else at, end))
            tail = _TRAILING_CONJUNCTION.search(text, span[0], span[1])
            if tail:
                span = _strip(text, (span[0], tail.start()))
            if re.search(r"\w", text[span[0] : span[1]]):
                claims.append((part, span, index))  # else only separators were left: no claim
    return claims


def _restate_extensions(found: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """Each claim another claim of the sentence begins ("She earned a Ph.D." before "She earned
    a Ph.D. from Harvard") replaced by the claim its added words make on their own ("The Ph.D.
    was from Harvard"), where one reads naturally; ``found`` holds (claim text, start offset)
    in text order, and the offsets are kept."""
    return [(_restated(part, found), at) for part, at in found]


def _restated(part: str, found: list[tuple[str, int]]) -> str:
    """``part``, or the claim its added words make on their own when another claim of ``found``
    begins it (:func:`dahl.adapters._phrases.own_claim`)."""
    for shorter, _ in found:
        if shorter != part and _begins(part, shorter):
            own = _own_claim(shorter.rstrip(" ,;"), _added_words(part, shorter))
            if own is not None and all(own != other and not _begins(own, other) for other, _ in found):
                return own
    return part


class RuleSplitter:
    """Offline Splitter: :func:`split_claims` run in a worker thread.

    Attributes:
        fingerprint: ``"rules/v9"``; bumped whenever the output for some input changes.
    """

    fingerprint: str = "rules/v9"
    #: Splitting is cheap and deterministic: the verdict cache does not store it.
    cacheable: bool = False
    parser_version: str = "1"

    async def split(self, answer: Answer) -> list[Claim]:
        """Split ``answer.response`` into claims (spans index ``answer.response``); never raises."""
        found = await anyio.to_thread.run_sync(split_claims, answer.response)
        return [
            Claim(text=claim, index=i, span=span, sentence=sentence)
            for i, (claim, span, sentence) in enumerate(found)
        ]

