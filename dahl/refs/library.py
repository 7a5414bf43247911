"""The documents of ``dahl refs build``: a JSONL corpus held whole, and retrieval over it.

The corpus is the evidence Checker's (``{"id", "title"?, "text"}`` per line, or a folder
of .txt/.md files: :func:`dahl.adapters.corpus.load_corpus`). Extraction needs whole documents, while the
BM25 index holds passages, so the library keeps both: the documents by id, and the
:class:`~dahl.adapters.corpus.Corpus` index. A question's documents are the top ``n``
distinct documents of its best passages (BM25 over passages; a document ranks by its
best passage), as "Beyond Precision" retrieves documents per question.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from dahl.adapters.corpus import Corpus, analyze, load_corpus
from dahl.adapters.documents import read_documents
from dahl.errors import InputError
from dahl.refs.questions import Document, RefQuestion

__all__ = ["DocumentLibrary"]

#: Passages looked at per wanted document: enough that n distinct documents are found.
_PASSAGES_PER_DOCUMENT = 20


class DocumentLibrary:
    """Whole documents and the BM25 index of their passages.

    Build it with :meth:`load` (blocking: run it in a worker thread).

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
        """Read and index the corpus ``path``, a JSONL file or a folder of .txt/.md files (blocking).

        Raises:
            ConfigError: the file does not exist or cannot be read.
            InputError: a line is not a document (file, line and field named).
        """
        corpus = load_corpus(path)  # validates every line, with file/line/field errors
        documents: dict[str, Document] = {}
        for doc in read_documents(path)[0]:
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
        """The ``n`` documents whose passages best match ``question`` (BM25), best first (CPU).

        Returns:
            Up to ``n`` documents; fewer when fewer documents share a term with the question.
        """
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
