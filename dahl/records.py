"""The data model: frozen msgspec Structs passed between pipeline stages.

An :class:`Answer` is split into :class:`Claim` s, each gets a :class:`Verdict`, and the
pipeline assembles an :class:`AnswerResult`.
"""

from __future__ import annotations

import enum
import hashlib
import unicodedata
from typing import Any

import msgspec

__all__ = [
    "LABELS", "Answer", "AnswerMetrics", "AnswerRecall", "AnswerResult", "Claim", "ClaimLabel",
    "Coverage", "FactResult", "FactMark", "FactSource", "RecallDigest", "RefFact", "RefSet",
    "ClaimResult", "Evidence", "GivenClaim", "Label", "ResultDigest", "Status",
    "UnsupportedReason", "Usage", "Verdict", "content_id", "normalize_text"
]


class Label(enum.StrEnum):
    """A claim's verdict label; ``unknown`` (undecided) and ``error`` (failed call or
    unparsable output) count as neither true nor false."""

    SUPPORTED = "supported"
    UNSUPPORTED = "unsupported"
    IRRELEVANT = "irrelevant"
    UNKNOWN = "unknown"
    ERROR = "error"


#: Column order of per-answer label-count arrays, shape (n_answers, 5).
LABELS: tuple[Label, ...] = tuple(Label)


class UnsupportedReason(enum.StrEnum):
    """Why a claim is unsupported ("Beyond Precision"): the evidence says otherwise, or does not say it."""

    CONTRADICTED = "contradicted"
    NO_EVIDENCE = "no_evidence"


class Coverage(enum.StrEnum):
    """Whether an answer states one reference fact ("Beyond Precision"); ``error`` (the judge
    failed) never counts as not covered."""

    COVERED = "covered"
    PARTIAL = "partial"
    NOT_COVERED = "not_covered"
    ERROR = "error"


class Status(enum.StrEnum):
    """What happened to one answer: ``scored`` (has a precision), ``abstained`` (noncommittal or
    so marked), ``excluded`` (no relevant claims, or an unknown/error verdict), ``error`` (split failed)."""

    SCORED = "scored"
    ABSTAINED = "abstained"
    EXCLUDED = "excluded"
    ERROR = "error"


def normalize_text(text: str) -> str:
    """Return ``text`` NFC-normalized with runs of whitespace collapsed to one space and stripped."""
    if not text.isascii():  # ASCII is NFC already
        text = unicodedata.normalize("NFC", text)
    # Fast path: every whitespace but the plain space is non-printable.
    if text.isprintable() and "  " not in text and text[:1] != " " and text[-1:] != " ":
        return text
    return " ".join(text.split())


def content_id(*parts: str) -> str:
    """Stable 16-hex-digit id (blake2b-64) of the normalized ``parts``, joined by NUL."""
    joined = "\x00".join(normalize_text(p) for p in parts)
    return hashlib.blake2b(joined.encode("utf-8"), digest_size=8).hexdigest()


class GivenClaim(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A claim supplied with the input, optionally with a human/gold label (replay Checker)."""

    text: str
    label: Label | None = None


class Answer(msgspec.Struct, frozen=True, kw_only=True):
    """One model response to one question.

    Attributes:
        id: unique id within the run (a content hash when the input has none).
        question: the prompt the model answered.
        response: the model's long-form answer.
        model: name of the model that answered; ``"unknown"`` if not given.
        category: question category (e.g. a DAHL domain); ``"all"`` if not given.
        claims: pre-split claims from the input (``given`` Splitter), or None.
        abstained: True when the input itself marks the answer as abstained.
        meta: free-form extra fields, carried through to the output.
    """

    id: str
    question: str
    response: str
    model: str = "unknown"
    category: str = "all"
    claims: tuple[GivenClaim, ...] | None = None
    abstained: bool = False
    meta: dict[str, Any] = {}


class Claim(msgspec.Struct, frozen=True, kw_only=True):
    """One atomic, checkable unit of an answer.

    Attributes:
        text: NFC-normalized, whitespace-collapsed claim text.
        index: 0-based position among its answer's claims.
        span: (start, end) character offsets into the preprocessed response, if known.
        sentence: 0-based index of the source sentence, if known.
        given_label: label supplied with the input (read by the replay Checker).
    """

    text: str
    index: int
    span: tuple[int, int] | None = None
    sentence: int | None = None
    given_label: Label | None = None


class Evidence(msgspec.Struct, frozen=True, kw_only=True):
    """A passage or URL a Checker actually used.

    Attributes:
        text: the snippet (may be empty for a bare URL).
        source: document id or URL.
        score: retrieval or support score, unit defined by the Checker.
        title: the document's or web page's title, when known.
        passage_id: id of the corpus passage (``"<doc_id>#<start>-<end>"``), when the snippet is one.
    """

    text: str = ""
    source: str | None = None
    score: float | None = None
    title: str | None = None
    passage_id: str | None = None


class Usage(msgspec.Struct, frozen=True, kw_only=True):
    """Tokens one call consumed, as reported by the server.

    Attributes:
        prompt_tokens: every prompt token, cached ones included.
        completion_tokens: completion tokens.
        cached_tokens: of ``prompt_tokens``, those read from the provider's prompt cache
            (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``).
        cache_write_tokens: of ``prompt_tokens``, those written to it (Anthropic
            ``cache_creation_input_tokens``; OpenAI bills no write).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0


class Verdict(msgspec.Struct, frozen=True, kw_only=True):
    """A Checker's decision on one claim.

    Attributes:
        label: the decision.
        checker: fingerprint of the Checker that decided.
        raw: the model's raw output, if any.
        evidence: snippets or URLs actually used.
        error: ``"ClassName: message"`` when ``label`` is ``error``.
        usage: tokens consumed, when a model was called.
        reason: for ``unsupported``, why, when the Checker tells.
    """

    label: Label
    checker: str
    raw: str | None = None
    evidence: tuple[Evidence, ...] = ()
    error: str | None = None
    usage: Usage | None = None
    reason: UnsupportedReason | None = None


class ClaimResult(msgspec.Struct, frozen=True, kw_only=True):
    """A claim with its verdict, as written to ``answers.jsonl``."""

    text: str
    index: int
    label: Label
    sentence: int | None = None
    span: tuple[int, int] | None = None
    evidence: tuple[Evidence, ...] = ()
    raw: str | None = None
    error: str | None = None
    reason: UnsupportedReason | None = None


class FactSource(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Where a reference fact came from: a document or an answer, and a span in it.

    Attributes:
        doc_id: id of the corpus document the fact was extracted from.
        answer_id: id of the answer whose supported claim the fact is (pooled sets).
        span: (start, end) character offsets into that document or response.
    """

    doc_id: str | None = None
    answer_id: str | None = None
    span: tuple[int, int] | None = None


class RefFact(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One reference fact of a question ("Beyond Precision" F).

    Attributes:
        id: unique within its question's set.
        text: the fact, one atomic sentence.
        source: where it came from.
        relevance: r, 1-5, how relevant the fact is to the question (LLM rating).
        salience: s, 1-5, how central the fact is to the topic (LLM rating).
        importance: imp = α·(r − 1)/4 + β·(s − 1)/4 in [0, 1], when rated (or given).
        support: how many answers stated the fact (pooled sets).
    """

    id: str
    text: str
    source: FactSource | None = None
    relevance: float | None = None
    salience: float | None = None
    importance: float | None = None
    support: int | None = None


class RefSet(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A question's reference fact set: one line of ``refs.jsonl``.

    Attributes:
        question_id: :func:`content_id` of the question (matches ``AnswerResult.question_id``).
        question: the question text (matches answers without a ``question_id``).
        facts: the reference facts, in file order.
        meta: free-form (e.g. the α, β the importances were computed with).
    """

    question_id: str
    question: str = ""
    facts: tuple[RefFact, ...] = ()
    meta: dict[str, Any] = {}


class FactResult(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One fact of F* with its coverage by one answer, as written to ``answers.jsonl``.

    Attributes:
        id: the fact's id in its reference set.
        text: the fact.
        weight: its importance weight in Rec^w (1 when the fact is unrated).
        label: the coverage judge's decision.
        raw: the judge's raw output, if any.
        error: ``"ClassName: message"`` when ``label`` is ``error``.
    """

    id: str
    text: str
    weight: float
    label: Coverage
    raw: str | None = None
    error: str | None = None


class AnswerMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """Per-answer metrics; None where undefined (never NaN).

    Attributes:
        precision: S / (S + U), DAHL's per-answer factual precision.
        factscore: S / (S + U + I) times the length penalty exp(1 - γ/|A|) when |A| < γ.
        factscore_init: S / (S + U + I), no penalty.
        f1_at_k: SAFE's F1@K with P = S/(S+U), R = min(S/K, 1).
    """

    precision: float | None = None
    factscore: float | None = None
    factscore_init: float | None = None
    f1_at_k: float | None = None


class AnswerRecall(msgspec.Struct, frozen=True, kw_only=True):
    """One answer's recall against its question's F* ("Beyond Precision").

    Formulas in :func:`dahl.metrics.answer_recall`; None when undefined (``reason`` says why).

    Attributes:
        recall: Rec = Σ credit / |F*|.
        recall_w: Rec^w = Σ imp·credit / Σ imp.
        f1, f1_w: harmonic mean of the answer's DAHL precision and Rec (Rec^w).
        recall_at_5, recall_at_10, recall_at_20: Rec over the top k facts of F* by importance.
        reason: why the metrics are None: ``empty_fstar`` (no facts), ``zero_weight``
            (Σ imp = 0, recall_w only), ``coverage_error`` (a judge call failed),
            ``split_error``.
        facts: each fact of F* with its coverage, in importance order.
    """

    recall: float | None = None
    recall_w: float | None = None
    f1: float | None = None
    f1_w: float | None = None
    recall_at_5: float | None = None
    recall_at_10: float | None = None
    recall_at_20: float | None = None
    reason: str | None = None
    facts: tuple[FactResult, ...] = ()


class AnswerResult(msgspec.Struct, frozen=True, kw_only=True):
    """One scored answer: a line of ``answers.jsonl``.

    Attributes:
        id, model, category: copied from the :class:`Answer`.
        question: the question, as given.
        response: the response as scored (after preprocessing).
        question_id: :func:`content_id` of the question, shared across models.
        status: see :class:`Status`.
        reason: why the answer is excluded/abstained/errored (None when scored).
        claims: every claim with its verdict, in answer order.
        counts: number of claims per label (all five labels present).
        metrics: per-answer metrics.
        input_hash: content hash of the input answer (resume key).
        recall: recall against the question's reference facts; UNSET without a reference set.
    """

    id: str
    model: str
    category: str
    status: Status
    claims: tuple[ClaimResult, ...]
    counts: dict[str, int]
    metrics: AnswerMetrics
    input_hash: str
    question: str = ""
    response: str = ""
    question_id: str = ""
    reason: str | None = None
    meta: dict[str, Any] = {}
    recall: AnswerRecall | msgspec.UnsetType = msgspec.UNSET


class ClaimLabel(msgspec.Struct, frozen=True):
    """A claim of :class:`ResultDigest`: its label, and why it is unsupported when told."""

    label: Label
    reason: UnsupportedReason | None = None


class FactMark(msgspec.Struct, frozen=True):
    """A fact of :class:`RecallDigest`: its coverage label only."""

    label: Coverage


class RecallDigest(msgspec.Struct, frozen=True, kw_only=True):
    """What the summary reads of an :class:`AnswerRecall` (attributes as there; facts as labels only)."""

    recall: float | None = None
    recall_w: float | None = None
    f1: float | None = None
    f1_w: float | None = None
    recall_at_5: float | None = None
    recall_at_10: float | None = None
    recall_at_20: float | None = None
    reason: str | None = None
    facts: tuple[FactMark, ...] = ()


class ResultDigest(msgspec.Struct, frozen=True, kw_only=True):
    """What the summary and the verdict store read of an :class:`AnswerResult` line, skipping texts,
    evidence and raw replies (attributes as there; ``claims`` as labels only)."""

    id: str
    model: str
    category: str
    status: Status
    claims: tuple[ClaimLabel, ...]
    counts: dict[str, int]
    question: str = ""
    question_id: str = ""
    recall: RecallDigest | msgspec.UnsetType = msgspec.UNSET