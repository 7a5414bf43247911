"""One response column per model (--response-column repeated) and a CSV column named twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.errors import ConfigError, InputError
from dahl.formats import describe_input, read_answers


def write(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestCsvResponseColumns:
    def test_one_answer_per_column(self, tmp_path: Path) -> None:
        """Two response columns give two answers per row, in option order, named after their columns."""
        path = write(tmp_path, "id,question,gpt-4o,llama-3,note\nq1,Q1?,A1.,B1.,n\nq2,Q2?,A2.,B2.,m\n", "runs.csv")
        answers = list(read_answers(path, response_column=["gpt-4o", "llama-3"]))
        assert [(a.id, a.model, a.response) for a in answers] == [
            ("q1/gpt-4o", "gpt-4o", "A1."),
            ("q1/llama-3", "llama-3", "B1."),
            ("q2/gpt-4o", "gpt-4o", "A2."),
            ("q2/llama-3", "llama-3", "B2."),
        ]
        assert answers[0].meta == {"note": "n"}  # the other response column is not meta

    def test_single_column_keeps_file_stem_model(self, tmp_path: Path) -> None:
        """One --response-column keeps the old naming: the model is the file's stem."""
        path = write(tmp_path, "question,answer\nQ?,A.\n", "llama-3-8b.csv")
        [answer] = list(read_answers(path, response_column=["answer"]))
        assert answer.model == "llama-3-8b"

    def test_empty_cell_costs_one_answer(self, tmp_path: Path) -> None:
        """An empty cell in one column rejects that answer only; the row's other column is read."""
        path = write(tmp_path, "question,a,b\nQ?,,B.\n", "m.csv")
        errors: list[InputError] = []
        answers = list(read_answers(path, response_column=["a", "b"], on_error=errors.append))
        assert [a.model for a in answers] == ["b"]
        assert [(e.line, e.field, e.message) for e in errors] == [(2, "a", "response is empty")]

    def test_missing_column_lists_columns(self, tmp_path: Path) -> None:
        """A response column the header lacks is a ConfigError listing the columns."""
        path = write(tmp_path, "question,a\nQ?,A.\n", "m.csv")
        with pytest.raises(ConfigError, match=r"has no column 'b' \(columns: question, a\)"):
            read_answers(path, response_column=["a", "b"])

    def test_describe_counts_models(self, tmp_path: Path) -> None:
        """dahl inspect counts one model per response column."""
        path = write(tmp_path, "question,a,b\nQ1?,A.,B.\nQ2?,A.,\n", "m.csv")
        stats = describe_input(path, response_column=["a", "b"])
        assert (stats.rows, stats.models, stats.invalid) == (3, {"a": 2, "b": 1}, 1)


class TestDuplicateColumns:
    def test_two_response_columns_is_an_error(self, tmp_path: Path) -> None:
        """A CSV with two columns named response names the file and the column instead of using the last."""
        path = write(tmp_path, "question,response,response\nQ?,first,second\n", "dup.csv")
        with pytest.raises(ConfigError, match=r"dup\.csv has two columns named 'response'"):
            read_answers(path)

    def test_describe_reports_it_too(self, tmp_path: Path) -> None:
        """dahl inspect reports the duplicate column the same way."""
        path = write(tmp_path, "question,category,category\nQ?,a,b\n", "dup.csv")
        with pytest.raises(ConfigError, match=r"dup\.csv has two columns named 'category'"):
            describe_input(path)


class TestRecordResponseColumns:
    def test_jsonl_two_columns(self, tmp_path: Path) -> None:
        """JSON Lines records with two answer fields give one answer per field (MedHallu's layout)."""
        path = write(
            tmp_path,
            '{"Question": "Q?", "Ground Truth": "Yes.", "Hallucinated Answer": "No."}\n',
            "medhallu.jsonl",
        )
        answers = list(
            read_answers(path, response_column=["Ground Truth", "Hallucinated Answer"], fields={"question": "Question"})
        )
        assert [(a.model, a.question, a.response) for a in answers] == [
            ("Ground Truth", "Q?", "Yes."),
            ("Hallucinated Answer", "Q?", "No."),
        ]

    def test_missing_value_names_column(self, tmp_path: Path) -> None:
        """A record without a value in a response column is rejected naming that column."""
        path = write(tmp_path, '{"question": "Q?", "a": "A."}\n', "x.jsonl")
        errors: list[InputError] = []
        answers = list(read_answers(path, response_column=["a", "b"], on_error=errors.append))
        assert [a.model for a in answers] == ["a"]
        assert [(e.line, e.field) for e in errors] == [(1, "b")]
