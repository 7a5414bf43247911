"""Tests for dahl.adapters._corpus: loading, passages, analysis, BM25 search, fingerprint."""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

import pytest

from dahl.adapters._documents import open_corpus
from dahl.adapters._corpus import Corpus, analyze, split_sentences
from dahl.errors import ConfigError, InputError


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def doc(id_: str, text: str, **extra: str) -> str:
    return json.dumps({"id": id_, "text": text, **extra})


FIVE = "One alpha. Two beta. Three gamma. Four delta. Five epsilon."


class TestAnalyze:
    def test_stems_lowercases_and_drops_stopwords(self) -> None:
        """Words are lower-cased and Snowball-stemmed; stopwords and one-letter tokens go."""
        assert analyze("The Patients received doses of a drug") == ["patient", "receiv", "dose", "drug"]

    def test_keeps_decimal_numbers_whole(self) -> None:
        """'2.5' stays one token and a decimal comma becomes a point."""
        assert analyze("2.5 mg or 0,5 mg") == ["2.5", "mg", "0.5", "mg"]

    def test_plural_and_singular_fold_together(self) -> None:
        """'studies' and 'study' give the same term."""
        assert analyze("studies") == analyze("study") == ["studi"]


class TestSplitSentences:
    def test_splits_at_terminal_punctuation_before_capital(self) -> None:
        """A sentence ends at . ! ? followed by a capital or digit; '2.5' is not a boundary."""
        assert split_sentences("It is 2.5 m tall! Is it? 3 people said so.") == [
            "It is 2.5 m tall!",
            "Is it?",
            "3 people said so.",
        ]


class TestLoadCorpus:
    def test_cuts_overlapping_windows(self, tmp_path: Path) -> None:
        """Five sentences, window 3, stride 2 -> passages of sentences 1-3 and 3-5."""
        corpus = open_corpus(write_lines(tmp_path / "c.jsonl", [doc("d1", FIVE)]))
        assert [p.text for p in corpus.passages] == [
            "One alpha. Two beta. Three gamma.",
            "Three gamma. Four delta. Five epsilon.",
        ]
        assert corpus.n_documents == 1

    def test_short_document_is_one_passage(self, tmp_path: Path) -> None:
        """A two-sentence document gives one passage holding both."""
        corpus = open_corpus(write_lines(tmp_path / "c.jsonl", [doc("d1", "Cats purr. Dogs bark.")]))
        assert [p.sentences for p in corpus.passages] == [("Cats purr.", "Dogs bark.")]

    def test_integer_id_and_title_and_blank_lines(self, tmp_path: Path) -> None:
        """An integer id becomes a string; the title is kept; blank lines are skipped."""
        path = write_lines(tmp_path / "c.jsonl", ['{"id": 7, "title": "T", "text": "Hello there."}', ""])
        corpus = open_corpus(path)
        assert [(p.doc_id, p.title) for p in corpus.passages] == [("7", "T")]

    def test_missing_file_is_config_error_naming_path(self, tmp_path: Path) -> None:
        """A missing corpus file raises ConfigError whose message names the path."""
        path = tmp_path / "nope.jsonl"
        with pytest.raises(ConfigError, match="nope.jsonl"):
            open_corpus(path)

    def test_malformed_line_is_input_error_with_line(self, tmp_path: Path) -> None:
        """Invalid JSON on line 2 raises InputError with file and line 2."""
        path = write_lines(tmp_path / "c.jsonl", [doc("d1", "Fine."), "{not json"])
        with pytest.raises(InputError) as info:
            open_corpus(path)
        assert (info.value.file, info.value.line) == (str(path), 2)

    def test_missing_text_names_field(self, tmp_path: Path) -> None:
        """A line without 'text' raises InputError with field 'text' and its line."""
        path = write_lines(tmp_path / "c.jsonl", ['{"id": "d1"}'])
        with pytest.raises(InputError) as info:
            open_corpus(path)
        assert (info.value.line, info.value.field) == (1, "text")

    def test_wrong_text_type_names_field(self, tmp_path: Path) -> None:
        """A non-string 'text' raises InputError with field 'text'."""
        path = write_lines(tmp_path / "c.jsonl", [doc("d1", "ok"), '{"id": "d2", "text": 3}'])
        with pytest.raises(InputError) as info:
            open_corpus(path)
        assert (info.value.line, info.value.field) == (2, "text")

    def test_deep_line_is_input_error_with_line(self, tmp_path: Path) -> None:
        """A line nested 1,000 levels raises InputError "nested too deeply" with file and line 2."""
        deep = '{"id": "d2", "text": "t.", "meta": ' + '{"a":' * 1000 + "1" + "}" * 1001
        path = write_lines(tmp_path / "c.jsonl", [doc("d1", "Fine."), deep])
        with pytest.raises(InputError, match="nested too deeply") as info:
            open_corpus(path)
        assert (info.value.file, info.value.line) == (str(path), 2)

    def test_corpus_without_terms_searches_empty(self, tmp_path: Path) -> None:
        """A corpus of stopwords only loads and every search returns nothing."""
        corpus = open_corpus(write_lines(tmp_path / "c.jsonl", [doc("d1", "A b. The.")]))
        assert len(corpus) == 1
        assert corpus.search(["b"], k=3) == []

    def test_bad_window_is_config_error(self, tmp_path: Path) -> None:
        """A stride larger than the window is refused."""
        with pytest.raises(ConfigError):
            open_corpus(write_lines(tmp_path / "c.jsonl", [doc("d1", "A.")]), window=2, stride=3)


class TestFingerprint:
    def test_is_blake2b_of_bytes_and_window(self, tmp_path: Path) -> None:
        """The fingerprint is blake2b-128 over the file bytes then 'w3s2'."""
        path = write_lines(tmp_path / "c.jsonl", [doc("d1", FIVE)])
        expected = hashlib.blake2b(path.read_bytes() + b"w3s2", digest_size=16).hexdigest()
        assert open_corpus(path).fingerprint == expected

    def test_changes_with_content_not_path(self, tmp_path: Path) -> None:
        """One changed character changes it; the same bytes elsewhere keep it."""
        a = open_corpus(write_lines(tmp_path / "a.jsonl", [doc("d1", "Dose is 5 mg.")]))
        b = open_corpus(write_lines(tmp_path / "b.jsonl", [doc("d1", "Dose is 5 mg.")]))
        c = open_corpus(write_lines(tmp_path / "c.jsonl", [doc("d1", "Dose is 6 mg.")]))
        assert a.fingerprint == b.fingerprint != c.fingerprint

    def test_changes_with_window(self, tmp_path: Path) -> None:
        """Different passage settings give a different fingerprint."""
        path = write_lines(tmp_path / "c.jsonl", [doc("d1", FIVE)])
        assert open_corpus(path).fingerprint != open_corpus(path, window=2, stride=1).fingerprint


class TestSearch:
    @pytest.fixture
    def corpus(self) -> Corpus:
        return Corpus.from_documents(
            [
                ("asp", "", "Aspirin reduces the risk of myocardial infarction."),
                ("zol", "", "Zolpidem treats insomnia."),
                ("vit", "", "Vitamin D does not prevent fractures."),
                ("asp2", "", "Aspirin irritates the stomach."),
            ]
        )

    def test_best_passage_first(self, corpus: Corpus) -> None:
        """The passage holding both query terms ranks above the one holding one."""
        hits = corpus.search(analyze("aspirin infarction"), k=5)
        assert [h.passage.doc_id for h in hits] == ["asp", "asp2"]
        assert hits[0].score > hits[1].score > 0

    def test_unknown_terms_give_no_hits(self, corpus: Corpus) -> None:
        """A query with no indexed term returns nothing."""
        assert corpus.search(analyze("Eiffel tower"), k=5) == []

    def test_restricts_to_doc_ids(self, corpus: Corpus) -> None:
        """With doc_ids only those documents are searched; unknown ids are ignored."""
        hits = corpus.search(analyze("aspirin infarction"), k=5, doc_ids=["asp2", "missing"])
        assert [h.passage.doc_id for h in hits] == ["asp2"]

    def test_idf_matches_lucene_formula(self, corpus: Corpus) -> None:
        """idf = ln(1 + (N - df + 0.5)/(df + 0.5)): N = 4, df('aspirin') = 2 -> ln(2)."""
        assert corpus.idf("aspirin") == pytest.approx(math.log(1 + 2.5 / 2.5))
        assert corpus.idf("zolpidem") == pytest.approx(math.log(1 + 3.5 / 1.5))
