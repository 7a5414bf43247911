"""The whole-answer input process (dahl.cache.whole_input): same outputs as reading the input here.

``mocks`` is the MockServers fixture of tests/conftest.py.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

import dahl.run._score
from dahl.run._plan import AdapterSettings
from dahl.cache import CacheStore
from dahl.cache.database import DB_NAME
from dahl.cache.whole_input import WholeInputFailed, WholeInputProcess
from dahl.cache.whole_input_child import Bad, Hit, Miss, Start
from dahl.config import EndpointConfig
from dahl.results._log import answer_input_hash, line_key
from dahl.results._assemble import FoundLine
from dahl.run._source import InputErrors, answer_source
from dahl.run._score import ScoreConfig, score_async

RUN_FP = b'{"run": "test"}'


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


def run(inputs: Path, out: Path, url: str, cache: Path, *, input_process: bool) -> dict[str, Any]:
    """Score ``inputs`` (rules Splitter, the mock as Checker) and return summary.json."""
    endpoint = EndpointConfig(base_url=url, model="mock", api_key_env="DAHL_TEST_KEY")
    config = ScoreConfig(inputs=(inputs,), out_dir=out, adapters=AdapterSettings(splitter="rules", checker="openai",
                         check_endpoint=endpoint), cache_dir=cache, input_process=input_process)
    anyio.run(functools.partial(score_async, config))
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def stable(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without what depends on timing."""
    return {k: v for k, v in summary.items() if k not in ("run", "changes")}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAHL_TEST_KEY", "sk-test-key-one")


class TestSameOutputs:
    def test_rescore_with_edits_bad_records_and_a_duplicate(self, tmp_path: Path, mocks: Any) -> None:
        """Found whole in the child or here: identical answers.jsonl, summary and input errors, same API calls."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 40, bad=frozenset({7}))
        cache = tmp_path / "cache"
        first = run(answers, tmp_path / "first", url, cache, input_process=False)
        assert first["run"]["answers_cached"] == 0
        write_answers(answers, 40, edited=frozenset({5, 20}), bad=frozenset({7}))
        sent = mocks.stats(url)["requests"]
        child = run(answers, tmp_path / "child", url, cache, input_process=True)
        requests_child = mocks.stats(url)["requests"] - sent
        here = run(answers, tmp_path / "here", url, cache, input_process=False)
        assert mocks.stats(url)["requests"] - sent == requests_child  # the second re-score found everything
        assert requests_child == 2  # the edited sentence of answers 5 and 20: one new claim each
        assert (tmp_path / "child" / "answers.jsonl").read_bytes() == (tmp_path / "here" / "answers.jsonl").read_bytes()
        assert stable(child) == stable(here)
        # 41 records: one bad, answer 3 twice; 39 answers, 37 unchanged and found whole.
        assert child["run"]["answers_cached"] == 37
        assert here["run"]["answers_cached"] == 39
        assert child["input_errors"] == here["input_errors"] == first["input_errors"]
        assert len(child["input_errors"]) == 2
        assert "duplicate answer" in child["input_errors"][0]
        assert "response is empty" in child["input_errors"][1] and ":9" in child["input_errors"][1]

    def test_a_large_entry_is_found_by_the_child(self, tmp_path: Path, mocks: Any) -> None:
        """A whole entry over 32 KiB is one row like any other: the child finds it, no side file is written."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 3)
        long = " ".join(f"Drug 9 binds receptor R{i} in tissue T{i} with high affinity." for i in range(300))
        with answers.open("a") as f:
            f.write(json.dumps({"id": "long", "question": "What does drug 9 bind?", "response": long}) + "\n")
        cache = tmp_path / "cache"
        run(answers, tmp_path / "first", url, cache, input_process=False)
        assert sorted(p.name for p in cache.iterdir()) == ["cache.db", "dahl.lock"]
        sent = mocks.stats(url)["requests"]
        child = run(answers, tmp_path / "child", url, cache, input_process=True)
        assert mocks.stats(url)["requests"] == sent
        assert child["run"]["answers_cached"] == 4
        assert child["run"]["claims_checked"] == 0
        assert (tmp_path / "child" / "answers.jsonl").read_bytes() == (tmp_path / "first" / "answers.jsonl").read_bytes()

    def test_resume_skips_finished_answers(self, tmp_path: Path, mocks: Any) -> None:
        """An output folder holding some answers: the child's run resumes them like a run reading here."""
        url = mocks.start()
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 30)
        cache = tmp_path / "cache"
        run(answers, tmp_path / "full", url, cache, input_process=False)
        out = tmp_path / "partial"
        out.mkdir()
        kept = (tmp_path / "full" / "answers.jsonl").read_bytes().splitlines(keepends=True)[:12]
        (out / "answers.jsonl").write_bytes(b"".join(kept))
        summary = run(answers, out, url, cache, input_process=True)
        assert (summary["run"]["answers_resumed"], summary["run"]["answers_cached"]) == (12, 18)
        assert (out / "answers.jsonl").read_bytes() == (tmp_path / "full" / "answers.jsonl").read_bytes()


def child_records(db: Path, inputs: list[Path], material: bytes = b"material") -> Iterator[Hit | Miss | Bad]:
    child = WholeInputProcess()
    try:
        child.begin(Start([str(p) for p in inputs], "auto", None, RUN_FP, material, str(db), 10.0, 64, 4))
        yield from child.records()
    finally:
        child.close()


@pytest.fixture
def empty_db(tmp_path: Path) -> Path:
    store = CacheStore(tmp_path / "cache")
    store.close()
    return tmp_path / "cache" / DB_NAME


class TestChildRecords:
    def test_misses_carry_the_input_hash_and_the_answer(self, tmp_path: Path, empty_db: Path) -> None:
        """With nothing stored, every answer is a Miss whose JSON is the answer read here, meta in input order."""
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 6, bad=frozenset({1}))
        from dahl.formats import read_answers

        records = list(child_records(empty_db, [answers]))
        assert [type(r).__name__ for r in records] == ["Miss", "Bad", "Miss", "Miss", "Miss", "Miss", "Miss"]
        here = list(read_answers(answers, "auto", on_error=lambda e: None))
        misses = [r for r in records if isinstance(r, Miss)]
        for record, answer in zip(misses, here, strict=True):
            input_hash = answer_input_hash(answer, RUN_FP)
            assert (record.input_hash, record.key) == (input_hash, line_key(answer.id, input_hash))
            assert record.answer == msgspec.json.encode(answer)
            assert list(json.loads(record.answer)["meta"]) == ["source", "rank", "weight"]
        bad = records[1]
        assert isinstance(bad, Bad)
        assert (bad.line, bad.field, bad.path) == (2, "response", str(answers))

    def test_the_child_exits_by_itself_when_the_parent_stops_reading(self, tmp_path: Path, empty_db: Path) -> None:
        """Closing the pipes mid-input (a run cancelled or killed) ends the child: it is not killed."""
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 10_000)  # ~4 MB of records: more than a pipe holds
        child = WholeInputProcess()
        child.begin(Start([str(answers)], "auto", None, RUN_FP, b"material", str(empty_db), 10.0, 64, 4))
        records = child.records()
        assert isinstance(next(records), Miss)
        child.close()
        assert child._proc.returncode == 0  # noqa: SLF001 - killed would be -9

    def test_a_path_that_is_not_utf8_fails_at_once(self, tmp_path: Path, empty_db: Path) -> None:
        """A surrogate-escaped file name cannot be sent: the child is given up, not the run."""
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 3)
        odd = str(tmp_path / "cache\udce9" / DB_NAME)
        child = WholeInputProcess()
        try:
            child.begin(Start([str(answers)], "auto", None, RUN_FP, b"material", odd, 10.0, 64, 4))
            with pytest.raises(WholeInputFailed, match="cannot send what to read"):
                next(child.records())
        finally:
            child.close()

    def test_an_unreadable_database_fails_at_once(self, tmp_path: Path) -> None:
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 3)
        with pytest.raises(WholeInputFailed, match="OperationalError"):
            list(child_records(tmp_path / "missing.db", [answers]))


class FailingChild:
    """A child whose records stop with WholeInputFailed after ``keep`` records of the real child."""

    def __init__(self, db: Path, inputs: list[Path], keep: int) -> None:
        self.records_sent: list[Hit | Miss | Bad] = []
        self._records = child_records(db, inputs)
        self._keep = keep
        self.closed = False

    def records(self) -> Iterator[Hit | Miss | Bad]:
        for record in self._records:
            if len(self.records_sent) == self._keep:
                raise WholeInputFailed("it ended (exit status -9)")
            self.records_sent.append(record)
            yield record

    def close(self) -> None:
        self._records.close()  # type: ignore[attr-defined]
        self.closed = True


def source_items(inputs: list[Path], child: Any, finished: set[int] | None = None) -> tuple[list[Any], list[str], dict[int, int], int]:
    errors = InputErrors()
    order: dict[int, int] = {}
    resumed = [0]
    items = list(answer_source(inputs, "auto", None, RUN_FP, finished or set(), order, errors, resumed, child))
    keys = [(i.key if isinstance(i, FoundLine) else (i.answer.id, i.input_hash)) for i in items]
    return keys, [str(e) for e in errors.first], order, resumed[0]


class TestFallback:
    @pytest.mark.parametrize("keep", [0, 1, 2, 5, 9, 14])
    def test_a_child_stopping_midway_loses_and_repeats_nothing(
        self, tmp_path: Path, empty_db: Path, keep: int, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Two files with bad records and a duplicate; the child stops after ``keep`` records; the rest is read here."""
        a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
        write_answers(a, 6, bad=frozenset({1}))
        write_answers(b, 7, bad=frozenset({0, 5}))
        expected = source_items([a, b], None)
        child = FailingChild(empty_db, [a, b], keep)
        with caplog.at_level(logging.WARNING, logger="dahl.run._source"):
            got = source_items([a, b], child)
        assert got == expected
        assert child.closed
        assert len(child.records_sent) == keep
        assert "reading the rest of the input here" in caplog.text
        # 3 bad records; a3 twice in a.jsonl; a2, a3 (twice) and a4 of b.jsonl repeat a.jsonl's.
        assert len(expected[1]) == 8

    def test_finished_answers_are_resumed_not_yielded(self, tmp_path: Path, empty_db: Path) -> None:
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 5)
        keys, _, order, _ = source_items([answers], None)
        finished = {line_key(answer_id, input_hash) for answer_id, input_hash in keys[:2]}
        got = source_items([answers], FailingChild(empty_db, [answers], keep=100), finished)
        assert got[3] == 2
        assert got[0] == keys[2:]
        assert got[2] == order


class TestWhenStarted:
    def config(self, tmp_path: Path, size: int, **settings: Any) -> ScoreConfig:
        answers = tmp_path / "answers.jsonl"
        answers.write_bytes(b"x" * size)
        endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="")
        adapters = AdapterSettings(**{"splitter": "given", "checker": "openai", "check_endpoint": endpoint,
                                      **settings})
        return ScoreConfig(inputs=(answers,), out_dir=tmp_path / "out", adapters=adapters)

    def test_large_inputs_with_whole_answer_keys_of_this_form_only(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(dahl.run._score, "INPUT_PROCESS_AFTER_BYTES", 100)
        started: list[object] = []
        monkeypatch.setattr(dahl.run._score, "WholeInputProcess", lambda: started.append(1) or "child")
        assert dahl.run._score._spawn_input_process(self.config(tmp_path, 100)) == "child"
        assert dahl.run._score._spawn_input_process(self.config(tmp_path, 99)) is None
        endpoint = EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env="")
        assert dahl.run._score._spawn_input_process(self.config(tmp_path, 100, splitter="openai", split_endpoint=endpoint)) is None
        assert dahl.run._score._spawn_input_process(self.config(tmp_path, 100, checker="fake")) is None
        import dataclasses

        no_cache = dataclasses.replace(self.config(tmp_path, 100), use_cache=False)
        assert dahl.run._score._spawn_input_process(no_cache) is None
        forced_off = dataclasses.replace(self.config(tmp_path, 100), input_process=False)
        assert dahl.run._score._spawn_input_process(forced_off) is None
        forced_on = dataclasses.replace(self.config(tmp_path, 1), input_process=True)
        assert dahl.run._score._spawn_input_process(forced_on) == "child"
        assert len(started) == 2
