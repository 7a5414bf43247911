"""Coverage judges: does an answer state a reference fact? ("Beyond Precision", coverage).

A judge labels each fact of F* ``covered``, ``partial`` or ``not_covered`` against one
finished answer. Three judges:

* :class:`ExactJudge` (``exact``): a fact is covered iff its normalized text
  (:func:`~dahl.records.normalize_text`: NFC, whitespace collapsed) equals the normalized
  text of one of the answer's *supported* claims. Deterministic; made for replayed
  labels, where a pooled reference set is the union of the answers' supported claims
  (FactRBench-style pooling), so each answer covers exactly its own supported facts.
* :class:`LexicalJudge` (``lexical``): offline content-word overlap. With ``T`` the set
  of the fact's index terms (:func:`dahl.adapters._corpus.analyze`: lower-cased,
  stopword-free, stemmed; numbers kept) and ``R`` those of the response, the overlap is
  ``|T ∩ R| / |T|``: ≥ :data:`LEXICAL_COVERED` (0.8) covered, ≥ :data:`LEXICAL_PARTIAL`
  (0.5) partial, else not covered. A fact with no index terms is covered iff its
  lower-cased text occurs in the lower-cased response.
* the ``openai`` LLM judge, in :mod:`dahl.adapters._coverage_llm`.

Cheap judges are ``cacheable = False``: :mod:`dahl.cache._coverage` calls them directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import anyio
import msgspec

from dahl.records import AnswerResult, Coverage, Label, normalize_text

__all__ = [
    "COVERAGE_JUDGES",
    "LEXICAL_COVERED",
    "LEXICAL_PARTIAL",
    "CoverageJudge",
    "ExactJudge",
    "Judgement",
    "LexicalJudge",
]

#: Names of ``--coverage``.
COVERAGE_JUDGES: tuple[str, ...] = ("exact", "lexical", "openai")

#: Share of a fact's index terms the response must hold for ``covered`` (lexical judge).
LEXICAL_COVERED = 0.8
#: Share of a fact's index terms the response must hold for ``partial`` (lexical judge).
LEXICAL_PARTIAL = 0.5


class Judgement(msgspec.Struct, frozen=True, kw_only=True):
    """A judge's decision on one fact.

    Attributes:
        label: covered / partial / not_covered, or ``error`` (the judge failed for this fact).
        raw: the model's raw reply, if any.
        error: ``"ClassName: message"`` when ``label`` is ``error``.
    """

    label: Coverage
    raw: str | None = None
    error: str | None = None


@runtime_checkable
class CoverageJudge(Protocol):
    """Labels the coverage of reference facts by one answer.

    Attributes:
        fingerprint: stable string naming the judge and every setting that changes its
            labels (goes into coverage cache keys and the run fingerprint).
        cacheable: False for cheap deterministic judges (never cached).
        parser_version: version of its output parser (stored beside a cached label).
    """

    fingerprint: str
    cacheable: bool
    parser_version: str

    async def judge(self, result: AnswerResult, facts: Sequence[str]) -> list[Judgement]:
        """Label each fact of ``facts`` (normalized texts) against ``result``.

        Returns:
            One judgement per fact, in order (``len(out) == len(facts)``).

        Raises:
            AdapterError: the call failed (the Coverer labels these facts ``error``);
                QuotaExhausted / FatalAPIError stop the run.
        """
        ...


class ExactJudge:
    """Covered iff the fact's normalized text is one of the answer's supported claims.

    Attributes:
        fingerprint: ``"exact/v1"``.
        cacheable: False.
    """

    fingerprint = "exact/v1"
    cacheable = False
    parser_version = "1"

    async def judge(self, result: AnswerResult, facts: Sequence[str]) -> list[Judgement]:
        """See :class:`CoverageJudge`; never raises."""
        supported = {normalize_text(c.text) for c in result.claims if c.label is Label.SUPPORTED}
        return [
            Judgement(label=Coverage.COVERED if normalize_text(f) in supported else Coverage.NOT_COVERED)
            for f in facts
        ]


class LexicalJudge:
    """Offline content-word overlap of each fact with the response (thresholds in the module docstring).

    Attributes:
        fingerprint: names the thresholds, e.g. ``"lexical/v1|covered=0.8|partial=0.5"``.
        cacheable: False.
    """

    cacheable = False
    parser_version = "1"

    def __init__(self, covered: float = LEXICAL_COVERED, partial: float = LEXICAL_PARTIAL) -> None:
        if not 0.0 < partial <= covered <= 1.0:
            raise ValueError(f"need 0 < partial <= covered <= 1, got partial={partial}, covered={covered}")
        self._covered = covered
        self._partial = partial
        self.fingerprint = f"lexical/v1|covered={covered!r}|partial={partial!r}"

    def label(self, fact: str, response_terms: set[str], response: str) -> Coverage:
        """The label of ``fact`` given the response's index terms (and lower-cased text)."""
        from dahl.adapters._corpus import analyze  # bm25s and a stemmer: loaded on first use, in the thread

        terms = set(analyze(fact))
        if not terms:
            return Coverage.COVERED if normalize_text(fact).lower() in response else Coverage.NOT_COVERED
        share = len(terms & response_terms) / len(terms)
        if share >= self._covered:
            return Coverage.COVERED
        return Coverage.PARTIAL if share >= self._partial else Coverage.NOT_COVERED

    def labels(self, response: str, facts: Sequence[str]) -> list[Judgement]:
        """The judgements of ``facts`` against ``response`` (blocking: stemming is CPU work)."""
        from dahl.adapters._corpus import analyze

        text = normalize_text(response).lower()
        terms = set(analyze(text))
        return [Judgement(label=self.label(f, terms, text)) for f in facts]

    async def judge(self, result: AnswerResult, facts: Sequence[str]) -> list[Judgement]:
        """See :class:`CoverageJudge`; never raises. Runs in a worker thread (off the event loop)."""
        return await anyio.to_thread.run_sync(self.labels, result.response, list(facts))
