"""Runs that find answers whole in the cache (dahl.cache.AnswerCache): re-score, large entries, resume.

``mocks`` is the MockServers fixture of tests/conftest.py.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from dahl.config import EndpointConfig
from dahl.run._plan import AdapterSettings
from dahl.run._score import ScoreConfig, score_async


def write_answers(path: Path, n: int, edited: frozenset[int] = frozenset(), bad: frozenset[int] = frozenset()) -> None:
    """n answers; an edited one changes its last sentence; a bad one is a record with an empty response.

    Answer 3 is written twice (a duplicate record) when n > 3.
    """
    with path.open("w") as f:
        for i in range(n):
            if i in bad:
                f.write(json.dumps({"id": f"bad{i}", "question": "Q?", "response": ""}) + "\n")
                continue
            last = f"Its half-life is {i % 7 + 2} hours." if i not in edited else f"It is cleared by the kidney {i}."
            record = {"id": f"a{i}", "question": f"What is known about drug {i}?", "model": "m", "category": f"c{i % 3}",
                      "response": f"Drug {i} inhibits enzyme E{i % 13}. It is given orally twice a day. {last}",
                      "meta": {"source": "test", "rank": i, "weight": i / 7}}
            f.write(json.dumps(record) + "\n")
            if i == 3:
                f.write(json.dumps(record) + "\n")


def run(inputs: Path, out: Path, url: str, cache: Path) -> dict[str, Any]:
    """Score ``inputs`` (rules Splitter, the mock as Checker) and return summary.json."""
    endpoint = EndpointConfig(base_url=url, model="mock", api_key_env="DAHL_TEST_KEY")
    config = ScoreConfig(inputs=(inputs,), out_dir=out, adapters=AdapterSettings(splitter="rules", checker="openai",
                         check_endpoint=endpoint), cache_dir=cache)
    anyio.run(functools.partial(score_async, config))
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def stable(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without what depends on timing."""
    return {k: v for k, v in summary.items() if k not in ("run", "changes")}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAHL_TEST_KEY", "sk-test-key-one")


class TestWholeAnswerRuns:
    def test_rescore_with_edits_bad_records_and_a_duplicate(self, tmp_path: Path, mocks: Any) -> None:
        """A re-score calls the API for the 2 edited claims only, finds the 37 unchanged answers whole; a second finds all 39."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 40, bad=frozenset({7}))
        cache = tmp_path / "cache"
        first = run(answers, tmp_path / "first", url, cache)
        assert first["run"]["answers_cached"] == 0
        write_answers(answers, 40, edited=frozenset({5, 20}), bad=frozenset({7}))
        sent = mocks.stats(url)["requests"]
        edited = run(answers, tmp_path / "edited", url, cache)
        assert mocks.stats(url)["requests"] - sent == 2  # the edited sentence of answers 5 and 20: one new claim each
        again = run(answers, tmp_path / "again", url, cache)
        assert mocks.stats(url)["requests"] - sent == 2  # the second re-score found everything
        assert (tmp_path / "edited" / "answers.jsonl").read_bytes() == (tmp_path / "again" / "answers.jsonl").read_bytes()
        assert stable(edited) == stable(again)
        # 41 records: one bad, answer 3 twice; 39 answers, 37 unchanged and found whole.
        assert edited["run"]["answers_cached"] == 37
        assert again["run"]["answers_cached"] == 39
        assert edited["input_errors"] == again["input_errors"] == first["input_errors"]
        assert len(edited["input_errors"]) == 2
        assert "duplicate answer" in edited["input_errors"][0]
        assert "response is empty" in edited["input_errors"][1] and ":9" in edited["input_errors"][1]

    def test_a_large_entry_is_found_whole(self, tmp_path: Path, mocks: Any) -> None:
        """A whole entry over 32 KiB is one row like any other: found whole, no side file is written."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 3)
        long = " ".join(f"Drug 9 binds receptor R{i} in tissue T{i} with high affinity." for i in range(300))
        with answers.open("a") as f:
            f.write(json.dumps({"id": "long", "question": "What does drug 9 bind?", "response": long}) + "\n")
        cache = tmp_path / "cache"
        run(answers, tmp_path / "first", url, cache)
        assert sorted(p.name for p in cache.iterdir()) == ["cache.db"]
        sent = mocks.stats(url)["requests"]
        again = run(answers, tmp_path / "again", url, cache)
        assert mocks.stats(url)["requests"] == sent
        assert again["run"]["answers_cached"] == 4
        assert again["run"]["claims_checked"] == 0
        assert (tmp_path / "again" / "answers.jsonl").read_bytes() == (tmp_path / "first" / "answers.jsonl").read_bytes()

    def test_resume_skips_finished_answers(self, tmp_path: Path, mocks: Any) -> None:
        """An output folder holding 12 answers: they are resumed, the other 18 found whole, the file equals a full run's."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 30)
        cache = tmp_path / "cache"
        run(answers, tmp_path / "full", url, cache)
        out = tmp_path / "partial"
        out.mkdir()
        kept = (tmp_path / "full" / "answers.jsonl").read_bytes().splitlines(keepends=True)[:12]
        (out / "answers.jsonl").write_bytes(b"".join(kept))
        summary = run(answers, out, url, cache)
        assert (summary["run"]["answers_resumed"], summary["run"]["answers_cached"]) == (12, 18)
        assert (out / "answers.jsonl").read_bytes() == (tmp_path / "full" / "answers.jsonl").read_bytes()
