"""RunCounters: one error total, requests in flight as the server sees them, live resume and input counts.

``mocks`` is tests/conftest.py's MockServers fixture.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from dahl.run._plan import AdapterSettings
from dahl.config import EndpointConfig
from dahl.results._counters import RunCounters
from dahl.lanes._lane import LaneStatistics
from dahl.records import AnswerResult
from dahl.run._score import ScoreConfig, score_async


def lane(in_flight: int, waiting: int) -> LaneStatistics:
    return LaneStatistics(
        in_flight=in_flight, waiting=waiting, requests=10, successes=10, retries=1, rate_limited=2,
        transient_errors=0, fatal_errors=0, tokens_reserved=0, tokens_used=300, paused_until=None, rpm=None, tpm=None,
    )


def write_answers(path: Path, n: int, *, first: int = 0, bad_first: bool = False) -> None:
    with path.open("w") as f:
        if bad_first:
            f.write('{"question": "q?", "response": ""}\n')  # empty response: rejected
        for i in range(first, first + n):
            claims = [{"text": f"Drug {i} lowers marker {j}."} for j in range(3)]
            f.write(json.dumps({"id": f"a{i}", "question": f"What does drug {i} do?",
                                "response": " ".join(c["text"] for c in claims), "claims": claims}) + "\n")


def config(inputs: Path, out: Path, **adapters: Any) -> ScoreConfig:
    settings = AdapterSettings(**{"splitter": "given", "checker": "fake", **adapters})
    return ScoreConfig(inputs=(inputs,), out_dir=out, adapters=settings)


class TestErrorCount:
    def test_split_and_input_errors_count(self) -> None:
        """A too-long response (a split error, no claim failed) and a bad record make 2 errors."""
        counters = RunCounters()
        counters.errors["ResponseTooLong"] += 1
        counters.input_errors = 1
        assert counters.claims_failed == 0
        assert counters.error_count() == 2

    def test_claim_errors_count_once(self) -> None:
        """A failed claim is in claims_failed and errors; it counts once."""
        counters = RunCounters(claims_failed=3)
        counters.errors["PermanentAPIError"] += 3
        assert counters.error_count() == 3


class TestRequestsInFlight:
    def test_lanes_figures_not_check_workers(self) -> None:
        """With lanes, in flight is what the lanes sent (5 + 1) and queued what waits (40 + 18), not 64 checks."""
        counters = RunCounters(checks_in_flight=64)
        counters.lane_statistics = lambda: {"split": lane(1, 18), "check": lane(5, 40)}
        assert counters.requests_in_flight() == (6, 58)
        assert counters.lane_totals() == {
            "requests": 20, "rate_limited": 4, "retries": 2, "tokens_used": 600, "in_flight": 6, "waiting": 58,
        }

    def test_offline_is_checker_calls(self) -> None:
        """Without lanes (offline adapters) the Checker calls running are in flight, none queued."""
        assert RunCounters(checks_in_flight=7).requests_in_flight() == (7, 0)

    @pytest.mark.timeout(60)
    async def test_never_above_what_the_server_saw(self, tmp_path: Path, mocks: Any) -> None:
        """Against a 0.4 s mock and a 300 rpm lane, sampled in-flight never exceeds the mock's peak concurrency."""
        url = mocks.start("--latency-ms", "400")
        write_answers(tmp_path / "answers.jsonl", 4)  # 12 claims: ~2.4 s at 5 requests/s
        endpoint = EndpointConfig(base_url=url, model="mock", api_key_env="", rpm=300, max_in_flight=64)
        counters = RunCounters()
        peak = peak_checks = 0

        async def watch() -> None:
            nonlocal peak, peak_checks
            while True:
                await anyio.sleep(0.005)
                peak = max(peak, counters.requests_in_flight()[0])
                peak_checks = max(peak_checks, counters.checks_in_flight)

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            await score_async(config(tmp_path / "answers.jsonl", tmp_path / "out", checker="openai",
                                     check_endpoint=endpoint), counters=counters)
            tg.cancel_scope.cancel()
        server_peak = mocks.stats(url)["in_flight_max"]
        assert mocks.stats(url)["requests"] == 12
        assert 1 <= peak <= server_peak
        assert peak_checks > server_peak  # the check workers' count includes calls queued for the rate limit
        assert counters.requests_in_flight() == (0, 0)


class TestLiveCounts:
    async def test_input_errors_counted_as_read(self, tmp_path: Path) -> None:
        """A bad first record is counted before the first answer is written, not only at the end."""
        write_answers(tmp_path / "answers.jsonl", 3, bad_first=True)
        counters = RunCounters()
        seen: list[int] = []

        def on_result(result: AnswerResult) -> None:
            seen.append(counters.input_errors)

        await score_async(config(tmp_path / "answers.jsonl", tmp_path / "out"), counters=counters, on_result=on_result)
        assert seen == [1, 1, 1]

    async def test_resumed_counted_as_read(self, tmp_path: Path) -> None:
        """A re-run over 4 finished and 2 new answers has counted the 4 resumed by its first new result."""
        answers = tmp_path / "answers.jsonl"
        write_answers(answers, 4)
        await score_async(config(answers, tmp_path / "out"))
        with answers.open("a") as f:
            for i in (4, 5):
                f.write(json.dumps({"id": f"a{i}", "question": f"q{i}?", "response": f"Drug {i} works.",
                                    "claims": [{"text": f"Drug {i} works."}]}) + "\n")
        counters = RunCounters()
        seen: list[int] = []
        await score_async(config(answers, tmp_path / "out"), counters=counters,
                          on_result=lambda r: seen.append(counters.answers_resumed))
        assert seen == [4, 4]
        assert (counters.answers_resumed, counters.answers_done) == (4, 2)
