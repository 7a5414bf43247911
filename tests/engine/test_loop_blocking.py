"""The event loop never blocks: with 1,000 claims in flight no callback runs 50 ms.

Every callback the loop runs (task steps included) is timed by wrapping
``asyncio.Handle._run``, as asyncio's debug mode does, but without debug mode's
stack capture, which would itself slow every call.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dahl import AdapterSettings, EndpointConfig, RunCounters, ScoreConfig, score_async

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def mock_url() -> Iterator[str]:
    """A mock server in its own process (3 s latency: starting 1,000 requests takes ~1 s of client CPU, so all overlap), so its work is not on our loop."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.mockserver", "--port", "0", "--latency-ms", "3000"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "ready" in line, line
        yield line.split()[-1].rstrip("/") + "/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def write_answers(path: Path, n_answers: int, claims_each: int) -> None:
    with path.open("w") as f:
        for i in range(n_answers):
            claims = [{"text": f"Compound {i}-{j} inhibits enzyme {j}."} for j in range(claims_each)]
            f.write(json.dumps({"id": f"a{i}", "question": f"What does compound {i} do?",
                                "response": " ".join(c["text"] for c in claims), "claims": claims}) + "\n")


class TestEventLoopBlocking:
    async def test_no_callback_over_50ms_with_1000_in_flight(
        self, tmp_path: Path, mock_url: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A whole run with 1,000 concurrent checks has no loop callback taking 50 ms or more."""
        slowest: list[tuple[float, str]] = []
        original = asyncio.Handle._run

        def timed_run(handle: asyncio.Handle) -> None:
            start = time.perf_counter()
            original(handle)
            took = time.perf_counter() - start
            if took >= 0.01:
                owner = getattr(handle._callback, "__self__", None)  # the Task for task steps
                where = owner.get_coro() if isinstance(owner, asyncio.Task) else handle
                slowest.append((took, repr(where)[:300]))

        monkeypatch.setattr(asyncio.Handle, "_run", timed_run)
        write_answers(tmp_path / "answers.jsonl", 100, 10)
        config = ScoreConfig(
            inputs=(tmp_path / "answers.jsonl",),
            out_dir=tmp_path / "out",
            adapters=AdapterSettings(
                splitter="given",
                checker="openai",
                check_endpoint=EndpointConfig(base_url=mock_url, model="mock", api_key_env="", max_in_flight=1000),
            ),
        )
        counters = RunCounters()
        peak = 0

        async def watch() -> None:
            nonlocal peak
            while True:
                await asyncio.sleep(0.005)
                peak = max(peak, counters.checks_in_flight)

        watcher = asyncio.create_task(watch())
        try:
            report = await score_async(config, counters=counters)
        finally:
            watcher.cancel()
        assert report.counters.claims_done == 1000
        assert peak >= 990  # all 1,000 claims were in flight at once
        worst = sorted(slowest, reverse=True)[:3]
        assert all(took < 0.05 for took, _ in worst), worst
