"""The ``dahl`` command end to end: shipped example, FActScore acceptance figures, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from dahl.cli import main

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def require(shared_data: Path, relative: str) -> Path:
    path = shared_data / relative
    if not path.exists():
        pytest.skip(f"data file {path} not found")
    return path


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def summary(out: Path) -> dict:  # type: ignore[type-arg]
    return json.loads((out / "summary.json").read_text())


class TestScoreExample:
    def test_readme_quickstart_runs_offline(self, tmp_path: Path) -> None:
        """The README's first command scores the shipped example with the evidence Checker."""
        out = tmp_path / "out"
        code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--evidence", str(EXAMPLES / "corpus.jsonl"),
                         "-o", str(out))
        assert code == 0, text
        s = summary(out)
        assert set(s["models"]) == {"model-a", "model-b"}
        assert s["models"]["model-b"]["n_abstained"] == 1  # "I don't know."
        lines = (out / "answers.jsonl").read_text().splitlines()
        assert len(lines) == 8
        assert "DAHL Score" in text

    def test_rerun_resumes_without_rescoring(self, tmp_path: Path) -> None:
        """A second identical run scores nothing new and writes identical outputs."""
        out = tmp_path / "out"
        args = ("score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", str(out))
        assert run(*args)[0] == 0
        first = (out / "answers.jsonl").read_bytes()
        first_summary = summary(out)
        code, text = run(*args)
        assert code == 0
        second_summary = summary(out)
        assert (out / "answers.jsonl").read_bytes() == first
        assert second_summary["run"]["answers_resumed"] == 8
        assert second_summary["run"]["answers_done"] == 0
        assert second_summary["changes"] == {
            "previous_run": True, "config_changed": False,
            "answers_reused": 8, "answers_scored": 0, "answers_dropped": 0,
        }
        for key in ("run", "changes"):
            first_summary.pop(key), second_summary.pop(key)
        assert first_summary == second_summary


class TestFActScoreAcceptance:
    def test_replay_reproduces_human_factscore(self, tmp_path: Path, shared_data: Path) -> None:
        """Given claims + replayed human labels give FActScore 41.9/57.5/69.3 and DAHL 47.5/61.8/82.6."""
        files = [str(require(shared_data, f"factscore/labeled/{m}.jsonl")) for m in ("InstructGPT", "ChatGPT", "PerplexityAI")]
        out = tmp_path / "fs"
        code, text = run("score", *files, "--format", "factscore", "--splitter", "given", "--checker", "replay",
                         "-o", str(out))
        assert code == 0, text
        models = summary(out)["models"]
        expected = {
            "InstructGPT": (41.9, 127, 47.5, 125),
            "ChatGPT": (57.5, 110, 61.8, 110),
            "PerplexityAI": (69.3, 115, 82.6, 106),
        }
        for model, (fs, n_fs, dahl, n_dahl) in expected.items():
            m = models[model]
            assert 100 * m["factscore_init"] == pytest.approx(fs, abs=0.05), model
            assert m["n_factscore"] == n_fs, model
            assert 100 * m["dahl_score"] == pytest.approx(dahl, abs=0.05), model
            assert m["n_scored"] == n_dahl, model
            lo, hi = m["dahl_score_ci"]
            assert lo < m["dahl_score"] < hi


class TestBadInput:
    def write(self, tmp_path: Path, text: bytes) -> Path:
        path = tmp_path / "answers.jsonl"
        path.write_bytes(text)
        return path

    GOOD = b'{"id": "a", "question": "Q?", "response": "Aspirin inhibits COX-1."}\n'

    @pytest.mark.parametrize(
        ("bad_line", "expected"),
        [
            pytest.param(b'{"id": "b", "question": "Q?", "response": \n', ":2", id="malformed-json"),
            pytest.param(b'{"id": "b", "response": "x"}\n', "question", id="missing-field"),
            pytest.param(b'{"id": "b", "question": "Q?", "response": "  "}\n', "response", id="empty-response"),
            pytest.param(b'{"id": "b", "question": "Q?", "response": "caf\xe9"}\n', ":2", id="invalid-utf8"),
            pytest.param(b'{"id": "b", "question": "Q?", "response": "A.", "meta": ' + b'{"a":' * 1000 + b"1"
                         + b"}" * 1001 + b"\n", "nested too deeply", id="nested-too-deeply"),
        ],
    )
    def test_bad_record_is_named_and_skipped(self, tmp_path: Path, bad_line: bytes, expected: str) -> None:
        """A bad line is reported with file/line/field; the good lines are still scored and written."""
        path = self.write(tmp_path, self.GOOD + bad_line + self.GOOD.replace(b'"a"', b'"c"'))
        out = tmp_path / "out"
        code, text = run("score", str(path), "--checker", "fake", "-o", str(out), "--no-progress")
        assert code == 0, text
        assert "1 input record skipped" in text
        assert str(path) in text and expected in text
        ids = [json.loads(line)["id"] for line in (out / "answers.jsonl").read_text().splitlines()]
        assert ids == ["a", "c"]
        assert summary(out)["run"]["input_errors"] == 1

    def test_bad_first_record_is_skipped_like_any_other(self, tmp_path: Path) -> None:
        """A malformed line 1 is skipped (file:1) and lines 2-3 are scored: the format comes from line 2."""
        path = self.write(tmp_path, b'{"id": "x", "question": \n' + self.GOOD + self.GOOD.replace(b'"a"', b'"c"'))
        out = tmp_path / "out"
        code, text = run("score", str(path), "--checker", "fake", "-o", str(out), "--no-progress")
        assert code == 0, text
        assert f"{path}:1: malformed JSON" in text
        ids = [json.loads(line)["id"] for line in (out / "answers.jsonl").read_text().splitlines()]
        assert ids == ["a", "c"]

    def test_given_splitter_answer_without_claims_is_skipped(self, tmp_path: Path) -> None:
        """--splitter given: an answer without claims is a bad record (file:2, field claims); the rest is scored."""
        with_claims = b'{"id": "a", "question": "Q?", "response": "R.", "claims": [{"text": "Aspirin is a drug."}]}\n'
        path = self.write(tmp_path, with_claims + b'{"id": "b", "question": "Q?", "response": "R."}\n'
                          + with_claims.replace(b'"a"', b'"c"'))
        out = tmp_path / "out"
        code, text = run("score", str(path), "--splitter", "given", "--checker", "fake", "-o", str(out), "--no-progress")
        assert code == 0, text
        assert f"{path}:2, field 'claims'" in text
        ids = [json.loads(line)["id"] for line in (out / "answers.jsonl").read_text().splitlines()]
        assert ids == ["a", "c"]
        assert summary(out)["run"]["input_errors"] == 1

    def test_replay_claim_without_label_is_skipped(self, tmp_path: Path) -> None:
        """--checker replay: a claim without a label makes its answer a bad record naming $.claims[1].label."""
        line = b'{"id": "a", "question": "Q?", "response": "R.", "claims": [{"text": "x", "label": "S"}, {"text": "y", "label": "NS"}]}\n'
        path = self.write(tmp_path, line + line.replace(b'"a"', b'"b"').replace(b', "label": "NS"', b""))
        out = tmp_path / "out"
        code, text = run("score", str(path), "--splitter", "given", "--checker", "replay", "-o", str(out),
                         "--no-progress")
        assert code == 0, text
        assert f"{path}:2, field '$.claims[1].label'" in text
        lines = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
        assert [a["id"] for a in lines] == ["a"]
        assert summary(out)["models"]["unknown"]["labels"]["unknown"] == 0

    def test_replay_needs_the_given_splitter(self, tmp_path: Path) -> None:
        """--checker replay with another Splitter has no labels to replay: a usage error naming --splitter given."""
        path = self.write(tmp_path, self.GOOD)
        code, text = run("score", str(path), "--checker", "replay", "-o", str(tmp_path / "o"))
        assert code == 2
        assert "--checker replay needs --splitter given" in text

    def test_same_id_other_content_is_written_once(self, tmp_path: Path) -> None:
        """Id "a" on lines 1 and 2 with different responses: line 1 is scored, line 2 skipped naming both lines."""
        path = self.write(tmp_path, self.GOOD + self.GOOD.replace(b"COX-1", b"COX-2"))
        out = tmp_path / "out"
        code, text = run("score", str(path), "--checker", "fake", "-o", str(out), "--no-progress")
        assert code == 0, text
        assert summary(out)["input_errors"] == [f"{path}:2, field 'id': answer id 'a' is already used by {path}:1 "
                                                "with different content; skipped (give each answer its own id)"]
        lines = [json.loads(line) for line in (out / "answers.jsonl").read_text().splitlines()]
        assert [(a["id"], a["response"]) for a in lines] == [("a", "Aspirin inhibits COX-1.")]

    def test_dash_scores_standard_input(self, tmp_path: Path) -> None:
        """``dahl score -`` scores JSONL from stdin, read once (the early input check does not consume it)."""
        out = tmp_path / "out"
        result = CliRunner().invoke(main, ["score", "-", "--checker", "fake", "-o", str(out), "--no-progress"],
                                    input=self.GOOD + self.GOOD.replace(b'"a"', b'"c"'), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        ids = [json.loads(line)["id"] for line in (out / "answers.jsonl").read_text().splitlines()]
        assert ids == ["a", "c"]
        assert summary(out)["config"]["inputs"] == ["-"]

    def test_dash_scores_gzip_from_standard_input(self, tmp_path: Path) -> None:
        """``zcat``-less piping: gzip bytes on stdin are decompressed from their first bytes and scored."""
        out = tmp_path / "out"
        data = gzip.compress(self.GOOD + self.GOOD.replace(b'"a"', b'"c"'))
        result = CliRunner().invoke(main, ["score", "-", "--checker", "fake", "-o", str(out), "--no-progress"],
                                    input=data, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        ids = [json.loads(line)["id"] for line in (out / "answers.jsonl").read_text().splitlines()]
        assert ids == ["a", "c"]

    def test_dash_twice_is_a_usage_error(self, tmp_path: Path) -> None:
        """Standard input can be read once: ``-`` given twice exits 2 saying so."""
        code, text = run("score", "-", "-", "--checker", "fake", "-o", str(tmp_path / "o"))
        assert code == 2
        assert "standard input (-) can be an input once only" in text

    def test_directory_input_is_named(self, tmp_path: Path) -> None:
        """A directory as input exits 2 saying it is a directory, not that it is missing."""
        code, text = run("score", str(tmp_path), "--checker", "fake", "-o", str(tmp_path / "o"))
        assert code == 2
        assert "is a directory" in text and "not found" not in text

    def test_unknown_format_is_a_usage_error(self, tmp_path: Path) -> None:
        """An unknown --format exits 2 with the valid choices, no traceback."""
        path = self.write(tmp_path, self.GOOD)
        code, text = run("score", str(path), "--format", "xml", "-o", str(tmp_path / "o"))
        assert code == 2
        assert "jsonl" in text and "Traceback" not in text

    def test_missing_evidence_file_is_named(self, tmp_path: Path) -> None:
        """A missing --evidence file exits 2 naming the path."""
        path = self.write(tmp_path, self.GOOD)
        code, text = run("score", str(path), "--evidence", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "o"))
        assert code == 2
        assert "nope.jsonl" in text and "Traceback" not in text

    def test_missing_input_file_is_named(self, tmp_path: Path) -> None:
        """A missing input file exits 2 naming the path."""
        code, text = run("score", str(tmp_path / "absent.jsonl"), "--checker", "fake", "-o", str(tmp_path / "o"))
        assert code == 2
        assert "absent.jsonl" in text

    def test_openai_checker_without_key_names_the_variable(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """--checker openai with an unset key variable exits 2 naming the variable, not a key."""
        monkeypatch.delenv("DAHL_TEST_KEY", raising=False)
        path = self.write(tmp_path, self.GOOD)
        code, text = run("score", str(path), "--checker", "openai", "--base-url", "http://127.0.0.1:9/v1",
                         "--model", "m", "--api-key-env", "DAHL_TEST_KEY", "-o", str(tmp_path / "o"))
        assert code == 2
        assert "DAHL_TEST_KEY" in text


class TestCacheCommands:
    def test_stats_and_clear_of_a_missing_folder_create_nothing(self, tmp_path: Path) -> None:
        """`cache stats` and `cache clear` on a folder that holds no cache report 0 and leave no folder behind."""
        missing = tmp_path / "never-used"
        code, output = run("cache", "stats", "--cache-dir", str(missing))
        assert code == 0 and "entries: 0 (no cache there yet)" in output
        code, output = run("cache", "clear", "--yes", "--cache-dir", str(missing))
        assert code == 0 and "removed 0 entries" in output
        assert not missing.exists()

    def test_stats_then_clear_after_a_run(self, tmp_path: Path) -> None:
        """After the example is scored with a cache folder, stats counts its entries and clear removes them all."""
        cache = tmp_path / "cache"
        code, _ = run("score", str(EXAMPLES / "answers.jsonl"), "--evidence", str(EXAMPLES / "corpus.jsonl"),
                      "-o", str(tmp_path / "out"), "--cache-dir", str(cache), "--no-progress")
        assert code == 0
        code, output = run("cache", "stats", "--cache-dir", str(cache))
        entries = int(output.split("entries: ", 1)[1].split()[0])
        assert code == 0 and entries > 0
        code, output = run("cache", "clear", "--yes", "--cache-dir", str(cache))
        assert code == 0 and f"removed {entries} entries" in output
        code, output = run("cache", "stats", "--cache-dir", str(cache))
        assert "entries: 0\n" in output


class TestInspect:
    def test_dahl_questions_csv_counts(self, shared_data: Path) -> None:
        """questions.csv: 8,573 rows, 8,505 unique questions, 29 categories."""
        path = require(shared_data, "dahl/questions.csv")
        code, text = run("inspect", str(path))
        assert code == 0
        assert "rows: 8573" in text
        assert "unique questions: 8505" in text
        assert "categories: 29" in text


class TestInspectInvalid:
    def test_says_why_each_record_is_invalid(self, tmp_path: Path) -> None:
        """dahl inspect lists each invalid record's file:line, field and reason, not just a count."""
        path = tmp_path / "a.jsonl"
        path.write_text('{"question": "q", "response": "r"}\n{"question": "q2", "response": " "}\n{"response": "r"}\n')
        code, text = run("inspect", str(path))
        assert code == 0, text
        assert "invalid records (skipped by dahl score): 2" in text
        assert f"{path}:2, field 'response': response is empty" in text
        assert f"{path}:3, field 'question': Object missing required field `question`" in text


class TestInterrupt:
    @pytest.mark.parametrize("written", [False, True], ids=["nothing-written", "answers-on-disk"])
    def test_message_matches_what_is_on_disk(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: bool
    ) -> None:
        """Ctrl-C exits 130; it points at the output folder only when answers.jsonl exists."""
        import dahl.cli

        out = tmp_path / "out"
        if written:
            out.mkdir()
            (out / "answers.jsonl").write_text("")

        def interrupted(*args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(dahl.cli.anyio, "run", interrupted)
        code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--evidence", str(EXAMPLES / "corpus.jsonl"),
                         "-o", str(out))
        assert code == 130
        if written:
            assert f"Finished answers are in {out}" in text.replace("\n", "")
        else:
            assert "before any answer was written" in text and "Finished answers" not in text
