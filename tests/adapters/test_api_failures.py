"""A run against an endpoint that cannot work stops at once, cleanly, with FatalAPIError.

Real runs (:func:`dahl.run._score.score_async`) against the loopback mock (``mocks``, a
``python -m bench.mockserver`` process; tests/conftest.py), counting the requests it saw.
"""

from __future__ import annotations

import json
import random
import socket
from pathlib import Path
from typing import Any

import pytest

from dahl.run._plan import AdapterSettings
from dahl.adapters._http import make_session
from dahl.adapters._openai import OpenAIChecker
from dahl.config import EndpointConfig, load_config
from dahl.lanes._lane import Lane, LaneLimits
from dahl.lanes._retry import RetryPolicy
from dahl.errors import ConfigError, FatalAPIError
from dahl.records import Answer, Claim, Label
from dahl.run._score import ScoreConfig, score_async

KEY_ENV = "DAHL_H3_TEST_TOKEN"
KEY = "sk-h3-ECHOEDSECRET0123456789"


def write_answers(path: Path, n: int) -> None:
    """``n`` answers of three given claims each."""
    with path.open("w") as f:
        for i in range(n):
            claims = [{"text": f"Drug {i} lowers marker {j}."} for j in range(3)]
            f.write(json.dumps({"id": f"a{i}", "question": f"What does drug {i} do?",
                                "response": " ".join(c["text"] for c in claims), "claims": claims}) + "\n")


def config(tmp_path: Path, url: str, n: int, **endpoint: Any) -> ScoreConfig:
    """A run of ``n`` answers (given claims) checked by the openai Checker at ``url``, 4 in flight."""
    answers = tmp_path / "answers.jsonl"
    write_answers(answers, n)
    check = EndpointConfig(base_url=url, model="mock", api_key_env=KEY_ENV, max_in_flight=4, **endpoint)
    return ScoreConfig(
        inputs=(answers,),
        out_dir=tmp_path / "out",
        adapters=AdapterSettings(splitter="given", checker="openai", check_endpoint=check),
        cache_dir=tmp_path / "cache",
        n_boot=10,
    )


def written(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "out" / "answers.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


class TestBadKey:
    async def test_401_stops_the_run_after_the_requests_in_flight(self, tmp_path: Path, mocks: Any) -> None:
        """A 401 on every call: FatalAPIError naming the endpoint and the key check; at most 4 requests (in flight) for 300 claims."""
        url = mocks.start("--fault", "401=1")
        with pytest.raises(FatalAPIError) as info:
            await score_async(config(tmp_path, url, 100))
        text = str(info.value)
        assert text.startswith(f"HTTP 401 from {url}/chat/completions: Incorrect API key provided.")
        assert text.endswith("Check the API key (and its access to this model).")
        assert "ECHOEDSECRET" not in text
        assert 1 <= mocks.stats(url)["requests"] <= 4
        assert written(tmp_path) == []  # no answer labelled error


class TestPermanentFailures:
    async def test_400_on_every_call_trips_the_breaker(self, tmp_path: Path, mocks: Any) -> None:
        """A 400 on every call: FatalAPIError after 20 failed calls (plus the 4 in flight at most), with the server's message."""
        url = mocks.start("--fault", "400=1")
        with pytest.raises(FatalAPIError) as info:
            await score_async(config(tmp_path, url, 100))
        assert str(info.value).startswith(
            f"{url} (model mock): 20 calls in a row failed with a permanent error and none succeeded; stopping."
        )
        assert str(info.value).endswith("Last error: HTTP 400: Mock fault 400: unsupported parameter.")
        assert 20 <= mocks.stats(url)["requests"] <= 24


class TestOutage:
    async def test_500s_pause_the_lane_and_stop_after_max_outage_s(self, tmp_path: Path, mocks: Any) -> None:
        """500 on every call, max_outage_s=2.5: the lane opens after 10, probes at ~1 and ~3 s, then stops: 16 requests at most."""
        url = mocks.start("--fault", "500=1")
        with pytest.raises(FatalAPIError, match=r"no successful reply for \d+ s .*Last error: HTTP 500: Mock fault 500\."):
            await score_async(config(tmp_path, url, 100, max_outage_s=2.5))
        # 10 failures open it, up to 4 were in flight, then the probes at ~1 s and ~3 s.
        assert 10 <= mocks.stats(url)["requests"] <= 16


class TestRefusals:
    async def test_a_refused_check_is_a_claim_in_error(self, tmp_path: Path, mocks: Any) -> None:
        """Every reply a refusal (message.refusal): each claim is labelled error with ModelRefused, one request each (no re-ask), no trip."""
        url = mocks.start("--fault", "refusal=1")
        await score_async(config(tmp_path, url, 10))
        claims = [c for row in written(tmp_path) for c in row["claims"]]
        assert {(c["label"], c["error"]) for c in claims} == {(Label.ERROR, (
            "ModelRefused: the model refused (finish_reason 'refusal'): I'm sorry, but I can't help with that request."))}
        assert len(claims) == mocks.stats(url)["requests"] == 30


class TestRequestAboveTheTokenBudget:
    async def test_a_claim_no_window_can_fit_is_an_error_after_one_request(self, tmp_path: Path, mocks: Any) -> None:
        """Anthropic route, mock --tpm 1000, one ~5,600-token claim: one request, its 429 announces the budget, the claim is a PermanentAPIError naming both sizes."""
        url = mocks.start("--tpm", "1000")
        answers = tmp_path / "answers.jsonl"
        text = "Metformin lowers hepatic glucose production in adults with diabetes. " * 320
        answers.write_text(json.dumps({"id": "a", "question": "What does metformin do?", "response": text,
                                       "claims": [{"text": text}]}) + "\n")
        check = EndpointConfig(base_url=url, model="mock", api_key_env=KEY_ENV, provider="anthropic")
        await score_async(ScoreConfig(
            inputs=(answers,), out_dir=tmp_path / "out", cache_dir=tmp_path / "cache", n_boot=10,
            adapters=AdapterSettings(splitter="given", checker="openai", check_endpoint=check)))
        [row] = written(tmp_path)
        [claim] = row["claims"]
        assert claim["label"] == Label.ERROR
        assert claim["error"].startswith("PermanentAPIError: request of ")
        requested = int(claim["error"].split()[3])
        assert requested > 5600
        assert claim["error"] == (
            f"PermanentAPIError: request of {requested} tokens (prompt estimate + max_tokens) exceeds the token "
            f"budget of 1000 tokens per minute of {url} (model mock): no window can fit it (the server said: "
            "HTTP 429: Number of tokens has exceeded your rate limit.)")
        assert mocks.stats(url)["requests"] == 1


class TestRefusedConnection:
    async def test_refused_connection_is_fatal_after_the_retry_budget(self) -> None:
        """Nobody listening: the first call's attempts (6), then FatalAPIError 'cannot connect to URL'; other calls send nothing."""
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        url = f"http://127.0.0.1:{port}/v1"
        cfg = EndpointConfig(base_url=url, model="mock", api_key_env="")
        lane = Lane(f"{url}|nokey|mock", LaneLimits(max_in_flight=4),
                    policy=RetryPolicy(base_s=0.01, cap_s=0.05), rng=random.Random(1))
        session = make_session(4, 5.0)
        try:
            checker = OpenAIChecker(cfg, session, lane)
            answer = Answer(id="a", question="Q?", response="A.")
            with pytest.raises(FatalAPIError, match=f"^cannot connect to {url}/chat/completions: .* \\(6 attempts in "):
                await checker.check(Claim(text="A.", index=0), answer)
            with pytest.raises(FatalAPIError, match="cannot connect"):
                await checker.check(Claim(text="B.", index=1), answer)
        finally:
            await session.close()
        assert lane.statistics().requests == 6


class TestKeyNeverStored:
    async def test_key_echoed_by_the_server_reaches_no_file(self, tmp_path: Path, mocks: Any) -> None:
        """A server echoing the Authorization header in every reply: the key is in neither answers.jsonl nor cache.db."""
        url = mocks.start("--echo-auth")
        run = config(tmp_path, url, 5)
        await score_async(run)
        rows = written(tmp_path)
        assert len(rows) == 5
        raws = [c["raw"] for r in rows for c in r["claims"]]
        assert len(raws) == 15 and all(raw.endswith("\nAuthorization: Bearer ***") for raw in raws)
        assert all(c["label"] != Label.ERROR for r in rows for c in r["claims"])
        files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()] + [
            p for p in (tmp_path / "cache").rglob("*") if p.is_file()]
        assert any(p.name.startswith("cache.db") for p in files)
        assert [p.name for p in files if KEY.encode() in p.read_bytes()] == []


class TestSetting:
    def test_max_outage_s_is_validated(self) -> None:
        """max_outage_s must be a finite number of seconds > 0."""
        for bad in (0, -1.0, float("inf")):
            with pytest.raises(ConfigError, match="max_outage_s"):
                EndpointConfig(base_url="http://x/v1", model="m", max_outage_s=bad)

    def test_max_outage_s_from_toml(self, tmp_path: Path) -> None:
        """A [check] table may set max_outage_s (an int is read as float seconds)."""
        path = tmp_path / "dahl.toml"
        path.write_text('[check]\nbase_url = "http://x/v1"\nmodel = "m"\nmax_outage_s = 30\n')
        assert load_config(path)["check"].max_outage_s == 30.0
