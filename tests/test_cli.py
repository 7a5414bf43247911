"""The ``dahl`` command end to end: shipped example, FActScore acceptance figures, bad input."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from dahl.cli import main
from dahl.errors import FatalAPIError
from dahl.exit_status import ExitStatus

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


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
        assert s["models"]["model-b"]["unsupported_by_reason"] == {"contradicted": 3, "no_evidence": 2, "unstated": 0}
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


class TestGivenClaimsAbstain:
    def test_noncommittal_answer_with_given_claims_is_abstained(self, tmp_path: Path) -> None:
        """"I don't know." with one supported given claim is abstained, as the rule Splitter's run scores it;
        a response that repeats its question is not emptied (given claims are not taken from it)."""
        path = tmp_path / "given.jsonl"
        path.write_text("".join(
            json.dumps({"id": i, "question": question, "response": response, "model": "m",
                        "claims": [{"text": "Aspirin is a drug.", "label": label}]}) + "\n"
            for i, question, response, label in (
                ("a", "What is aspirin?", "I don't know.", "S"), ("b", "What is aspirin?", "Aspirin is a food.", "NS"),
                ("c", "Aspirin is a drug.", "Aspirin is a drug.", "S"))))
        given, rules = tmp_path / "given", tmp_path / "rules"
        code, text = run("score", str(path), "--splitter", "given", "--checker", "replay", "-o", str(given),
                         "--no-progress")
        assert code == 0, text
        code, text = run("score", str(path), "--checker", "fake", "-o", str(rules), "--no-progress")
        assert code == 0, text
        line = json.loads((given / "answers.jsonl").read_text().splitlines()[0])
        assert (line["id"], line["status"], line["reason"], line["claims"]) == ("a", "abstained", "abstained", [])
        assert set(line["metrics"].values()) == {None}
        as_rules = json.loads((rules / "answers.jsonl").read_text().splitlines()[0])
        for key in ("status", "reason", "claims", "counts", "metrics", "response"):
            assert line[key] == as_rules[key], key
        model = summary(given)["models"]["m"]
        assert (model["n_abstained"], model["n_scored"], model["dahl_score"]) == (1, 2, 0.5)


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
        assert code == ExitStatus.PARTIAL, text
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
        assert code == ExitStatus.PARTIAL, text
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
        assert code == ExitStatus.PARTIAL, text
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
        assert code == ExitStatus.PARTIAL, text
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
        assert code == ExitStatus.PARTIAL, text
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

    def test_missing_input_file_is_named_before_adapter_options(self, tmp_path: Path) -> None:
        """A missing input with the default evidence Checker and no --evidence names the input, not --evidence."""
        code, text = run("score", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "o"))
        assert code == ExitStatus.USAGE
        assert f"input file not found: {tmp_path / 'missing.jsonl'}" in text and "--evidence" not in text

    def test_json_object_given_as_json_array_is_refused(self, tmp_path: Path) -> None:
        """--format json on a top-level object exits 2 naming the file and the array it expected, not 0 records."""
        path = tmp_path / "obj.json"
        path.write_text('{"answers": [{"question": "q", "response": "r"}]}\n')
        code, text = run("score", str(path), "--format", "json", "--checker", "fake", "-o", str(tmp_path / "o"),
                         "--no-progress")
        assert code == ExitStatus.USAGE, text
        assert f"{path}: expected a JSON array of records" in text.replace("\n", "")

    def test_refs_nested_1000_deep_is_named(self, tmp_path: Path) -> None:
        """A --refs line nested 1,000 deep exits 2 naming file and line, not a RecursionError."""
        refs = tmp_path / "refs.jsonl"
        refs.write_text('{"question_id": "q", "facts": [{"text": "x"}], "meta": {"a": ' + "[" * 1000 + "]" * 1000
                        + "}}\n")
        code, text = run("score", str(self.write(tmp_path, self.GOOD)), "--checker", "fake", "--refs", str(refs),
                         "-o", str(tmp_path / "o"), "--no-progress")
        assert code == ExitStatus.USAGE, text
        assert f"{refs}:1: nested too deeply" in text.replace("\n", "")

    def test_config_chooses_the_checker(self, tmp_path: Path) -> None:
        """[check] kind in --config chooses the Checker when --checker is not given; --checker wins."""
        config = tmp_path / "dahl.toml"
        config.write_text('[check]\nkind = "fake"\n')
        path = self.write(tmp_path, self.GOOD)
        code, text = run("score", str(path), "--config", str(config), "-o", str(tmp_path / "o"), "--no-progress")
        assert code == 0, text
        assert summary(tmp_path / "o")["config"]["checker"].startswith("fake/")
        code, text = run("score", str(path), "--config", str(config), "--checker", "evidence", "--evidence",
                         str(EXAMPLES / "corpus.jsonl"), "-o", str(tmp_path / "o2"), "--no-progress")
        assert code == 0, text
        assert summary(tmp_path / "o2")["config"]["checker"].startswith("evidence/")

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
        import dahl.cli._console

        out = tmp_path / "out"
        if written:
            out.mkdir()
            (out / "answers.jsonl").write_text("")

        def interrupted(*args: object, **kwargs: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(dahl.cli._console.anyio, "run", interrupted)
        code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--evidence", str(EXAMPLES / "corpus.jsonl"),
                         "-o", str(out))
        assert code == 130
        if written:
            assert f"Finished answers are in {out}" in text.replace("\n", "")
        else:
            assert "before any answer was written" in text and "Finished answers" not in text


class TestExitStatus:
    GOOD = TestBadInput.GOOD

    def test_every_record_skipped_is_nothing_scored(self, tmp_path: Path) -> None:
        """A file whose every record is bad exits 5 (nothing scored), not 0."""
        path = tmp_path / "answers.jsonl"
        path.write_bytes(b'{"id": "a", "question": "Q?"}\n{"id": "b", "question": "Q?", "response": " "}\n')
        code, text = run("score", str(path), "--format", "jsonl", "--checker", "fake", "-o", str(tmp_path / "o"),
                         "--no-progress")
        assert code == ExitStatus.NOTHING_SCORED, text
        assert "nothing scored" in text and "2 input records skipped" in text

    @pytest.mark.parametrize(("name", "content"), [
        ("empty.jsonl", b""),
        ("blank.jsonl", b"\n  \n"),
        ("bad.jsonl", b'garbage\n{"x": 1}\n'),
        ("bad.jsonl.gz", gzip.compress(b'{"question": "Q?"}\n')),
    ], ids=["empty", "blank-lines", "only-bad-records", "gzip-only-bad"])
    def test_a_jsonl_file_with_nothing_to_score_is_nothing_scored(self, tmp_path: Path, name: str,
                                                                 content: bytes) -> None:
        """Auto-detection agrees with --format jsonl: a .jsonl file with no good record exits 5, not 2."""
        path = tmp_path / name
        path.write_bytes(content)
        code, text = run("score", str(path), "--checker", "fake", "-o", str(tmp_path / "o"), "--no-progress")
        assert code == ExitStatus.NOTHING_SCORED, text

    def test_a_file_of_unknown_kind_is_still_a_usage_error(self, tmp_path: Path) -> None:
        """A .txt file whose lines name no format cannot be guessed: exit 2 naming the format option."""
        path = tmp_path / "notes.txt"
        path.write_bytes(b"garbage\n")
        code, text = run("score", str(path), "--checker", "fake", "-o", str(tmp_path / "o"), "--no-progress")
        assert code == ExitStatus.USAGE and "cannot detect the format" in text

    def test_claims_in_error_are_partial(self, tmp_path: Path, mocks: object) -> None:
        """Every claim labelled error (off-format replies) exits 6, naming the errors."""
        from tests.test_quota_resume import write_answers

        url = mocks.start("--fault", "offformat=1")  # type: ignore[attr-defined]
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 2)
        code, text = run("score", str(answers), "-o", str(tmp_path / "o"), "--splitter", "given",
                         "--checker", "openai", "--base-url", url, "--model", "mock", "--api-key-env", "",
                         "--no-progress")
        assert code == ExitStatus.PARTIAL, text
        assert "6 claims ended in error" in text

    def test_a_wrong_base_url_path_exits_4_naming_the_url(self, tmp_path: Path, mocks: object) -> None:
        """Every reply 404 (a wrong path in --base-url), 9 claims: exit 4 at the 5th, printing the URL and the server's message."""
        from tests.test_quota_resume import write_answers

        url = mocks.start()  # type: ignore[attr-defined]
        wrong = url.removesuffix("/v1") + "/wrong"
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 3)
        code, text = run("score", str(answers), "-o", str(tmp_path / "o"), "--splitter", "given", "--checker", "openai",
                         "--base-url", wrong, "--model", "mock", "--api-key-env", "", "--max-in-flight", "1",
                         "--no-progress")
        assert code == ExitStatus.FATAL_API, text
        line = " ".join(text.split())
        assert (f"stopped: {wrong} (model mock): 5 calls in a row were answered 404 Not Found; stopping. Check the "
                f"base URL and the model. Last error: HTTP 404 from {wrong}/chat/completions: 404: Not Found.") in line

    def test_fatal_api_error_exits_4(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """A FatalAPIError stops the run with exit 4 and one line naming it, no traceback."""
        import dahl.cli._console

        def fatal(*args: object, **kwargs: object) -> None:
            raise FatalAPIError("http://127.0.0.1:9/v1 refused the connection")

        monkeypatch.setattr(dahl.cli._console.anyio, "run", fatal)
        code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", str(tmp_path / "o"))
        assert code == ExitStatus.FATAL_API
        assert "stopped: http://127.0.0.1:9/v1 refused the connection" in text and "Traceback" not in text


class TestEntryPoint:
    # Runs the console script named in pyproject.toml; SIGINT arrives while the CLI's
    # imports run (rich.console is imported by dahl.cli), as a Ctrl-C in the first 0.4 s.
    CTRL_C_DURING_IMPORTS = """
import builtins, importlib, os, signal, sys
module, func = sys.argv.pop(1).split(":")
real = builtins.__import__
def hooked(name, *args, **kwargs):
    if name == "rich.console":
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = hooked
sys.argv[0] = "dahl"
getattr(importlib.import_module(module), func)()
"""

    def entry(self) -> str:
        with (REPO / "pyproject.toml").open("rb") as f:
            return str(tomllib.load(f)["project"]["scripts"]["dahl"])

    def test_ctrl_c_during_imports_exits_130_quietly(self) -> None:
        """Ctrl-C while the command is still importing exits 130 with one line, no traceback."""
        proc = subprocess.run([sys.executable, "-c", self.CTRL_C_DURING_IMPORTS, self.entry(), "--help"],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == ExitStatus.INTERRUPTED, proc.stderr
        assert proc.stderr == "interrupted\n"

    # The child signals itself at a fixed point of its start: while importing the module named
    # first, or (<before-main>) between importing the entry point and calling it.
    SIGINT_AT = """
import builtins, importlib, os, signal, sys
at = sys.argv.pop(1)
module, func = sys.argv.pop(1).split(":")
real = builtins.__import__
def hooked(name, *args, **kwargs):
    if name == at:
        os.kill(os.getpid(), signal.SIGINT)
    return real(name, *args, **kwargs)
builtins.__import__ = hooked
sys.argv[0] = "dahl"
entry = getattr(importlib.import_module(module), func)
if at == "<before-main>":
    os.kill(os.getpid(), signal.SIGINT)
entry()
"""

    @pytest.mark.parametrize("at", ["dahl.exit_status", "<before-main>", "click", "dahl.cli._score", "msgspec"])
    def test_ctrl_c_early_in_dahl_score_exits_130_with_one_line(self, tmp_path: Path, at: str) -> None:
        """Ctrl-C at each early moment of dahl score (the entry point's own imports, before main is
        called, the CLI's imports) prints one line "interrupted" and exits 130: no traceback, no -2."""
        proc = subprocess.run([sys.executable, "-c", self.SIGINT_AT, at, self.entry(), "score",
                               str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", str(tmp_path / "o"),
                               "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stderr) == (ExitStatus.INTERRUPTED, "interrupted\n")
        assert not (tmp_path / "o").exists()

    def test_sigterm_during_imports_exits_130_quietly(self) -> None:
        """SIGTERM while the command is still importing exits 130 with one line (it was 143, silent)."""
        script = self.CTRL_C_DURING_IMPORTS.replace("signal.SIGINT", "signal.SIGTERM")
        proc = subprocess.run([sys.executable, "-c", script, self.entry(), "--help"],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == ExitStatus.INTERRUPTED, proc.stderr
        assert proc.stderr == "interrupted\n"

    def test_a_reader_that_stops_reading_ends_quietly(self) -> None:
        """dahl inspect FILE | head -1: the closed pipe ends the command with status 0 and no traceback."""
        with subprocess.Popen([sys.executable, "-m", "dahl", "inspect", str(EXAMPLES / "answers.jsonl")], cwd=REPO,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.close()  # the reader is gone before the first line is printed
            stderr = proc.stderr.read().decode()
            assert proc.wait(timeout=60) == ExitStatus.OK, stderr
        assert stderr == ""

    def test_ctrl_c_inside_a_report_command_exits_130(self, tmp_path: Path) -> None:
        """Ctrl-C inside dahl leaderboard (while it imports its modules) exits 130, not click's "Aborted!" 1."""
        script = self.CTRL_C_DURING_IMPORTS.replace('"rich.console"', '"dahl.analysis._leaderboard"')
        proc = subprocess.run([sys.executable, "-c", script, self.entry(), "leaderboard", str(tmp_path)],
                              cwd=REPO, capture_output=True, text=True, timeout=60)
        assert proc.returncode == ExitStatus.INTERRUPTED, proc.stderr
        assert proc.stderr.endswith("interrupted\n") and "Aborted" not in proc.stderr

    def test_usage_errors_and_declined_prompts_keep_their_status(self, tmp_path: Path) -> None:
        """Through the entry point a bad option still exits 2, and a declined cache clear prompt 1."""
        proc = subprocess.run([sys.executable, "-m", "dahl", "score", "--no-such-option"], cwd=REPO,
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "Error: No such option '--no-such-option'" in proc.stderr
        cache = tmp_path / "cache"
        assert run("score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", str(tmp_path / "o"),
                   "--cache-dir", str(cache), "--no-progress")[0] == 0
        proc = subprocess.run([sys.executable, "-m", "dahl", "cache", "clear", "--cache-dir", str(cache)], cwd=REPO,
                              input="n\n", capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1 and "Aborted!" in proc.stderr

    def test_python_m_dahl_runs_the_command(self) -> None:
        """python -m dahl --version prints the package version."""
        import dahl

        proc = subprocess.run([sys.executable, "-m", "dahl", "--version"], cwd=REPO, capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode == 0 and proc.stdout.strip().endswith(dahl.__version__)


class TestOptions:
    @pytest.mark.parametrize("where", ["group", "subcommand"])
    def test_verbose_before_or_after_the_subcommand(self, tmp_path: Path, where: str) -> None:
        """dahl -v score and dahl score -v both log at info level (the verdict store line)."""
        args = ["score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", str(tmp_path / "o"),
                "--no-progress"]
        args = ["-v", *args] if where == "group" else [*args, "-v"]
        env = {**os.environ, "COLUMNS": "200"}
        proc = subprocess.run([sys.executable, "-m", "dahl", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=120, env=env)
        assert proc.returncode == 0, proc.stderr
        assert "INFO wrote verdict store" in proc.stderr

    def test_a_log_is_plain_lines(self, tmp_path: Path) -> None:
        """stderr not a terminal: each warning is one "WARNING ..." line, neither padded nor wrapped at 160 columns."""
        path = tmp_path / "a.jsonl"
        question = "Q" * 150 + "?"
        path.write_text(json.dumps({"id": "a", "question": question, "response": " "}) + "\n"
                        + json.dumps({"id": "b", "question": "Q?", "response": "Aspirin inhibits COX-1."}) + "\n")
        proc = subprocess.run([sys.executable, "-m", "dahl", "score", str(path), "--checker", "fake", "-o",
                               str(tmp_path / "o"), "--no-progress"], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == ExitStatus.PARTIAL, proc.stderr
        warnings = [line for line in proc.stderr.splitlines() if line.startswith("WARNING ")]
        assert warnings == [f"WARNING skipped input record: {path}:1, field 'response': response is empty"]
        assert all(line == line.rstrip() for line in proc.stderr.splitlines())
        assert any(line.endswith(f"{tmp_path / 'o' / 'answers.jsonl'}, {tmp_path / 'o' / 'summary.json'}")
                   for line in proc.stderr.splitlines())  # the path line is whole, not wrapped

    def test_verbose_twice_after_the_subcommand_is_debug(self, tmp_path: Path) -> None:
        """dahl score -vv is accepted (it was a usage error) and logs at debug level."""
        proc = subprocess.run([sys.executable, "-m", "dahl", "score", str(EXAMPLES / "answers.jsonl"), "--checker",
                               "fake", "-o", str(tmp_path / "o"), "--no-progress", "-vv"],
                              cwd=REPO, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "DEBUG " in proc.stderr

    @pytest.mark.parametrize(
        ("option", "value"),
        [("--gamma", "nan"), ("--gamma", "inf"), ("--gamma", "-inf"), ("--rpm", "nan"), ("--timeout", "inf")],
    )
    def test_numbers_must_be_finite(self, tmp_path: Path, option: str, value: str) -> None:
        """nan and ±inf are usage errors naming the option, before anything is written."""
        code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", str(tmp_path / "o"),
                         option, value)
        assert code == ExitStatus.USAGE
        assert f"Invalid value for '{option}'" in text and f"{value!r} is not a finite number" in text
        assert not (tmp_path / "o").exists()

    @pytest.mark.parametrize("command", [["score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake"],
                                         ["leaderboard", "."], ["report", "."], ["study", "temperature", "."],
                                         ["sample", str(EXAMPLES / "answers.jsonl"), "--fraction", "0.5"]],
                             ids=["score", "leaderboard", "report", "study", "sample"])
    def test_negative_seed_is_a_usage_error(self, tmp_path: Path, command: list[str]) -> None:
        """--seed -1 exits 2 naming the option (it was a numpy traceback, exit 1)."""
        code, text = run(*command, "-o", str(tmp_path / "o"), "--seed", "-1")
        assert code == ExitStatus.USAGE, text
        assert "Invalid value for '--seed': -1 is not in the range x>=0." in text

    @pytest.mark.parametrize("command", [["leaderboard", "run"], ["report", "run", "-o", "site"]],
                             ids=["leaderboard", "report"])
    def test_huge_n_boot_is_a_usage_error(self, tmp_path: Path, command: list[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
        """--n-boot 100000000000 exits 2 with the limit (it was a numpy MemoryError traceback asking for 745 GiB)."""
        monkeypatch.chdir(tmp_path)
        code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", "run", "--no-progress")
        assert code == 0, text
        code, text = run(*command, "--n-boot", "100000000000")
        assert code == ExitStatus.USAGE, text
        assert "error: n_boot must be at most 10,000,000, got 100,000,000,000" in text

    def test_k_beyond_64_bits_is_a_usage_error(self, tmp_path: Path) -> None:
        """--k 99999999999999999999 exits 2 before anything is written (it was a TypeError traceback, exit 1)."""
        code, text = run("score", str(EXAMPLES / "answers.jsonl"), "--checker", "fake", "-o", str(tmp_path / "o"),
                         "--k", "99999999999999999999", "--no-progress")
        assert code == ExitStatus.USAGE, text
        assert "--k must be below 2**63 claims, got 99999999999999999999" in text
        assert not (tmp_path / "o" / "answers.jsonl").exists()

    def test_score_config_refuses_nan_gamma(self, tmp_path: Path) -> None:
        """ScoreConfig(gamma=nan) raises ConfigError (the Python API checks what the CLI checks)."""
        from dahl import AdapterSettings, ConfigError, ScoreConfig

        with pytest.raises(ConfigError, match="gamma must be a finite number >= 0"):
            ScoreConfig(inputs=(EXAMPLES / "answers.jsonl",), out_dir=tmp_path, gamma=float("nan"),
                        adapters=AdapterSettings(checker="fake"))


# Runs dahl as a shell's background job does (``dahl score ... &`` in a script): SIGINT ignored.
_SIGINT_IGNORED = ("import runpy, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                   "sys.argv[0] = 'dahl'; runpy.run_module('dahl', run_name='__main__')")


def _start_score(tmp_path: Path, mocks: object, launch: list[str]) -> tuple[subprocess.Popen[str], Path]:
    """Start ``dahl score`` of 400 answers against a mock with 50 ms latency; returns the process and
    its answers.jsonl once the first answer is written."""
    import time

    from tests.test_quota_resume import write_answers

    url = mocks.start("--latency-ms", "50")  # type: ignore[attr-defined]
    answers, out = tmp_path / "answers.jsonl", tmp_path / "out"
    write_answers(answers, 400)
    proc = subprocess.Popen(
        [sys.executable, *launch, "score", str(answers), "-o", str(out), "--splitter", "given", "--checker",
         "openai", "--base-url", url, "--model", "mock", "--api-key-env", "", "--max-in-flight", "4",
         "--no-progress"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    written = out / "answers.jsonl"
    deadline = time.monotonic() + 60  # a guard against a hung child, not a measurement
    while not (written.exists() and written.stat().st_size > 0):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    return proc, written


class TestSigterm:
    @pytest.mark.parametrize("launch", [["-m", "dahl"], ["-c", _SIGINT_IGNORED]], ids=["foreground", "background-job"])
    def test_sigterm_stops_like_ctrl_c(self, tmp_path: Path, mocks: object, launch: list[str]) -> None:
        """SIGTERM mid-run exits 130 with the interrupted line, also with SIGINT ignored (it was ignored
        there, the run went on to the end); the answers written are whole lines."""
        import signal

        proc, written = _start_score(tmp_path, mocks, launch)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == ExitStatus.INTERRUPTED, err
        assert "interrupted." in err and "Traceback" not in err
        lines = written.read_text().splitlines()
        assert 0 < len(lines) < 400
        assert all(len(json.loads(line)["claims"]) == 3 for line in lines)

    def test_background_job_still_ignores_sigint(self, tmp_path: Path, mocks: object) -> None:
        """SIGINT to a background job (Ctrl-C in the script's terminal) does not stop it: answers keep
        coming after it; SIGTERM then stops it with exit 130."""
        import signal
        import time

        proc, written = _start_score(tmp_path, mocks, ["-c", _SIGINT_IGNORED])
        proc.send_signal(signal.SIGINT)
        after = len(written.read_text().splitlines())
        deadline = time.monotonic() + 60  # a guard against a hung child, not a measurement
        while len(written.read_text().splitlines()) <= after + 2:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == ExitStatus.INTERRUPTED, err
        assert "interrupted." in err and "Traceback" not in err
        assert len(written.read_text().splitlines()) < 400
