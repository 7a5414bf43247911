"""The mock's Anthropic route ``POST /v1/messages``: header checks, Message replies, rate-limit headers, 529."""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from bench.mock_anthropic import anthropic_headers
from bench.mockserver import MockConfig
from tests.bench.conftest import MakeServer
from tests.bench.test_mockserver import FakeClock

HEADERS = {"x-api-key": "k", "anthropic-version": "2023-06-01"}


def check_body(claim: str, *, tool: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "claude-mock", "max_tokens": 64, "system": "You check claims.",
        "messages": [{"role": "user", "content": f"<question>\nQ?\n</question>\n<claim>\n{claim}\n</claim>"}],
    }
    if tool:
        body["tools"] = [{"name": "dahl_check", "input_schema": {"type": "object"}}]
        body["tool_choice"] = {"type": "tool", "name": "dahl_check"}
    return body


async def post(session: aiohttp.ClientSession, url: str, body: dict[str, Any],
               headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], Any]:
    async with session.post(f"{url}/messages", json=body, headers=HEADERS if headers is None else headers) as reply:
        return reply.status, {k.lower(): v for k, v in reply.headers.items()}, json.loads(await reply.read())


class TestMessagesRoute:
    async def test_tool_reply_shape(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """A forced tool: one tool_use block with the label object, stop_reason tool_use, usage in tokens."""
        server = await make_server()
        status, _, message = await post(session, server.url, check_body("Paris is in France."))
        assert status == 200
        assert message["content"] == [{"type": "tool_use", "id": "toolu_msg_mock_0", "name": "dahl_check",
                                        "input": {"label": "unsupported",
                                                  "reason": "Mock label derived from the claim text."}}]
        prompt_chars = len("You check claims.") + len(check_body("x")["messages"][0]["content"]) + len("Paris is in France.") - 1
        assert (message["stop_reason"], message["usage"]["input_tokens"]) == ("tool_use", -(-prompt_chars // 4))
        assert server.stats()["check"] == 1

    async def test_text_reply_without_tool(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """No tool: one text block ("Label\\nreason"), stop_reason end_turn."""
        server = await make_server()
        _, _, message = await post(session, server.url, check_body("Paris is in France.", tool=False))
        assert message["content"] == [{"type": "text", "text": "Unsupported\nMock label derived from the claim text."}]
        assert message["stop_reason"] == "end_turn"

    async def test_headers_are_checked(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """No anthropic-version: 400 invalid_request_error; no x-api-key: 401 authentication_error."""
        server = await make_server()
        status, _, error = await post(session, server.url, check_body("c"), {"x-api-key": "k"})
        assert (status, error["error"]["type"]) == (400, "invalid_request_error")
        status, _, error = await post(session, server.url, check_body("c"), {"anthropic-version": "2023-06-01"})
        assert (status, error) == (401, {"type": "error", "error": {"type": "authentication_error",
                                                                     "message": "x-api-key header is required"}})

    async def test_rate_limit_headers_and_429(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """--rpm 180 --window-s 1: 3 admitted with anthropic-ratelimit-* headers, the 4th a 429 rate_limit_error."""
        clock = FakeClock()
        server = await make_server(MockConfig(rpm=180, window_s=1.0), clock=clock)
        clock.now = 100.25
        replies = [await post(session, server.url, check_body(f"c{i}")) for i in range(4)]
        assert [r[0] for r in replies] == [200, 200, 200, 429]
        assert [r[1]["anthropic-ratelimit-requests-remaining"] for r in replies] == ["2", "1", "0", "0"]
        assert replies[0][1]["anthropic-ratelimit-requests-limit"] == "180"
        assert replies[3][1]["retry-after"] == "0.75"
        assert replies[3][2]["error"]["type"] == "rate_limit_error"

    async def test_overloaded_fault(self, make_server: MakeServer, session: aiohttp.ClientSession) -> None:
        """--fault 529=1: every request answers 529 overloaded_error."""
        server = await make_server(MockConfig(faults=(("529", 1.0),)))
        status, _, error = await post(session, server.url, check_body("c"))
        assert (status, error["error"]) == (529, {"type": "overloaded_error", "message": "Overloaded"})
        assert server.stats()["faults"] == {"529": 1}


class TestAnthropicHeaders:
    def test_reset_is_an_rfc3339_time(self) -> None:
        """A 750 ms reset at Unix time 1767225600 is 2026-01-01T00:00:00.750Z."""
        out = anthropic_headers({"x-ratelimit-limit-tokens": "1000", "x-ratelimit-remaining-tokens": "10",
                                 "x-ratelimit-reset-tokens": "750ms"}, now=1767225600.0)
        assert out == {"anthropic-ratelimit-tokens-limit": "1000", "anthropic-ratelimit-tokens-remaining": "10",
                       "anthropic-ratelimit-tokens-reset": "2026-01-01T00:00:00.750Z"}
