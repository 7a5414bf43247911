"""A local document corpus cut into short passages and indexed with BM25.

The offline ``evidence`` Checker (:mod:`dahl.adapters.evidence`) retrieves
passages from a :class:`Corpus`. The corpus file is JSON Lines, one document
per line::

    {"id": "21645374", "title": "optional", "text": "Programmed cell death ..."}

Each document is cut into passages of ``window`` consecutive sentences taken
every ``stride`` sentences (overlapping windows, so a fact spanning two
sentences sits whole in some passage), and every passage is indexed with
BM25 (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework: BM25
and Beyond"; Lucene variant, k1 = 1.5, b = 0.75) through the ``bm25s`` library.

Text analysis (:func:`analyze`), shared by the index, the queries and the
support decision: lowercase, tokens are runs of word characters or numbers
with their decimal part kept whole ("2.5" stays one token), ``bm25s``'s English
stopword list removed, Snowball English stemmer (PyStemmer) applied to words,
numbers left unstemmed.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import bm25s  # type: ignore[import-untyped]
import msgspec
import numpy as np
import Stemmer  # type: ignore[import-not-found]
from bm25s.stopwords import STOPWORDS_EN  # type: ignore[import-untyped]

from dahl.errors import ConfigError, InputError
from dahl.formats.jsonpath import nesting_error
from dahl.records import normalize_text

__all__ = ["Corpus", "Hit", "Passage", "analyze", "load_corpus", "split_sentences"]

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
    """Return the index terms of ``text``, in order, repeats kept.

    Args:
        text: any text.

    Returns:
        Lower-cased, stopword-free, stemmed tokens; numbers unchanged
        (``"2.5"``), with a decimal comma read as a point.
    """
    terms: list[str] = []
    for token in _TOKEN.findall(text.lower()):
        if _NUMBER.search(token):
            terms.append(token.replace(",", "."))
        elif token not in _STOPWORDS and len(token) > 1:
            terms.append(_stem(token))
    return terms


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with a light regex (no abbreviation list).

    Good enough to cut evidence documents into passages; claims are split by a
    Splitter, not here.

    Args:
        text: a document.

    Returns:
        Non-empty, whitespace-normalized sentences in order.
    """
    return [s for s in (normalize_text(p) for p in _SENTENCE_END.split(text)) if s]


class Passage(msgspec.Struct, frozen=True, kw_only=True):
    """A short run of sentences from one corpus document.

    Attributes:
        doc_id: id of the document it comes from.
        title: the document's title, or "".
        sentences: the passage's sentences, in document order.
    """

    doc_id: str
    title: str
    sentences: tuple[str, ...]

    @property
    def text(self) -> str:
        """The passage's sentences joined by one space."""
        return " ".join(self.sentences)


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

    Build it with :func:`load_corpus` (from a file) or :meth:`from_documents`.

    Attributes:
        passages: every passage, index-aligned with the BM25 index.
        fingerprint: 32-hex-digit blake2b-128 of the corpus content (the file's
            bytes when loaded from a file) plus the passage settings.
        n_documents: number of documents.
    """

    def __init__(
        self, passages: Sequence[Passage], *, content_hash: str, n_documents: int
    ) -> None:
        """Index ``passages``; prefer :func:`load_corpus` or :meth:`from_documents`.

        Args:
            passages: passages to index, in any order.
            content_hash: hash of the content they were cut from (goes into the fingerprint).
            n_documents: number of source documents.
        """
        self.passages: tuple[Passage, ...] = tuple(passages)
        self.fingerprint = content_hash
        self.n_documents = n_documents
        self._doc_rows: dict[str, list[int]] = {}
        for row, passage in enumerate(self.passages):
            self._doc_rows.setdefault(passage.doc_id, []).append(row)
        self._bm25 = bm25s.BM25()
        tokens = [analyze(f"{p.title} {p.text}") for p in self.passages]
        self._df: Counter[str] = Counter()
        for terms in tokens:
            self._df.update(set(terms))
        # bm25s divides by the mean passage length: index only when some term exists.
        self._indexed = any(tokens)
        if self._indexed:
            self._bm25.index(tokens, show_progress=False)
        logger.info(
            "indexed %d passages from %d documents", len(self.passages), n_documents
        )

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[tuple[str, str, str]],
        *,
        window: int = 3,
        stride: int = 2,
    ) -> Corpus:
        """Build a corpus from ``(id, title, text)`` triples held in memory.

        Args:
            documents: (doc id, title, text) triples.
            window: sentences per passage (>= 1).
            stride: sentences between passage starts (1 <= stride <= window).

        Raises:
            ConfigError: window or stride out of range.
        """
        _check_window(window, stride)
        hasher = hashlib.blake2b(digest_size=16)
        passages: list[Passage] = []
        n_docs = 0
        for doc_id, title, text in documents:
            hasher.update(msgspec.json.encode([doc_id, title, text]))
            passages.extend(_cut(doc_id, title, text, window, stride))
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
        """BM25 inverse document frequency of ``term`` over passages.

        idf = ln(1 + (N - df + 0.5) / (df + 0.5)) (Lucene's BM25 idf), N = number
        of passages, df = passages containing the term; a term absent from the
        corpus gets the largest value, ln(1 + 2N + 1).
        """
        n = len(self.passages)
        df = self._df.get(term, 0)
        return math.log(1.0 + (n - df + 0.5) / (df + 0.5))

    def has_document(self, doc_id: str) -> bool:
        """True when the corpus holds a document with id ``doc_id``."""
        return doc_id in self._doc_rows

    def search(
        self,
        query_terms: Sequence[str],
        *,
        k: int = 5,
        doc_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Return the ``k`` best passages for an analyzed query, best first.

        Args:
            query_terms: terms from :func:`analyze`.
            k: number of passages wanted (>= 1).
            doc_ids: if given, search only passages of these documents (unknown
                ids are ignored; an empty or all-unknown list gives no hits).

        Returns:
            Up to ``k`` hits with score > 0; empty when no query term is in the index.
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


def _check_window(window: int, stride: int) -> None:
    if window < 1 or not 1 <= stride <= window:
        raise ConfigError(
            f"passage window={window}, stride={stride}: need window >= 1 and 1 <= stride <= window"
        )


def _cut(doc_id: str, title: str, text: str, window: int, stride: int) -> list[Passage]:
    """Cut one document into overlapping sentence windows."""
    sentences = split_sentences(text)
    if not sentences:
        return []
    out: list[Passage] = []
    start = 0
    while True:
        out.append(Passage(doc_id=doc_id, title=title, sentences=tuple(sentences[start : start + window])))
        if start + window >= len(sentences):
            return out
        start += stride


class _Document(msgspec.Struct, frozen=True):
    """One line of a corpus file."""

    id: str | int
    text: str
    title: str | None = None


def load_corpus(path: str | Path, *, window: int = 3, stride: int = 2) -> Corpus:
    """Read a JSONL corpus file and index it.

    Args:
        path: JSON Lines file, one ``{"id", "title"?, "text"}`` object per line
            (blank lines skipped; ``id`` a string or integer).
        window: sentences per passage (>= 1).
        stride: sentences between passage starts (1 <= stride <= window).

    Returns:
        The indexed corpus; its fingerprint is blake2b-128 of the file's bytes
        and the window settings.

    Raises:
        ConfigError: the file does not exist or cannot be read; bad window/stride.
        InputError: a line is not a JSON object, is nested too deeply to decode, or
            ``id``/``text`` is missing or of the wrong type (file, 1-based line and
            field are named).
    """
    _check_window(window, stride)
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"corpus file not found: {p}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read corpus file {p}: {exc}") from exc
    decoder = msgspec.json.Decoder(_Document)
    passages: list[Passage] = []
    seen: set[str] = set()
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            doc = decoder.decode(line)
        except msgspec.ValidationError as exc:
            raise InputError(str(exc), file=str(p), line=number, field=_field_of(str(exc))) from None
        except msgspec.DecodeError as exc:
            raise InputError(f"not valid JSON: {exc}", file=str(p), line=number) from None
        except RecursionError:
            raise nesting_error(file=str(p), line=number) from None
        doc_id = str(doc.id)
        if doc_id in seen:
            logger.warning("%s:%d: duplicate document id %r", p, number, doc_id)
        seen.add(doc_id)
        passages.extend(_cut(doc_id, doc.title or "", doc.text, window, stride))
    digest = hashlib.blake2b(data, digest_size=16)
    digest.update(f"w{window}s{stride}".encode())
    return Corpus(passages, content_hash=digest.hexdigest(), n_documents=len(seen))


_FIELD = re.compile(r"`\$\.(\w+)`|field `(\w+)`")


def _field_of(message: str) -> str | None:
    """Pull the field name out of a msgspec validation message."""
    match = _FIELD.search(message)
    return (match.group(1) or match.group(2)) if match else None
