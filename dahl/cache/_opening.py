"""Opening the verdict cache for one command, off the event loop, closed with the command."""

from __future__ import annotations

import logging
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

from dahl.cache._schema import CacheUnusable
from dahl.cache._store import CacheStore, default_cache_dir

__all__ = ["open_store"]

log = logging.getLogger(__name__)


async def open_store(stack: AsyncExitStack, cache_dir: Path | None) -> tuple[CacheStore | None, CacheUnusable | None]:
    """Open the cache at ``cache_dir`` (None: :func:`default_cache_dir`) in a worker thread.

    The store is closed (queued writes committed) when ``stack``
    closes, shielded from cancellation so Ctrl-C loses no committed batch.

    Returns:
        ``(store, None)``, or ``(None, why)`` when the cache is unusable (logged as a
        warning; the command runs without it). Other processes may use the same cache.
    """
    directory = cache_dir if cache_dir is not None else default_cache_dir()
    try:
        store = await anyio.to_thread.run_sync(CacheStore, directory)
    except CacheUnusable as exc:
        log.warning("%s; running without the cache", exc)
        return None, exc
    stack.push_async_callback(_close, store)
    return store, None


async def _close(store: CacheStore) -> None:
    with anyio.CancelScope(shield=True):
        await anyio.to_thread.run_sync(store.close)
