"""``dahl questions lint``: the report on the DAHL questions file, bad input, exit statuses."""

from __future__ import annotations

import csv
import json
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.errors import InputError
from dahl.questions._checks import context_flags
from dahl.questions._lint import lint_questions, read_questions
from tests.conftest import require_data


def _lint(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["questions", "lint", *args], catch_exceptions=False)
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def dahl_report() -> tuple[Path, int, dict[str, Any]]:
    """The --json report on the released DAHL questions.csv (one clustering run, ~10 s)."""
    path = require_data("dahl/questions.csv")
    status, output = _lint(str(path), "--json")
    return path, status, json.loads(output)


class TestDahlQuestions:
    def test_counts(self, dahl_report: tuple[Path, int, dict[str, Any]]) -> None:
        """8,573 rows, 68 duplicate rows and 8,505 unique questions, as a csv-module count finds."""
        path, _, report = dahl_report
        with path.open(newline="", encoding="utf-8") as f:
            questions = [row["question"] for row in csv.DictReader(f)]
        keys = {" ".join(unicodedata.normalize("NFC", q).casefold().split()) for q in questions}
        assert (len(questions), len(questions) - len(keys), len(keys)) == (8573, 68, 8505)
        assert (report["rows"], report["duplicate_rows"], report["unique_questions"]) == (8573, 68, 8505)

    def test_categories(self, dahl_report: tuple[Path, int, dict[str, Any]]) -> None:
        """29 labels, no "other"; "statistics" beside "bio-statistics" (community medicine and PSM are both
        categories of the paper, §3.2.3)."""
        path, _, report = dahl_report
        with path.open(newline="", encoding="utf-8") as f:
            labels = {row["category"] for row in csv.DictReader(f)}
        assert len(labels) == len(report["categories"]) == 29 and "other" not in labels
        assert report["unused_categories"] == ["other"]
        assert report["non_canonical"] == {"statistics": "bio-statistics"}
        assert report["near_synonyms"] == [["statistics", "bio-statistics"]]
        assert {"community medicine", "preventive and social medicine"} <= labels

    def test_context_dependent(self, dahl_report: tuple[Path, int, dict[str, Any]]) -> None:
        """At least 44 questions still name their article; every "the case report" question is among them."""
        path, _, report = dahl_report
        with path.open(newline="", encoding="utf-8") as f:
            named = [r["question"] for r in csv.DictReader(f)
                     if any(p in r["question"].lower() for p in ("the case report", "this study", "this case"))]
        assert len(named) == 48  # an independent substring count
        assert all("context_reference" in context_flags(q) for q in named)
        assert report["context"]["context_reference"] == 97 >= len(named) >= 44
        assert report["context"] == {"context_reference": 97, "context_verb": 78, "context_finding": 45,
                                     "context_basis": 43}  # 21 of 64 name a standard ("the DSM-5 criteria")
        assert report["context_dependent"] == 188

    def test_no_question_mark(self, dahl_report: tuple[Path, int, dict[str, Any]]) -> None:
        """5,103 questions do not end in "?" (imperative essay prompts), as a csv-module count finds."""
        path, _, report = dahl_report
        with path.open(newline="", encoding="utf-8") as f:
            n = sum(1 for r in csv.DictReader(f) if not r["question"].strip().endswith("?"))
        assert n == report["no_question_mark"] == 5103

    def test_exit_status_and_dropping(self, dahl_report: tuple[Path, int, dict[str, Any]]) -> None:
        """Duplicates and context-dependent questions would be dropped: exit status 6, 258 rows dropping."""
        _, status, report = dahl_report
        assert status == 6
        assert report["near_duplicate_rows"] == 3
        assert report["dropping"] == 258


def _write(tmp_path: Path, text: str, name: str = "q.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


class TestSmallFiles:
    def test_clean_file_exits_0(self, tmp_path: Path) -> None:
        """Only informational findings (a prompt without "?", unused categories): exit 0, readable report."""
        path = _write(tmp_path, "question,category\nWhat is the mechanism of metformin?,pharmacology\n"
                                "Discuss the anatomy of the brachial plexus.,Anatomy\n")
        status, output = _lint(str(path))
        assert status == 0
        assert "rows: 2\n" in output and "unique questions: 2\n" in output
        assert "questions not ending in '?': 1 (informational" in output
        assert "non-canonical category: 'Anatomy' (canonical: 'anatomy')" in output
        assert "rows dropped by `dahl questions build`: 0\n" in output

    def test_duplicate_exits_6(self, tmp_path: Path) -> None:
        """A case-and-space variant of an earlier question is a duplicate row: exit 6."""
        path = _write(tmp_path, "question,category\nWhat is asthma?,medicine\n\"what  is ASTHMA?\",medicine\n")
        status, output = _lint(str(path))
        assert status == 6
        assert "duplicate rows: 1 " in output and "unique questions: 1\n" in output

    def test_multiline_field_line_numbers(self, tmp_path: Path) -> None:
        """A quoted field over two lines: the next row starts on line 4."""
        path = _write(tmp_path, 'question,category\n"What is\nasthma?",medicine\nWhat is gout?,medicine\n')
        assert [line for line, _, _ in read_questions(path)] == [2, 4]

    def test_missing_column(self, tmp_path: Path) -> None:
        """A file without a category column: exit 2, the message names file, line 1 and the field."""
        path = _write(tmp_path, "question,topic\nWhat is asthma?,medicine\n")
        status, output = _lint(str(path))
        assert status == 2
        assert f"{path}:1, field 'category': missing column" in " ".join(output.split())

    def test_wrong_field_count(self, tmp_path: Path) -> None:
        """A row with an extra unquoted comma names its line."""
        path = _write(tmp_path, "question,category\nWhat is asthma?,medicine\nWhat is A, B?,medicine\n")
        with pytest.raises(InputError, match=r"q\.csv:3, field 'category': 3 fields where the header has 2"):
            lint_questions(path)

    def test_not_text(self, tmp_path: Path) -> None:
        """A binary file (not UTF-8) is an InputError naming file and line."""
        path = tmp_path / "q.parquet"
        path.write_bytes(b"PAR1\n\x00\xff\xfe")
        with pytest.raises(InputError, match=r"q\.parquet:2: not UTF-8 text"):
            lint_questions(path)

    def test_missing_file(self, tmp_path: Path) -> None:
        """A file that does not exist: exit 2 naming it."""
        status, output = _lint(str(tmp_path / "none.csv"))
        assert status == 2 and "none.csv: cannot read" in output

    def test_near_duplicates_and_threshold(self, tmp_path: Path) -> None:
        """A near duplicate (ratio 98.5) counts at the default 95 and not with --near 100."""
        path = _write(tmp_path, "question,category\n"
                                "What are the risk factors for developing a neonatal liver abscess?,pediatrics\n"
                                "What are the risk factors for developing neonatal liver abscess?,pediatrics\n")
        status, output = _lint(str(path), "--json")
        assert (status, json.loads(output)["near_duplicate_rows"], json.loads(output)["dropping"]) == (6, 1, 1)
        status, output = _lint(str(path), "--json", "--near", "100")
        assert (status, json.loads(output)["near_duplicate_rows"], json.loads(output)["dropping"]) == (0, 0, 0)
