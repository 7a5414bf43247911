"""What the mock server says to ``dahl refs build``: fact extraction and rating, deterministically.

The refs prompts (:mod:`dahl.refs._prompts`) delimit their data with tags: an extraction
user message holds ``<title>`` and ``<source_text>``; a rating user message holds
``<question>`` and ``<facts>`` (one ``N. fact`` line per fact). Replies are JSON in every
mode, so a test can compute them by hand:

- extraction: the source text's sentences (:func:`bench.mock_reply.sentences` rules:
  split after ``.``/``!``/``?`` and whitespace), ``{"facts": [...]}``;
- rating: for each numbered fact, relevance = 1 + min(4, shared words), where shared
  words are the distinct lowercase words of 4 or more letters/digits (``[a-z0-9]{4,}``)
  in both the fact and the question; salience = 1 + min(4, words // 4), with words the
  fact's ``\\w+`` tokens; ``{"ratings": [{"id", "relevance", "salience"}, ...]}``.
  A fact holding :data:`SKIP_WORD` is left out of a reply rating more than one fact
  (a count mismatch, which dahl answers by asking each fact alone).
"""

from __future__ import annotations

import json
import re

from dahl.records import normalize_text

__all__ = ["KINDS", "SKIP_WORD", "classify", "rating", "reply_content", "tagged_block"]

#: A fact holding this word is not rated in a batch of several facts.
SKIP_WORD = "MOCKSKIP"

#: Request kinds this module answers.
KINDS = ("extract", "rate")

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LONG_WORD = re.compile(r"[a-z0-9]{4,}")
_WORD = re.compile(r"\w+")
_NUMBERED = re.compile(r"^\s*\d+\.\s+")


def tagged_block(tag: str, text: str) -> str | None:
    """Content of the last ``<tag>`` block of ``text`` (one newline trimmed each side), or None."""
    opening, closing = f"<{tag}>\n", f"\n</{tag}>"
    start = text.rfind(opening)
    if start < 0:
        return None
    end = text.find(closing, start + len(opening))
    return None if end < 0 else text[start + len(opening) : end]


def classify(text: str) -> tuple[str, str | None, str] | None:
    """``(kind, question or title, data)`` of a refs user message, or None for other prompts."""
    source = tagged_block("source_text", text)
    if source is not None:
        return "extract", tagged_block("title", text), source
    facts = tagged_block("facts", text)
    if facts is not None:
        return "rate", tagged_block("question", text), facts
    return None


def rating(question: str, fact: str) -> tuple[int, int]:
    """The mock's (relevance, salience) of ``fact`` for ``question`` (see the module docstring)."""
    shared = set(_LONG_WORD.findall(fact.lower())) & set(_LONG_WORD.findall(question.lower()))
    return 1 + min(4, len(shared)), 1 + min(4, len(_WORD.findall(fact)) // 4)


def reply_content(kind: str, question: str | None, data: str) -> str:
    """The JSON reply to an ``extract`` or ``rate`` request."""
    if kind == "extract":
        facts = [part for part in _SENTENCE_END.split(normalize_text(data)) if part]
        return json.dumps({"facts": facts}, ensure_ascii=False)
    facts = [_NUMBERED.sub("", line) for line in data.split("\n") if line.strip()]
    ratings = []
    for n, fact in enumerate(facts, 1):
        if SKIP_WORD in fact and len(facts) > 1:
            continue
        relevance, salience = rating(question or "", fact)
        ratings.append({"id": n, "relevance": relevance, "salience": salience})
    return json.dumps({"ratings": ratings})
