"""The offline ``evidence`` Checker: BM25 retrieval over a local corpus plus a learned support model.

Decision for one claim (thresholds are :class:`EvidenceSettings`):

1. **Retrieve** the BM25 top ``top_k`` passages for question + claim (or the claim alone),
   only in the documents of ``answer.meta["evidence_ids"]`` when given and ``restrict``.
2. **Nothing found → unknown**: no hit, or the best score is below ``min_score``.
3. **Content terms.** No content word → irrelevant; with ``discount_question``, a claim whose
   own span adds no content term to the question → irrelevant.
4. **Off-topic → unknown** (whole corpus searched): no kept passage holds ``on_topic`` of the
   question's content idf weight and none ``unknown_below`` of the claim's added terms'.
5. **Stated → supported**: one sentence of a kept passage holds ``stated_share`` of the
   claim's content terms and no veto applies.
6. **Model**: the passage with the highest P(supports) decides: supported at or above
   ``support_threshold``, else contradicted when P(refutes) ≥ P(neutral), else not stated.
7. **Vetoes**: a supported claim is unsupported when that passage lacks one of its numbers
   (contradicted when the closest sentence gives a number instead, else not stated), holds the
   opposite of one of its words, or a sentence with ≥ 80 % of its content terms has the other
   negation polarity (both contradicted).

The verdict keeps the best ``n_evidence`` passages as evidence and a one-line reason in ``raw``;
an unsupported verdict's ``reason`` is ``contradicted`` or ``no_evidence`` (not stated).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import anyio
import anyio.to_thread
import numpy as np

from dahl.adapters._corpus import Corpus, Hit, analyze
from dahl.adapters._lexicon import NON_CONTENT
from dahl.adapters._support import FEATURE_NAMES, SupportModel, load_support_model, numbers_with_units, pair_features
from dahl.adapters._support import claim_terms as claim_terms_of
from dahl.errors import ConfigError
from dahl.records import Answer, Claim, Evidence, Label, UnsupportedReason, Verdict, normalize_text

__all__ = ["Assessment", "EvidenceChecker", "EvidenceSettings", "evidence_ids"]

logger = logging.getLogger(__name__)

_ADDED_SHARE = FEATURE_NAMES.index("added_share_idf")
_NUMBER_MISSING = FEATURE_NAMES.index("number_missing_share")
_ANTONYM = FEATURE_NAMES.index("antonym_conflicts")
_NEGATION_SHARE = FEATURE_NAMES.index("negation_mismatch_x_share")
_SHARE_IDF = FEATURE_NAMES.index("content_share_idf")
_SENTENCE_SHARE = FEATURE_NAMES.index("sentence_share")


@dataclass(frozen=True)
class Assessment:
    """The decision on one claim with its intermediate figures.

    Attributes:
        coverage: idf-weighted share of the claim's content terms in the deciding passage, in
            [0, 1]; None when no passage decided.
        reason: one-line account of the decision (goes into ``Verdict.raw``).
        hits: the evidence passages kept (best first, at most ``n_evidence``).
        probabilities: (P supports, P refutes, P neutral) for the deciding passage, float64
            array of shape (3,); None when the model was not consulted.
        stated: supported by the ``stated_share`` rule, not by the model.
        unsupported: for an ``unsupported`` claim, whether the passage contradicts it or does
            not state it (``no_evidence``); None for every other label.
    """

    label: Label
    coverage: float | None
    reason: str
    hits: tuple[Hit, ...]
    probabilities: np.ndarray | None = None
    stated: bool = False
    unsupported: UnsupportedReason | None = None


@dataclass(frozen=True)
class EvidenceSettings:
    """Thresholds of the evidence Checker (see the module docstring for the rule).

    Attributes:
        top_k: passages retrieved per claim (>= 1).
        n_evidence: best passages the model scores (1 <= n_evidence <= top_k).
        use_question: query with question + claim (True) or the claim alone.
        restrict: honour ``answer.meta["evidence_ids"]`` (search only those documents).
        discount_question: a claim adding no content term to its question is irrelevant.
        support_threshold: P(supports) at or above which a claim is supported, in [0, 1].
        unknown_below: added-terms idf share below which an unrestricted search gives
            unknown, in [0, 1].
        min_score: best BM25 score below which the claim is unknown (unitless, >= 0).
        on_topic: question idf share a kept passage must hold to exempt it from rule 4, in
            [0, 1]; None turns the exemption off.
        stated_share: share of the claim's content terms one sentence must hold for rule 5,
            in [0, 1]; None turns the rule off.
    """

    top_k: int = 5
    n_evidence: int = 3
    use_question: bool = True
    restrict: bool = True
    discount_question: bool = True
    support_threshold: float = 0.35
    unknown_below: float = 0.2
    min_score: float = 0.0
    stated_share: float | None = 0.9
    on_topic: float | None = 0.5

    def __post_init__(self) -> None:
        """Validate ranges.

        Raises:
            ConfigError: a setting is out of range.
        """
        if self.top_k < 1 or not 1 <= self.n_evidence <= self.top_k:
            raise ConfigError(
                f"need top_k >= 1 and 1 <= n_evidence <= top_k, got {self.top_k}, {self.n_evidence}"
            )
        for name in ("support_threshold", "unknown_below", "stated_share", "on_topic"):
            value = getattr(self, name)
            if value is not None and not 0.0 <= value <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1], got {value}")
        if self.min_score < 0.0:
            raise ConfigError(f"min_score must be >= 0, got {self.min_score}")

    def tag(self) -> str:
        """Compact, stable text of every setting (goes into the fingerprint)."""
        return (
            f"k={self.top_k},n={self.n_evidence},q={int(self.use_question)},"
            f"r={int(self.restrict)},d={int(self.discount_question)},s={self.support_threshold:g},"
            f"u={self.unknown_below:g},m={self.min_score:g}"
            + ("" if self.stated_share is None else f",t={self.stated_share:g}")
            + ("" if self.on_topic is None else f",o={self.on_topic:g}")
        )


class EvidenceChecker:
    """Checker that judges claims against a local corpus, offline, in up to ``max_threads`` worker threads.

    Args:
        corpus: the indexed corpus (:func:`dahl.adapters._documents.open_corpus`).
        top_k, n_evidence, use_question, restrict, discount_question, support_threshold,
            unknown_below, min_score, stated_share, on_topic: see :class:`EvidenceSettings`.
        model: the support model; None = the one shipped in the package.

    Attributes:
        fingerprint: ``"evidence/v5:<corpus fingerprint>:<model digest>:<settings>"``.

    Raises:
        ConfigError: a setting is out of range, or the shipped model is missing or malformed.
    """

    cacheable = True
    #: "2": verdicts carry ``reason``; entries stored by "1" (without it) are checked again.
    parser_version = "2"
    #: ``cache_request`` holds document ids only: the key keeps the question and claim texts.
    cache_request_covers_input = False

    def __init__(
        self,
        corpus: Corpus,
        *,
        top_k: int = 5,
        n_evidence: int = 3,
        use_question: bool = True,
        restrict: bool = True,
        discount_question: bool = True,
        support_threshold: float = 0.35,
        unknown_below: float = 0.2,
        min_score: float = 0.0,
        stated_share: float | None = 0.9,
        on_topic: float | None = 0.5,
        max_threads: int = 1,
        model: SupportModel | None = None,
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
            stated_share=stated_share,
            on_topic=on_topic,
        )
        self.model = model if model is not None else load_support_model()
        self.fingerprint = f"evidence/v5:{corpus.fingerprint}:{self.model.digest}:{self.settings.tag()}"
        self._max_threads = max_threads
        self._limiter: anyio.CapacityLimiter | None = None

    def __repr__(self) -> str:
        """Show the fingerprint."""
        return f"<EvidenceChecker {self.fingerprint}>"

    def cache_request(
        self, claim: Claim, answer: Answer
    ) -> dict[str, list[str] | str | None]:
        """``{"doc_ids": [...] | None, "own": str | None}``: the evidence ids searched and the
        words the claim's span adds, what the verdict depends on beyond the claim (cache keys)."""
        return {"doc_ids": self._doc_ids(answer), "own": _own_text(claim, answer)}

    def _capacity(self) -> anyio.CapacityLimiter:
        # Created on first use: a limiter belongs to the running event loop.
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self._max_threads)
        return self._limiter

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Judge one claim in a worker thread (see the module docstring for the rule)."""
        return await anyio.to_thread.run_sync(
            self.check_sync, claim, answer, limiter=self._capacity()
        )

    def check_sync(self, claim: Claim, answer: Answer) -> Verdict:
        """Blocking form of :meth:`check`."""
        a = self.assess(claim, answer)
        evidence = tuple(
            Evidence(text=h.passage.text, source=h.passage.doc_id, score=round(h.score, 4))
            for h in a.hits
        )
        return Verdict(label=a.label, checker=self.fingerprint, raw=a.reason, evidence=evidence,
                       reason=a.unsupported)

    def assess(self, claim: Claim, answer: Answer) -> Assessment:
        """Apply the decision and return its intermediate figures (blocking)."""
        s = self.settings
        claim_terms = analyze(claim.text)
        asked = analyze(answer.question) if answer.question else []
        query = claim_terms + asked if s.use_question else claim_terms
        doc_ids = self._doc_ids(answer)
        hits = self.corpus.search(query, k=s.top_k, doc_ids=doc_ids)
        if not hits or hits[0].score < s.min_score:
            best = f"{hits[0].score:.3g}" if hits else "none"
            return Assessment(Label.UNKNOWN, None, f"no passage found (best score {best})", ())
        kept = tuple(hits[: s.n_evidence])
        terms = claim_terms_of(claim.text, asked if s.discount_question else ())
        own = _own_text(claim, answer) if s.discount_question else None
        if own is not None:
            # Only the words the claim's own span adds are judged new; the head the
            # Splitter carried onto a phrase still counts for every other feature.
            owned = set(analyze(own))
            terms = replace(terms, added=tuple(t for t in terms.added if t in owned))
        if not terms.content:
            return Assessment(Label.IRRELEVANT, None, "claim has no content word", kept)
        if s.discount_question and not terms.added:
            return Assessment(Label.IRRELEVANT, None, "claim adds no term to the question", kept)
        query_idf = sum(self.corpus.idf(t) for t in dict.fromkeys(query))
        texts = [f"{h.passage.title} {h.passage.text}" for h in kept]
        rows = [
            pair_features(terms, text, h.passage.sentences, h.score, query_idf, self.corpus.idf)
            for text, h in zip(texts, kept, strict=True)
        ]
        x = np.stack([r[0] for r in rows])
        probs = self.model.probabilities(x)
        if (
            doc_ids is None
            and float(x[:, _ADDED_SHARE].max()) < s.unknown_below
            and not self._on_topic(asked, texts)
        ):
            note = f"best share of the claim's words {float(x[:, _ADDED_SHARE].max()):.3f}"
            return Assessment(Label.UNKNOWN, None, f"off-topic: {note}", kept, probs[0])
        stated = self._stated(x, rows)
        if stated is not None:
            return Assessment(
                Label.SUPPORTED, float(x[stated, _SHARE_IDF]),
                f"passage {kept[stated].passage.id} states it: {x[stated, _SENTENCE_SHARE]:.0%} of its content "
                f"words in one sentence, same numbers, negation and opposites "
                f"(P supports={probs[stated, 0]:.2f}); sentence: {rows[stated][1][:160]!r}",
                kept, probs[stated], stated=True,
            )
        # The passage most likely to support the claim decides (a passage about
        # something else must not refute it).
        top_row = int(np.argmax(probs[:, 0]))
        p = probs[top_row]
        label = Label.SUPPORTED if p[0] >= s.support_threshold else Label.UNSUPPORTED
        veto = _veto(x[top_row])
        if veto and label == Label.SUPPORTED:
            why = UnsupportedReason.CONTRADICTED
            if veto == _LACKS_NUMBER:  # contradicted only when its closest sentence gives a number instead
                claim_numbers = {n for n, _ in terms.numbers}
                if any(n not in claim_numbers for n, _ in numbers_with_units(rows[top_row][1])):
                    veto += " and its closest sentence gives another"
                else:
                    why = UnsupportedReason.NO_EVIDENCE
            return Assessment(
                Label.UNSUPPORTED, float(x[top_row, _SHARE_IDF]),
                f"passage {kept[top_row].passage.id} {veto} (P supports={p[0]:.2f})", kept, p, unsupported=why,
            )
        cls = 0 if label == Label.SUPPORTED else (1 if p[1] >= p[2] else 2)
        top = ", ".join(f"{n} {v:+.2f}" for n, v in self.model.contributions(x[top_row], cls)[:3])
        verdict = ("supports", "contradicts", "does not state")[cls]
        note = (
            f"passage {kept[top_row].passage.id} {verdict} it (P supports={p[0]:.2f} refutes={p[1]:.2f} "
            f"neutral={p[2]:.2f}; top: {top})"
        )
        if rows[top_row][1]:
            note += f"; closest sentence: {rows[top_row][1][:160]!r}"
        return Assessment(label, float(x[top_row, _SHARE_IDF]), note, kept, p,
                          unsupported=(None, UnsupportedReason.CONTRADICTED, UnsupportedReason.NO_EVIDENCE)[cls])

    def _on_topic(self, asked: Sequence[str], texts: Sequence[str]) -> bool:
        """Whether a kept passage holds ``on_topic`` of the idf weight of the question's content
        terms; asking words ("please", "explain") do not count."""
        limit = self.settings.on_topic
        wanted = [t for t in dict.fromkeys(asked) if t not in NON_CONTENT and t not in _ASKING]
        total = sum(self.corpus.idf(t) for t in wanted)
        if limit is None or total <= 0:
            return False
        for text in texts:
            have = set(analyze(text))
            if sum(self.corpus.idf(t) for t in wanted if t in have) / total >= limit:
                return True
        return False

    def _stated(self, x: np.ndarray, rows: Sequence[tuple[np.ndarray, str]]) -> int | None:
        """Row of the first kept passage one sentence of which states the claim with no veto, or None."""
        limit = self.settings.stated_share
        if limit is None:
            return None
        for i, (row, sentence) in enumerate(rows):
            if sentence and row[_SENTENCE_SHARE] >= limit and _veto(row) is None:
                return i
        return None

    def _doc_ids(self, answer: Answer) -> list[str] | None:
        return evidence_ids(answer) if self.settings.restrict else None


def evidence_ids(answer: Answer) -> list[str] | None:
    """The documents ``answer.meta["evidence_ids"]`` restricts the search to, or None (all)."""
    ids = answer.meta.get("evidence_ids") if answer.meta else None
    return [str(i) for i in ids] if isinstance(ids, list) else None


#: Index terms of words that ask for an answer instead of naming what it is about.
_ASKING = frozenset(
    t
    for w in "please tell explain describe answer briefly brief detail detailed help give list discuss "
    "summarize summarise know question".split()
    for t in analyze(w)
)


_LACKS_NUMBER = "lacks a number of the claim"


def _veto(x: np.ndarray) -> str | None:
    """Why a passage cannot support the claim whatever the model says, or None."""
    if x[_NUMBER_MISSING] > 0:
        return _LACKS_NUMBER
    if x[_ANTONYM] > 0:
        return "says the opposite of a claim word"
    if x[_NEGATION_SHARE] >= 0.8:
        return "differs in negation"
    return None


def _own_text(claim: Claim, answer: Answer) -> str | None:
    """``answer.response[claim.span]`` when, normalized, it occurs in the claim's text, else None."""
    if claim.span is None:
        return None
    start, end = claim.span
    if not 0 <= start < end <= len(answer.response):
        return None
    own = normalize_text(answer.response[start:end]).strip(" ,;.")
    return own if own and own in claim.text else None
