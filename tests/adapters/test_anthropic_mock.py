"""The Anthropic provider and per-endpoint auth/headers against the in-process mock (bench/mockserver.py)."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from bench import mockserver
from bench.mock_reply import default_label
from dahl.adapters._anthropic_wire import ratelimit_headers
from dahl.adapters._bodies import check_request_body
from dahl.adapters._http import decode_json, make_session
from dahl.adapters._openai import OpenAIChecker, OpenAISplitter
from dahl.adapters._route import ChatRoute
from dahl.config import EndpointConfig
from dahl.lanes._lane import Lane, LaneLimits
from dahl.lanes._retry import RetryPolicy
from dahl.errors import FatalAPIError, ModelRefused, PermanentAPIError, QuotaExhausted, RateLimited
from dahl.records import Answer, Claim, Label

KEY = "sk-ant-TESTKEY-0123456789abcdef"
PROXY = "proxy-SECRET-TOKEN-42"
ANSWER = Answer(id="a1", question="Tell me about metformin.",
                response="Metformin treats type 2 diabetes. Metformin was approved in 1994. It is taken orally.")


@pytest.fixture(autouse=True)
def keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAHL_ANTHROPIC_TEST_KEY", KEY)
    monkeypatch.setenv("DAHL_PROXY_TEST_TOKEN", PROXY)
    monkeypatch.setenv("DAHL_AZURE_TEST_KEY", "az-short")


async def started(**config: Any) -> AsyncIterator[mockserver.MockServer]:
    server = await mockserver.start_mock(mockserver.MockConfig(**config))
    try:
        yield server
    finally:
        await server.close()


def claude(url: str, **kwargs: Any) -> EndpointConfig:
    return EndpointConfig(base_url=url, model="claude-mock", provider="anthropic",
                          api_key_env="DAHL_ANTHROPIC_TEST_KEY", **kwargs)


def fast_lane(**limits: Any) -> Lane:
    policy = RetryPolicy(retry_after_default_s=0.01, rate_limit_jitter_s=0.0, base_s=0.01, cap_s=0.05)
    return Lane("mock", LaneLimits(**limits), policy=policy, rng=random.Random(0))


class TestHeadersSent:
    async def test_anthropic_headers_and_custom_header(self) -> None:
        """x-api-key (redacted in the echo), anthropic-version 2023-06-01, a ${VAR} header (redacted) and a literal one."""
        async for server in started(echo_auth=True):
            cfg = claude(server.url, headers={"X-Proxy-Token": "${DAHL_PROXY_TEST_TOKEN}", "X-Title": "dahl-test"})
            route = ChatRoute(cfg)
            async with make_session(4, 5.0) as session:
                reply = await route.post(session, route.encode(check_request_body(cfg, "Q?", "Paris is in France.")))
            assert json.loads(reply.content) == {
                "label": default_label("Paris is in France."), "reason": "Mock label derived from the claim text.",
                "echo": {"x-api-key": "***", "anthropic-version": "2023-06-01", "x-proxy-token": "***",
                         "x-title": "dahl-test"},
            }
            assert "authorization" not in {k.lower() for k in route.headers}
            assert KEY not in repr(route) and server.stats()["status"] == {"200": 1}

    async def test_azure_api_key_header(self) -> None:
        """auth = "api-key" on the chat route: no Authorization header, the key in api-key."""
        async for server in started(echo_auth=True):
            cfg = EndpointConfig(base_url=server.url, model="gpt-4o-mini", auth="api-key",
                                 api_key_env="DAHL_AZURE_TEST_KEY", response_format="text")
            route = ChatRoute(cfg)
            async with make_session(4, 5.0) as session:
                reply = await route.post(session, route.encode(check_request_body(cfg, "Q?", "C.")))
            assert reply.content.endswith("\nAuthorization: \napi-key: az-short")
            assert route.url == f"{server.url}/chat/completions"

    async def test_auth_none_sends_no_key(self) -> None:
        """auth = "none": no key variable is read and no key header is sent."""
        async for server in started(echo_auth=True):
            cfg = EndpointConfig(base_url=server.url, model="m", auth="none", response_format="text")
            assert cfg.api_key_env == ""
            route = ChatRoute(cfg)
            async with make_session(4, 5.0) as session:
                reply = await route.post(session, route.encode(check_request_body(cfg, "Q?", "C.")))
            assert reply.content.endswith("\nAuthorization: ")

    async def test_mock_refuses_a_request_without_key(self) -> None:
        """An anthropic endpoint with auth none: the mock's 401 becomes FatalAPIError naming the route."""
        async for server in started():
            cfg = EndpointConfig(base_url=server.url, model="m", provider="anthropic", auth="none")
            async with make_session(4, 5.0) as session:
                checker = OpenAIChecker(cfg, session, fast_lane())
                with pytest.raises(FatalAPIError, match=f"HTTP 401 from {server.url}/messages: x-api-key header"):
                    await checker.check(Claim(text="C.", index=0), ANSWER)


class TestAdaptersOverMessages:
    async def test_split_then_check(self) -> None:
        """The Splitter gives one claim per sentence and the Checker the mock's label, in tool (JSON) mode."""
        async for server in started():
            cfg = claude(server.url)
            assert cfg.effective_format() == "json_schema"
            async with make_session(4, 5.0) as session:
                lane = fast_lane()
                claims = await OpenAISplitter(cfg, session, lane).split(ANSWER)
                assert [c.text for c in claims] == [
                    "Metformin treats type 2 diabetes.", "Metformin was approved in 1994.", "It is taken orally."]
                checker = OpenAIChecker(cfg, session, lane)
                verdicts = [await checker.check(c, ANSWER) for c in claims]
            assert [v.label.value for v in verdicts] == [default_label(c.text) for c in claims]
            assert all(v.usage is not None and v.usage.prompt_tokens > 0 for v in verdicts)
            stats = server.stats()
            assert (stats["split"], stats["check"], stats["status"]) == (1, 3, {"200": 4})

    async def test_offformat_text_reply_is_reasked_once(self) -> None:
        """A text block where a tool was forced: one re-ask, then label error (2 requests)."""
        async for server in started(faults=(("offformat", 1.0),)):
            async with make_session(4, 5.0) as session:
                verdict = await OpenAIChecker(claude(server.url), session, fast_lane()).check(
                    Claim(text="C.", index=0), ANSWER)
            assert verdict.label == Label.ERROR and server.stats()["check"] == 2


    async def test_a_refusal_is_an_error_and_never_reasked(self) -> None:
        """stop_reason refusal: the Splitter and the Checker raise ModelRefused with the model's words, one request each."""
        async for server in started(faults=(("refusal", 1.0),)):
            async with make_session(4, 5.0) as session:
                lane = fast_lane()
                said = "the model refused (finish_reason 'refusal'): I'm sorry, but I can't help with that request."
                with pytest.raises(ModelRefused) as split:
                    await OpenAISplitter(claude(server.url), session, lane).split(ANSWER)
                with pytest.raises(ModelRefused) as check:
                    await OpenAIChecker(claude(server.url), session, lane).check(Claim(text="C.", index=0), ANSWER)
            assert str(split.value) == str(check.value) == said
            assert isinstance(check.value, PermanentAPIError)
            assert (server.stats()["split"], server.stats()["check"]) == (1, 1)

    async def test_tool_rejection_falls_back_to_text_once(self) -> None:
        """A 400 naming tool_choice: asked once more in text mode (2 requests), then the 400 stands."""
        async for server in started(faults=(("400", 1.0),)):
            async with make_session(4, 5.0) as session:
                checker = OpenAIChecker(claude(server.url), session, fast_lane())
                with pytest.raises(PermanentAPIError, match="tool_choice is not supported"):
                    await checker.check(Claim(text="C.", index=0), ANSWER)
            assert (server.stats()["check"], checker._endpoint.reply_format) == (2, "text")


class TestBackPressure:
    async def test_529_is_retried_and_counted(self) -> None:
        """Overloaded replies (529) are retried: lane retries = rate-limited = the mock's 529 count; all 12 labelled."""
        async for server in started(faults=(("529", 0.4),), seed=3):
            async with make_session(4, 5.0) as session:
                lane = fast_lane(max_in_flight=1)
                checker = OpenAIChecker(claude(server.url), session, lane)
                claims = [Claim(text=f"Drug {i} lowers marker {i}.", index=i) for i in range(12)]
                verdicts = [await checker.check(c, ANSWER) for c in claims]
            stats, lane_stats = server.stats(), lane.statistics()
            overloaded = stats["faults"]["529"]
            assert overloaded > 0 and stats["status"] == {"200": 12, "529": overloaded}
            assert lane_stats.retries == lane_stats.rate_limited == overloaded
            assert lane_stats.requests == 12 + overloaded
            assert [v.label.value for v in verdicts] == [default_label(c.text) for c in claims]

    async def test_ratelimit_headers_feed_the_lane(self) -> None:
        """anthropic-ratelimit-requests-limit 600 is adopted by a lane with no limit of its own."""
        async for server in started(rpm=600, window_s=1.0):
            async with make_session(4, 5.0) as session:
                lane = fast_lane()
                assert lane.statistics().rpm is None
                await OpenAIChecker(claude(server.url), session, lane).check(Claim(text="C.", index=0), ANSWER)
            assert lane.statistics().rpm == 600

    async def test_credit_balance_is_quota(self) -> None:
        """Anthropic's 400 "credit balance is too low" stops the run as QuotaExhausted."""
        async for server in started(faults=(("quota", 1.0),)):
            async with make_session(4, 5.0) as session:
                checker = OpenAIChecker(claude(server.url), session, fast_lane())
                with pytest.raises(QuotaExhausted, match="credit balance is too low"):
                    await checker.check(Claim(text="C.", index=0), ANSWER)


class TestStatusMapping:
    def test_529_honours_retry_after(self) -> None:
        """A 529 overloaded_error with retry-after 2 is RateLimited(status 529, retry_after_s 2.0)."""
        body = b'{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}'
        with pytest.raises(RateLimited) as info:
            decode_json(529, {"retry-after": "2"}, body, "", "http://x/v1/messages")
        assert (info.value.status, info.value.retry_after_s, str(info.value)) == (529, 2.0, "HTTP 529: Overloaded")

    def test_429_without_retry_after_waits_for_the_anthropic_reset(self) -> None:
        """A 429 with only anthropic-ratelimit-* headers waits until the exhausted budget's reset (3.25 s)."""
        headers = ratelimit_headers({"anthropic-ratelimit-requests-remaining": "0",
                                     "anthropic-ratelimit-requests-reset": "2026-01-01T00:00:03.25Z"},
                                    now=1767225600.0)
        body = b'{"type": "error", "error": {"type": "rate_limit_error", "message": "Too many."}}'
        with pytest.raises(RateLimited) as info:
            decode_json(429, headers, body, "", "http://x/v1/messages")
        assert info.value.retry_after_s == 3.25
