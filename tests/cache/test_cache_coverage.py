"""Tests for the coverage cache: per-fact coverage labels in the real SQLite store."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from dahl.adapters._coverage import Judgement
from dahl.cache._keys import coverage_key
from dahl.cache._wrap import CachingJudge
from dahl.cache._store import CacheStore
from dahl.results._assemble import build_result
from dahl.errors import TransientAPIError
from dahl.records import Answer, AnswerResult, Coverage


class _Judge:
    """A real judge for these tests: fixed labels by fact text, every call recorded."""

    cacheable = True
    parser_version = "1"

    def __init__(self, labels: dict[str, Coverage], fingerprint: str = "judge/v1") -> None:
        self.labels = labels
        self.fingerprint = fingerprint
        self.calls: list[list[str]] = []
        self.fail = False

    async def judge(self, result: AnswerResult, facts: Sequence[str]) -> list[Judgement]:
        self.calls.append(list(facts))
        if self.fail:
            raise TransientAPIError("down")
        return [Judgement(label=self.labels[f], error="E" if self.labels[f] is Coverage.ERROR else None)
                for f in facts]


def _result(response: str = "R.") -> AnswerResult:
    return build_result(Answer(id="a", question="Q?", response=response), "h", [], [], gamma=10.0, k=64)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CacheStore]:
    with CacheStore(tmp_path / "cache") as opened:
        yield opened


LABELS = {"a": Coverage.COVERED, "b": Coverage.PARTIAL, "c": Coverage.ERROR, "d": Coverage.NOT_COVERED}


class TestCachingJudge:
    async def test_only_misses_reach_the_judge_in_one_call(self, store: CacheStore) -> None:
        """a, b judged once; then a, b, d sends only d; labels come back in fact order."""
        inner = _Judge(LABELS)
        judge = CachingJudge(inner, store)
        await judge.judge(_result(), ["a", "b"])
        got = await judge.judge(_result(), ["a", "d", "b"])
        assert [j.label for j in got] == [Coverage.COVERED, Coverage.NOT_COVERED, Coverage.PARTIAL]
        assert inner.calls == [["a", "b"], ["d"]]
        assert (judge.facts_cached, judge.facts_judged) == (2, 3)

    async def test_errors_are_never_stored(self, store: CacheStore) -> None:
        """A fact labelled error is asked again next time; a raising judge stores nothing."""
        inner = _Judge(LABELS)
        judge = CachingJudge(inner, store)
        await judge.judge(_result(), ["a", "c"])
        await judge.judge(_result(), ["a", "c"])
        assert inner.calls == [["a", "c"], ["c"]]
        inner.fail = True
        with pytest.raises(TransientAPIError):
            await judge.judge(_result(), ["d"])
        inner.fail = False
        await judge.judge(_result(), ["d"])
        assert inner.calls[-1] == ["d"]

    async def test_response_change_is_a_miss(self, store: CacheStore) -> None:
        """An edited response misses; a whitespace-only difference hits."""
        inner = _Judge(LABELS)
        judge = CachingJudge(inner, store)
        await judge.judge(_result("R one."), ["a"])
        await judge.judge(_result("R  one. "), ["a"])
        await judge.judge(_result("R two."), ["a"])
        assert inner.calls == [["a"], ["a"]]

    async def test_a_cheap_judge_is_never_cached(self, store: CacheStore) -> None:
        """cacheable = False: every call goes to the judge."""
        inner = _Judge(LABELS)
        inner.cacheable = False  # type: ignore[misc]
        judge = CachingJudge(inner, store)
        await judge.judge(_result(), ["a"])
        await judge.judge(_result(), ["a"])
        assert inner.calls == [["a"], ["a"]]


class TestCoverageKey:
    def test_key_names_judge_question_response_and_fact(self) -> None:
        """Each of the four parts changes the key; whitespace does not."""
        base = coverage_key("j", "Q?", "R.", "f")
        assert len(base) == 32
        assert coverage_key("j", " Q? ", "R. ", "f ") == base
        others = {coverage_key("k", "Q?", "R.", "f"), coverage_key("j", "Q2?", "R.", "f"),
                  coverage_key("j", "Q?", "R2.", "f"), coverage_key("j", "Q?", "R.", "g")}
        assert base not in others and len(others) == 4
