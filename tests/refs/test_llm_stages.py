"""The LLM extractor and rater over the one endpoint client: format fallback, re-ask, count mismatch."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
import orjson
import pytest
from aiohttp import web

from dahl.adapters._endpoint import Endpoint
from dahl.adapters._http import make_session
from dahl.config import EndpointConfig
from dahl.errors import OutputParseError
from dahl.refs._extract import Chunk, OpenAIExtractor
from dahl.refs._prompts import task
from dahl.refs._rate import OpenAIRater, Rating

R = TypeVar("R")
KEY_ENV = "DAHL_REFS_TEST_KEY"
CHUNK = Chunk("d1", "Metformin", "Metformin treats type 2 diabetes.", (0, 33))


class DirectLane:
    """Runs each attempt once, no waiting or retry."""

    async def call(self, attempt: Callable[[], Awaitable[R]], *, estimated_tokens: int) -> R:
        return await attempt()


class Script:
    """Loopback server of both routes (``/v1/chat/completions``, ``/v1/messages``) playing (status, body) in order."""

    def __init__(self, replies: list[tuple[int, Any]]) -> None:
        self.replies = replies
        self.requests: list[dict[str, Any]] = []
        self.base_url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(orjson.loads(await request.read()))
        status, body = self.replies.pop(0) if self.replies else (500, {"error": {"message": "script exhausted"}})
        return web.json_response(body, status=status)


def chat(content: str) -> tuple[int, Any]:
    return 200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                              "finish_reason": "stop"}],
                 "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12}}


def message(text: str) -> tuple[int, Any]:
    return 200, {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                 "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
                 "usage": {"input_tokens": 10, "output_tokens": 2}}


@pytest.fixture(autouse=True)
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test-0123456789abcdef")


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    sess = make_session(max_in_flight=4, timeout_s=2.0)
    yield sess
    await sess.close()


async def serve(script: Script) -> web.AppRunner:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", script.handle)
    app.router.add_post("/v1/messages", script.handle)
    runner = web.AppRunner(app, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    script.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
    return runner


async def run(script: Script, work: Callable[[str], Awaitable[R]]) -> R:
    runner = await serve(script)
    try:
        return await work(script.base_url)
    finally:
        await runner.cleanup()


class TestExtractorFormatFallback:
    async def test_anthropic_tool_rejection_falls_back_to_text(self, session: aiohttp.ClientSession) -> None:
        """An Anthropic 400 naming tool_choice: the extraction is asked again in text mode (no tool), and text mode stays."""
        script = Script([
            (400, {"type": "error", "error": {"type": "invalid_request_error",
                                              "message": "tool_choice: forced tool use is not supported"}}),
            message('{"facts": ["Metformin treats type 2 diabetes."]}'),
            message('{"facts": []}'),
        ])

        async def work(url: str) -> tuple[list[str], list[str], str]:
            cfg = EndpointConfig(base_url=url, model="claude-test", provider="anthropic", api_key_env=KEY_ENV)
            endpoint = Endpoint(cfg, session, DirectLane(), task(cfg, "extract"))
            extractor = OpenAIExtractor(endpoint)
            first, _ = await extractor.extract(CHUNK)
            second, _ = await extractor.extract(CHUNK)
            return [f.text for f in first], [f.text for f in second], endpoint.reply_format

        first, second, fmt = await run(script, work)
        assert (first, second, fmt) == (["Metformin treats type 2 diabetes."], [], "text")
        assert ["tool_choice" in r for r in script.requests] == [True, False, False]

    async def test_openai_response_format_rejection_falls_back_to_text(self, session: aiohttp.ClientSession) -> None:
        """A 422 naming response_format: asked again without it, once."""
        script = Script([(422, {"error": {"message": "response_format json_schema is not supported"}}),
                         chat('{"facts": ["A fact."]}')])

        async def work(url: str) -> list[str]:
            cfg = EndpointConfig(base_url=url, model="m", api_key_env=KEY_ENV, response_format="json_schema")
            facts, _ = await OpenAIExtractor(Endpoint(cfg, session, DirectLane(), task(cfg, "extract"))).extract(CHUNK)
            return [f.text for f in facts]

        assert await run(script, work) == ["A fact."]
        assert ["response_format" in r for r in script.requests] == [True, False]

    async def test_unparseable_is_reasked_once_then_raises(self, session: aiohttp.ClientSession) -> None:
        """Two unparseable replies: one re-ask quoting the error, then OutputParseError (2 requests)."""
        script = Script([chat("no json here"), chat("still none")])

        async def work(url: str) -> None:
            cfg = EndpointConfig(base_url=url, model="m", api_key_env=KEY_ENV, response_format="text")
            await OpenAIExtractor(Endpoint(cfg, session, DirectLane(), task(cfg, "extract"))).extract(CHUNK)

        with pytest.raises(OutputParseError, match="not JSON"):
            await run(script, work)
        assert len(script.requests) == 2
        assert script.requests[1]["messages"][-1]["content"].startswith("Your reply could not be parsed:")


class TestRaterCountMismatch:
    async def test_mismatch_is_not_reasked_but_asked_per_fact(self, session: aiohttp.ClientSession) -> None:
        """One rating for two facts: no re-ask of the batch; each fact is asked alone (3 requests)."""
        script = Script([
            chat('{"ratings": [{"id": 1, "relevance": 5, "salience": 4}]}'),
            chat('{"ratings": [{"id": 1, "relevance": 5, "salience": 4}]}'),
            chat('{"ratings": [{"id": 1, "relevance": 2, "salience": 1}]}'),
        ])

        async def work(url: str) -> list[Rating]:
            cfg = EndpointConfig(base_url=url, model="m", api_key_env=KEY_ENV, response_format="text")
            rater = OpenAIRater(Endpoint(cfg, session, DirectLane(), task(cfg, "rate")), batch=2)
            return await rater.rate("What is metformin?", ["Fact one.", "Fact two."])

        assert await run(script, work) == [Rating(5, 4), Rating(2, 1)]
        assert len(script.requests) == 3
