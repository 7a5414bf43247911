"""Word classes and the modifier rules that cut one clause-sized claim into atomic claims.

:func:`refine` is rule 4 of :mod:`dahl.adapters._rules`; the word classes (:func:`is_verb` and
friends) are small closed lists.
"""

from __future__ import annotations

import re

__all__ = [
    "COPULAS", "LIST_INTROS", "PARTICIPLES", "PREPOSITIONS", "WORD", "Span",
    "first_verb", "has_verb", "is_finite", "is_verb", "needs_article", "opens_with_verb", "paren_depth", "refine",
    "subject_of", "words",
]

#: (start, end) character offsets
Span = tuple[int, int]

_AUX = frozenset(
    "is are was were be been being has have had do does did can could will would may might "
    "must shall should am isn't aren't wasn't weren't hasn't haven't hadn't doesn't didn't "
    "can't won't".split()
)
# Irregular pasts ("died" aside, which _is_past does not count as past).
_IRREGULAR_PASTS = frozenset(
    "became began won wrote made took went left led held gave got grew saw found built taught "
    "brought bought spent sold told ran met came fought knew rose fell drew sang lost paid kept "
    "spoke broke chose sent stood".split()
)
# Frequent present-tense verbs too; regular pasts are caught by "-ed".
_VERBS = _IRREGULAR_PASTS | frozenset(
    "died remains becomes causes includes contains reduces "
    "increases affects occurs leads plays works lives serves involves requires helps produces "
    "inhibits binds acts results appears makes takes gives shows suggests indicates means "
    "refers consists depends lowers raises prevents treats regulates blocks activates develops "
    "spreads continues holds teaches writes runs owns focuses provides allows enables "
    "supports protects controls induces promotes mediates encodes expresses improves "
    "decreases stimulates enhances relieves reverses neutralizes combines include cause "
    "contain reduce increase affect occur lead involve require produce inhibit prevent treat "
    "regulate block activate develop promote".split()
)
_PARTICIPLES = frozenset("born known shown given taken written seen grown drawn gone done begun".split())
#: Irregular past participles (no "-ed"): a clause whose first verb is one of them has no tense.
PARTICIPLES = _PARTICIPLES
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


def opens_with_verb(following: list[str]) -> bool:
    """True when the lowercased words ``following`` (three are enough) open a predicate, not a
    noun phrase: a verb, or an adverb and then a verb ("later moved to Paris", "legally changed
    his name", "quickly became famous").

    An "-ed" word or participle after an adverb may be an adjective or share a copula before it
    ("a previously unreported factor", "was successful and well tolerated", "significantly but
    modestly associated with"): it opens a predicate after "later", "then" and the like when a
    phrase or an object follows it, and after an "-ly" adverb only when an object follows.
    """
    if not following:
        return False
    if is_verb(following[0]):
        return True
    if len(following) < 2 or not is_verb(following[1]):
        return False
    adverb, verb = following[0], following[1]
    then = adverb in _SEQUENCE_ADVERBS
    if not then and not _is_ly_adverb(adverb):
        return False
    if is_finite(verb):
        return True  # "quickly became", "then went"
    after = following[2] if len(following) > 2 else ""
    return after in _OBJECT_STARTS or (then and after in PREPOSITIONS)


def is_finite(word: str) -> bool:
    """True for a lowercased verb of the closed lists that is no bare participle ("became", "is",
    "remains"); a regular "-ed" word may be a participle or an adjective, so it is not counted."""
    return word in _AUX or word in _VERBS


def is_adverb(word: str) -> bool:
    """True for a lowercased word of the closed adverb list ("also", "later") or an "-ly" adverb
    ("legally"; not "family", "assembly")."""
    return word in _NOT_OBJECT or _is_ly_adverb(word)


def needs_article(following: list[str]) -> bool:
    """True when a list item or conjunct of lowercased words ``following`` takes "a"/"an" from the
    item before it ("an actress and singer" -> "a singer"): it has no determiner of its own, also
    not after an adverb ("and also a singer", but "and potentially long-term ..." takes one)."""
    if not following or following[0] in _OWN_ARTICLE:
        return False
    return not (is_adverb(following[0]) and following[1:2] and following[1] in _OWN_ARTICLE)


_OWN_ARTICLE = frozenset("the a an his her its their this these".split())


def _is_ly_adverb(word: str) -> bool:
    return len(word) > 4 and word.endswith("ly") and word not in _LY_NOUNS


# "-ly" words that are nouns or adjectives, not adverbs.
_LY_NOUNS = frozenset(
    "family assembly supply ally rally italy july anomaly monopoly butterfly belly jelly bully folly "
    "reply homily melancholy lily holy early daily weekly monthly yearly elderly friendly likely only".split()
)


def has_verb(text: str) -> bool:
    """True when some word of ``text`` is a verb (:func:`is_verb`)."""
    return any(is_verb(w) for w in words(text))


def subject_of(text: str, span: Span) -> str:
    """The words before the first verb of ``text[span]`` (after a leading adverbial or a leading
    "Born ...," phrase), or ""."""
    a, b = span
    lead = _LEADING_PARTICIPLE.match(text, a, b)
    if lead is not None:
        a = lead.end()
    for match in WORD.finditer(text, a, b):
        if is_verb(match.group().lower()):
            head = text[a : match.start()]
            head = head.rsplit(",", 1)[-1].strip()  # drop "In 1990," before the subject
            head = _without_trailing_adverbs(head)  # "She later was ...": the subject is "She"
            n = len(words(head))
            return head if 0 < n <= 6 else ""
    return ""


def _without_trailing_adverbs(head: str) -> str:
    """``head`` without the adverbs that end it ("She later" -> "She"; "The family" is kept)."""
    while True:
        rest, _, last = head.rpartition(" ")
        if not rest.strip() or last.lower() in _NOT_STRIPPED or not is_adverb(last.lower()):
            return head
        head = rest.rstrip()


_NOT_STRIPPED = frozenset("best most first only not".split())


def first_verb(text: str, span: Span) -> str:
    """The first verb of ``text[span]``, lowercased, or ""."""
    for match in WORD.finditer(text, span[0], span[1]):
        if is_verb(match.group().lower()):
            return match.group().lower()
    return ""


_PAST_AUX = frozenset("was were had did could would might".split())
_PP_SPLIT = frozenset(
    "in on at during since from until after before through throughout by via with without "
    "among between within".split()
)
# Words between the verb and a phrase that do not make an object ("He was also born in X").
_AGENT = frozenset("by with without through via among between within".split())
_PLACE = frozenset("in at on within among".split())
_NOT_OBJECT = frozenset(
    "also then later still first once not never often only originally primarily mainly "
    "currently previously subsequently eventually briefly widely best most well".split()
)
# Adverbs that open a later predicate of the subject ("and later moved to Paris").
_SEQUENCE_ADVERBS = frozenset(
    "also then later still once never often originally currently previously subsequently eventually "
    "soon afterwards thereafter".split()
)
# Words that start a verb's object ("legally changed his name").
_OBJECT_STARTS = frozenset("the a an his her its their this these that those him them it himself herself itself themselves".split())
_NOT_PARTICIPLE = frozenset(
    "including according following regarding concerning during excluding notwithstanding "
    "something nothing anything everything thing king spring string morning evening".split()
)
_RELATIVE = re.compile(r",\s+(who|which|where)\s+", re.IGNORECASE)
_COMMA = re.compile(r",\s+")


def _is_past(text: str) -> bool:
    """True when the first verb of ``text`` is past tense (chooses "was" over "is")."""
    verb = first_verb(text, (0, len(text)))
    return verb in _PAST_AUX or (verb not in _AUX and verb not in _VERBS) or verb in _IRREGULAR_PASTS


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
            if re.match(r"(?:e\.g|i\.e|viz|cf)\.", insert):
                return None  # "Some NSAIDs, e.g. ibuprofen, reduce ...": examples of the subject, one claim
            if lead and lead[0] in ("who", "which"):
                side = f"{subject} {insert.split(None, 1)[-1]}"
            elif lead and (lead[0] in ("a", "an", "the") or not has_verb(insert)):
                side = f"{subject} {'was' if _is_past(rest) else 'is'} {insert}"
            elif re.match(r"(?:also |better |more |commonly |professionally )?known as |born |nicknamed ", insert):
                # "X, also known as Y, was ..." / "X, born in 1950, is ...": a participle phrase
                side = f"{subject} {'was' if _is_past(rest) or lead[0] == 'born' else 'is'} {insert}"
            else:
                return None
            return [side, f"{subject} {rest}"]  # text order: the insert comes first
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
    """"He won X, earning Y" -> "He won X", "He earned Y"; ", known for Y" -> "He is/was known for Y".

    An "-ing" phrase is conjugated to the first verb's tense; when that is unsure it stays.
    """
    for match in _COMMA.finditer(claim):
        found = list(WORD.finditer(claim, match.end()))[:1]
        if not found or "-" in found[0].group() or found[0].group()[:1].isupper():
            continue  # "a Gram-negative, spiral-shaped bacterium": an adjective, not a phrase
        word = found[0].group().lower()
        if word in _NOT_PARTICIPLE:
            continue
        ing = word.endswith("ing") and len(word) > 5
        if not (ing or word in _PARTICIPLES or (word.endswith("ed") and is_verb(word))):
            continue
        left = claim[: match.start()]
        subject = subject_of(left, (0, len(left)))
        if not subject or is_verb(words(left)[-1]):
            continue
        past = _is_past(left)
        rest = claim[found[0].end() :]
        if not ing:
            return [left, f"{subject} {'was' if past else 'is'} {claim[match.end():]}"]
        verb = _conjugate(word, past)
        if verb is None:
            return None  # cannot conjugate simply: keep the phrase on the claim
        return [left, f"{subject} {verb}{rest}"]
    return None


_IRREGULAR = {  # -ing form: (present 3rd person singular, past)
    "being": ("is", "was"), "having": ("has", "had"), "doing": ("does", "did"),
    "going": ("goes", "went"), "becoming": ("becomes", "became"), "making": ("makes", "made"),
    "taking": ("takes", "took"), "giving": ("gives", "gave"), "writing": ("writes", "wrote"),
    "coming": ("comes", "came"), "winning": ("wins", "won"), "leading": ("leads", "led"),
    "leaving": ("leaves", "left"), "holding": ("holds", "held"), "getting": ("gets", "got"),
    "bringing": ("brings", "brought"), "running": ("runs", "ran"), "selling": ("sells", "sold"),
    "teaching": ("teaches", "taught"), "building": ("builds", "built"), "finding": ("finds", "found"),
    "spending": ("spends", "spent"), "keeping": ("keeps", "kept"), "meeting": ("meets", "met"),
    "setting": ("sets", "set"), "putting": ("puts", "put"), "beginning": ("begins", "began"),
    "earning": ("earns", "earned"), "lowering": ("lowers", "lowered"),
}
# Stem endings (the "-ing" form without "ing") that lost an "e": "reduc-ing" -> "reduce".
_E_DROPPED = re.compile(
    r"(?:[cvz]|[^z]z|[^eo]at|[^aeiou]ut|[^aeiou](?:in|ir|ur|id|ud|od|os|ar)|[aeiou]{2}s|[^aeioul]l"
    r"|[rd]g|chang|rang|creat|quir)$"
)
# Stem endings that keep their form: two consonants, a vowel pair + consonant, "-er", "-y" ...
_E_KEPT = re.compile(r"(?:[^aeiouy]{2}|[aeiou]{2}[^aeiousvcz]|er|en|ow|ss|y|x)$")


def _conjugate(ing: str, past: bool) -> str | None:
    """Third person singular of the verb of ``ing`` ("reducing" -> "reduces", past "reduced").

    Regular spelling rules plus a short list of irregular verbs; None when the base form is
    unsure ("visiting" or "hoping"?) or an irregular past is unknown.
    """
    if ing in _IRREGULAR:
        return _IRREGULAR[ing][past]
    stem = ing[:-3]
    doubled = len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] in "bdgmnprt"
    if doubled:
        base = stem[:-1]
    elif _E_DROPPED.search(stem):
        base = stem + "e"
    elif _E_KEPT.search(stem) and not stem.endswith("ll"):
        base = stem
    else:
        return None
    if past:
        if base in _NO_REGULAR_PAST:
            return None
        if doubled:
            return stem + "ed"
        if base.endswith("e"):
            return base + "d"
        return base[:-1] + "ied" if re.search(r"[^aeiou]y$", base) else base + "ed"
    if re.search(r"(?:s|sh|ch|x|z|o)$", base):
        return base + "es"
    return base[:-1] + "ies" if re.search(r"[^aeiou]y$", base) else base + "s"


# Bases whose past is irregular and not in _IRREGULAR: no regular "-ed" guess.
_NO_REGULAR_PAST = frozenset(
    "draw grow throw know show fly sing ring drink swim sit stand understand feel fight "
    "think buy seek sleep speak break choose drive ride rise write bite hide shake wake wear "
    "tear bear swear lose shoot hang strike stick dig lend send bend cut hit let shut spread "
    "cast cost hurt quit split read lead feed bleed breed flee see say pay lay tell".split()
)


def _prepositions(claim: str) -> list[str] | None:
    """"X was born on D in P" -> "X was born on D", "X was born in P".

    One claim per phrase, each with the text before the first phrase, which is a claim alone
    too when it holds an object ("He joined the army in 1990" -> also "He joined the army").
    """
    verb_end: int | None = None
    starts: list[int] = []
    for match in WORD.finditer(claim):
        word = match.group().lower()
        if verb_end is None:
            if is_verb(word):
                verb_end = match.end()
        elif word in _PP_SPLIT and match.group().islower() and claim.count('"', 0, match.start()) % 2 == 0:
            starts.append(match.start())
    if verb_end is None or not starts:
        return None
    between = [w for w in words(claim[verb_end : starts[0]]) if w not in _NOT_OBJECT]
    obj = [w for w in between if not is_verb(w)]
    if obj and any(is_verb(w) for w in between[between.index(obj[0]) :]):
        return None  # "is a disease caused by A in B": the phrases belong to the participle's noun
    # A place phrase right after an agent / instrument phrase names where that noun is
    # ("caused by mutations in the CFTR gene"): it stays with it.
    heads = [claim[i : claim.index(" ", i)].lower() if " " in claim[i:] else "" for i in starts]
    starts = [
        i for n, i in enumerate(starts)
        if not (n and heads[n] in _PLACE and heads[n - 1] in _AGENT)
    ]
    if any(is_verb(w) for w in words(claim[starts[0] :])[1:2]):
        return None  # "has since been re-elected in ...": "since" is an adverb here, unsure
    if len(starts) < 2:
        return None
    core = claim[: starts[0]].rstrip(" ,")
    bounds = [*starts, len(claim)]
    head = [core] if obj else []
    return head + [f"{core} {claim[a:b].rstrip(' ,')}" for a, b in zip(bounds, bounds[1:])]


_AND = re.compile(r"\s+and\s+")
# Prepositions outside the phrase lists: a conjunct starts after them too ("alongside A and B").
_OTHER_PREPOSITIONS = frozenset("alongside against under over across behind beside toward towards near".split())
_CONJUNCT_STOP = frozenset("that which who whom whose where when while".split())
_NOT_COORDINATED = frozenset("between both".split())
_DETERMINERS = frozenset("the a an his her its their".split())


def _coordination(claim: str) -> list[str] | None:
    """"X plays A and B in C" -> "X plays A in C", "X plays B in C".

    The left conjunct runs back to the last verb, preposition, "including" or comma before
    "and"; the right one on to the next comma, time/place phrase, relative word or the end.
    "wrote and sang songs", "between A and B" and "both A and B" are not split.
    """
    for match in _AND.finditer(claim):
        if claim.count('"', 0, match.start()) % 2:
            continue
        before = list(WORD.finditer(claim, 0, match.start()))
        after = list(WORD.finditer(claim, match.end()))
        if not before or not after or opens_with_verb([m.group().lower() for m in after[:3]]):
            continue
        if after[0].group().lower() in PREPOSITIONS | _PP_SPLIT:
            continue  # "Minister for A and for B" / "and as ...": the head is unclear
        if _maybe_verb_phrase(after):
            continue  # "lowers X and improves Y" with a verb outside the lists: unsure, keep whole
        if is_verb(before[-1].group().lower()) or not has_verb(claim[: match.start()]):
            continue
        start = None
        for k in range(len(before) - 1, -1, -1):
            m = before[k]
            word = m.group().lower()
            if "," in claim[m.end() : match.start()] or word in _NOT_COORDINATED:
                break  # a comma list is rule 3's; "between A and B" is one fact
            if is_verb(word) or word in PREPOSITIONS or word in _PP_SPLIT or word in LIST_INTROS or (
                word in _OTHER_PREPOSITIONS
            ):
                start = m.end()
                if (
                    word == "of" and after[0].group().lower() in _DETERMINERS
                    and k and before[k - 1].end() > first_verb_end(claim)
                ):
                    # "the son of A and the brother of B": coordinate the noun phrases, back to
                    # the determiner after the main verb ("is a major cause of A and a risk factor
                    # for B"; "cause" there is a noun); none found: unsure, no split.
                    start = None
                    main = first_verb_end(claim)
                    for j in range(k - 1, -1, -1):
                        if before[j].start() < main:
                            break
                        if before[j].group().lower() in _DETERMINERS:
                            start = before[j].start()
                            break
                break
        if start is None or not claim[start : match.start()].strip():
            continue
        end = len(claim)
        for m in after[1:]:
            word = m.group().lower()
            if "," in claim[after[0].start() : m.start()]:
                end = after[0].start() + claim[after[0].start() : m.start()].index(",")
                break
            if (word in _PP_SPLIT or word in _CONJUNCT_STOP) and m.group().islower():
                end = m.start()
                break
        head, tail = claim[:start].rstrip(), claim[end:].strip()
        left = claim[start : match.start()].strip()
        right = claim[match.end() : end].strip()
        if (
            before[-1].group()[:1].isupper() and after[0].group()[:1].isupper()
            and words(claim[:start])[-1:] == ["of"]
        ):
            continue  # "The College of William and Mary": one name
        if words(left)[:1] in (["a"], ["an"]) and needs_article(words(right)[:2]):
            right = f"{_article(right)} {right}"  # "an actress and singer" -> "a singer"
        sep = "" if tail[:1] in (",", ".", ";", "") else " "
        # The tail goes with the right conjunct only ("an actress and singer born in X").
        return [f"{head} {left}", f"{head} {right}{sep}{tail}"]
    return None


def _maybe_verb_phrase(after: list[re.Match[str]]) -> bool:
    """True when the words after "and" may open a verb phrase ("improves insulin sensitivity"):
    a lowercase "-s" word (not "-ss", "-us", "-is") not followed by a preposition."""
    word = after[0].group()
    if not word.islower() or len(word) < 4 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return False
    return len(after) > 1 and after[1].group().lower() not in PREPOSITIONS | _PP_SPLIT | {"and", "or"}


def first_verb_end(text: str) -> int:
    """End offset of the first verb of ``text`` (:func:`is_verb`), or 0 when it has none."""
    for match in WORD.finditer(text):
        if is_verb(match.group().lower()):
            return match.end()
    return 0


def _article(noun_phrase: str) -> str:
    """ "an" before a vowel letter, else "a" (a spelling rule, not a sound rule)."""
    return "an" if noun_phrase[:1].lower() in "aeiou" else "a"


_ADJ_SUFFIXES = ("al", "ic", "ous", "ive", "ful", "less", "able", "ible", "ary", "ian", "ese", "ish")


def _is_adjective(word: str) -> bool:
    """A modifier before a noun: "American", "Malaysian", "Hindi-language", "professional"."""
    low = word.lower()
    if low in _NOT_ADJECTIVES or not word.isalpha() and "-" not in word:
        return False
    return "-" in word or low.endswith(_ADJ_SUFFIXES) or (word[:1].isupper() and low.endswith("an"))


_NOT_ADJECTIVES = frozenset("former individual animal capital hospital journal festival".split())


_PAREN = re.compile(r"\s*\(([^()]*)\)")
_RANGE = re.compile(r"\s*(?:[–—-]|\bto\b)\s*")
_YEARISH = re.compile(r"(?:c\.\s*|circa\s*)?\d{3,4}\s*(?:AD|BC|BCE|CE)?")


def _parenthetical(claim: str) -> list[str] | None:
    """"X (born D; 1895 – 1968) is Y" -> "X is Y", "X was born D", "X was born in 1895", "X died in 1968".

    Only a parenthesis before the first verb that opens with "born" or holds a life span.
    """
    match = _PAREN.search(claim)
    if match is None or has_verb(claim[: match.start()]) or not words(claim[: match.start()]):
        return None
    subject = claim[: match.start()].strip()
    rest = f"{subject} {claim[match.end():].strip()}"
    found: list[str] = []
    for part in re.split(r"[;\x01]\s*", match.group(1).replace(_HIDDEN_COMMA, ",")):
        part = part.strip()
        if part.lower().startswith("born "):
            found.append(f"{subject} was {part}")
            continue
        ends = _RANGE.split(part)
        if len(ends) == 2 and all(re.search(r"\d{3,4}", e) for e in ends):
            for verb, end in zip(("was born", "died"), ends, strict=True):
                prep = "in" if _YEARISH.fullmatch(end.strip()) else "on"
                found.append(f"{subject} {verb} {prep} {end.strip()}")
    if not found:
        return None
    return [*found, rest]  # text order: the parenthesis comes before the predicate


# A title (capitalized words, or quoted) followed by its year: "the film Rashomon (1950)".
_DATED_TITLE = re.compile(
    r"(?:[\"“]([^\"”]+)[\"”]|([A-Z][\w'’&:-]*(?:\s+(?:(?:of|the|a|an|and|in|on|to|for|with|from|at|&)\s+)*"
    r"[A-Z0-9][\w'’&:-]*)*))\s*\(((?:1[5-9]|20)\d\d(?:\s*[–-]\s*(?:(?:1[5-9]|20)\d\d|\d\d|present))?)\)"
)


def _dated_title(claim: str) -> list[str] | None:
    """"He starred in Rashomon (1950)" -> "He starred in Rashomon", "Rashomon is from 1950".

    Only after the first verb (a year right after the subject is a life span).
    """
    for match in _DATED_TITLE.finditer(claim):
        if not has_verb(claim[: match.start()]):
            continue
        title = (match.group(1) or match.group(2)).strip()
        if not words(title):
            continue
        paren = claim.index("(", match.start())
        main = (claim[:paren].rstrip() + claim[match.end() :]).strip()
        # Text order: the words up to the title, its year, then the rest (whose first claim
        # repeats the first one and is dropped as a duplicate).
        years = re.split(r"\s*[–-]\s*", match.group(3))
        if len(years) == 2 and len(years[1]) == 2:
            years[1] = years[0][:2] + years[1]  # "2005–09": the end year in the start's century
        dated = f"{title} is from {years[0]}" if len(years) == 1 else f"{title} ran from {years[0]} to {years[1]}"
        return [claim[:paren].rstrip(" ,"), dated, main]
    return None


_BORN_NAME = re.compile(r"([A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)*)\s*\((born\s[^()]*)\)")


# "Born in 1922 in Kenya, Itote became ...": a participle phrase before the subject, up to the
# last comma before the first verb after it (dates and places inside it have commas too).
_LEADING_PARTICIPLE = re.compile(
    r"(?:Born|Raised|Educated)\s+[^.;]*?,\s+(?=(?:[\w'’-]+\s+){0,5}?(?:is|are|was|were|has|have|had|"
    r"[a-z]+ed|" + "|".join(sorted(_IRREGULAR_PASTS)) + r")\b)"
)


# First words of a subject that is not the person a leading "Born ...," phrase is about.
_NOT_A_PERSON = frozenset(
    "the a an his her its their my our your this these that those many some most all several one it there "
    "who whom whose which where when what".split()
)


def _leading_participle(claim: str) -> list[str] | None:
    """"Born in 1922 in Kenya, Itote became a leader" -> "Itote was born in 1922 in Kenya", "Itote became a leader"."""
    match = _LEADING_PARTICIPLE.match(claim)
    if match is None:
        return None
    rest = claim[match.end() :]
    subject = subject_of(rest, (0, len(rest)))
    found = words(subject)
    person = bool(found) and (found[0] in ("he", "she", "they", "i", "we") or (
        subject[:1].isupper() and found[0] not in _NOT_A_PERSON))
    if not person or has_verb(subject) or "and" in found:
        return None  # "Born in 1950, his father was ...", "Born in Paris, where ...": not about the subject
    phrase = claim[: match.end()].rstrip(" ,")
    participle, _, where = phrase.partition(" ")
    return [f"{subject[:1].upper()}{subject[1:]} was {participle.lower()} {where}", rest[:1].upper() + rest[1:]]


def _born_after_verb(claim: str) -> list[str] | None:
    """"They have a son, Keykhosrow (born 1971)" -> "They have a son, Keykhosrow", "Keykhosrow was born 1971".

    Only after the first verb.
    """
    for match in _BORN_NAME.finditer(claim):
        if not has_verb(claim[: match.start()]):
            continue
        paren = claim.index("(", match.start())
        born = match.group(2).replace(_HIDDEN_COMMA, ",")
        main = (claim[:paren].rstrip() + claim[match.end() :]).strip()
        return [claim[:paren].rstrip(" ,"), f"{match.group(1)} was {born}", main]
    return None


_PLACE_NAME = r"[A-Z][\w'’.-]*(?:\s+(?:(?:of|de|da|del|do|on|upon)\s+)?[A-Z][\w'’.-]*)*"
# "in Yanai, Yamaguchi, Japan" at the end of a claim: a place, then the places that contain it.
_PLACE_CHAIN = re.compile(rf"\b(?:in|at|from|near)\s+({_PLACE_NAME})((?:,\s+{_PLACE_NAME})+)\s*([.!]?)\Z")


def _place_chain(claim: str) -> list[str] | None:
    """"He was born in Yanai, Yamaguchi, Japan." -> "He was born in Yanai", "Yanai is in Yamaguchi", "Yamaguchi is in Japan.".

    A place followed by commas and capitalized names ending the claim.
    """
    match = _PLACE_CHAIN.search(claim)
    if match is None or not has_verb(claim[: match.start()]):
        return None
    places = [match.group(1), *(p.strip() for p in match.group(2).split(",")[1:])]
    if any(is_verb(w) for p in places for w in words(p)):
        return None
    out = [claim[: match.start(2)].rstrip(" ,")]
    out += [f"{inner} is in {outer}" for inner, outer in zip(places, places[1:])]
    out[-1] += match.group(3)
    return out


# A quoted title right after the noun it names: 'the reality TV show "New Zealand Idol"'.
_NAMED = re.compile(
    r"\b([a-z][\w'-]*)\s+([\"“][A-Z][^\"”]*[\"”]"
    r"|[A-Z][\w'’.&-]*(?:\s+(?:(?:of|the|and|de|&)\s+)*[A-Z0-9][\w'’.&-]*)*)"
)
_NOT_NOUN = frozenset(
    "and or but nor the a an his her its their our my your as than include includes included "
    "called titled entitled named nicknamed dubbed known".split()
)
# Not a noun before a name: quantifiers, numerals, ordinals, "former", name particles ("van").
_NOT_HEAD_NOUN = frozenset(
    "former several two three four five six seven eight nine ten first second third fourth fifth last "
    "other another multiple various numerous both one many some few all each every now ever "
    "van von der den des del de da di du la le to who which that where when while into onto upon "
    "without throughout across against toward towards under over near alongside through during after "
    "before since until among within around behind beyond beside besides despite except per versus via "
    "than then also".split()
)
_DETERMINED = re.compile(r"(?:the|a|an|his|her|its|their)\s", re.IGNORECASE)


def _ends_phrase(rest: str) -> bool:
    """True when ``rest`` (the text after a name) starts a new phrase: nothing, punctuation, or a function word or verb."""
    following = words(rest)[:1]
    return not rest.strip() or rest.lstrip()[:1] in ",.;:!?)" or (
        bool(following) and (following[0] in PREPOSITIONS or following[0] in _NOT_NOUN
                             or following[0] in _NOT_HEAD_NOUN or is_verb(following[0]))
    )


def paren_depth(text: str, at: int) -> int:
    """Parenthesis depth of ``text`` just before offset ``at``."""
    return text.count("(", 0, at) - text.count(")", 0, at)


def _named_title(claim: str) -> list[str] | None:
    """'He won the show "Idol" in 2004' -> 'He won the show', 'The show is "Idol"', 'He won the show in 2004'.

    A common noun then a quoted (or, after a determiner, capitalized) name, after the first verb,
    when the noun phrase before it is found; the words after the title make a third claim.
    """
    for match in _NAMED.finditer(claim):
        noun = match.group(1).lower()
        before = claim[: match.end(1)]
        if noun in _NOT_NOUN or noun in PREPOSITIONS or noun in LIST_INTROS or is_verb(noun):
            continue
        if not has_verb(before) or claim.count('"', 0, match.start(2)) % 2:
            continue
        phrase = _last_noun_phrase(before)
        if not phrase or has_verb(phrase):
            continue
        if match.group(2)[0] not in "\"“" and (
            noun in _NOT_HEAD_NOUN or noun.endswith(("ing", "ly")) or _is_adjective(noun)
            or not _DETERMINED.match(phrase) or paren_depth(claim, match.start(2))
        ):
            continue  # an unquoted name: only after "the/his ... <noun>" ("the band The Living End")
        if match.group(2)[0] not in "\"“" and not _ends_phrase(claim[match.end(2) :]):
            continue  # "the reality TV show": the capitals are inside the noun phrase
        first, _, rest_words = phrase.partition(" ")
        if first.lower() in ("a", "an"):
            phrase = f"the {rest_words}"
        title = match.group(2)
        out = [before, f"{phrase[:1].upper()}{phrase[1:]} is {title}"]
        rest = claim[match.end(2) :]
        if words(rest):
            out.append(f"{before}{rest}")  # the title's words are the naming claim's own
        return out
    return None


_HIDDEN_COMMA = "\x00"  # rules.py hides "," and ";" inside brackets as \x00 and \x01
_SPLITS = (
    _leading_participle,
    _parenthetical,
    _dated_title,
    _born_after_verb,
    _named_title,
    _place_chain,
    _insert_after_subject,
    _trailing_relative,
    _trailing_participle,
    _coordination,
)


def refine(claim: str, depth: int = 0) -> list[str]:
    """Rule 4 of :mod:`dahl.adapters._rules` on one claim: the claims it holds, in text order,
    at least one.

    Parentheses, comma modifiers and "and" conjuncts first (recursively, at most 8 levels,
    ``depth`` being the current one), then time/place/agent phrases.
    """
    if depth < 8:
        for rule in _SPLITS:
            parts = rule(claim)
            if parts is not None:
                return [c for part in parts for c in refine(part.strip(" ,;"), depth + 1)]
    return _prepositions(claim) or [claim]
