"""The cover stage: every finished answer is covered once before it is written, and none is lost."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import anyio
import msgspec
import pytest

from dahl.results._counters import RunCounters
from dahl.results._log import AnswerLog
from dahl.engine._pipeline import PipelineOptions, QueuedAnswer, run_pipeline
from dahl.results._assemble import FoundAnswer
from dahl.errors import FatalAPIError, PermanentAPIError, QuotaExhausted
from dahl.metrics import answer_recall
from dahl.records import Answer, AnswerRecall, AnswerResult, Coverage, FactResult

from tests.engine.test_pipeline import CountingChecker, SentenceSplitter, make_answers, read_log


class KeywordCoverer:
    """A Coverer over two facts per answer: 'Fact 0 of answer i' (stated) and 'Fact 9 of answer i' (never).

    Records the ids it was called with, in call order; can raise, return a failed fact, or wait on a gate.
    """

    fingerprint = "test-keyword-coverer"

    def __init__(
        self,
        *,
        quota_on: str | None = None,
        fatal_on: str | None = None,
        fail_on: str | None = None,
        judge_error_on: str | None = None,
        gate: anyio.Event | None = None,
    ) -> None:
        self.calls: list[str] = []
        self.statuses: list[str] = []
        self.in_flight = 0
        self.most = 0
        self.quota_on, self.fatal_on, self.fail_on, self.judge_error_on = quota_on, fatal_on, fail_on, judge_error_on
        self.gate = gate

    async def cover(self, result: AnswerResult) -> AnswerResult:
        self.calls.append(result.id)
        self.statuses.append(str(result.status))
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            if self.gate is not None:
                await self.gate.wait()
            await anyio.sleep(0)
        finally:
            self.in_flight -= 1
        if result.id == self.quota_on:
            raise QuotaExhausted("insufficient_quota")
        if result.id == self.fatal_on:
            raise FatalAPIError("HTTP 401 from http://judge.test/v1/chat/completions: bad key", status=401)
        if result.id == self.fail_on:
            raise PermanentAPIError("bad request", status=400)
        n = result.id.removeprefix("a")
        facts: list[FactResult] = []
        for j in (0, 9):
            text = f"Fact {j} of answer {n}"
            if result.id == self.judge_error_on and j == 9:
                facts.append(FactResult(id=f"f{j}", text=text, weight=1.0, label=Coverage.ERROR,
                                        error="RateLimited: HTTP 429"))
                continue
            label = Coverage.COVERED if text in result.response else Coverage.NOT_COVERED
            facts.append(FactResult(id=f"f{j}", text=text, weight=1.0, label=label))
        recall = answer_recall(facts, precision=result.metrics.precision,
                               abstained=result.status == "abstained")
        return msgspec.structs.replace(result, recall=recall)


async def run_covered(
    items: Sequence[QueuedAnswer], path: Path, coverer: KeywordCoverer, **opts: object
) -> tuple[RunCounters, list[str]]:
    """Run the pipeline with ``coverer``; returns the counters and the ids passed to on_result, in order."""
    log_file = AnswerLog(path)
    log_file.open()
    counters = RunCounters()
    seen: list[str] = []
    settings: dict[str, object] = {"preprocess": False, "queue_size": 4, "check_concurrency": 3, **opts}
    try:
        await run_pipeline(iter(items), SentenceSplitter(), CountingChecker(), log_file,  # type: ignore[arg-type]
                           options=PipelineOptions(**settings),  # type: ignore[arg-type]
                           counters=counters, on_result=lambda r: seen.append(r.id), coverer=coverer)
    finally:
        log_file.close()
    return counters, seen


class TestCoverStage:
    async def test_every_finished_answer_is_covered_once(self, tmp_path: Path) -> None:
        """20 scored answers, one abstained, one too long: 22 covers, 22 lines each with the coverer's recall."""
        items = make_answers(20)
        items.append(QueuedAnswer(Answer(id="a20", question="q?", response="No idea.", model="m", category="c",
                                         abstained=True), "h20"))
        items.append(QueuedAnswer(Answer(id="a21", question="q?", response="Fact. " * 40, model="m", category="c"),
                                  "h21"))
        coverer = KeywordCoverer()
        counters, _ = await run_covered(items, tmp_path / "a.jsonl", coverer, max_response_chars=200)
        results = {r.id: r for r in read_log(tmp_path / "a.jsonl")}
        assert sorted(coverer.calls) == sorted(f"a{i}" for i in range(22))
        assert sorted(coverer.statuses) == ["abstained", "error"] + ["scored"] * 20
        assert len(results) == 22
        recall = results["a3"].recall
        assert isinstance(recall, AnswerRecall)
        assert recall.recall == 0.5  # Fact 0 stated, Fact 9 not
        assert [f.label for f in recall.facts] == ["covered", "not_covered"]
        assert (counters.answers_covered, counters.facts_judged, counters.facts_failed) == (22, 44, 0)
        assert (counters.answers_covering, counters.covers_in_flight) == (0, 0)

    async def test_writes_follow_the_order_covers_finish(self, tmp_path: Path) -> None:
        """One cover worker: answers.jsonl and on_result see the answers in the order they were covered."""
        coverer = KeywordCoverer()
        _, seen = await run_covered(make_answers(30), tmp_path / "a.jsonl", coverer, cover_concurrency=1)
        assert [r.id for r in read_log(tmp_path / "a.jsonl")] == coverer.calls
        assert seen == coverer.calls
        assert len(seen) == 30

    @pytest.mark.parametrize("kind", ["quota", "fatal"])
    async def test_a_stopping_error_keeps_the_covered_answers(self, tmp_path: Path, kind: str) -> None:
        """QuotaExhausted / FatalAPIError from cover stops the run; the answers covered before it are written."""
        coverer = KeywordCoverer(**{f"{kind}_on": "a12"})  # type: ignore[arg-type]
        error = QuotaExhausted if kind == "quota" else FatalAPIError
        with pytest.raises(error):
            await run_covered(make_answers(40), tmp_path / "a.jsonl", coverer, cover_concurrency=1)
        written = [r.id for r in read_log(tmp_path / "a.jsonl")]
        assert coverer.calls[-1] == "a12"  # nothing covered after the stop
        assert written == coverer.calls[:-1]
        assert all(isinstance(r.recall, AnswerRecall) for r in read_log(tmp_path / "a.jsonl"))

    async def test_an_adapter_error_does_not_lose_the_answer(self, tmp_path: Path) -> None:
        """PermanentAPIError from cover: the answer is written without recall, the error counted, the rest covered."""
        coverer = KeywordCoverer(fail_on="a3")
        counters, _ = await run_covered(make_answers(10), tmp_path / "a.jsonl", coverer)
        lines = {json.loads(line)["id"]: json.loads(line) for line in (tmp_path / "a.jsonl").read_bytes().splitlines()}
        assert sorted(lines) == sorted(f"a{i}" for i in range(10))
        assert "recall" not in lines["a3"]
        assert lines["a3"]["status"] == "scored"
        assert lines["a4"]["recall"]["recall"] == 0.5
        assert counters.errors["PermanentAPIError"] == 1
        assert (counters.answers_covered, counters.facts_judged) == (10, 18)

    async def test_a_failed_fact_is_counted_not_judged_false(self, tmp_path: Path) -> None:
        """A fact labelled error counts in facts_failed and errors by class; the answer's recall is None."""
        coverer = KeywordCoverer(judge_error_on="a2")
        counters, _ = await run_covered(make_answers(4), tmp_path / "a.jsonl", coverer)
        by_id = {r.id: r for r in read_log(tmp_path / "a.jsonl")}
        recall = by_id["a2"].recall
        assert isinstance(recall, AnswerRecall)
        assert (recall.recall, recall.reason) == (None, "coverage_error")
        assert (counters.facts_judged, counters.facts_failed, counters.errors["RateLimited"]) == (8, 1, 1)
        assert counters.error_count() == 1

    async def test_covers_in_flight_are_bounded_and_hold_back_upstream(self, tmp_path: Path) -> None:
        """Covers blocked: at most cover_concurrency run, at most 11 answers wait in the cover stage (queue 4,
        2 covering, 5 producers blocked sending), and checking stops well short of 50 answers; then all finish."""
        gate = anyio.Event()
        coverer = KeywordCoverer(gate=gate)
        counters = RunCounters()
        log_file = AnswerLog(tmp_path / "a.jsonl")
        log_file.open()
        checker = CountingChecker()
        options = PipelineOptions(preprocess=False, queue_size=4, read_batch=1, split_concurrency=2,
                                  check_concurrency=3, cover_concurrency=2)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: run_pipeline(iter(make_answers(50)), SentenceSplitter(), checker, log_file,  # type: ignore[arg-type]
                                                   options=options, counters=counters, coverer=coverer))
                while counters.covers_in_flight < 2:
                    await anyio.sleep(0)
                for _ in range(2000):  # let every stage run until it blocks
                    await anyio.sleep(0)
                assert coverer.most == 2
                assert counters.answers_covering <= 11
                assert checker.calls < 150
                assert counters.answers_done == 0
                gate.set()
        finally:
            log_file.close()
        assert len(read_log(tmp_path / "a.jsonl")) == 50
        assert (coverer.most, counters.answers_covered, checker.calls) == (2, 50, 150)

    async def test_a_coverer_with_the_whole_answer_cache_is_refused(self, tmp_path: Path) -> None:
        """Lines found whole carry no recall: coverer + whole raises ValueError before reading anything."""

        class NoWhole:
            async def look_up(self, items: Sequence[tuple[Answer, str]]) -> tuple[list[str | None], list[FoundAnswer | None]]:
                return [None] * len(items), [None] * len(items)

            def keep(self, key: str, result: AnswerResult, cleaned: bool) -> None:
                pass

        def source() -> Iterator[QueuedAnswer]:
            raise AssertionError("the source must not be read")
            yield  # a generator: nothing runs until it is read

        log_file = AnswerLog(tmp_path / "a.jsonl")
        with pytest.raises(ValueError, match="cannot use the whole-answer cache"):
            await run_pipeline(source(), SentenceSplitter(), CountingChecker(), log_file,  # type: ignore[arg-type]
                               options=PipelineOptions(), counters=RunCounters(), whole=NoWhole(),
                               coverer=KeywordCoverer())

    async def test_cover_counters_reach_the_summary_only_with_a_coverer(self, tmp_path: Path) -> None:
        """as_dict() gains answers_covered, facts_judged, facts_failed with a coverer; without one it is unchanged."""
        counters, _ = await run_covered(make_answers(3), tmp_path / "a.jsonl", KeywordCoverer())
        run = counters.as_dict()
        assert (run["answers_covered"], run["facts_judged"], run["facts_failed"]) == (3, 6, 0)
        assert "facts_judged" not in RunCounters().as_dict()
