"""The offline ``evidence`` Checker: BM25 retrieval over a local corpus plus a lexical support rule.

This module holds the product's offline judgement of a claim. It calls no
model: it asks whether the best passages of a local :class:`~dahl.adapters.corpus.Corpus`
say what the claim says, word for word after light normalization.

Decision, for one claim (all thresholds are :class:`EvidenceChecker` parameters):

1. **Retrieve.** Query = the answer's question + the claim (``use_question=True``,
   the default) or the claim alone; BM25 top ``top_k`` passages. When
   ``answer.meta["evidence_ids"]`` is a list of document ids and
   ``restrict=True``, only those documents are searched.
2. **Nothing found → unknown.** No passage shares a term with the query, or
   the best BM25 score is below ``min_score``.
3. **Content terms.** The claim's terms (:func:`~dahl.adapters.corpus.analyze`:
   lowercase, punctuation dropped, Snowball-stemmed so plurals and suffixes
   fold, numbers kept whole) minus function words and hedging/reporting words
   ("suggest", "indicate", "results", "may": they say how a finding is
   asserted, not what it asserts; Hyland 1998). A claim with no content term →
   irrelevant. With ``discount_question`` (default) only the words the claim
   adds are judged: the terms of its own text (``answer.response[claim.span]``
   when that text occurs in the claim, so a subject or head the Splitter
   carried onto a phrase is not judged again; the whole claim otherwise) that
   are not in the question. A claim that adds no such term only restates the
   question: a word-overlap rule cannot check it (the question's words are in
   its evidence whatever the answer says), so it is irrelevant.
4. **One passage.** Each of the best ``n_evidence`` passages is weighed on its
   own: terms scattered over several passages do not support a claim. A passage
   is on topic when it holds at least half of the claim's terms that also occur
   in the question (the claim's subject); the on-topic passage with the highest
   coverage is chosen. Coverage = Σ idf(t) over judged claim terms found in that
   passage / Σ idf(t) over all judged terms, idf being the corpus BM25 idf, so a
   missing rare word ("calcium", "protease") costs more than a common one.
5. **Opposites.** A content term of the claim (any, not only the judged ones: a
   phrase claim's head counts) that the chosen on-topic passage lacks while it
   holds its opposite (positive/negative, higher/lower, safe/teratogenic, a short
   documented list) → unsupported, whatever the coverage.
6. **Off-topic → unknown.** Coverage below ``unknown_below`` when the whole
   corpus was searched: the corpus does not talk about this claim. When the
   answer named its own evidence documents, low coverage means those documents
   do not say it, and the claim goes on to be judged (unsupported). No on-topic
   passage at all → unsupported. Then every number the claim adds must appear in
   the chosen passage exactly ("2.5" ≠ "5", "type 1" ≠ "type 2") → else unsupported.
7. **Negation.** The sentence of the chosen passage sharing most of the claim's
   content terms is found, skipping sentences that assert nothing (aims such as
   "To determine whether ...", "The objective was ...", questions); if it holds
   at least ``negation_overlap`` of them and exactly one of claim and sentence
   carries a negation cue ("not", "no", "never", "without", "neither", "nor",
   "none", "cannot", "n't") → unsupported.
8. **Coverage ≥ ``support_threshold`` → supported, else unsupported.**

Defaults (``support_threshold`` 0.3, ``n_evidence`` 3, ``unknown_below`` 0.2,
``negation_overlap`` 0.8) were picked on the even rows of MedHallu
(``bench/offline_eval.py``); a low support threshold suits the rule because only
the terms the claim adds to the question are weighed, and true conclusions
reword their evidence. evidence/v3 with the rules/v5 Splitter, end to end
through ``dahl score`` on MedHallu pqa_labeled (``python -m bench.pairwise``):
pairwise accuracy 0.598 (598 wins, 125 ties of 1,000; even rows 0.618, odd rows
0.578), against 0.566 for a
plain token-overlap rule and 0.487 for evidence/v2 with rules/v4. Most of the
gain comes from setting aside claims that only restate the question (step 3).

The verdict keeps the best ``n_evidence`` passages as evidence (text, document
id, BM25 score) and a one-line account of the decision in ``raw``.

This is a lexical proxy, not entailment: paraphrases score low and a claim
that reuses the evidence's words in a wrong relation scores high. Measured
figures are in ``bench/offline_eval.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import anyio
import anyio.to_thread

from dahl.adapters.corpus import Corpus, Hit, analyze
from dahl.adapters.lexicon import ANTONYMS as _ANTONYMS
from dahl.adapters.lexicon import NEGATION as _NEGATION
from dahl.adapters.lexicon import NON_ASSERTION as _NON_ASSERTION
from dahl.adapters.lexicon import NON_CONTENT as _NON_CONTENT
from dahl.adapters.lexicon import NUMBER as _NUMBER
from dahl.errors import ConfigError
from dahl.records import Answer, Claim, Evidence, Label, Verdict, normalize_text

__all__ = ["Assessment", "EvidenceChecker", "EvidenceSettings"]

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class Assessment:
    """The decision on one claim with its intermediate figures.

    Attributes:
        label: supported, unsupported, irrelevant or unknown.
        coverage: idf-weighted share of the judged claim terms found in the
            evidence, in [0, 1]; None when no evidence was found or the claim
            has no content term.
        reason: one-line account of the decision (goes into ``Verdict.raw``).
        hits: the evidence passages kept (best first, at most ``n_evidence``).
    """

    label: Label
    coverage: float | None
    reason: str
    hits: tuple[Hit, ...]


@dataclass(frozen=True)
class EvidenceSettings:
    """Thresholds of the evidence Checker (see the module docstring for the rule).

    Attributes:
        top_k: passages retrieved per claim (>= 1).
        n_evidence: best passages whose terms count as evidence (1 <= n_evidence <= top_k).
        use_question: query with question + claim (True) or the claim alone.
        restrict: honour ``answer.meta["evidence_ids"]`` (search only those documents).
        discount_question: judge coverage on the terms of the claim's own text
            that are not in the question (what the claim adds); a claim that adds
            none is irrelevant.
        support_threshold: idf-weighted coverage at or above which a claim is
            supported, in [0, 1].
        unknown_below: coverage below which the claim is unknown (off-topic), in [0, 1].
        min_score: best BM25 score below which the claim is unknown (unitless, >= 0).
        negation_overlap: share of the claim's content terms (unweighted, in
            [0, 1]) the closest evidence sentence must hold for a negation
            mismatch to count.
    """

    top_k: int = 5
    n_evidence: int = 3
    use_question: bool = True
    restrict: bool = True
    discount_question: bool = True
    support_threshold: float = 0.3
    unknown_below: float = 0.2
    min_score: float = 0.0
    negation_overlap: float = 0.8

    def __post_init__(self) -> None:
        """Validate ranges.

        Raises:
            ConfigError: a setting is out of range.
        """
        if self.top_k < 1 or not 1 <= self.n_evidence <= self.top_k:
            raise ConfigError(
                f"need top_k >= 1 and 1 <= n_evidence <= top_k, got {self.top_k}, {self.n_evidence}"
            )
        if not 0.0 <= self.unknown_below <= self.support_threshold <= 1.0:
            raise ConfigError(
                "need 0 <= unknown_below <= support_threshold <= 1, got "
                f"{self.unknown_below}, {self.support_threshold}"
            )
        if not 0.0 <= self.negation_overlap <= 1.0:
            raise ConfigError(f"negation_overlap must be in [0, 1], got {self.negation_overlap}")
        if self.min_score < 0.0:
            raise ConfigError(f"min_score must be >= 0, got {self.min_score}")

    def tag(self) -> str:
        """Compact, stable text of every setting (goes into the fingerprint)."""
        return (
            f"k={self.top_k},n={self.n_evidence},q={int(self.use_question)},"
            f"r={int(self.restrict)},d={int(self.discount_question)},s={self.support_threshold:g},"
            f"u={self.unknown_below:g},m={self.min_score:g},o={self.negation_overlap:g}"
        )


class EvidenceChecker:
    """Checker that judges claims against a local corpus, offline.

    Implements :class:`dahl.adapters.base.Checker`. CPU work (retrieval and
    the decision) runs in a worker thread under a capacity limiter, so the
    event loop never blocks.

    Args:
        corpus: the indexed corpus (:func:`dahl.adapters.corpus.load_corpus`).
        top_k, n_evidence, use_question, restrict, discount_question, support_threshold,
            unknown_below, min_score, negation_overlap: see :class:`EvidenceSettings`.
        max_threads: worker threads used at once (1 or 2 is plenty).

    Attributes:
        fingerprint: ``"evidence/v3:<corpus fingerprint>:<settings>"``.
        settings: the thresholds in force.

    Raises:
        ConfigError: a setting is out of range.
    """

    def __init__(
        self,
        corpus: Corpus,
        *,
        top_k: int = 5,
        n_evidence: int = 3,
        use_question: bool = True,
        restrict: bool = True,
        discount_question: bool = True,
        support_threshold: float = 0.3,
        unknown_below: float = 0.2,
        min_score: float = 0.0,
        negation_overlap: float = 0.8,
        max_threads: int = 1,
    ) -> None:
        if max_threads < 1:
            raise ConfigError(f"max_threads must be >= 1, got {max_threads}")
        self.corpus = corpus
        self.settings = EvidenceSettings(
            top_k=top_k,
            n_evidence=n_evidence,
            use_question=use_question,
            restrict=restrict,
            discount_question=discount_question,
            support_threshold=support_threshold,
            unknown_below=unknown_below,
            min_score=min_score,
            negation_overlap=negation_overlap,
        )
        self.fingerprint = f"evidence/v3:{corpus.fingerprint}:{self.settings.tag()}"
        self._max_threads = max_threads
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        """Show the fingerprint."""
        return f"<EvidenceChecker {self.fingerprint}>"

    def cache_request(
        self, claim: Claim, answer: Answer
    ) -> dict[str, list[str] | str | None]:
        """What the verdict depends on beyond fingerprint, question and claim (cache keys).

        Returns:
            ``{"doc_ids": [...], "own": ...}``: the ``meta["evidence_ids"]``
            retrieval is restricted to (None when unrestricted), and the words the
            claim adds (its span's text, see step 3 of the module docstring; None
            when the whole claim is judged). See :mod:`dahl.cache.keys`.
        """
        return {"doc_ids": self._doc_ids(answer), "own": _own_text(claim, answer)}

    def _capacity(self) -> anyio.CapacityLimiter:
        # Created on first use: a limiter belongs to the running event loop.
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_threads)
        return self._limiter

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Judge one claim in a worker thread.

        Args:
            claim: the claim.
            answer: its answer (question and ``meta["evidence_ids"]`` are read).

        Returns:
            A verdict labelled supported, unsupported, irrelevant or unknown.
        """
        return await anyio.to_thread.run_sync(
            self.check_sync, claim, answer, limiter=self._capacity()
        )

    async def check_batch(self, items: Sequence[tuple[Claim, Answer]]) -> list[Verdict]:
        """Judge many claims in one worker-thread hop (cheaper than one hop per claim).

        Args:
            items: (claim, answer) pairs, any number.

        Returns:
            One verdict per pair, in the same order.
        """
        return await anyio.to_thread.run_sync(
            self.check_many_sync, list(items), limiter=self._capacity()
        )

    def check_many_sync(self, items: Sequence[tuple[Claim, Answer]]) -> list[Verdict]:
        """Blocking form of :meth:`check_batch`; call it from a worker thread or a script."""
        return [self.check_sync(claim, answer) for claim, answer in items]

    def check_sync(self, claim: Claim, answer: Answer) -> Verdict:
        """Blocking form of :meth:`check`; call it from a worker thread or a script.

        Args:
            claim: the claim.
            answer: its answer.

        Returns:
            The verdict (see the module docstring for the rule).
        """
        a = self.assess(claim, answer)
        evidence = tuple(
            Evidence(text=h.passage.text, source=h.passage.doc_id, score=round(h.score, 4))
            for h in a.hits
        )
        return Verdict(label=a.label, checker=self.fingerprint, raw=a.reason, evidence=evidence)

    def assess(self, claim: Claim, answer: Answer) -> Assessment:
        """Apply the decision rule and return its intermediate figures (blocking).

        Args:
            claim: the claim.
            answer: its answer.

        Returns:
            The label with the coverage, the reason and the evidence passages kept.
        """
        s = self.settings
        claim_terms = analyze(claim.text)
        query = claim_terms + analyze(answer.question) if s.use_question else claim_terms
        doc_ids = self._doc_ids(answer)
        hits = self.corpus.search(query, k=s.top_k, doc_ids=doc_ids)
        if not hits or hits[0].score < s.min_score:
            best = f"{hits[0].score:.3g}" if hits else "none"
            return Assessment(Label.UNKNOWN, None, f"no passage found (best score {best})", ())
        kept = tuple(hits[: s.n_evidence])
        content = [t for t in dict.fromkeys(claim_terms) if t not in _NON_CONTENT]
        if not content:
            return Assessment(Label.IRRELEVANT, None, "claim has no content word", kept)
        judged = content
        owned = set(content)
        anchor: list[str] = []
        if s.discount_question:
            asked = set(analyze(answer.question))
            own = _own_text(claim, answer)
            owned = set(analyze(own)) if own is not None else owned
            judged = [t for t in content if t in owned and t not in asked]
            if not judged:
                return Assessment(Label.IRRELEVANT, None, "claim adds no term to the question", kept)
            anchor = [t for t in content if t in asked]
        weights = {t: self.corpus.idf(t) for t in judged}
        total = sum(weights.values())
        # One passage must say the claim: terms scattered over several passages do not
        # support it. A passage counts only if it is about the claim's subject, i.e. holds
        # at least half of the claim's terms that also occur in the question (the anchor).
        chosen: tuple[bool, float, set[str], Hit] | None = None
        for hit in kept:
            terms = set(analyze(f"{hit.passage.title} {hit.passage.text}"))
            on_topic = not anchor or 2 * sum(t in terms for t in anchor) >= len(anchor)
            share = sum(w for t, w in weights.items() if t in terms) / total
            if chosen is None or (on_topic, share) > chosen[:2]:
                chosen = (on_topic, share, terms, hit)
        assert chosen is not None  # kept is not empty
        on_topic, coverage, evidence_terms, best_hit = chosen
        missing = [t for t in judged if t not in evidence_terms]
        note = f"coverage={coverage:.3f} missing={missing} passage={best_hit.passage.doc_id}"
        # Over every content term, not only the judged ones: a phrase claim ("... safe
        # during pregnancy") is wrong when its head says the opposite of the passage; and
        # before the off-topic test, since a passage about the subject that holds the
        # opposite ("teratogenic") decides the claim even if it shares no judged word.
        opposed = [
            t for t in content if t not in evidence_terms and _ANTONYMS.get(t, frozenset()) & evidence_terms
        ]
        if on_topic and opposed:
            return Assessment(
                Label.UNSUPPORTED, coverage, f"evidence says the opposite of {opposed}: {note}", kept
            )
        if doc_ids is None and coverage < s.unknown_below:
            return Assessment(Label.UNKNOWN, coverage, f"off-topic: {note}", kept)
        if not on_topic:
            return Assessment(Label.UNSUPPORTED, coverage, f"no passage about the claim's subject: {note}", kept)
        bad_numbers = [
            t for t in content if t in owned and _NUMBER.search(t) and t not in evidence_terms
        ]
        if bad_numbers:
            return Assessment(
                Label.UNSUPPORTED, coverage, f"number not in evidence {bad_numbers}: {note}", kept
            )
        sentence, share = _closest_sentence(set(content), (best_hit,))
        negated = bool(_NEGATION.search(claim.text))
        if share >= s.negation_overlap and negated != bool(_NEGATION.search(sentence)):
            return Assessment(
                Label.UNSUPPORTED, coverage, f"negation differs from {sentence!r}: {note}", kept
            )
        label = Label.SUPPORTED if coverage >= s.support_threshold else Label.UNSUPPORTED
        return Assessment(label, coverage, note, kept)

    def _doc_ids(self, answer: Answer) -> list[str] | None:
        if not self.settings.restrict:
            return None
        ids = answer.meta.get("evidence_ids") if answer.meta else None
        if not isinstance(ids, list):
            return None
        return [str(i) for i in ids]


def _own_text(claim: Claim, answer: Answer) -> str | None:
    """The words the claim adds: ``answer.response[claim.span]`` when it lies inside the claim.

    A Splitter that carries a subject or head onto a phrase points the span at
    the phrase (rules/v5). The span text is used only when, normalized, it
    occurs in the claim's text, so a span into another version of the
    response (or no span) gives None: the whole claim is judged.
    """
    if claim.span is None:
        return None
    start, end = claim.span
    if not 0 <= start < end <= len(answer.response):
        return None
    own = normalize_text(answer.response[start:end]).strip(" ,;.")
    return own if own and own in claim.text else None


def _closest_sentence(terms: set[str], hits: Sequence[Hit]) -> tuple[str, float]:
    """Return the evidence sentence sharing most of ``terms`` and that share, in [0, 1].

    The first sentence wins ties; an empty ``terms`` gives share 0.
    """
    best, best_overlap = "", 0
    for hit in hits:
        for sentence in hit.passage.sentences:
            if _NON_ASSERTION.search(sentence):
                continue
            overlap = len(terms.intersection(analyze(sentence)))
            if overlap > best_overlap:
                best, best_overlap = sentence, overlap
    return best, (best_overlap / len(terms) if terms else 0.0)
