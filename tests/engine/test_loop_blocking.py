"""The event loop never makes a blocking call: scoring runs under a blocking-call detector.

``blockbuster`` replaces the blocking functions of the standard library (``time.sleep``,
file reads and writes, ``os.stat`` and friends, blocking socket calls, sqlite3, lock
acquires) with wrappers that raise ``BlockingError`` when they are called on a thread
running an event loop; the same calls in worker threads pass. A run that completes under
it made none on the loop, whatever the machine's load: no wall-clock threshold. How long
the loop stalls is a benchmark figure instead (``event-loop lag p99 ms`` of B1, B2, B7).

The detector watches every module, not only ``dahl``: a blocking call inside aiohttp or
msgspec on the loop stalls dahl's run just the same. Its own allow-list covers imports
(``importlib`` reading a module's source) and writes to the real stdout and stderr.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from blockbuster import BlockingError, blockbuster_ctx

from dahl import AdapterSettings, EndpointConfig, RunCounters, ScoreConfig, score_async
from dahl.adapters._fake import FakeChecker
from dahl.adapters._given import GivenSplitter
from dahl.results._log import AnswerLog
from dahl.engine._pipeline import PipelineOptions, QueuedAnswer, run_pipeline
from dahl.records import Answer, Claim, GivenClaim, Verdict

N_ANSWERS = 100
CLAIMS_EACH = 10


@pytest.fixture
def mock_url(mocks: Any) -> str:
    """A mock in its own process with 1 s latency, so the 1,000 checks overlap.

    ``mocks`` is tests/conftest.py's MockServers.
    """
    url: str = mocks.start("--latency-ms", "1000")
    return url


def write_answers(path: Path, n_answers: int, claims_each: int) -> None:
    """Write ``n_answers`` pre-split answers of ``claims_each`` distinct claims to ``path`` (JSONL)."""
    with path.open("w") as f:
        for i in range(n_answers):
            claims = [{"text": f"Compound {i}-{j} inhibits enzyme {j}."} for j in range(claims_each)]
            f.write(json.dumps({"id": f"a{i}", "question": f"What does compound {i} do?",
                                "response": " ".join(c["text"] for c in claims), "claims": claims}) + "\n")


def given_answer(i: int, n_claims: int) -> Answer:
    """Answer ``a{i}`` with ``n_claims`` given claims, each naming ``answer {i}``."""
    texts = [f"Claim {j} of answer {i}." for j in range(n_claims)]
    return Answer(id=f"a{i}", question=f"Question {i}?", response=" ".join(texts),
                  claims=tuple(GivenClaim(text=t) for t in texts))


class GatedChecker:
    """The fake Checker, except that claims containing one of ``holds`` wait until cancelled (counted in ``held``)."""

    def __init__(self, *holds: str) -> None:
        self.inner = FakeChecker()
        self.fingerprint = self.inner.fingerprint
        self.cacheable, self.parser_version = True, "1"
        self.holds = holds
        self.held = 0

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """The fake verdict, or wait until cancelled."""
        if any(h in claim.text for h in self.holds):
            self.held += 1
            await asyncio.Event().wait()
        return await self.inner.check(claim, answer)


def config_for(answers: Path, out_dir: Path, url: str) -> ScoreConfig:
    """An openai-Checker run of ``answers`` into ``out_dir`` with up to 1,000 checks in flight.

    Built before the detector starts: a ScoreConfig checks its files when built, at the
    edge of the program (the CLI builds it before ``asyncio.run``).
    """
    return ScoreConfig(
        inputs=(answers,),
        out_dir=out_dir,
        adapters=AdapterSettings(
            splitter="given",
            checker="openai",
            check_endpoint=EndpointConfig(base_url=url, model="mock", api_key_env="", max_in_flight=1000),
        ),
    )


class TestDetector:
    async def test_catches_a_sleep_on_the_loop(self) -> None:
        """The detector is live: ``time.sleep`` on the loop raises BlockingError naming it."""
        with blockbuster_ctx(), pytest.raises(BlockingError, match="time.sleep"):
            time.sleep(0)

    async def test_lets_a_worker_thread_block(self) -> None:
        """A blocking call sent to a worker thread (as dahl does its file work) passes."""
        with blockbuster_ctx():
            await asyncio.to_thread(time.sleep, 0)


class TestNoBlockingCallOnTheLoop:
    async def test_first_run_with_up_to_1000_in_flight(self, tmp_path: Path, mock_url: str, mocks: Any) -> None:
        """A first run (1,000 claims, cache on, every claim a request, up to 1,000 at once) blocks nothing."""
        write_answers(tmp_path / "answers.jsonl", N_ANSWERS, CLAIMS_EACH)
        config = config_for(tmp_path / "answers.jsonl", tmp_path / "out", mock_url)
        with blockbuster_ctx():
            report = await score_async(config)
        assert report.counters.claims_done == 1000
        assert mocks.stats(mock_url)["check"] == 1000

    async def test_rescore_from_the_cache(self, tmp_path: Path, mock_url: str, mocks: Any) -> None:
        """A re-score into a new folder finds all 100 answers whole, sends 0 requests, blocks nothing."""
        write_answers(tmp_path / "answers.jsonl", N_ANSWERS, CLAIMS_EACH)
        await score_async(config_for(tmp_path / "answers.jsonl", tmp_path / "first", mock_url))
        assert mocks.stats(mock_url)["check"] == 1000
        again = config_for(tmp_path / "answers.jsonl", tmp_path / "again", mock_url)
        with blockbuster_ctx():
            report = await score_async(again)
        assert (report.counters.answers_cached, report.counters.claims_cached) == (100, 1000)
        assert mocks.stats(mock_url)["check"] == 1000  # not one more

    async def test_failed_rescore_writes_each_answer_once(self, tmp_path: Path, mock_url: str) -> None:
        """A re-score whose ``on_result`` raises stops without blocking the loop; each answer is written once.

        ``on_result`` raising after a write batch made the writer append that batch again,
        on the loop: 200 lines for 100 answers.
        """
        write_answers(tmp_path / "answers.jsonl", N_ANSWERS, CLAIMS_EACH)
        await score_async(config_for(tmp_path / "answers.jsonl", tmp_path / "first", mock_url))
        again = config_for(tmp_path / "answers.jsonl", tmp_path / "again", mock_url)

        def fail(result: object) -> None:
            raise RuntimeError("the caller gives up")

        # score_async raises the one meaningful error of its task groups: a BlockingError
        # beside it would make it raise the whole group instead.
        with blockbuster_ctx(), pytest.raises(RuntimeError, match="the caller gives up") as caught:
            await score_async(again, on_result=fail)
        cause = caught.value.__cause__
        assert not (isinstance(cause, BaseExceptionGroup) and cause.subgroup(BlockingError) is not None)
        ids = [json.loads(line)["id"] for line in (tmp_path / "again" / "answers.jsonl").read_text().splitlines()]
        assert sorted(ids) == sorted(f"a{i}" for i in range(N_ANSWERS))

    async def test_cancelled_run_writes_its_finished_batch_off_the_loop(self, tmp_path: Path) -> None:
        """Cancelled with 10 finished answers not yet written, the pipeline writes them in a thread, then stops.

        Answers a10 and a11 wait on a gate that never opens; writes are held back (flush
        every hour or 10^6 results) until the cancel. Before, the cancelled writer
        appended its batch on the loop.
        """
        items = [QueuedAnswer(given_answer(i, 3), f"h{i}") for i in range(12)]
        checker = GatedChecker("answer 10", "answer 11")
        counters = RunCounters()
        log_file = AnswerLog(tmp_path / "answers.jsonl")
        log_file.open()
        options = PipelineOptions(preprocess=False, check_concurrency=8, flush_items=10**6, flush_interval_s=3600.0)
        try:
            with blockbuster_ctx():
                run = asyncio.create_task(run_pipeline(
                    iter(items), GivenSplitter(), checker, log_file, options=options, counters=counters
                ))
                while counters.claims_done < 10 * 3 or checker.held < 2 * 3:
                    await asyncio.sleep(0.01)
                for _ in range(10):  # the writer takes each result in the loop pass after it is sent
                    await asyncio.sleep(0)
                run.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await run
        finally:
            log_file.close()
        ids = [json.loads(line)["id"] for line in (tmp_path / "answers.jsonl").read_text().splitlines()]
        assert sorted(ids) == sorted(f"a{i}" for i in range(10))
