"""The documents of ``dahl refs build``: a corpus held whole, and BM25 retrieval over its passages
(a document ranks by its best passage).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dahl.adapters._corpus import Corpus, analyze
from dahl.adapters._documents import open_corpus, read_documents
from dahl.errors import InputError
from dahl.refs._questions import Document, RefQuestion

__all__ = ["DocumentLibrary"]

#: Passages looked at per wanted document: enough that n distinct documents are found.
_PASSAGES_PER_DOCUMENT = 20


class DocumentLibrary:
    """Whole documents and the BM25 index of their passages; build it with :meth:`load` (blocking).

    Attributes:
        corpus: the passage index.
        fingerprint: the corpus content hash (recorded in each set's meta).
    """

    def __init__(self, corpus: Corpus, documents: dict[str, Document]) -> None:
        self.corpus = corpus
        self.fingerprint = corpus.fingerprint
        self._documents = documents

    def __len__(self) -> int:
        return len(self._documents)

    def __repr__(self) -> str:
        return f"DocumentLibrary({len(self)} documents, {len(self.corpus)} passages)"

    @classmethod
    def load(cls, path: str | Path) -> DocumentLibrary:
        """Read and index the corpus ``path`` (JSONL or a folder of .txt/.md files; blocking).

        Raises:
            ConfigError: the path does not exist or cannot be read.
            InputError: a line is not a document (file, line and field named).
        """
        corpus = open_corpus(path)
        docs, _content = read_documents(path)
        documents: dict[str, Document] = {}
        for doc in docs:
            documents.setdefault(str(doc.id), Document(id=str(doc.id), text=doc.text, title=doc.title or ""))
        return cls(corpus, documents)

    def given(self, question: RefQuestion, path: str) -> list[Document]:
        """The documents ``question.doc_ids`` names, in its order.

        Raises:
            InputError: an id is not in the corpus (names the questions file, line and field).
        """
        out: list[Document] = []
        for n, doc_id in enumerate(question.doc_ids or ()):
            doc = self._documents.get(doc_id)
            if doc is None:
                raise InputError(f"document {doc_id!r} is not in the corpus", file=path, line=question.line,
                                 field=f"doc_ids[{n}]")
            out.append(doc)
        return out

    def retrieve(self, question: str, n: int) -> list[Document]:
        """Up to ``n`` documents whose passages best match ``question`` (BM25), best first (CPU)."""
        hits = self.corpus.search(analyze(question), k=max(1, n) * _PASSAGES_PER_DOCUMENT)
        ids: dict[str, None] = {}
        for hit in hits:
            ids.setdefault(hit.passage.doc_id, None)
            if len(ids) == n:
                break
        return [self._documents[i] for i in ids if i in self._documents]

    def documents(self, ids: Sequence[str]) -> list[Document]:
        """The documents of ``ids`` that the library holds, in order."""
        return [self._documents[i] for i in ids if i in self._documents]
