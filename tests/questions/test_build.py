"""dahl questions build against the loopback mock: questions, judgements, flags, cache and resume."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.errors import InputError
from dahl.exit_status import ExitStatus
from dahl.questions._articles import read_articles
from dahl.questions._journal import ArticleQuestions, Judged
from dahl.questions._table import COLUMNS, write_table

TITLE = "Metformin and the liver"
ARTICLES = [
    {"id": "a1", "title": TITLE, "text": "Metformin lowers glucose production. It is first-line therapy for type 2 "
     "diabetes.", "license": "CC BY 4.0"},
    {"id": "a2", "title": TITLE, "text": "Insulin resistance precedes type 2 diabetes. Exercise improves insulin "
     "sensitivity."},
    {"id": "a3", "title": TITLE, "text": "Metformin lowers the glucose production. Weight gain is rare."},
]
# The mock's questions (bench/mock_questions.py): k=0 "What is known about <6 words>?",
# k=1 the context question about the title, k=2 "How does <3 words> relate to clinical practice?".
A1_Q0 = "What is known about Metformin lowers glucose production?"
CONTEXT_Q = f"What did this study conclude about {TITLE}?"
A1_Q2 = "How does Metformin lowers glucose relate to clinical practice?"
A2_Q0 = "What is known about Insulin resistance precedes type 2 diabetes?"
A2_Q2 = "How does Insulin resistance precedes relate to clinical practice?"
A3_Q0 = "What is known about Metformin lowers the glucose production?"  # ratio 96.6 to A1_Q0: near duplicate
A3_Q2 = "How does Metformin lowers the relate to clinical practice?"


def _articles(tmp_path: Path, items: list[dict[str, Any]] = ARTICLES) -> Path:
    path = tmp_path / "articles.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


def _build(url: str, articles: Path, out: Path, *extra: str) -> tuple[int, str]:
    args = ["questions", "build", str(articles), "-o", str(out), "--per-article", "3", "--base-url", url,
            "--model", "mock", "--api-key-env", "", "--no-progress", *extra]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result.exit_code, result.output


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


class TestBuildWire:
    def test_questions_flags_and_calls(self, mocks: Any, tmp_path: Path) -> None:
        """Three articles: 3 generation calls, 7 judge calls (a repeated question is judged once), 4 rows kept."""
        url = mocks.start()
        out = tmp_path / "questions.csv"
        code, text = _build(url, _articles(tmp_path), out)
        assert code == ExitStatus.OK, text
        rows = _rows(out)
        assert list(rows[0]) == list(COLUMNS)
        assert [(r["question"], r["category"], r["article_id"]) for r in rows] == [
            (A1_Q0, "bio-statistics", "a1"), (A1_Q2, "dermatology", "a1"),
            (A2_Q0, "public health", "a2"), (A2_Q2, "surgery", "a2"),
            (A3_Q2, "community medicine", "a3"),
        ]
        assert rows[0]["license"] == "CC BY 4.0" and rows[0]["generator"] == "mock"
        assert rows[0]["category_confidence"] == "0.710" and rows[0]["flags"] == ""
        assert rows[0]["prompt_version"] == "questions-generate/v1+questions-judge/v1"
        assert mocks.stats(url)["kinds"] == {"questions": 3, "judge": 7}
        assert "5 questions written" in text and "9 generated, 4 flagged, dropped" in text
        assert "  context_reference: 3\n" in text and "  duplicate: 3\n" in text

    def test_keep_flagged_records_flags_and_clusters(self, mocks: Any, tmp_path: Path) -> None:
        """--keep-flagged writes all 9 rows; a duplicate names its cluster's first question id."""
        url = mocks.start()
        out = tmp_path / "questions.csv"
        code, text = _build(url, _articles(tmp_path), out, "--keep-flagged")
        assert code == ExitStatus.OK, text
        assert "9 questions written" in text and "(9 generated, 4 flagged, kept)" in text
        rows = _rows(out)
        assert [r["flags"] for r in rows] == ["", "context_reference", "", "", "context_reference;duplicate", "",
                                              "duplicate", "context_reference;duplicate", ""]
        assert rows[4]["question_id"] == rows[4]["duplicate_cluster"] == rows[1]["question_id"]  # exact: one id
        assert rows[6]["duplicate_cluster"] == rows[0]["question_id"] != rows[6]["question_id"]  # near: its own
        assert rows[6]["question"] == A3_Q0

    def test_rerun_sends_nothing(self, mocks: Any, tmp_path: Path) -> None:
        """A re-run of a finished build sends 0 requests and writes the same CSV."""
        url = mocks.start()
        out = tmp_path / "questions.csv"
        articles = _articles(tmp_path)
        _build(url, articles, out)
        first = out.read_bytes()
        before = mocks.stats(url)["requests"]
        code, text = _build(url, articles, out)
        assert code == ExitStatus.OK, text
        assert mocks.stats(url)["requests"] == before
        assert "3 articles already done" in text
        assert out.read_bytes() == first


    def test_each_row_names_its_article_url(self, mocks: Any, tmp_path: Path) -> None:
        """article_url: the article's own url, else the PMC page of a PMC id, else empty."""
        url = mocks.start()
        out = tmp_path / "questions.csv"
        items = [{**ARTICLES[0], "id": "PMC7"}, {**ARTICLES[1], "id": "b", "url": "https://example.org/b"},
                 {**ARTICLES[2], "id": "c"}]
        code, text = _build(url, _articles(tmp_path, items), out, "--keep-flagged")
        assert code == ExitStatus.OK, text
        urls = {r["article_id"]: r["article_url"] for r in _rows(out)}
        assert urls == {"PMC7": "https://www.ncbi.nlm.nih.gov/pmc/articles/PMC7/", "b": "https://example.org/b",
                        "c": ""}

    def test_other_settings_refused(self, mocks: Any, tmp_path: Path) -> None:
        """Continuing a build with another --per-article is refused (exit 2), naming the journal."""
        url = mocks.start()
        out = tmp_path / "questions.csv"
        articles = _articles(tmp_path)
        _build(url, articles, out)
        args = ["questions", "build", str(articles), "-o", str(out), "--per-article", "2", "--base-url", url,
                "--model", "mock", "--api-key-env", "", "--no-progress"]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == ExitStatus.USAGE
        assert "other settings (--per-article)" in result.output and "questions.csv.journal.jsonl" in result.output


class TestTable:
    def test_judge_flags(self, tmp_path: Path) -> None:
        """needs_article, ambiguous and uncategorized are flags; only the unflagged row is kept."""
        judged = (
            Judged(question="What causes gout?", answerable=True, category="Medicine", confidence=0.9),
            Judged(question="What is the dose here?", answerable=False, category="Pharmacology", confidence=0.5),
            Judged(question="Why do cells age?", answerable=True, category="ambiguous", confidence=0.2),
            Judged(question="What is a prion?", answerable=True, category="", confidence=0.1),
        )
        item = ArticleQuestions(article_id="x", title="", license="", model="m", generator="g", per_article=4,
                                questions=judged)
        out = tmp_path / "q.csv"
        counts = write_table(out, [item], near=95.0, keep_flagged=False)
        assert (counts.questions, counts.written, counts.flagged, counts.dropped) == (4, 1, 3, 3)
        assert dict(counts.flags) == {"needs_article": 1, "ambiguous": 1, "uncategorized": 1}
        assert [r["question"] for r in _rows(out)] == ["What causes gout?"]


class TestArticles:
    def test_bad_line_names_file_line_field(self, tmp_path: Path) -> None:
        """A line without text is an InputError naming the file, line 2 and text."""
        path = tmp_path / "a.jsonl"
        path.write_text('{"id": 1, "text": "A."}\n{"id": 2, "title": "T"}\n')
        with pytest.raises(InputError) as info:
            list(read_articles(path))
        assert (info.value.file, info.value.line, info.value.field) == (str(path), 2, "text")

    def test_repeated_id(self, tmp_path: Path) -> None:
        """An id seen twice is refused (its questions would be journaled under one id)."""
        path = tmp_path / "a.jsonl"
        path.write_text('{"id": 1, "text": "A."}\n{"id": "1", "text": "B."}\n')
        with pytest.raises(InputError, match="seen twice"):
            list(read_articles(path))
