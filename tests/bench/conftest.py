"""Fixtures for the mock-server tests: in-process servers on the test's event loop."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

# bench/ is not an installed package; make the repository root importable.
REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.mockserver import MockConfig, MockServer, start_mock  # noqa: E402

MakeServer = Callable[..., Awaitable[MockServer]]


@pytest.fixture
async def make_server() -> AsyncIterator[MakeServer]:
    """Factory ``await make_server(MockConfig(...), **start_mock_kwargs)``; closes every server."""
    servers: list[MockServer] = []

    async def make(config: MockConfig | None = None, **kwargs: Any) -> MockServer:
        server = await start_mock(config or MockConfig(), **kwargs)
        servers.append(server)
        return server

    yield make
    for server in servers:
        await server.close()


@pytest.fixture
async def session() -> AsyncIterator[aiohttp.ClientSession]:
    """A client session closed after the test."""
    async with aiohttp.ClientSession() as client:
        yield client
