"""dahl.run._source: the answers a run scores, with bad records, duplicates and needs (claims, labels)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from dahl.engine._pipeline import QueuedAnswer
from dahl.results._index import InputIndex
from dahl.run._source import MAX_REPORTED_INPUT_ERRORS, InputErrors, answer_source
from dahl.formats import Needs
from dahl.formats._jsonpath import NESTED_TOO_DEEPLY
from dahl.formats._lines import STDIN

RUN_FP = b'{"run": "source-test"}'


def record(answer_id: str, **fields: Any) -> str:
    return json.dumps({"id": answer_id, "question": "Q?", "response": f"Answer {answer_id}.", **fields}) + "\n"


def read(inputs: list[Path], needs: Needs = Needs.NOTHING) -> tuple[list[str], InputErrors]:
    """Ids of the answers answer_source yields (read here), and its error collector."""
    errors = InputErrors()
    items = answer_source(inputs, "auto", None, RUN_FP, set(), InputIndex(), errors, needs)
    return [item.answer.id for item in items if isinstance(item, QueuedAnswer)], errors


class TestNeeds:
    CLAIMED = record("a", claims=[{"text": "c"}]) + record("b") + record("c", claims=[{"text": "c"}])

    def test_claimless_answer_is_rejected_here(self, tmp_path: Path) -> None:
        """With Needs.CLAIMS the answer without claims is an input error (line 2, field claims)."""
        path = tmp_path / "a.jsonl"
        path.write_text(self.CLAIMED)
        ids, errors = read([path], Needs.CLAIMS)
        assert ids == ["a", "c"]
        assert [(e.file, e.line, e.field) for e in errors.first] == [(str(path), 2, "claims")]

    def test_empty_claims_list_is_admitted(self, tmp_path: Path) -> None:
        """``"claims": []`` says the answer has no claims (FactBench's HaluEval rows): admitted, to be excluded."""
        path = tmp_path / "a.jsonl"
        path.write_text(record("a", claims=[]) + record("b"))
        ids, errors = read([path], Needs.CLAIMS)
        assert ids == ["a"]
        assert [(e.line, e.field) for e in errors.first] == [(2, "claims")]


class TestDeepNesting:
    def test_a_deep_line_is_rejected_naming_its_line(self, tmp_path: Path) -> None:
        """A line nested 1,000 levels is an input error on line 2; the records around it are read."""
        path = tmp_path / "a.jsonl"
        deep = '{"question":"Q?","response":"A.","meta":' + '{"a":' * 1000 + "1" + "}" * 1001 + "\n"
        path.write_text(record("a") + deep + record("c"))
        ids, errors = read([path])
        assert ids == ["a", "c"]
        assert [(e.line, e.message) for e in errors.first] == [(2, NESTED_TOO_DEEPLY)]


class TestDuplicates:
    def test_exact_duplicate_names_both_lines(self, tmp_path: Path) -> None:
        """A record repeated on line 3 is skipped; the error names line 3 and the first at line 1."""
        path = tmp_path / "a.jsonl"
        path.write_text(record("a") + record("b") + record("a"))
        ids, errors = read([path])
        assert ids == ["a", "b"]
        assert [(e.file, e.line, e.field) for e in errors.first] == [(str(path), 3, "id")]
        assert errors.first[0].message == f"duplicate answer (same id and content as {path}:1) skipped"

    def test_same_id_other_content_is_skipped_naming_both(self, tmp_path: Path) -> None:
        """Id "a" again on line 3 with another response: the first is kept, line 3 is a bad record naming line 1."""
        path = tmp_path / "a.jsonl"
        path.write_text(record("a") + record("b") + record("a", response="Another answer."))
        ids, errors = read([path])
        assert ids == ["a", "b"]
        assert [(e.line, e.field) for e in errors.first] == [(3, "id")]
        assert errors.first[0].message == (
            f"answer id 'a' is already used by {path}:1 with different content; skipped (give each answer its own id)"
        )

    def test_duplicate_across_files(self, tmp_path: Path) -> None:
        """The first file's line and the second file's line are both named."""
        one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
        one.write_text(record("a"))
        two.write_text(record("b") + record("a", category="other"))
        ids, errors = read([one, two])
        assert ids == ["a", "b"]
        assert [(e.file, e.line) for e in errors.first] == [(str(two), 2)]
        assert f"{one}:1" in errors.first[0].message

    def test_derived_id_is_explained(self, tmp_path: Path) -> None:
        """Two records without ids and the same question and response share a derived id; the message says so."""
        path = tmp_path / "a.jsonl"
        same = {"question": "Q?", "response": "R."}
        path.write_text(json.dumps({**same, "category": "x"}) + "\n" + json.dumps({**same, "category": "y"}) + "\n")
        ids, errors = read([path])
        assert len(ids) == 1
        assert "derived from model, question and response" in errors.first[0].message

    def test_csv_duplicate_names_its_line(self, tmp_path: Path) -> None:
        """CSV rows know their line too: a repeated row on line 4 names line 2."""
        path = tmp_path / "m.csv"
        path.write_text("question,response\nQ1?,R1.\nQ2?,R2.\nQ1?,R1.\n")
        ids, errors = read([path])
        assert len(ids) == 2
        assert [(e.line, e.field) for e in errors.first] == [(4, "id")]
        assert f"{path}:2" in errors.first[0].message

    def test_stdin_duplicate_is_named_stdin(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Read from ``-``, a repeated record is named <stdin>:2 and its first <stdin>:1."""

        class Stdin:
            buffer = io.BytesIO((record("a") + record("a")).encode())

        monkeypatch.setattr("sys.stdin", Stdin)
        ids, errors = read([STDIN])
        assert ids == ["a"]
        assert [str(e) for e in errors.first] == [
            "<stdin>:2, field 'id': duplicate answer (same id and content as <stdin>:1) skipped"
        ]

    def test_a_repeat_and_a_reuse_name_their_own_lines(self, tmp_path: Path) -> None:
        """"a" repeated on line 3 and "b" reused with other content on line 4: two answers, errors on lines 3 and 4."""
        path = tmp_path / "a.jsonl"
        path.write_text(record("a") + record("b") + record("a") + record("b", response="Other."))
        ids, errors = read([path])
        assert ids == ["a", "b"]
        assert [e.line for e in errors.first] == [3, 4]


class TestNewFormats:
    """h2's readers under h1's checks: duplicates and needs name element and row numbers."""

    def test_json_array_duplicate_names_both_elements(self, tmp_path: Path) -> None:
        """Id "a" at elements 1 and 3 of a JSON array: element 3 is skipped naming element 1."""
        path = tmp_path / "a.json"
        path.write_text("[" + ",".join([record("a"), record("b"), record("a", response="Other.")]) + "]")
        ids, errors = read([path])
        assert ids == ["a", "b"]
        assert [str(e) for e in errors.first] == [
            f"{path}:3, field 'id': answer id 'a' is already used by {path}:1 with different content; "
            "skipped (give each answer its own id)"
        ]

    def test_parquet_duplicate_across_response_columns_is_none(self, tmp_path: Path) -> None:
        """Two response columns give two answers per row (ids suffixed by column), not duplicates;
        a repeated row is one, named by its row number."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        path = tmp_path / "a.parquet"
        pq.write_table(pa.table({"id": ["q1", "q2", "q1"], "question": ["Q1?", "Q2?", "Q1?"],
                                 "x": ["A.", "B.", "A."], "y": ["C.", "D.", "C."]}), path)
        errors = InputErrors()
        items = answer_source([path], "auto", ("x", "y"), RUN_FP, set(), InputIndex(), errors)
        ids = [item.answer.id for item in items if isinstance(item, QueuedAnswer)]
        assert ids == ["q1/x", "q1/y", "q2/x", "q2/y"]
        assert [(e.line, e.field) for e in errors.first] == [(3, "id"), (3, "id")]
        assert errors.first[0].message == f"duplicate answer (same id and content as {path}:1) skipped"

    def test_fields_needs_and_columns_together(self, tmp_path: Path) -> None:
        """A field mapping, Needs.CLAIMS and two response columns: the first record gives one answer per
        column, the claimless second one an error per column (line 2, claims)."""
        path = tmp_path / "a.jsonl"
        path.write_text(json.dumps({"prompt": "Q?", "x": "A.", "y": "B.", "claims": ["c"]}) + "\n"
                        + json.dumps({"prompt": "Q2?", "x": "C.", "y": "D."}) + "\n")
        errors = InputErrors()
        answers = [item.answer for item in answer_source([path], "auto", ("x", "y"), RUN_FP, set(), InputIndex(), errors,
                                                         Needs.CLAIMS, fields={"question": "prompt"})]
        assert [(a.question, a.model, a.response) for a in answers] == [("Q?", "x", "A."), ("Q?", "y", "B.")]
        assert [(e.line, e.field) for e in errors.first] == [(2, "claims"), (2, "claims")]


class TestWarningCap:
    def test_first_twenty_then_one_line_per_file(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """50 bad lines in one file and 3 in another: 20 warnings, then one line per file; counts stay exact."""
        one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
        one.write_text(record("a") + "{bad\n" * 50)
        two.write_text("{bad\n" * 3 + record("b"))
        with caplog.at_level(logging.WARNING, logger="dahl.run._source"):
            ids, errors = read([one, two])
            errors.log_suppressed()
        assert ids == ["a", "b"]
        assert errors.count == 53
        assert len(errors.first) == MAX_REPORTED_INPUT_ERRORS == 20
        messages = [r.getMessage() for r in caplog.records]
        assert len(messages) == 22
        assert all(m.startswith("skipped input record: ") for m in messages[:20])
        assert messages[20:] == [
            f"... and 30 more bad input records in {one}; see summary.json",
            f"... and 3 more bad input records in {two}; see summary.json",
        ]

    def test_nothing_suppressed_nothing_more_logged(self, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
        """Under the cap every bad record has its warning and no summary line follows."""
        path = tmp_path / "a.jsonl"
        path.write_text(record("a") + "{bad\n" * 2)
        with caplog.at_level(logging.WARNING, logger="dahl.run._source"):
            _, errors = read([path])
            errors.log_suppressed()
        assert len(caplog.records) == 2
