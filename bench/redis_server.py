"""A real ``redis-server`` on loopback for the shards' benchmark (B9) and the coordination tests."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

__all__ = ["RedisServer", "redis_missing"]


class RedisServer:
    """``redis-server`` on 127.0.0.1 at a free port, persisting nothing; ``url`` is ``redis://host:port/0``;
    :meth:`kill` and :meth:`start` stop it and start it again on the same port.

    Raises:
        RuntimeError: the server did not listen within 5 s.
    """

    def __init__(self, binary: str) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._binary = binary
        self.start()

    def start(self) -> None:
        """Start the server on :attr:`port` (again, after :meth:`kill`: empty, as nothing persists).

        Raises:
            RuntimeError: it did not listen within 5 s.
        """
        self._proc = subprocess.Popen([self._binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
                                       "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):  # up to 5 s for the port to listen
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.01)
        self.kill()
        raise RuntimeError(f"redis-server did not listen on port {self.port}")

    def kill(self) -> None:
        """Stop the server (SIGKILL) and wait for it."""
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait(timeout=10)


def redis_missing() -> str | None:
    """Why a real Redis cannot be used here (no ``redis-server`` binary, no ``redis`` package), or None."""
    if shutil.which("redis-server") is None:
        return "redis-server is not installed (Debian: apt-get install redis-server; .ci/run installs it)"
    try:
        import redis  # noqa: F401
    except ImportError:
        return "the redis package is not installed (pip install 'dahl[coord]')"
    return None
