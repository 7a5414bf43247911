"""Provider clients against a small in-process server: where results are fetched from, with which headers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import anyio
import orjson
from aiohttp import web

from dahl.batch._providers import AnthropicBatches, BatchState


async def _serving(app: web.Application, work: Callable[[str], Awaitable[Any]]) -> Any:
    """``work(root)`` while ``app`` serves on loopback at ``root`` (``http://127.0.0.1:PORT``)."""
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        return await work(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()


def _results_app(seen: list[tuple[str, str | None]]) -> web.Application:
    """Anthropic results of batch ``b1`` at ``/v1/messages/batches/b1/results``; records (path, x-api-key)."""
    async def results(request: web.Request) -> web.Response:
        seen.append((request.path, request.headers.get("x-api-key")))
        message = {"content": [{"type": "text", "text": "Supported"}], "stop_reason": "end_turn",
                   "usage": {"input_tokens": 7, "output_tokens": 1}}
        line = {"custom_id": "k1", "result": {"type": "succeeded", "message": message}}
        return web.Response(body=orjson.dumps(line) + b"\n")

    app = web.Application()
    app.router.add_get("/v1/messages/batches/b1/results", results)
    return app


class TestAnthropicResultsUrl:
    def test_an_absolute_results_url_on_another_path_is_fetched_as_it_is_with_the_key(self) -> None:
        """Base URL under a gateway prefix, results_url absolute elsewhere: that URL is fetched, x-api-key sent."""
        seen: list[tuple[str, str | None]] = []

        async def work(root: str) -> list[Any]:
            async with aiohttp.ClientSession() as session:
                client = AnthropicBatches(session, f"{root}/gateway/v1", "sk-test")
                state = BatchState("b1", "ended", True, 1, 1,
                                   {"results_url": f"{root}/v1/messages/batches/b1/results"})
                return [(o.custom_id, o.error, o.reply is not None) for o in await client.results(state)]

        assert anyio.run(_serving, _results_app(seen), work) == [("k1", None, True)]
        assert seen == [("/v1/messages/batches/b1/results", "sk-test")]

    def test_a_relative_results_url_is_joined_onto_the_base_url(self) -> None:
        """results_url ``/messages/batches/b1/results`` under base ``ROOT/v1``: ``/v1/messages/batches/b1/results``."""
        seen: list[tuple[str, str | None]] = []

        async def work(root: str) -> list[Any]:
            async with aiohttp.ClientSession() as session:
                client = AnthropicBatches(session, f"{root}/v1", "sk-test")
                state = BatchState("b1", "ended", True, 1, 1, {"results_url": "/messages/batches/b1/results"})
                return [o.custom_id for o in await client.results(state)]

        assert anyio.run(_serving, _results_app(seen), work) == ["k1"]
        assert seen == [("/v1/messages/batches/b1/results", "sk-test")]
