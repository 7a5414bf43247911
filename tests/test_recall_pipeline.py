"""The interim cover stage of run_pipeline (part S's stage-based pipeline replaces it): every result is covered once."""

from __future__ import annotations

from pathlib import Path

import anyio
import msgspec
import pytest

from dahl.adapters._fake import FakeChecker
from dahl.adapters._given import GivenSplitter
from dahl.results._counters import RunCounters
from dahl.results._log import AnswerLog
from dahl.engine._pipeline import PipelineOptions, QueuedAnswer, run_pipeline
from dahl.errors import QuotaExhausted
from dahl.records import AnswerRecall, AnswerResult, GivenClaim, Answer

DECODER = msgspec.json.Decoder(AnswerResult)


class TaggingCoverer:
    """A real Coverer for this test: recall = index / 10 of the answer id; counts covers; can run out of quota."""

    fingerprint = "tagging/v1"

    def __init__(self, quota_after: int | None = None) -> None:
        self.seen: list[str] = []
        self.quota_after = quota_after

    async def cover(self, result: AnswerResult) -> AnswerResult:
        if self.quota_after is not None and len(self.seen) >= self.quota_after:
            raise QuotaExhausted("insufficient_quota")
        self.seen.append(result.id)
        await anyio.sleep(0)
        return msgspec.structs.replace(result, recall=AnswerRecall(recall=int(result.id[1:]) / 10))


def _answers(n: int) -> list[QueuedAnswer]:
    return [QueuedAnswer(Answer(id=f"a{i}", question=f"q{i}?", response=f"r{i}.",
                                claims=(GivenClaim(text=f"c{i}."),)), f"h{i}") for i in range(n)]


async def _run(path: Path, coverer: TaggingCoverer, n: int) -> None:
    log_file = AnswerLog(path)
    log_file.open()
    options = PipelineOptions(preprocess=False, queue_size=2, cover_concurrency=3)
    try:
        await run_pipeline(iter(_answers(n)), GivenSplitter(), FakeChecker(), log_file, options=options,
                           counters=RunCounters(), coverer=coverer)
    finally:
        log_file.close()


class TestCoverStage:
    async def test_every_answer_covered_once_before_writing(self, tmp_path: Path) -> None:
        """20 answers: 20 covers, each written once with the recall its coverer gave."""
        coverer = TaggingCoverer()
        await _run(tmp_path / "answers.jsonl", coverer, 20)
        rows = [DECODER.decode(line) for line in (tmp_path / "answers.jsonl").read_bytes().splitlines()]
        assert sorted(coverer.seen) == sorted(f"a{i}" for i in range(20))
        assert sorted((r.id, r.recall.recall) for r in rows) == sorted((f"a{i}", i / 10) for i in range(20))

    async def test_quota_stops_and_keeps_covered_answers(self, tmp_path: Path) -> None:
        """QuotaExhausted from the coverer stops the run; the answers covered before are written."""
        coverer = TaggingCoverer(quota_after=5)
        with pytest.raises(QuotaExhausted):
            await _run(tmp_path / "answers.jsonl", coverer, 50)
        rows = [DECODER.decode(line) for line in (tmp_path / "answers.jsonl").read_bytes().splitlines()]
        assert sorted(r.id for r in rows) == sorted(coverer.seen)
        assert len(rows) == 5

    async def test_whole_answer_cache_refused_with_a_coverer(self, tmp_path: Path) -> None:
        """A coverer with a whole-answer cache is a ValueError (a whole answer carries no recall)."""
        log_file = AnswerLog(tmp_path / "answers.jsonl")
        with pytest.raises(ValueError, match="whole-answer cache"):
            await run_pipeline(iter([]), GivenSplitter(), FakeChecker(), log_file, options=PipelineOptions(),
                               counters=RunCounters(), whole=object(), coverer=TaggingCoverer())  # type: ignore[arg-type]
