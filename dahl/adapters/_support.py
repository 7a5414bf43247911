"""The evidence Checker's support model: features of a (claim, passage) pair, and the model in numpy.

:data:`FEATURE_NAMES` fixes the features' order (retrieval, content-word overlap, numbers with
units, names with digits, entities, negation, antonyms, refutation cues, the claim's wording);
:func:`pair_features` computes them. The model, a multinomial logistic regression trained by
``python -m bench.train_checker``, ships as ``support_model.json`` (``classes``, ``features``,
``mean``, ``scale``, ``coef``, ``intercept``, ``training``):
P(class | x) = softmax(W · (x - mean) / scale + b).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
import numpy as np
from rapidfuzz import fuzz

from dahl.adapters._corpus import analyze
from dahl.adapters._lexicon import ANTONYMS, NEGATION, NON_ASSERTION, NON_CONTENT
from dahl.errors import ConfigError

__all__ = [
    "CLASSES",
    "FEATURE_NAMES",
    "ClaimTerms",
    "SupportModel",
    "claim_terms",
    "load_support_model",
    "names_with_digits",
    "numbers_with_units",
    "pair_features",
    "parse_support_model",
]

# A token with its hyphen/slash joins ("SARS-CoV-2"); a name when it mixes letters and digits.
_JOINED = re.compile(r"\w+(?:[-/]\w+)*")
_LETTER = re.compile(r"[^\W\d_]")
_DIGIT = re.compile(r"\d")
_UNIT = (
    r"%|percent|mg|g|kg|µg|mcg|ml|mL|l|L|mm|cm|m|km|mmHg|iu|IU|units?|days?|weeks?|months?|years?"
    r"|hours?|h|minutes?|min|seconds?|s|°C|°F|degrees?|times|fold|patients|people|cases|deaths"
)
# A number standing alone (not part of a name), with its unit when one follows.
_NUMBER_UNIT = re.compile(
    rf"(?<![\w.\-/])(\d+(?:[.,]\d+)?)(?![\w\-/]*[A-Za-z]\d)\s*({_UNIT})?(?![\w])", re.IGNORECASE
)
_CAPITALIZED = re.compile(r"(?<=[\w,;:)] )[A-Z][\w-]*|\b[A-Z]{2,}[\w-]*")
_REFUTE_CUE = re.compile(
    r"\bno (?:\w+ ){0,2}(?:evidence|proof|data|benefit|effect|association|role|link)\b"
    r"|\bnot (?:\w+ ){0,2}(?:effective|shown|proven|supported|recommended|associated|safe|true)\b"
    r"|\b(?:ineffective|unproven|myths?|false|hoax|misinformation|misleading|debunked|insufficient"
    r"|contrary|unlikely|rumou?rs?|conspiracy|refutes?d?)\b",
    re.IGNORECASE,
)
_ABSOLUTE = re.compile(
    r"\b(?:cures?|cured|kills?|prevents?|protects?|destroys?|eliminates?|guarantees?|always|never"
    r"|completely|all|every|only|100 ?%|immune|definitely|proven)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(r"\b(?:may|might|can|could|possibly|some|likely|suggests?|help|helps)\b", re.IGNORECASE)

#: Names of the features, in the order of :func:`pair_features`'s vector.
FEATURE_NAMES: tuple[str, ...] = (
    "bm25_per_idf",
    "content_share",
    "content_share_idf",
    "added_share_idf",
    "claim_adds_nothing",
    "missing_idf_max",
    "missing_count",
    "sentence_share",
    "bigram_share",
    "fuzzy_token_set",
    "fuzzy_partial",
    "claim_has_number",
    "number_missing_share",
    "number_unit_mismatch",
    "name_digit_share",
    "name_digit_missing",
    "entity_share",
    "entity_missing",
    "claim_negated",
    "sentence_negated",
    "negation_mismatch",
    "negation_mismatch_x_share",
    "passage_negations",
    "antonym_conflicts",
    "passage_refute_cue",
    "claim_absolute",
    "claim_hedge",
    "claim_is_question",
    "claim_terms_log",
    "passage_terms_log",
    "share_x_bm25",
)


@dataclass(frozen=True)
class ClaimTerms:
    """What the features need of a claim, computed once per claim.

    Attributes:
        text: the claim's text.
        content: its content terms, first occurrences in order.
        added: the content terms it adds to its question (all when the question is empty).
        numbers: its standalone numbers as ``(number, unit or "")``.
        names: its names with digits, lower-cased ("covid-19").
        entities: its capitalized words and acronyms, as index terms.
    """

    text: str
    content: tuple[str, ...]
    added: tuple[str, ...]
    numbers: frozenset[tuple[str, str]]
    names: frozenset[str]
    entities: frozenset[str]


def _name_spans(text: str) -> list[tuple[int, int, str]]:
    return [
        (m.start(), m.end(), m.group(0))
        for m in _JOINED.finditer(text)
        if _LETTER.search(m.group(0)) and _DIGIT.search(m.group(0))
    ]


def names_with_digits(text: str) -> list[str]:
    """Tokens joining letters and digits ("COVID-19", "SARS-CoV-2", "H1N1"), lower-cased, in order."""
    return [name.lower() for _, _, name in _name_spans(text)]


def numbers_with_units(text: str) -> list[tuple[str, str]]:
    """Standalone numbers with their unit, e.g. "2.5 mg" -> ("2.5", "mg"), in order.

    A decimal comma is read as a point, the unit is lower-cased ("" when none follows), and
    names such as "COVID-19" and "IL-6" give nothing.
    """
    named = [(a, b) for a, b, _ in _name_spans(text)]
    out: list[tuple[str, str]] = []
    for m in _NUMBER_UNIT.finditer(text):
        if any(a <= m.start() < b for a, b in named):
            continue
        unit = (m.group(2) or "").lower()
        out.append((m.group(1).replace(",", "."), "%" if unit == "percent" else unit))
    return out


def claim_terms(text: str, question_terms: Sequence[str] = ()) -> ClaimTerms:
    """Analyze a claim once for :func:`pair_features`; content terms among ``question_terms``
    (analyzed terms of its question) are not counted as added."""
    asked = set(question_terms)
    content = tuple(t for t in dict.fromkeys(analyze(text)) if t not in NON_CONTENT)
    entities = {t for m in _CAPITALIZED.findall(text) for t in analyze(m)}
    return ClaimTerms(
        text=text,
        content=content,
        added=tuple(t for t in content if t not in asked),
        numbers=frozenset(numbers_with_units(text)),
        names=frozenset(names_with_digits(text)),
        entities=frozenset(entities),
    )


def _share(wanted: Sequence[str] | frozenset[str], have: set[str]) -> float:
    return sum(t in have for t in wanted) / len(wanted) if wanted else 1.0


def _weighted(wanted: Sequence[str], have: set[str], idf: Callable[[str], float]) -> float:
    total = sum(idf(t) for t in wanted)
    return sum(idf(t) for t in wanted if t in have) / total if total else 1.0


def _bigrams(terms: Sequence[str]) -> set[tuple[str, str]]:
    return set(zip(terms, terms[1:]))


def pair_features(
    claim: ClaimTerms,
    passage_text: str,
    passage_sentences: Sequence[str],
    bm25_score: float,
    query_idf: float,
    idf: Callable[[str], float],
) -> tuple[np.ndarray, str]:
    """Feature vector of one (claim, passage) pair.

    Args:
        claim: the analyzed claim (:func:`claim_terms`).
        passage_text: the passage (title and text); ``passage_sentences`` its sentences.
        bm25_score: the passage's BM25 score for the claim's query (>= 0).
        query_idf: summed idf of the query's terms.
        idf: term -> idf over the corpus (e.g. :meth:`Corpus.idf`).

    Returns:
        ``(vector, closest sentence)``: float64 array of shape ``(len(FEATURE_NAMES),)``, and
        the sentence sharing most content terms ("" when none).
    """
    passage_list = analyze(passage_text)
    have = set(passage_list)
    content = claim.content
    missing = [t for t in content if t not in have]
    best_sentence, best_overlap = "", 0
    for sentence in passage_sentences:
        if NON_ASSERTION.search(sentence):
            continue
        overlap = len(set(content).intersection(analyze(sentence)))
        if overlap > best_overlap:
            best_sentence, best_overlap = sentence, overlap
    sentence_share = best_overlap / len(content) if content else 0.0
    passage_numbers = set(numbers_with_units(passage_text))
    bare = {n for n, _ in passage_numbers}
    number_missing = [n for n, _ in claim.numbers if n not in bare]
    unit_mismatch = [
        (n, u) for n, u in claim.numbers if u and n in bare and (n, u) not in passage_numbers
    ]
    names = set(names_with_digits(passage_text))
    lowered = passage_text.lower()
    claim_neg = bool(NEGATION.search(claim.text))
    sentence_neg = bool(NEGATION.search(best_sentence))
    mismatch = float(claim_neg != sentence_neg) if best_sentence else 0.0
    antonyms = sum(1 for t in content if t not in have and ANTONYMS.get(t, frozenset()) & have)
    bigrams = _bigrams(content)
    share_idf = _weighted(content, have, idf)
    bm25 = bm25_score / query_idf if query_idf > 0 else 0.0
    values = (
        bm25,
        _share(content, have),
        share_idf,
        _weighted(claim.added, have, idf),
        float(not claim.added),
        max((idf(t) for t in missing), default=0.0),
        math.log1p(len(missing)),
        sentence_share,
        len(bigrams & _bigrams(passage_list)) / len(bigrams) if bigrams else 0.0,
        fuzz.token_set_ratio(claim.text.lower(), lowered) / 100.0,
        fuzz.partial_ratio(claim.text.lower(), lowered) / 100.0 if len(claim.text) < 400 else 0.0,
        float(bool(claim.numbers)),
        len(number_missing) / len(claim.numbers) if claim.numbers else 0.0,
        float(bool(unit_mismatch)),
        _share(claim.names, names) if claim.names else 0.0,
        float(sum(n not in names for n in claim.names)),
        _share(claim.entities, have) if claim.entities else 0.0,
        float(sum(t not in have for t in claim.entities)),
        float(claim_neg),
        float(sentence_neg),
        mismatch,
        mismatch * sentence_share,
        math.log1p(len(NEGATION.findall(passage_text))),
        float(antonyms),
        float(bool(_REFUTE_CUE.search(passage_text))),
        float(bool(_ABSOLUTE.search(claim.text))),
        float(bool(_HEDGE.search(claim.text))),
        float(claim.text.rstrip().endswith("?")),
        math.log1p(len(content)),
        math.log1p(len(passage_list)),
        share_idf * bm25,
    )
    return np.asarray(values, dtype=np.float64), best_sentence


#: The model's classes, in the order of its probability vectors.
CLASSES = ("supports", "refutes", "neutral")

_RESOURCE = "support_model.json"


@dataclass(frozen=True)
class SupportModel:
    """A fitted multinomial logistic regression with its feature standardization.

    Attributes:
        features: feature names, in the order the vectors use.
        mean: float64 array of shape (n_features,), subtracted first.
        scale: float64 array of shape (n_features,), divided by next (> 0).
        coef: float64 array of shape (n_classes, n_features).
        intercept: float64 array of shape (n_classes,).
        digest: first 12 hex digits of the model file's SHA-256 (in the Checker's fingerprint).
        training: the training record (command, seed, split, data hashes).
    """

    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    coef: np.ndarray
    intercept: np.ndarray
    digest: str
    training: dict[str, Any]

    def probabilities(self, x: np.ndarray) -> np.ndarray:
        """Class probabilities, in :data:`CLASSES` order, of float rows of shape (n_rows,
        n_features) or (n_features,): float64 of shape (n_rows, 3) or (3,)."""
        z = ((np.asarray(x, dtype=np.float64) - self.mean) / self.scale) @ self.coef.T + self.intercept
        z = z - z.max(axis=-1, keepdims=True)
        e = np.exp(z)
        out: np.ndarray = e / e.sum(axis=-1, keepdims=True)
        return out

    def contributions(self, x: np.ndarray, cls: int) -> list[tuple[str, float]]:
        """``(feature name, coef * standardized value)`` terms of class ``cls``'s logit for one
        row of shape (n_features,), largest magnitude first."""
        terms = self.coef[cls] * (np.asarray(x, dtype=np.float64) - self.mean) / self.scale
        pairs = [(n, float(v)) for n, v in zip(self.features, terms, strict=True)]
        return sorted(pairs, key=lambda p: -abs(p[1]))


def parse_support_model(data: bytes) -> SupportModel:
    """Read a model file's bytes.

    Raises:
        ConfigError: not valid JSON, fields missing, shapes inconsistent, or features other
            than :data:`FEATURE_NAMES`.
    """
    try:
        raw = msgspec.json.decode(data)
        features = tuple(str(f) for f in raw["features"])
        mean = np.asarray(raw["mean"], dtype=np.float64)
        scale = np.asarray(raw["scale"], dtype=np.float64)
        coef = np.asarray(raw["coef"], dtype=np.float64)
        intercept = np.asarray(raw["intercept"], dtype=np.float64)
        classes = tuple(raw["classes"])
        training = dict(raw.get("training", {}))
    except (msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"support model file is malformed: {exc}") from exc
    n = len(features)
    if features != FEATURE_NAMES:
        raise ConfigError("support model was trained for other features; retrain with python -m bench.train_checker")
    if classes != CLASSES or coef.shape != (len(CLASSES), n) or intercept.shape != (len(CLASSES),):
        raise ConfigError(f"support model has classes {classes} and coef shape {coef.shape}")
    if mean.shape != (n,) or scale.shape != (n,) or not np.all(scale > 0):
        raise ConfigError("support model mean/scale must be n_features long with scale > 0")
    return SupportModel(
        features, mean, scale, coef, intercept, hashlib.sha256(data).hexdigest()[:12], training
    )


@functools.lru_cache(maxsize=1)
def load_support_model() -> SupportModel:
    """The model shipped in the package (read once).

    Raises:
        ConfigError: the shipped file is missing or malformed.
    """
    try:
        data = importlib.resources.files("dahl.adapters").joinpath(_RESOURCE).read_bytes()
    except OSError as exc:
        raise ConfigError(f"support model {_RESOURCE} not found in the package: {exc}") from exc
    return parse_support_model(data)
