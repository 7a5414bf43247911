"""dahl against a local server as llama.cpp's Python server behaves, played by the bench mock
(``--llama``, ``--slots``, ``--n-ctx``, ``--models``: bench/mock_local.py)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from typing import Any

import pytest

from dahl.adapters._endpoint import Connections
from dahl.adapters._http import _status_error, make_session, post_chat
from dahl.adapters._openai import OpenAIChecker, OpenAISplitter
from dahl.config import EndpointConfig, is_local_url
from dahl.errors import PermanentAPIError, ReplyCut, RequestTimeout
from dahl.lanes._lane import LaneLimits, LanePool
from dahl.records import Answer, Claim, Label

mockserver = pytest.importorskip("bench.mockserver", reason="bench/mockserver.py not available")

ANSWER = Answer(
    id="a1",
    question="Tell me about metformin.",
    response="Metformin treats type 2 diabetes. Metformin was approved in 1994. It is taken orally.",
)
LLAMA_500 = (b'{"error": {"message": "1 validation error:\\n  {\'type\': \'literal_error\', \'loc\': (\'body\', '
             b'\'response_format\', \'type\'), \'msg\': \\"Input should be \'text\' or \'json_object\'\\", '
             b'\'input\': \'json_schema\'}", "type": "internal_server_error"}}')


async def started(**config: Any) -> AsyncIterator[Any]:
    server = await mockserver.start_mock(mockserver.MockConfig(**config))
    try:
        yield server
    finally:
        await server.close()


def endpoint(url: str, **kwargs: Any) -> EndpointConfig:
    return EndpointConfig(base_url=url, model=kwargs.pop("model", "smollm2"), api_key_env="", **kwargs)


def test_local_hosts() -> None:
    """Loopback, private and link-local addresses and localhost are local; a public name is not."""
    local = ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://10.0.0.5/v1",
             "http://192.168.1.9:8000/v1", "http://[::1]:8000/v1", "http://169.254.1.1/v1"]
    assert [is_local_url(u) for u in local] == [True] * len(local)
    assert [is_local_url(u) for u in ("https://api.openai.com/v1", "http://8.8.8.8/v1")] == [False, False]


class TestValidation500:
    def test_validation_error_naming_body_fields_is_permanent(self) -> None:
        """A 500 whose error is a validation error of the request body is permanent, status kept."""
        error = _status_error(500, {}, LLAMA_500, "", "http://127.0.0.1/v1/chat/completions")
        assert type(error) is PermanentAPIError and error.status == 500
        assert "response_format" in str(error)
        plain = _status_error(500, {}, b'{"error": {"message": "out of memory"}}', "", "u")
        assert type(plain).__name__ == "TransientAPIError"

    @pytest.mark.parametrize("body", [b"[1]", b'{"model": "smollm2", "messages": "hi"}'], ids=["not-object", "messages"])
    async def test_invalid_body_500_not_retried(self, body: bytes) -> None:
        """A body the server rejects with a validation error (its 500 names the body's fields) is sent once."""
        async for server in started(llama=True):
            session = make_session(4, 5.0)
            try:
                lane = LanePool().get(server.url, "none", "smollm2", LaneLimits(max_in_flight=4))
                with pytest.raises(PermanentAPIError) as info:
                    await lane.call(lambda: post_chat(session, f"{server.url}/chat/completions", "", body),
                                    estimated_tokens=10)
                assert info.value.status == 500 and "validation error" in str(info.value)
                assert server.stats()["requests"] == 1
            finally:
                await session.close()

    async def test_json_schema_falls_back_to_text_within_two_requests(self, caplog: pytest.LogCaptureFixture) -> None:
        """json_schema answered by llama.cpp's 500: the Splitter falls back to text on its 2nd request."""
        async for server in started(llama=True):
            session = make_session(4, 5.0)
            try:
                lane = LanePool().get(server.url, "none", "smollm2", LaneLimits(max_in_flight=4))
                cfg = endpoint(server.url, response_format="json_schema")
                with caplog.at_level(logging.WARNING):
                    claims = await OpenAISplitter(cfg, session, lane).split(ANSWER)
                assert [c.text for c in claims] == [
                    "Metformin treats type 2 diabetes.", "Metformin was approved in 1994.", "It is taken orally."]
                assert server.stats()["requests"] == 2
                assert "using text mode for the rest of the run" in caplog.text
                verdict = await OpenAIChecker(cfg, session, lane).check(claims[0], ANSWER)
                assert verdict.label in (Label.SUPPORTED, Label.UNSUPPORTED, Label.UNKNOWN)
                assert server.stats()["requests"] == 4
            finally:
                await session.close()


async def test_local_timeouts_do_not_multiply_the_queue(caplog: pytest.LogCaptureFixture) -> None:
    """A one-slot queueing server slower than the timeout: each call is tried twice, not six times,
    and the lane says once why."""
    async for server in started(slots=1, latency=mockserver.Latency(median_ms=1000.0)):
        session = make_session(3, 0.2)
        try:
            lane = LanePool().get(server.url, "none", "smollm2", LaneLimits(max_in_flight=3))
            body = endpoint(server.url)

            async def one() -> BaseException | None:
                try:
                    await lane.call(lambda: post_chat(session, body.request_url, "", {
                        "model": "smollm2", "messages": [{"role": "user", "content": "hi"}]}), estimated_tokens=10)
                except RequestTimeout as exc:
                    return exc
                return None

            with caplog.at_level(logging.WARNING):
                errors = await asyncio.gather(one(), one(), one())
            assert all(isinstance(e, RequestTimeout) for e in errors)
            assert server.stats()["requests"] == 6
            assert caplog.text.count("a local server queues requests") == 1
        finally:
            await session.close()


class TestContextWindow:
    async def test_cut_reply_is_an_error(self) -> None:
        """prompt + reply past n_ctx: the reply comes back cut (finish_reason length) and the
        Splitter raises ReplyCut instead of returning half a claim list; never re-asked."""
        async for server in started():
            session = make_session(4, 5.0)
            try:
                lane = LanePool().get(server.url, "none", "smollm2", LaneLimits())
                await OpenAISplitter(endpoint(server.url), session, lane).split(ANSWER)
                prompt_tokens = server.stats()["tokens"]["prompt"]
            finally:
                await session.close()
        async for server in started(n_ctx=prompt_tokens + 10):
            session = make_session(4, 5.0)
            try:
                lane = LanePool().get(server.url, "none", "smollm2", LaneLimits())
                with pytest.raises(ReplyCut, match="cut at the token limit"):
                    await OpenAISplitter(endpoint(server.url), session, lane).split(ANSWER)
                assert server.stats()["requests"] == 1
                claim = Claim(text="Metformin treats type 2 diabetes.", index=0)
                verdict = await OpenAIChecker(endpoint(server.url), session, lane).check(claim, ANSWER)
                assert verdict.label != Label.ERROR  # a short check reply fits the window
            finally:
                await session.close()

    async def test_prompt_past_the_window_is_refused(self) -> None:
        """A prompt above n_ctx: 400 context_length_exceeded, permanent."""
        async for server in started(n_ctx=5):
            session = make_session(4, 5.0)
            try:
                lane = LanePool().get(server.url, "none", "smollm2", LaneLimits())
                with pytest.raises(PermanentAPIError, match="exceed context window of 5"):
                    await OpenAISplitter(endpoint(server.url), session, lane).split(ANSWER)
                assert server.stats()["requests"] == 1
            finally:
                await session.close()


@pytest.mark.parametrize(("models", "model", "warned"), [
    (("smollm2",), "gpt-4o-mini", True), (("smollm2",), "smollm2", False), ((), "gpt-4o-mini", False)],
    ids=["not-listed", "listed", "no-models-route"])
async def test_model_name_checked_once(models: tuple[str, ...], model: str, warned: bool,
                                       caplog: pytest.LogCaptureFixture) -> None:
    """GET /models once per endpoint and model: a name not listed warns; a 404 there is fine."""
    async for server in started(models=models):
        async with AsyncExitStack() as stack:
            connections = Connections(stack)
            cfg = endpoint(server.url, model=model)
            with caplog.at_level(logging.WARNING):
                await connections.open(cfg)
                await Connections(stack, connections.pool).open(cfg)
            assert caplog.text.count("does not list model") == (1 if warned else 0)
            assert server.stats()["requests"] == 0  # no chat request was sent


def test_mock_flags() -> None:
    """The mock's local-server flags on its command line."""
    config = mockserver.config_from_args(["--port", "0", "--llama", "--slots", "1", "--n-ctx", "2048",
                                          "--models", "smollm2"])
    assert (config.llama, config.slots, config.n_ctx, config.models) == (True, 1, 2048, ("smollm2",))
