"""DAHL CSV reader: columns, defaults, multi-line fields and every error case."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.errors import ConfigError, InputError
from dahl.formats import read_answers
from dahl.records import Answer, content_id


def write(tmp_path: Path, data: str | bytes, name: str = "llama-3-8b.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


class TestReadCsv:
    def test_reads_rows_with_defaults(self, tmp_path: Path) -> None:
        """Model defaults to the file stem, id to the content hash, extra columns go to meta."""
        path = write(
            tmp_path,
            "question,category,response,source\r\n"
            'What is PACER?,pediatrics,"A shuttle run, paced by beeps.",pmc1\r\n',
        )
        (answer,) = read_answers(path, "csv")
        assert answer == Answer(
            id=content_id("llama-3-8b", "What is PACER?", "A shuttle run, paced by beeps."),
            question="What is PACER?",
            response="A shuttle run, paced by beeps.",
            model="llama-3-8b",
            category="pediatrics",
            meta={"source": "pmc1"},
        )

    def test_id_model_and_named_response_column(self, tmp_path: Path) -> None:
        """id and model columns are used; response_column picks the answer column."""
        path = write(tmp_path, "id,model,question,category,answer\nx7,mpt-7b,Q?,oncology,A.\n")
        (answer,) = read_answers(path, "csv", response_column="answer")
        assert (answer.id, answer.model, answer.response) == ("x7", "mpt-7b", "A.")

    def test_multiline_field_and_line_numbers(self, tmp_path: Path) -> None:
        """A quoted response spanning lines 2-3 is one record; the next record starts on line 4."""
        path = write(
            tmp_path,
            'question,category,response\nQ1,all,"line one\nline two"\nQ2,all,\n',
        )
        errors: list[InputError] = []
        answers = list(read_answers(path, "csv", on_error=errors.append))
        assert [a.response for a in answers] == ["line one\nline two"]
        assert [(e.line, e.field) for e in errors] == [(4, "response")]

    def test_missing_category_is_all(self, tmp_path: Path) -> None:
        """Without a category column (or with an empty cell) the category is "all"."""
        path = write(tmp_path, "question,response\nQ,R\n")
        assert next(read_answers(path, "csv")).category == "all"


class TestCsvErrors:
    def test_no_response_column(self, tmp_path: Path) -> None:
        """A questions-only CSV raises ConfigError listing its columns and --response-column."""
        path = write(tmp_path, "question,category\nQ,all\n")
        with pytest.raises(ConfigError, match=r"columns: question, category\).*--response-column"):
            read_answers(path, "csv")

    def test_named_response_column_absent(self, tmp_path: Path) -> None:
        """A response_column the header lacks raises ConfigError naming it."""
        path = write(tmp_path, "question,response\nQ,R\n")
        with pytest.raises(ConfigError, match="no column 'reply'"):
            read_answers(path, "csv", response_column="reply")

    def test_no_question_column(self, tmp_path: Path) -> None:
        """A header without "question" raises ConfigError."""
        path = write(tmp_path, "prompt,response\nQ,R\n")
        with pytest.raises(ConfigError, match="no 'question' column"):
            read_answers(path, "csv")

    def test_empty_response_names_column(self, tmp_path: Path) -> None:
        """An empty cell in the response column raises InputError on its line with the column name."""
        path = write(tmp_path, "question,category,reply\nQ,all,R\nQ2,all,  \n")
        with pytest.raises(InputError) as info:
            list(read_answers(path, "csv", response_column="reply"))
        assert (info.value.line, info.value.field) == (3, "reply")

    def test_wrong_field_count(self, tmp_path: Path) -> None:
        """A row with 2 fields under a 3-column header raises InputError for its line."""
        path = write(tmp_path, "question,category,response\nQ,all,R\nQ,R\n")
        with pytest.raises(InputError, match="expected 3 fields.*got 2") as info:
            list(read_answers(path, "csv"))
        assert info.value.line == 3

    def test_invalid_utf8_line_3(self, tmp_path: Path) -> None:
        """An invalid UTF-8 byte on line 3 is reported for line 3 and only that row is skipped."""
        path = write(tmp_path, b"question,response\nQ1,R1\nQ2,R\xe9\nQ3,R3\n")
        with pytest.raises(InputError, match="invalid UTF-8") as info:
            list(read_answers(path, "csv"))
        assert info.value.line == 3
        errors: list[InputError] = []
        answers = list(read_answers(path, "csv", on_error=errors.append))
        assert [a.question for a in answers] == ["Q1", "Q3"]
        assert [e.line for e in errors] == [3]

    def test_unterminated_quote(self, tmp_path: Path) -> None:
        """A quote left open at end of file is an InputError naming the line the record starts on."""
        path = write(tmp_path, 'question,response\nQ1,R1\nQ2,"open\nmore\n')
        with pytest.raises(InputError, match="malformed CSV") as info:
            list(read_answers(path, "csv"))
        assert info.value.line == 3

    def test_bad_quote_skipped_with_on_error(self, tmp_path: Path) -> None:
        """A stray quote on line 2 is reported and reading resumes on line 3."""
        path = write(tmp_path, 'question,response\n"Q1"x,R1\nQ2,R2\n')
        errors: list[InputError] = []
        answers = list(read_answers(path, "csv", on_error=errors.append))
        assert [a.question for a in answers] == ["Q2"]
        assert [e.line for e in errors] == [2]
