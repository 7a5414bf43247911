"""Faults of the mock's batch API calls (``--batch-fault OP:KIND[:N]``): the first N calls of an operation fail.

Deterministic, so a test can count exactly what a client retried: ``500`` / ``503``
reply that status without acting; ``reset`` lets the call act and then drops the
connection, so its reply is lost (a create has created its batch, an upload stored
its file). Used by :mod:`bench.mock_batches`.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable

from aiohttp import web

from dahl.errors import ConfigError

__all__ = ["BATCH_FAULTS", "FAULT_OPS", "faulty", "parse_batch_fault"]

#: Operations of the batch API a fault can hit.
FAULT_OPS = ("upload", "create", "list", "retrieve", "results", "cancel", "delete")
#: Faults of a batch API call.
BATCH_FAULTS = ("500", "503", "reset")

Handler = Callable[[web.Request], Awaitable[web.Response]]


def faulty(handler: Handler, op: str, faults: tuple[tuple[str, str, int], ...], counts: Counter[str]) -> Handler:
    """``handler`` failing its first calls as ``faults`` (``(op, kind, n)``) says for ``op``.

    Counts calls in ``counts["calls:OP"]`` and faults in ``counts["faults_OP"]``.
    """
    if not any(o == op for o, _, _ in faults):
        return handler

    async def serve(request: web.Request) -> web.Response:
        calls = counts[f"calls:{op}"]
        counts[f"calls:{op}"] += 1
        kind = next((k for o, k, n in faults if o == op and calls < n), None)
        if kind is None:
            return await handler(request)
        counts[f"faults_{op}"] += 1
        if kind != "reset":
            return web.json_response({"error": {"message": f"Mock batch fault {kind}.", "type": "server_error"}},
                                     status=int(kind))
        await handler(request)  # it acts; its reply is lost with the connection
        if request.transport is not None:
            request.transport.abort()
        raise asyncio.CancelledError

    return serve


def parse_batch_fault(spec: str) -> tuple[str, str, int]:
    """Parse one ``OP:KIND[:N]`` flag (N, default 1: the first N calls of OP fail).

    Raises:
        ConfigError: an unknown operation or kind, or N not an int >= 1.
    """
    op, _, rest = spec.partition(":")
    kind, _, count = rest.partition(":")
    if op not in FAULT_OPS or kind not in BATCH_FAULTS or not (count or "1").isdigit() or int(count or "1") < 1:
        raise ConfigError(f"--batch-fault must be OP:KIND[:N] with OP in {', '.join(FAULT_OPS)}, KIND in "
                          f"{', '.join(BATCH_FAULTS)} and N >= 1; got {spec!r}")
    return op, kind, int(count or "1")
