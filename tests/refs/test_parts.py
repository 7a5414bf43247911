"""Units of dahl refs build: questions input, chunks, duplicates, reply parsing, the output file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dahl.errors import InputError, OutputParseError
from dahl.records import content_id
from dahl.refs._dedupe import distinct, fact_key
from dahl.refs._rate import CountMismatch
from dahl.refs._extract import chunks, parse_facts
from dahl.refs._output import finished_questions
from dahl.refs._questions import Document, read_questions
from dahl.refs._rate import Rating, parse_ratings


class TestReadQuestions:
    def test_jsonl_with_inline_documents_and_doc_ids(self, tmp_path: Path) -> None:
        """question_id defaults to content_id of the question; doc ids become strings; repeats are dropped."""
        path = tmp_path / "q.jsonl"
        path.write_text("\n".join([
            json.dumps({"question": "  What is  PCD? ", "documents": [{"id": 7, "text": "PCD is cell death."}]}),
            json.dumps({"question_id": "x", "question": "Why?", "doc_ids": [1, "b"]}),
            json.dumps({"question": "What is PCD?"}),
        ]) + "\n")
        got = list(read_questions(path))
        assert [(q.question_id, q.question, q.doc_ids, q.line) for q in got] == [
            (content_id("What is PCD?"), "What is PCD?", None, 1), ("x", "Why?", ("1", "b"), 2)]
        assert got[0].documents == (Document(id="7", text="PCD is cell death."),)

    def test_csv_doc_ids(self, tmp_path: Path) -> None:
        """A CSV questions file: doc_ids separated by ';', rows numbered from 2 (after the header)."""
        path = tmp_path / "q.csv"
        path.write_text("question_id,question,doc_ids\nq1,Who was Curie?,curie; nobel\nq2,What is metformin?,\n")
        got = [(q.question_id, q.doc_ids, q.line) for q in read_questions(path)]
        assert got == [("q1", ("curie", "nobel"), 2), ("q2", None, 3)]

    def test_answers_input_gives_distinct_questions(self, tmp_path: Path) -> None:
        """An answers file (records with response): one question per distinct question text, in order."""
        path = tmp_path / "answers.jsonl"
        rows = [("Q one?", "A", "m1"), ("Q two?", "B", "m1"), ("Q one?", "C", "m2")]
        path.write_text("".join(json.dumps({"question": q, "response": r, "model": m}) + "\n" for q, r, m in rows))
        assert [q.question for q in read_questions(path)] == ["Q one?", "Q two?"]

    def test_empty_question_names_file_line_and_field(self, tmp_path: Path) -> None:
        """A blank question is an InputError naming the file, line 2 and the field."""
        path = tmp_path / "q.jsonl"
        path.write_text(json.dumps({"question": "Fine?"}) + "\n" + json.dumps({"question": " "}) + "\n")
        with pytest.raises(InputError) as caught:
            list(read_questions(path))
        assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), 2, "question")

    @pytest.mark.parametrize(
        ("documents", "field"),
        [([], "documents"), ([{"id": "a", "text": "A."}, {"id": "b", "text": " "}], "$.documents[1].text")],
        ids=["no-documents", "empty-text"],
    )
    def test_empty_inline_documents_are_refused(self, tmp_path: Path, documents: list[object], field: str) -> None:
        """An empty documents list, or an inline document without text, names the file, line 2 and the field."""
        path = tmp_path / "q.jsonl"
        path.write_text(json.dumps({"question": "Fine?"}) + "\n" + json.dumps({"question": "Q?", "documents": documents})
                        + "\n")
        with pytest.raises(InputError) as caught:
            list(read_questions(path))
        assert (caught.value.file, caught.value.line, caught.value.field) == (str(path), 2, field)


class TestChunks:
    def test_chunk_and_sentence_granularity(self) -> None:
        """Seven sentences: chunks of 5 + 2 sentences, or 7 one-sentence chunks; spans index the text."""
        text = " ".join(f"Sentence number {n} is here." for n in range(1, 8))
        got = chunks("d", "T", text)
        assert [c.span for c in got] == [(0, 134), (135, 188)]  # 26 characters a sentence, one space between
        assert all(text[c.span[0]:c.span[1]] == c.text for c in got)
        assert len(chunks("d", "T", text, "sentence")) == 7
        assert chunks("d", "T", "   ") == []


class TestDistinct:
    def test_exact_and_near_duplicates(self) -> None:
        """Case, spacing and final period are exact duplicates; an article is near; a number is not."""
        facts = ["Marie Curie was born in 1867.", "marie  curie was born in 1867", "Marie Curie was born in 1868.",
                 "The CFTR gene encodes a chloride channel.", "The CFTR gene encodes the chloride channel."]
        assert distinct(facts, str) == [facts[0], facts[2], facts[3]]
        assert distinct(facts, str, near=100) == [facts[0], facts[2], facts[3], facts[4]]
        assert fact_key(" The  Gene. ", fold=True) == "the gene"

    def test_bad_threshold(self) -> None:
        """A threshold outside [0, 100] is refused."""
        with pytest.raises(ValueError, match=r"\[0, 100\]"):
            distinct(["a"], str, near=101)


class TestParse:
    def test_facts(self) -> None:
        """A fenced JSON reply parses; blank facts are dropped and texts normalized."""
        assert parse_facts('```json\n{"facts": ["A  b.", " ", "C."]}\n```') == ["A b.", "C."]
        with pytest.raises(OutputParseError, match="no \"facts\" list"):
            parse_facts('{"claims": []}')

    def test_ratings_in_fact_order(self) -> None:
        """Ratings are returned by id, whatever the reply's order."""
        raw = json.dumps({"ratings": [{"id": 2, "relevance": 5, "salience": 1}, {"id": 1, "relevance": 3, "salience": 4}]})
        assert parse_ratings(raw, 2) == [Rating(3, 4), Rating(5, 1)]

    @pytest.mark.parametrize(("ratings", "error"), [
        ([{"id": 1, "relevance": 3, "salience": 4}], CountMismatch),
        ([{"id": 1, "relevance": 3, "salience": 4}, {"id": 1, "relevance": 3, "salience": 4}], CountMismatch),
        ([{"id": 1, "relevance": 3, "salience": 4}, {"id": 3, "relevance": 3, "salience": 4}], CountMismatch),
        ([{"id": 1, "relevance": 6, "salience": 4}, {"id": 2, "relevance": 3, "salience": 4}], OutputParseError),
    ], ids=["missing", "twice", "unknown-id", "out-of-range"])
    def test_bad_ratings(self, ratings: list[dict[str, int]], error: type[Exception]) -> None:
        """Missing, repeated or unknown ids are count mismatches; a 6 is a parse error."""
        with pytest.raises(error):
            parse_ratings(json.dumps({"ratings": ratings}), 2)


class TestFinishedQuestions:
    def test_torn_last_line_is_truncated(self, tmp_path: Path) -> None:
        """Complete lines give the finished ids; a last line without newline is cut off the file."""
        path = tmp_path / "refs.jsonl"
        good = '{"question_id":"a","facts":[]}\n'
        path.write_text(good + '{"question_id":"b","fa')
        assert finished_questions(path) == {"a"}
        assert path.read_text() == good

    def test_foreign_file_is_refused(self, tmp_path: Path) -> None:
        """A complete line that is not a set stops the build and leaves the file alone."""
        path = tmp_path / "refs.jsonl"
        path.write_text('{"question_id":"a"}\nnot json\n')
        with pytest.raises(InputError, match="not a reference set line"):
            finished_questions(path)
        assert path.read_text() == '{"question_id":"a"}\nnot json\n'
