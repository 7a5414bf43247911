"""A local document corpus cut into short passages and indexed with BM25.

A corpus is a JSON Lines file, one ``{"id", "title"?, "text", "url"?}`` document per line, or a
folder of ``.txt``/``.md`` files (:mod:`dahl.adapters._documents`). Each document is cut into
overlapping passages of ``window`` sentences every ``stride`` sentences, indexed with BM25
(Robertson & Zaragoza 2009; Lucene variant, k1 = 1.5, b = 0.75) through ``bm25s``.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import bm25s  # type: ignore[import-untyped]
import msgspec
import numpy as np
import Stemmer  # type: ignore[import-not-found]
from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped]

from dahl.errors import ConfigError
from dahl.records import normalize_text

__all__ = ["ANALYZER_VERSION", "Corpus", "Hit", "Passage", "analyze", "check_window", "cut_passages", "sentence_spans", "split_sentences"]

#: Version of :func:`analyze`, the sentence cut and the passage layout; a saved index of
#: another version is rebuilt (bump when any of them changes a passage or a term).
ANALYZER_VERSION = "1"

logger = logging.getLogger(__name__)

#: Words, or numbers with an optional decimal part ("2.5", "0,05" stays whole).
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+|\w+")
_NUMBER = re.compile(r"\d")
# A sentence ends at . ! ? followed by space and an upper-case letter, digit or bracket.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])")
_STOPWORDS = frozenset(STOPWORDS_EN)
_STEMMER = Stemmer.Stemmer("english")


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return str(_STEMMER.stemWord(word))


def analyze(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept: lower-cased, stopword-free
    (``bm25s``'s English list), Snowball-stemmed tokens; numbers unstemmed (``"2.5"``), a
    decimal comma read as a point."""
    terms: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if _NUMBER.search(token):
            terms.append(token.replace(",", "."))
        elif token not in _STOPWORDS and len(token) > 1:
            terms.append(_stem(token))
    return terms


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` spans of the sentences of ``text``, in order, without surrounding
    whitespace; pieces with no visible character are left out."""
    spans: list[tuple[int, int]] = []
    start = 0
    for cut in (*_SENTENCE_END.finditer(text), None):
        end = len(text) if cut is None else cut.start()
        piece = text[start:end]
        stripped = piece.strip()
        if stripped and normalize_text(stripped):
            left = start + piece.index(stripped)
            spans.append((left, left + len(stripped)))
        if cut is not None:
            start = cut.end()
    return spans


def split_sentences(text: str) -> list[str]:
    """Non-empty, whitespace-normalized sentences of ``text`` by a light regex (no
    abbreviation list; for cutting documents into passages)."""
    return [normalize_text(text[a:b]) for a, b in sentence_spans(text)]


class Passage(msgspec.Struct, frozen=True, kw_only=True):
    """A short run of sentences from one corpus document.

    Attributes:
        doc_id: id of the document it comes from.
        title: the document's title, or "".
        sentences: the passage's sentences (whitespace-normalized), in document order.
        span: ``(start, end)`` character offsets of the passage in its document's text;
            None for a passage built without offsets.
        url: the document's URL, when the corpus gives one.
    """

    doc_id: str
    title: str
    sentences: tuple[str, ...]
    span: tuple[int, int] | None = None
    url: str | None = None

    @property
    def text(self) -> str:
        """The passage's sentences joined by one space."""
        return " ".join(self.sentences)

    @property
    def id(self) -> str:
        """``"<doc_id>#<start>-<end>"`` (its span), or ``"<doc_id>"`` without one; unique per corpus."""
        if self.span is None:
            return self.doc_id
        return f"{self.doc_id}#{self.span[0]}-{self.span[1]}"

    @property
    def digest(self) -> str:
        """blake2b-64 (16 hex digits) of id, title and text: what a prompt shows of it."""
        data = msgspec.json.encode([self.id, self.title, self.text])
        return hashlib.blake2b(data, digest_size=8).hexdigest()


class Hit(msgspec.Struct, frozen=True):
    """One retrieved passage.

    Attributes:
        passage: the passage.
        score: its BM25 score for the query (unitless, > 0).
    """

    passage: Passage
    score: float


class Corpus:
    """Passages of a document collection with a BM25 index over them.

    Attributes:
        passages: every passage, index-aligned with the BM25 index.
        fingerprint: 32-hex-digit blake2b-128 of the corpus content plus the passage settings.
        n_documents: number of documents.
        built: True when the BM25 index was computed here, False when a saved one was handed in.
    """

    def __init__(
        self,
        passages: Sequence[Passage],
        *,
        content_hash: str,
        n_documents: int,
        index: tuple[Any, dict[str, int]] | None = None,
    ) -> None:
        """Index ``passages`` cut from content hashed as ``content_hash``; ``index`` is a saved index
        of exactly these passages (:attr:`index_state`), None = compute it here."""
        self.passages: tuple[Passage, ...] = tuple(passages)
        self.fingerprint = content_hash
        self.n_documents = n_documents
        self._doc_rows: dict[str, list[int]] = {}
        for row, passage in enumerate(self.passages):
            self._doc_rows.setdefault(passage.doc_id, []).append(row)
        self.built = index is None
        if index is not None:
            bm25, df = index
            self._bm25 = bm25 if bm25 is not None else bm25s.BM25()
            self._df: Counter[str] = Counter(df)
            self._indexed = bm25 is not None
            return
        self._bm25 = bm25s.BM25()
        tokens = [analyze(f"{p.title} {p.text}") for p in self.passages]
        self._df = Counter()
        for terms in tokens:
            self._df.update(set(terms))
        # bm25s divides by the mean passage length: index only when some term exists.
        self._indexed = any(tokens)
        if self._indexed:
            self._bm25.index(tokens, show_progress=False)
        logger.info(
            "indexed %d passages from %d documents", len(self.passages), n_documents
        )

    @property
    def index_state(self) -> tuple[Any, dict[str, int]]:
        """``(bm25s.BM25 or None, {term: document frequency})``: what saving the index keeps."""
        return (self._bm25 if self._indexed else None), dict(self._df)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[tuple[str, str, str]],
        *,
        window: int = 3,
        stride: int = 2,
    ) -> Corpus:
        """Build a corpus from ``(id, title, text)`` triples in memory (indexed here, not saved).

        ``window`` sentences per passage (>= 1), ``stride`` between passage starts (1 <= stride <=
        window).

        Raises:
            ConfigError: window or stride out of range.
        """
        check_window(window, stride)
        hasher = hashlib.blake2b(digest_size=16)
        passages: list[Passage] = []
        n_docs = 0
        for doc_id, title, text in documents:
            hasher.update(msgspec.json.encode([doc_id, title, text]))
            passages.extend(cut_passages(doc_id, title, text, window, stride))
            n_docs += 1
        hasher.update(f"w{window}s{stride}".encode())
        return cls(passages, content_hash=hasher.hexdigest(), n_documents=n_docs)

    def __len__(self) -> int:
        """Number of passages."""
        return len(self.passages)

    def __repr__(self) -> str:
        """Show size and fingerprint."""
        return (
            f"<Corpus documents={self.n_documents} passages={len(self.passages)}"
            f" fingerprint={self.fingerprint[:12]}>"
        )

    def idf(self, term: str) -> float:
        """BM25 idf of ``term`` over passages: ln(1 + (N - df + 0.5) / (df + 0.5)) (Lucene's),
        N passages, df passages containing it."""
        n = len(self.passages)
        df = self._df.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def search(
        self,
        query_terms: Sequence[str],
        *,
        k: int = 5,
        doc_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """The ``k`` (>= 1) best passages with score > 0 for an analyzed query, best first (blocking).

        ``doc_ids`` limits the search to those documents (unknown ids are ignored; an empty or
        all-unknown list gives no hits).
        """
        if not self._indexed:
            return []
        ids = self._bm25.get_tokens_ids(list(query_terms))
        if not ids:
            return []
        scores = np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float64)
        if doc_ids is not None:
            rows = np.fromiter(
                (r for d in dict.fromkeys(doc_ids) for r in self._doc_rows.get(d, ())),
                dtype=np.int64,
            )
            keep = np.zeros(len(scores), dtype=bool)
            keep[rows] = True
            scores = np.where(keep, scores, 0.0)
        n = min(k, len(scores))
        top = np.argpartition(-scores, n - 1)[:n]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [Hit(self.passages[int(i)], float(scores[i])) for i in top if scores[i] > 0.0]


def cut_passages(
    doc_id: str, title: str, text: str, window: int, stride: int, url: str | None = None
) -> list[Passage]:
    """Cut one document into overlapping windows of ``window`` sentences, ``stride`` apart:
    the passages in document order, each with its span in ``text`` ([] with no sentence)."""
    spans = sentence_spans(text)
    if not spans:
        return []
    out: list[Passage] = []
    start = 0
    while True:
        chunk = spans[start : start + window]
        out.append(
            Passage(
                doc_id=doc_id,
                title=title,
                sentences=tuple(normalize_text(text[a:b]) for a, b in chunk),
                span=(chunk[0][0], chunk[-1][1]),
                url=url,
            )
        )
        if start + window >= len(spans):
            return out
        start += stride


def check_window(window: int, stride: int) -> None:
    """Raise ConfigError unless window >= 1 and 1 <= stride <= window."""
    if window < 1 or not 1 <= stride <= window:
        raise ConfigError(
            f"passage window={window}, stride={stride}: need window >= 1 and 1 <= stride <= window"
        )
