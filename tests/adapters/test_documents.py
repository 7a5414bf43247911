"""Tests for dahl.adapters._documents: folder corpora, passage spans, and the saved BM25 index."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from dahl.adapters._corpus import analyze, sentence_spans
from dahl.adapters._documents import open_corpus, read_documents
from dahl.errors import ConfigError, InputError

TEXT = "Metformin lowers glucose.  It was approved in 1994.\nAspirin thins blood."


def _corpus_file(path: Path, text: str = TEXT) -> Path:
    rows = [{"id": "d1", "title": "Drugs", "text": text, "url": "https://example.org/d1"}, {"id": 2, "text": "Insulin."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


class TestSpans:
    def test_sentence_spans_point_into_the_text(self) -> None:
        """Spans are offsets into the raw text, whitespace around sentences left out."""
        assert sentence_spans(TEXT) == [(0, 25), (27, 51), (52, 72)]
        assert [TEXT[a:b] for a, b in sentence_spans(TEXT)][1] == "It was approved in 1994."

    def test_passage_span_and_id(self, tmp_path: Path) -> None:
        """A passage's span runs from its first sentence's start to its last's end; id = doc#start-end."""
        corpus = open_corpus(_corpus_file(tmp_path / "c.jsonl"), window=2, stride=1)
        first, second = corpus.passages[:2]
        assert (first.span, first.id, first.url) == ((0, 51), "d1#0-51", "https://example.org/d1")
        assert (second.span, second.text) == ((27, 72), "It was approved in 1994. Aspirin thins blood.")
        assert corpus.passages[2].id == "2#0-8"


class TestFolderCorpus:
    def test_ids_are_relative_paths_and_titles_headings(self, tmp_path: Path) -> None:
        """id = relative path; title = first Markdown heading, else the file stem; other files and hidden ones skipped."""
        root = tmp_path / "docs"
        (root / "sub").mkdir(parents=True)
        (root / "a.md").write_text("Intro line.\n\n## Metformin facts ##\n\nMetformin lowers glucose.\n", encoding="utf-8")
        (root / "sub" / "b.txt").write_text("Aspirin thins blood.", encoding="utf-8")
        (root / "c.pdf").write_bytes(b"%PDF")
        (root / ".hidden.md").write_text("# Secret\nNo.", encoding="utf-8")
        documents, _ = read_documents(root)
        assert [(d.id, d.title) for d in documents] == [("a.md", "Metformin facts"), ("sub/b.txt", "b")]
        corpus = open_corpus(root)
        assert corpus.n_documents == 2
        assert corpus.search(analyze("aspirin"), k=1)[0].passage.doc_id == "sub/b.txt"

    def test_fingerprint_follows_content(self, tmp_path: Path) -> None:
        """Editing one file changes the folder's fingerprint; reading it again does not."""
        root = tmp_path / "docs"
        root.mkdir()
        (root / "a.txt").write_text("One fact.", encoding="utf-8")
        before = open_corpus(root).fingerprint
        assert open_corpus(root).fingerprint == before
        (root / "a.txt").write_text("Another fact.", encoding="utf-8")
        assert open_corpus(root).fingerprint != before

    def test_non_utf8_file_is_named(self, tmp_path: Path) -> None:
        """A file that is not UTF-8 is an InputError naming it."""
        root = tmp_path / "docs"
        root.mkdir()
        (root / "bad.txt").write_bytes(b"\xff\xfe bad")
        with pytest.raises(InputError, match="not UTF-8") as info:
            open_corpus(root)
        assert info.value.file == str(root / "bad.txt")


class TestEmptyCorpus:
    @pytest.mark.parametrize("kind", ["folder without .txt/.md", "empty JSONL"])
    def test_a_corpus_without_documents_is_refused(self, tmp_path: Path, kind: str) -> None:
        """No document at all is a ConfigError naming the corpus (a Checker would call every claim unsupported)."""
        if kind == "empty JSONL":
            path = tmp_path / "corpus.jsonl"
            path.write_text("\n")
        else:
            path = tmp_path / "docs"
            path.mkdir()
            (path / "notes.pdf").write_bytes(b"%PDF")
        with pytest.raises(ConfigError, match="no documents") as info:
            open_corpus(path)
        assert str(path) in str(info.value)


class TestSavedIndex:
    def test_second_open_loads_instead_of_indexing(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """The first open builds and saves the index; the second loads it and answers the same search."""
        path, index = _corpus_file(tmp_path / "c.jsonl"), tmp_path / "index"
        with caplog.at_level(logging.INFO, logger="dahl.adapters"):
            built = open_corpus(path, index_dir=index)
            loaded = open_corpus(path, index_dir=index)
        assert (built.built, loaded.built) == (True, False)
        assert [r.getMessage().split()[0] for r in caplog.records if r.name.startswith("dahl.adapters")] == [
            "indexed", "saved", "loaded"
        ]
        assert [f.name for f in index.iterdir()] == [f"{built.fingerprint}-a1"]
        assert loaded.passages == built.passages and loaded.fingerprint == built.fingerprint
        query = analyze("approved glucose")
        assert loaded.search(query, k=3) == built.search(query, k=3)
        assert loaded.idf("glucos") == built.idf("glucos")

    def test_changed_corpus_gets_its_own_index(self, tmp_path: Path) -> None:
        """An edited corpus file is indexed again, under a second folder."""
        index = tmp_path / "index"
        open_corpus(_corpus_file(tmp_path / "c.jsonl"), index_dir=index)
        again = open_corpus(_corpus_file(tmp_path / "c.jsonl", TEXT + " Heparin too."), index_dir=index)
        assert again.built is True
        assert len(list(index.iterdir())) == 2

    def test_damaged_index_is_rebuilt(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """A saved index that cannot be decoded is logged and indexed again."""
        path, index = _corpus_file(tmp_path / "c.jsonl"), tmp_path / "index"
        first = open_corpus(path, index_dir=index)
        (index / f"{first.fingerprint}-a1" / "passages.msgpack").write_bytes(b"\x00garbage")
        with caplog.at_level(logging.WARNING, logger="dahl.adapters"):
            again = open_corpus(path, index_dir=index)
        assert again.built is True
        assert "cannot be read" in caplog.text

    def test_duplicate_id_is_refused(self, tmp_path: Path) -> None:
        """Two documents with one id (1 and "1" alike) are an InputError naming file, the second line and id."""
        path = tmp_path / "c.jsonl"
        path.write_text('{"id": 1, "text": "A."}\n{"id": "b", "text": "B."}\n{"id": "1", "text": "C."}\n')
        for read in (read_documents, open_corpus):
            with pytest.raises(InputError, match=r"duplicate document id '1' \(first on line 1\)") as info:
                read(path)
            assert (info.value.file, info.value.line, info.value.field) == (str(path), 3, "id")

    def test_bad_line_still_reported_with_an_index_dir(self, tmp_path: Path) -> None:
        """A malformed line is an InputError naming file, line and field, index folder or not."""
        path = tmp_path / "c.jsonl"
        path.write_text('{"id": "a", "text": "ok"}\n{"id": "b"}\n', encoding="utf-8")
        with pytest.raises(InputError) as info:
            open_corpus(path, index_dir=tmp_path / "index")
        assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, "text")
