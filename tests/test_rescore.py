"""Re-scoring calls the API only for what changed (issue 4), through the CLI and the mock server.

``mocks`` is the MockServers fixture of tests/conftest.py.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from dahl.run._plan import AdapterSettings
from dahl.cli import main
from dahl.config import EndpointConfig
from dahl.exit_status import ExitStatus
from dahl.records import AnswerResult
from dahl.run._score import ScoreConfig, score_async

QUESTIONS = 100


def write_answers(path: Path, n: int, edited: frozenset[int] = frozenset()) -> None:
    """n answers of three sentences; an edited answer changes its last sentence."""
    with path.open("w") as f:
        for i in range(n):
            last = f"Its half-life is {i % 7 + 2} hours." if i not in edited else f"It is cleared by the kidney {i}."
            response = f"Drug {i} inhibits enzyme E{i % 13}. It is given orally twice a day. {last}"
            f.write(json.dumps({"id": f"a{i}", "question": f"What is known about drug {i}?", "response": response,
                                "model": "m", "category": f"c{i % 3}"}) + "\n")


def score(answers: Path, out: Path, url: str, *extra: str, checker_model: str = "mock", status: int = 0) -> None:
    """Run ``dahl score`` against the mock at ``url``; assert its exit status (6 when claims end in error)."""
    args = ["score", str(answers), "-o", str(out), "--no-progress", "--splitter", "openai", "--checker", "openai",
            "--base-url", url, "--model", checker_model, "--api-key-env", "DAHL_TEST_KEY", *extra]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == status, result.output


def lines(path: Path) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["id"]: r for r in map(json.loads, (path / "answers.jsonl").read_text().splitlines())}


def run_fields(out: Path) -> tuple[int, int, int]:
    """``answers_cached``, ``claims_cached`` and ``claims_checked`` of a run's summary."""
    run = json.loads((out / "summary.json").read_text())["run"]
    return run["answers_cached"], run["claims_cached"], run["claims_checked"]


def without_run_fields(summary_path: Path) -> dict:  # type: ignore[type-arg]
    summary = json.loads(summary_path.read_text())
    for key in ("run", "changes"):
        summary.pop(key)
    return summary


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAHL_TEST_KEY", "sk-test-key-one")


class TestRescore:
    def test_second_run_makes_no_request_and_same_outputs(self, tmp_path: Path, mocks: Any) -> None:
        """Same command twice (same folder, or a new folder with the same cache): 0 requests, identical files."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 50)
        score(answers, tmp_path / "out", url)
        first = mocks.stats(url)["requests"]
        assert first == 50 + 150  # one split per answer, one check per claim (all claims distinct)
        before = (tmp_path / "out" / "answers.jsonl").read_bytes()
        summary_before = without_run_fields(tmp_path / "out" / "summary.json")
        score(answers, tmp_path / "out", url)
        score(answers, tmp_path / "fresh", url)
        assert mocks.stats(url)["requests"] == first
        assert (tmp_path / "out" / "answers.jsonl").read_bytes() == before
        assert (tmp_path / "fresh" / "answers.jsonl").read_bytes() == before
        assert without_run_fields(tmp_path / "out" / "summary.json") == summary_before
        # The new folder found every answer whole in the cache: none was split or checked.
        assert run_fields(tmp_path / "fresh")[:2] == (50, 150)

    def test_editing_10_of_1000_answers_sends_10_splits_and_new_claims_only(
        self, tmp_path: Path, mocks: Any
    ) -> None:
        """1,000 answers, 10 edited: exactly 10 split requests plus one check per unseen claim."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 1000)
        score(answers, tmp_path / "out", url)
        old = lines(tmp_path / "out")
        seen = {(r["question"], c["text"]) for r in old.values() for c in r["claims"]}
        before = mocks.stats(url)
        edited = frozenset(range(0, 1000, 100))
        write_answers(answers, 1000, edited)
        score(answers, tmp_path / "out", url)
        after = mocks.stats(url)
        new = lines(tmp_path / "out")
        unseen = {(r["question"], c["text"]) for i, r in new.items() for c in r["claims"]} - seen
        assert after["split"] - before["split"] == 10
        assert after["check"] - before["check"] == len(unseen) > 0
        run = json.loads((tmp_path / "out" / "summary.json").read_text())["run"]
        assert (run["answers_resumed"], run["answers_done"]) == (990, 10)  # same folder: the rest is resumed
        for i in range(1000):
            key = f"a{i}"
            if i not in edited:
                assert new[key]["metrics"] == old[key]["metrics"]
                assert new[key]["claims"] == old[key]["claims"]

    def test_checker_model_change_rechecks_everything(self, tmp_path: Path, mocks: Any) -> None:
        """Another Checker model is another verdict: every claim is checked again."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 20)
        score(answers, tmp_path / "a", url)
        before = mocks.stats(url)
        score(answers, tmp_path / "b", url, checker_model="mock-2")
        after = mocks.stats(url)
        assert after["check"] - before["check"] == 60
        assert after["split"] - before["split"] == 20  # the split endpoint model changed too
        assert run_fields(tmp_path / "b")[0] == 0

    @pytest.mark.parametrize(
        "change",
        [
            pytest.param(("--max-in-flight", "3"), id="concurrency"),
            pytest.param(("--timeout", "17"), id="timeout"),
            pytest.param(("--rpm", "100000"), id="rate-limit"),
            pytest.param("key", id="api-key"),
        ],
    )
    def test_operational_changes_recheck_nothing(
        self, tmp_path: Path, mocks: Any, monkeypatch: pytest.MonkeyPatch, change: tuple[str, ...] | str
    ) -> None:
        """Concurrency, timeouts, limits and the API key do not change a verdict: 0 requests."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 20)
        score(answers, tmp_path / "a", url)
        before = mocks.stats(url)["requests"]
        extra: tuple[str, ...] = ()
        if change == "key":
            monkeypatch.setenv("DAHL_TEST_KEY", "sk-another-key")
        else:
            assert isinstance(change, tuple)
            extra = change
        score(answers, tmp_path / "b", url, *extra)
        assert mocks.stats(url)["requests"] == before
        assert lines(tmp_path / "b") == lines(tmp_path / "a")
        assert run_fields(tmp_path / "b")[0] == 20  # whole answers too

    def test_api_key_never_reaches_outputs_or_cache(
        self, tmp_path: Path, mocks: Any, private_cache_dir: Path
    ) -> None:
        """The key's value appears in no output file and no cache file."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 5)
        score(answers, tmp_path / "out", url)
        for folder in (tmp_path / "out", private_cache_dir):
            for path in folder.rglob("*"):
                if path.is_file():
                    assert b"sk-test-key-one" not in path.read_bytes(), path

    def test_corrupted_cache_warns_and_completes(
        self, tmp_path: Path, mocks: Any, private_cache_dir: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A cache database overwritten with garbage is moved aside with a warning; the run completes."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 10)
        score(answers, tmp_path / "a", url)
        databases = list(private_cache_dir.rglob("cache.db"))
        assert databases
        for db in databases:
            db.write_bytes(b"this is not a database" * 100)
        with caplog.at_level(logging.WARNING):
            score(answers, tmp_path / "b", url)
        assert len(lines(tmp_path / "b")) == 10
        assert any("corrupt" in r.getMessage().lower() for r in caplog.records)


class TestWholeAnswers:
    def test_a_response_cleaned_by_preprocessing_comes_back_cleaned(self, tmp_path: Path, mocks: Any) -> None:
        """An answer whose duplicate sentence preprocessing dropped is served whole with the cleaned response."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        with answers.open("w") as f:
            for i in range(6):
                twice = f"Drug {i} inhibits enzyme E{i}. Drug {i} inhibits enzyme E{i}. It is given orally."
                f.write(json.dumps({"id": f"a{i}", "question": f"What does drug {i} do?", "response": twice}) + "\n")
        score(answers, tmp_path / "a", url)
        requests = mocks.stats(url)["requests"]
        first = lines(tmp_path / "a")
        assert first["a2"]["response"] == "Drug 2 inhibits enzyme E2. It is given orally."
        score(answers, tmp_path / "b", url)
        assert mocks.stats(url)["requests"] == requests
        assert run_fields(tmp_path / "b") == (6, 12, 0)
        assert (tmp_path / "b" / "answers.jsonl").read_bytes() == (tmp_path / "a" / "answers.jsonl").read_bytes()

    def test_on_result_gets_answers_found_whole_decoded(self, tmp_path: Path, mocks: Any) -> None:
        """score_async's on_result sees an AnswerResult for an answer found whole, equal to the first run's."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 5)
        endpoint = EndpointConfig(base_url=url, model="mock", api_key_env="DAHL_TEST_KEY")
        adapters = AdapterSettings(splitter="openai", checker="openai", split_endpoint=endpoint, check_endpoint=endpoint)
        seen: dict[str, list[AnswerResult]] = {"first": [], "whole": []}
        for run in seen:
            config = ScoreConfig(inputs=(answers,), out_dir=tmp_path / run, adapters=adapters)
            anyio.run(functools.partial(score_async, config, on_result=seen[run].append))
        assert run_fields(tmp_path / "whole") == (5, 15, 0)
        assert all(type(r) is AnswerResult for r in seen["whole"])
        assert sorted(seen["whole"], key=lambda r: r.id) == sorted(seen["first"], key=lambda r: r.id)

    def test_an_answer_with_a_failed_claim_is_checked_again(self, tmp_path: Path, mocks: Any) -> None:
        """A claim that ended in an error keeps its answer out of the whole-answer cache: the re-run retries it."""
        url = mocks.start("--fault", "offformat=0.4", "--seed", "3")
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 30)
        score(answers, tmp_path / "a", url, status=ExitStatus.PARTIAL)
        failed = {r["id"] for r in lines(tmp_path / "a").values() if any(c["label"] == "error" for c in r["claims"])}
        assert failed
        score(answers, tmp_path / "b", url, status=ExitStatus.PARTIAL)
        cached_whole = run_fields(tmp_path / "b")[0]
        assert cached_whole == 30 - len(failed) - sum(
            1 for r in lines(tmp_path / "a").values() if r["status"] == "error" and not r["claims"]
        )


class TestResumeAfterAStoppedFirstRun:
    def test_same_command_again_is_the_same_configuration(self, tmp_path: Path) -> None:
        """A first run stopped midway, then the same command: summary.json says config_changed false."""
        answers = tmp_path / "answers.jsonl"
        with answers.open("w") as f:
            for i in range(4):
                f.write(json.dumps({"id": f"a{i}", "question": f"Q{i}?", "response": f"R{i}.",
                                    "claims": [{"text": f"R{i}.", "label": "S"}]}) + "\n")
        config = ScoreConfig(inputs=(answers,), out_dir=tmp_path / "out", use_cache=False,
                             adapters=AdapterSettings(splitter="given", checker="replay"))

        def stop(result: AnswerResult) -> None:
            raise RuntimeError("stopped")

        with pytest.raises(RuntimeError, match="stopped"):
            anyio.run(functools.partial(score_async, config, on_result=stop))
        report = anyio.run(score_async, config)
        changes = report.summary["changes"]
        assert changes["previous_run"] and not changes["config_changed"], changes
