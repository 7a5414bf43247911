"""The streaming pipeline: every claim gets a verdict, results are written once, state survives cancellation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import msgspec
import pytest

from dahl.adapters._fake import FakeChecker
from dahl.results._counters import RunCounters
from dahl.results._log import AnswerLog, line_key
from dahl.engine._pipeline import PipelineOptions, QueuedAnswer, run_pipeline
from dahl.errors import FatalAPIError, PermanentAPIError, QuotaExhausted
from dahl.records import Answer, AnswerResult, Claim, Label, Verdict

DECODER = msgspec.json.Decoder(AnswerResult)


class SentenceSplitter:
    """Splits on '. ' so tests do not depend on the rule Splitter."""

    fingerprint = "test-sentences"
    cacheable = True
    parser_version = "1"

    async def split(self, answer: Answer) -> list[Claim]:
        parts = [p.strip().rstrip(".") for p in answer.response.split(". ") if p.strip()]
        return [Claim(text=p, index=i) for i, p in enumerate(parts)]


class CountingChecker:
    """Supported unless the claim contains 'wrong'; counts calls; can fail or block."""

    fingerprint = "test-counting"
    cacheable = True
    parser_version = "1"

    def __init__(self, *, fail_on: str | None = None, quota_on: str | None = None, fatal_on: str | None = None) -> None:
        self.calls = 0
        self.fail_on = fail_on
        self.quota_on = quota_on
        self.fatal_on = fatal_on

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        self.calls += 1
        await anyio.sleep(0)
        if self.quota_on and self.quota_on in claim.text:
            raise QuotaExhausted("insufficient_quota")
        if self.fatal_on and self.fatal_on in claim.text:
            raise FatalAPIError("HTTP 401 from http://api.test/v1/chat/completions: bad key", status=401)
        if self.fail_on and self.fail_on in claim.text:
            raise PermanentAPIError("bad request", status=400)
        label = Label.UNSUPPORTED if "wrong" in claim.text else Label.SUPPORTED
        return Verdict(label=label, checker=self.fingerprint)


def make_answers(n: int, sentences: int = 3) -> list[QueuedAnswer]:
    out = []
    for i in range(n):
        text = ". ".join(f"Fact {j} of answer {i}" + (" is wrong" if j == 0 and i % 2 else "") for j in range(sentences))
        answer = Answer(id=f"a{i}", question=f"q{i}?", response=text + ".", model="m", category="c")
        out.append(QueuedAnswer(answer, f"h{i}"))
    return out


def read_log(path: Path) -> list[AnswerResult]:
    return [DECODER.decode(line) for line in path.read_bytes().splitlines()]


async def run(
    items: list[QueuedAnswer], path: Path, checker: object, **opts: object
) -> tuple[RunCounters, AnswerLog]:
    log_file = AnswerLog(path)
    log_file.open()
    counters = RunCounters()
    settings: dict[str, object] = {"preprocess": False, "queue_size": 4, "check_concurrency": 3, **opts}
    options = PipelineOptions(**settings)  # type: ignore[arg-type]
    source: Iterator[QueuedAnswer] = iter(items)
    try:
        await run_pipeline(source, SentenceSplitter(), checker, log_file, options=options, counters=counters)  # type: ignore[arg-type]
    finally:
        log_file.close()
    return counters, log_file


class TestRunPipeline:
    async def test_every_claim_gets_one_verdict(self, tmp_path: Path) -> None:
        """50 answers of 3 claims: 150 checks, 50 lines, each answer once with 3 verdicts."""
        checker = CountingChecker()
        counters, log_file = await run(make_answers(50), tmp_path / "a.jsonl", checker)
        results = read_log(log_file.path)
        assert checker.calls == 150
        assert counters.claims_done == 150
        assert sorted(r.id for r in results) == sorted(f"a{i}" for i in range(50))
        assert all(len(r.claims) == 3 for r in results)

    async def test_the_claims_of_one_answer_are_checked_at_once(self, tmp_path: Path) -> None:
        """One answer of 4 claims, 4 check workers: all 4 checks are in flight together (claims travel an
        answer at a time, but each claim still goes to its own worker)."""

        class Gathering:
            fingerprint = "test-gathering"
            cacheable = True
            parser_version = "1"

            def __init__(self) -> None:
                self.in_flight = 0
                self.most = 0
                self.all_in = anyio.Event()

            async def check(self, claim: Claim, answer: Answer) -> Verdict:
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
                if self.in_flight == 4:
                    self.all_in.set()
                with anyio.fail_after(5):
                    await self.all_in.wait()
                self.in_flight -= 1
                return Verdict(label=Label.SUPPORTED, checker=self.fingerprint)

        checker = Gathering()
        counters, _ = await run(make_answers(1, sentences=4), tmp_path / "a.jsonl", checker, check_concurrency=4)
        assert (checker.most, counters.claims_done) == (4, 4)

    async def test_scores_follow_verdicts(self, tmp_path: Path) -> None:
        """An odd answer has 1 unsupported of 3 claims: precision 2/3; even answers 1.0."""
        _, log_file = await run(make_answers(4), tmp_path / "a.jsonl", CountingChecker())
        by_id = {r.id: r for r in read_log(log_file.path)}
        assert by_id["a1"].metrics.precision == pytest.approx(2 / 3)
        assert by_id["a0"].metrics.precision == 1.0
        assert by_id["a1"].counts["unsupported"] == 1

    async def test_failed_check_is_labelled_error_and_excluded(self, tmp_path: Path) -> None:
        """A PermanentAPIError becomes an error verdict; the answer is excluded, not scored as false."""
        counters, log_file = await run(make_answers(2), tmp_path / "a.jsonl", CountingChecker(fail_on="Fact 1 of answer 0"))
        by_id = {r.id: r for r in read_log(log_file.path)}
        bad = by_id["a0"]
        assert bad.status == "excluded"
        assert [c.label for c in bad.claims] == ["supported", "error", "supported"]
        assert bad.claims[1].error is not None and bad.claims[1].error.startswith("PermanentAPIError")
        assert counters.claims_failed == 1
        assert counters.errors["PermanentAPIError"] == 1

    async def test_quota_stops_the_run_and_keeps_finished_results(self, tmp_path: Path) -> None:
        """QuotaExhausted propagates; answers finished before it are on disk, complete."""
        items = make_answers(40, sentences=1)
        checker = CountingChecker(quota_on="answer 30")
        with pytest.raises(QuotaExhausted):
            await run(items, tmp_path / "a.jsonl", checker, check_concurrency=1)
        results = read_log(tmp_path / "a.jsonl")
        assert 0 < len(results) <= 30
        assert all(len(r.claims) == 1 for r in results)

    async def test_fatal_api_error_stops_the_run_and_keeps_finished_results(self, tmp_path: Path) -> None:
        """FatalAPIError from a check propagates alone (no group, no error verdicts); finished answers are on disk."""
        items = make_answers(40, sentences=1)
        checker = CountingChecker(fatal_on="answer 30")
        with pytest.raises(FatalAPIError, match="HTTP 401 from http://api.test"):
            await run(items, tmp_path / "a.jsonl", checker, check_concurrency=1)
        results = read_log(tmp_path / "a.jsonl")
        # The split workers take turns, so neighbours may reach the one check worker swapped:
        # the 30 answers checked before answer 30 are on disk, each once.
        ids = {r.id for r in results}
        assert len(results) == len(ids) == 30 and "a30" not in ids and ids <= {f"a{i}" for i in range(40)}
        assert checker.calls == 31  # nothing checked after the fatal reply
        assert [c for r in results for c in r.claims if c.label == "error"] == []

    async def test_fatal_api_error_from_the_splitter_stops_the_run(self, tmp_path: Path) -> None:
        """FatalAPIError from a split propagates; the answers split before it are scored and written."""
        class FatalSplitter(SentenceSplitter):
            async def split(self, answer: Answer) -> list[Claim]:
                if answer.id == "a5":
                    raise FatalAPIError("cannot connect to http://127.0.0.1:9/v1/chat/completions")
                return await super().split(answer)

        log_file = AnswerLog(tmp_path / "a.jsonl")
        log_file.open()
        options = PipelineOptions(preprocess=False, queue_size=1, check_concurrency=1, split_concurrency=1)
        try:
            with pytest.raises(FatalAPIError, match="cannot connect"):
                await run_pipeline(iter(make_answers(20)), FatalSplitter(), CountingChecker(), log_file,  # type: ignore[arg-type]
                                   options=options, counters=RunCounters())
        finally:
            log_file.close()
        ids = [r.id for r in read_log(tmp_path / "a.jsonl")]
        assert "a5" not in ids and set(ids) <= {f"a{i}" for i in range(5)}
        assert all(r.reason is None for r in read_log(tmp_path / "a.jsonl"))

    async def test_cancellation_flushes_finished_results(self, tmp_path: Path) -> None:
        """Cancelling mid-run writes every result that was already assembled."""
        items = make_answers(200, sentences=1)
        checker = FakeChecker(latency_s=0.02)
        done: list[str] = []

        async def scenario() -> None:
            with anyio.move_on_after(0.15):
                log_file = AnswerLog(tmp_path / "a.jsonl")
                log_file.open()
                counters = RunCounters()
                try:
                    await run_pipeline(
                        iter(items), SentenceSplitter(), checker, log_file,
                        options=PipelineOptions(preprocess=False, flush_interval_s=10.0),
                        counters=counters, on_result=lambda r: done.append(r.id),
                    )
                finally:
                    log_file.close()

        await scenario()
        written = [r.id for r in read_log(tmp_path / "a.jsonl")]
        assert 0 < len(written) < 200
        assert written == done


class TestAnswerLog:
    def test_torn_last_line_is_cut_off_on_open(self, tmp_path: Path) -> None:
        """A half-written line from a crash is dropped; complete lines stay."""
        path = tmp_path / "a.jsonl"
        path.write_bytes(b'{"id":"x","input_hash":"1"}\n{"id":"y","inp')
        log_file = AnswerLog(path)
        assert log_file.finished_keys() == {line_key("x", "1")}
        log_file.open()
        log_file.close()
        assert path.read_bytes() == b'{"id":"x","input_hash":"1"}\n'


    def test_failed_lines_are_not_finished_and_are_removed(self, tmp_path: Path) -> None:
        """A split error or an errored claim makes the answer unfinished; only the clean line stays."""
        path = tmp_path / "a.jsonl"
        lines = [
            b'{"id":"ok","input_hash":"1","status":"scored","counts":{"supported":2,"error":0}}\n',
            b'{"id":"split","input_hash":"2","status":"error","counts":{}}\n',
            b'{"id":"check","input_hash":"3","status":"excluded","counts":{"supported":1,"error":1}}\n',
        ]
        path.write_bytes(b"".join(lines))
        assert AnswerLog(path).finished_keys() == {line_key("ok", "1")}
        assert path.read_bytes() == lines[0]

    def test_unreadable_line_is_dropped(self, tmp_path: Path) -> None:
        """A complete line that is not a result (garbage) is removed before the run, with the rest kept."""
        path = tmp_path / "a.jsonl"
        good = b'{"id":"ok","input_hash":"1","status":"scored","counts":{"supported":1}}\n'
        path.write_bytes(b"not json at all\n" + good)
        assert AnswerLog(path).finished_keys() == {line_key("ok", "1")}
        assert path.read_bytes() == good

class TestLimits:
    async def test_overlong_response_is_an_error_not_a_hang(self, tmp_path: Path) -> None:
        """A response over max_response_chars gets status error with the reason; others are scored."""
        items = make_answers(2)
        long_answer = items[0].answer
        items[0] = QueuedAnswer(
            Answer(id=long_answer.id, question="q?", response="Fact. " * 20, model="m", category="c"), "h"
        )
        checker = CountingChecker()
        counters, log_file = await run(items, tmp_path / "a.jsonl", checker, max_response_chars=100)
        by_id = {r.id: r for r in read_log(log_file.path)}
        assert by_id["a0"].status == "error"
        assert by_id["a0"].reason is not None and "exceeds the limit of 100" in by_id["a0"].reason
        assert by_id["a1"].status == "scored"
        assert checker.calls == 3
        assert counters.errors["ResponseTooLong"] == 1
