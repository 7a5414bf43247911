"""What the mock server says to ``dahl questions build``: question generation and the judge.

The prompts (:mod:`dahl.questions._prompts`) tag their data: a generation user message
holds ``<count>``, ``<article_title>`` and ``<article_text>``; a judge user message holds
``<exam_question>``. Replies are JSON in every mode and computable by hand:

- generation: with S the text's sentences (:func:`bench.mock_reply.sentences`) and W(s)
  a sentence's ``\\w+`` words, question k (0-based, k < count) is built from
  s = S[k mod |S|]: k mod 3 == 0: ``"What is known about <W(s)[:6]>?"``; k mod 3 == 1:
  ``"What did this study conclude about <first 5 title words>?"`` (a context question);
  k mod 3 == 2: ``"How does <W(s)[:3]> relate to clinical practice?"``;
- judge: h = blake2b-64 of the normalized question as an integer; answerable unless
  h mod 10 == 0; category CATEGORIES[h mod 30] with index 29 meaning ``"ambiguous"``;
  confidence (h mod 101) / 100.
"""

from __future__ import annotations

import hashlib
import json
import re

from bench.mock_refs import tagged_block
from dahl.questions._checks import CATEGORIES
from dahl.records import normalize_text

__all__ = ["KINDS", "classify", "judgement", "questions", "reply_content"]

#: Request kinds this module answers.
KINDS = ("questions", "judge")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")


def classify(text: str) -> tuple[str, str | None, str] | None:
    """``(kind, title or question, data)`` of a questions user message, or None for other prompts.

    Generation data is ``"<count>\\n<article text>"``.
    """
    article = tagged_block("article_text", text)
    if article is not None:
        return "questions", tagged_block("article_title", text) or "", f"{(tagged_block('count', text) or '1').strip()}\n{article}"
    question = tagged_block("exam_question", text)
    if question is not None:
        return "judge", question, question
    return None


def questions(title: str, text: str, count: int) -> list[str]:
    """The mock's questions for an article (see the module docstring)."""
    found = [part for part in _SENTENCE_END.split(normalize_text(text)) if part] or [title or "the topic"]
    title_words = " ".join(_WORD.findall(title)[:5]) or "the topic"
    out = []
    for k in range(count):
        words = _WORD.findall(found[k % len(found)])
        if k % 3 == 0:
            out.append(f"What is known about {' '.join(words[:6])}?")
        elif k % 3 == 1:
            out.append(f"What did this study conclude about {title_words}?")
        else:
            out.append(f"How does {' '.join(words[:3])} relate to clinical practice?")
    return out


def judgement(question: str) -> dict[str, object]:
    """The mock judge's ``{answerable, category, confidence}`` (see the module docstring)."""
    h = int.from_bytes(hashlib.blake2b(normalize_text(question).encode(), digest_size=8).digest(), "big")
    index = h % 30
    category = CATEGORIES[index] if index < len(CATEGORIES) else "ambiguous"
    return {"answerable": h % 10 != 0, "category": category, "confidence": (h % 101) / 100}


def reply_content(kind: str, question: str | None, data: str) -> str:
    """The JSON reply to a ``questions`` (question generation) or ``judge`` request."""
    if kind == "questions":
        count, _, text = data.partition("\n")
        return json.dumps({"questions": questions(question or "", text, max(int(count), 1))}, ensure_ascii=False)
    return json.dumps(judgement(data))


#: Sentences of the mock's articles; article n uses FACTS[n % 4] and FACTS[(n + 1) % 4].
FACTS = (
    "Aspirin irreversibly inhibits platelet cyclooxygenase.",
    "Metformin lowers hepatic glucose production.",
    "Vitamin B12 deficiency causes megaloblastic anaemia.",
    "Beta blockers reduce myocardial oxygen demand.",
)


def efetch_xml(raw_id: str) -> bytes:
    """The mock ``efetch`` reply (JATS) for PMC id ``raw_id`` (digits, ``PMC`` optional).

    Rule: id 0 (or not digits): an empty ``<pmc-articleset>`` (not found); an odd id:
    front matter only, no ``<body>`` (outside the Open Access subset, HTTP 200 as NCBI
    answers); an even id: title ``Mock article PMC<n>``, abstract FACTS[n % 4], body
    FACTS[(n + 1) % 4], licence ``CC BY 4.0`` (xlink:href
    ``https://creativecommons.org/licenses/by/4.0/``).
    """
    digits = raw_id.removeprefix("PMC")
    n = int(digits) if digits.isdigit() else 0
    if n == 0:
        return b'<?xml version="1.0"?>\n<pmc-articleset></pmc-articleset>\n'
    front = (f"<front><article-meta><article-id pub-id-type=\"pmc\">{n}</article-id>"
             f"<title-group><article-title>Mock article PMC{n}</article-title></title-group>"
             "<permissions><license xmlns:xlink=\"http://www.w3.org/1999/xlink\" "
             "xlink:href=\"https://creativecommons.org/licenses/by/4.0/\"><license-p>CC BY 4.0</license-p>"
             f"</license></permissions><abstract><p>{FACTS[n % 4]}</p></abstract></article-meta></front>")
    if n % 2:
        body = ("<!--The publisher of this article does not allow downloading of the full text in XML form.-->")
    else:
        body = (f"<body><sec><title>Introduction</title><p>{FACTS[(n + 1) % 4]}</p>"
                "<table-wrap><table><tr><td><p>table cell</p></td></tr></table></table-wrap></sec></body>")
    return (f'<?xml version="1.0"?>\n<pmc-articleset><article article-type="research-article">{front}{body}'
            "</article></pmc-articleset>\n").encode()
