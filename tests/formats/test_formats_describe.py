"""describe_input: the figures `dahl inspect` shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.formats import InputStats, describe_input
from dahl.formats._stats import MAX_INVALID_EXAMPLES


class TestDescribeInput:
    def test_csv_without_responses(self, tmp_path: Path) -> None:
        """A questions-only CSV is described: rows, normalized-distinct questions, categories, no models."""
        path = tmp_path / "q.csv"
        path.write_text("question,category\nWhat  is X?,a\nWhat is X?,b\nY?,a\n", encoding="utf-8")
        assert describe_input(path) == InputStats(
            rows=3, unique_questions=2, categories={"a": 2, "b": 1}, models={}, with_response=0
        )

    def test_csv_with_responses_and_bad_row(self, tmp_path: Path) -> None:
        """Models count rows with a response; a bad row is counted as invalid, not raised."""
        path = tmp_path / "m.csv"
        path.write_bytes(b"question,model,answer\nQ1,m1,A\nQ2,m1,\nQ3,m2,B\nQ4,\xff,C\n")
        stats = describe_input(path, response_column="answer")
        assert (stats.rows, stats.with_response, stats.invalid) == (3, 2, 1)
        assert stats.models == {"m1": 1, "m2": 1}

    def test_jsonl_counts_invalid(self, tmp_path: Path) -> None:
        """A jsonl line with an empty response is invalid; the others are counted by model/category."""
        path = tmp_path / "a.jsonl"
        path.write_text(
            '{"question": "q1", "response": "r", "model": "m", "category": "c"}\n'
            '{"question": "q2", "response": ""}\n'
            '{"question": "q1", "response": "r2", "model": "n"}\n',
            encoding="utf-8",
        )
        assert describe_input(path) == InputStats(
            rows=2,
            unique_questions=1,
            categories={"c": 1, "all": 1},
            models={"m": 1, "n": 1},
            with_response=2,
            invalid=1,
            invalid_examples=(f"{path}:2, field 'response': response is empty",),
        )

    def test_says_why_records_are_invalid(self, tmp_path: Path) -> None:
        """The first invalid records are listed with file, line, field and reason; past the cap only counted."""
        path = tmp_path / "a.jsonl"
        path.write_text('{"question": "q1", "response": "r"}\n{"question": "q2", "response": ""}\n'
                        + "{bad\n" * 30)
        stats = describe_input(path)
        assert stats.invalid == 31
        assert len(stats.invalid_examples) == MAX_INVALID_EXAMPLES == 20
        assert stats.invalid_examples[:2] == (
            f"{path}:2, field 'response': response is empty",
            f"{path}:3: malformed JSON: JSON is malformed: object keys must be strings (byte 1)",
        )

    def test_deep_line_counts_invalid(self, tmp_path: Path) -> None:
        """A line nested 1,000 levels is counted as invalid; the lines around it are counted as rows."""
        path = tmp_path / "a.jsonl"
        deep = '{"question":"Q?","response":"A.","meta":' + '{"a":' * 1000 + "1" + "}" * 1001
        path.write_text('{"question": "q1", "response": "r"}\n' + deep + '\n{"question": "q2", "response": "r"}\n')
        stats = describe_input(path)
        assert (stats.rows, stats.invalid) == (2, 1)


@pytest.mark.data
class TestDescribeSharedData:
    def test_dahl_questions(self, shared_data: Path) -> None:
        """questions.csv: 8,573 rows, 8,505 unique questions, 29 categories (public health 969)."""
        stats = describe_input(shared_data / "dahl" / "questions.csv")
        assert (stats.rows, stats.unique_questions, len(stats.categories)) == (8573, 8505, 29)
        assert list(stats.categories.items())[:2] == [("public health", 969), ("oncology", 868)]
        assert stats.categories["preventive and social medicine"] == 7
        assert (stats.with_response, stats.invalid, stats.models) == (0, 0, {})

    def test_factscore_chatgpt(self, shared_data: Path) -> None:
        """ChatGPT.jsonl: 128 rows, 128 topics' questions, 5 frequency buckets (medium 27, freq 23)."""
        stats = describe_input(shared_data / "factscore" / "labeled" / "ChatGPT.jsonl")
        assert (stats.rows, stats.unique_questions, stats.with_response) == (128, 128, 128)
        assert stats.categories == {"very rare": 25, "rare": 26, "medium": 27, "freq": 23, "very freq": 27}
        assert stats.models == {"ChatGPT": 128}
