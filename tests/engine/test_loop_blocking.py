"""The event loop never blocks: with 1,000 claims in flight no callback runs 50 ms.

Every callback the loop runs (task steps included) is timed by wrapping
``asyncio.Handle._run``, as asyncio's debug mode does, but without debug mode's
stack capture, which would itself slow every call.
"""

from __future__ import annotations

import asyncio
import gc
import json
import time
from pathlib import Path
from typing import Any

import pytest

from dahl import AdapterSettings, EndpointConfig, RunCounters, ScoreConfig, score_async



@pytest.fixture
def mock_url(mocks: Any) -> str:
    """A mock in its own process with 3 s latency: starting 1,000 requests takes ~1 s of
    client CPU, so all of them overlap. ``mocks`` is tests/conftest.py's MockServers."""
    url: str = mocks.start("--latency-ms", "3000")
    return url


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
        # Earlier tests of this pytest process leave a large heap; a full collection of it
        # (~50 ms in a full run) is not dahl's doing. A CLI run starts with a fresh process.
        gc.collect()
        gc.freeze()
        try:
            report = await score_async(config, counters=counters)
        finally:
            watcher.cancel()
            gc.unfreeze()
        assert report.counters.claims_done == 1000
        assert peak >= 990  # all 1,000 claims were in flight at once
        worst = sorted(slowest, reverse=True)[:3]
        assert all(took < 0.05 for took, _ in worst), worst
