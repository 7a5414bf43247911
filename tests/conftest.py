"""Shared test fixtures: where the real, human-labelled data sets live."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from bench.redis_server import RedisServer, redis_missing

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    """Return ../shared/data beside the repository, or $DAHL_SHARED_DATA when set."""
    env = os.environ.get("DAHL_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture
def shared_data() -> Path:
    """Path of the shared data folder; skips the test when it is absent."""
    path = shared_data_dir()
    if not path.is_dir():
        pytest.skip(f"shared data not found at {path} (set DAHL_SHARED_DATA)")
    return path


def require_data(relative: str) -> Path:
    """Return shared_data_dir()/relative, skipping the calling test when the file is absent."""
    path = shared_data_dir() / relative
    if not path.exists():
        pytest.skip(f"data file {path} not found (set DAHL_SHARED_DATA to the shared data folder)")
    return path


@pytest.fixture(autouse=True)
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty verdict cache, never the user's real one."""
    path = tmp_path_factory.mktemp("dahl-cache")
    monkeypatch.setenv("DAHL_CACHE_DIR", str(path))
    return path


class MockServers:
    """Start ``python -m bench.mockserver`` processes on loopback; all stopped after the test."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[str]] = []

    def start(self, *args: str, port: int = 0) -> str:
        """Start a mock with ``args`` (bench.mockserver flags); return its ``/v1`` base URL."""
        proc = subprocess.Popen(
            [sys.executable, "-m", "bench.mockserver", "--port", str(port), *args],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )
        self._procs.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "ready" in line, line
        return line.split()[-1].rstrip("/") + "/v1"

    @staticmethod
    def stats(url: str) -> dict[str, Any]:
        """The mock's request counters (``GET /stats``)."""
        with urlopen(url.removesuffix("/v1") + "/stats") as reply:
            data: dict[str, Any] = json.loads(reply.read())
        return data

    def stop_all(self) -> None:
        for proc in self._procs:
            if proc.poll() is None:
                proc.terminate()
            proc.wait(timeout=10)
            if proc.stdout is not None:
                proc.stdout.close()
        self._procs.clear()


@pytest.fixture
def mocks() -> Iterator[MockServers]:
    """Factory of mock OpenAI-compatible servers in their own processes (loopback only)."""
    servers = MockServers()
    try:
        yield servers
    finally:
        servers.stop_all()


@pytest.fixture
def redis_server() -> Iterator[RedisServer]:
    """A fresh ``redis-server`` process on 127.0.0.1 (skipped without the binary or the redis package)."""
    missing = redis_missing()
    if missing is not None:
        pytest.skip(missing)
    server = RedisServer(shutil.which("redis-server") or "redis-server")
    try:
        yield server
    finally:
        server.kill()
