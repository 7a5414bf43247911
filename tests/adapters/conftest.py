"""Fixtures for adapter tests: a scripted OpenAI-compatible server on loopback.

:class:`ScriptedServer` answers ``POST /v1/chat/completions`` with the replies
pushed onto its script, in order (STYLE.md 11: 200, 429 + Retry-After, 500,
slow, malformed, reset), records every request body and header set, and answers
500 "script exhausted" when the script runs dry so an unexpected extra request
fails loudly.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
import orjson
import pytest
from aiohttp import web

from dahl.adapters._http import make_session
from dahl.lanes._limits import LaneLimits
from dahl.lanes._memory import MemoryLimiter

R = TypeVar("R")


@dataclass
class Reply:
    """One scripted reply.

    Attributes:
        status: HTTP status.
        body: JSON-encodable object, or raw bytes sent as is.
        headers: extra response headers.
        delay_s: seconds to sleep before answering (slow replies, timeouts).
        reset: close the connection without answering.
    """

    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    reset: bool = False


class ScriptedServer:
    """Loopback chat-completions server that plays a script of replies."""

    Reply = Reply  # so tests can script raw replies without importing this module

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []
        self.base_url = ""
        self._runner: web.AppRunner | None = None

    @staticmethod
    def chat(content: str, *, prompt_tokens: int = 10, completion_tokens: int = 2, **extra: Any) -> Reply:
        """A 200 chat-completion reply whose message content is ``content``."""
        body = {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "model": "test-model",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
            **extra,
        }
        return Reply(body=body)

    @staticmethod
    def error(status: int, message: str, *, type_: str = "error", code: str | None = None,
              headers: dict[str, str] | None = None) -> Reply:
        """An OpenAI-style error reply."""
        body = {"error": {"message": message, "type": type_, "code": code}}
        return Reply(status=status, body=body, headers=headers or {})

    def push(self, *replies: Reply) -> None:
        """Append replies to the script."""
        self.script.extend(replies)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.request_headers.append(dict(request.headers))
        self.requests.append(orjson.loads(await request.read()))
        if not self.script:
            return web.json_response({"error": {"message": "script exhausted"}}, status=500)
        reply = self.script.popleft()
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.reset:
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        data = reply.body if isinstance(reply.body, bytes) else orjson.dumps(reply.body)
        return web.Response(
            status=reply.status, body=data, headers=reply.headers, content_type="application/json"
        )

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.base_url = f"http://127.0.0.1:{port}/v1"

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


class DirectLane:
    """Stand-in for ``dahl.lanes._lane.Lane``: runs each attempt once, no waiting or retry.

    Its ``limiter`` (no limits) keeps the spend cap's ledger, as a real lane's does.
    """

    def __init__(self) -> None:
        self.estimates: list[int] = []
        self.limiter = MemoryLimiter("direct", LaneLimits())

    async def call(self, attempt: Callable[[], Awaitable[R]], *, estimated_tokens: int) -> R:
        self.estimates.append(estimated_tokens)
        return await attempt()


@pytest.fixture
async def server() -> AsyncIterator[ScriptedServer]:
    """A started ScriptedServer, closed after the test."""
    srv = ScriptedServer()
    await srv.start()
    yield srv
    await srv.close()


@pytest.fixture
def lane() -> DirectLane:
    """A DirectLane (one attempt per call, estimates recorded)."""
    return DirectLane()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session from make_session (8 in flight, 2 s timeout)."""
    sess = make_session(max_in_flight=8, timeout_s=2.0)
    yield sess
    await sess.close()
