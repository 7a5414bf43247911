"""The Redis store backend: the local store first, then Redis, and single flight across shards.

Entries are the local table's envelopes under ``dahl:store:<content-hash key>``, so every shard
reads what any shard checked; errors are never stored. A key missed everywhere is checked by the
shard that takes its lease (``SET dahl:lease:<key> NX PX``); the others wait for its verdict and
take over when the lease ends without one (a failed check, or a dead shard whose heartbeat stopped).
Redis lost: the local store alone, and Redis tried again after a backoff (1 s, doubling to 30 s).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import msgspec

from dahl.cache._store import CachedEntry, CacheStore, SingleFlight
from dahl.cache._table import ENVELOPE_DECODER, Value, encode_envelope, entry_of
from dahl.lanes import Reconnect, connection_pool, lost_errors

if TYPE_CHECKING:
    from redis.asyncio import Redis

__all__ = ["RedisStore"]

log = logging.getLogger(__name__)
T = TypeVar("T")

_STORE, _LEASE = "dahl:store:", "dahl:lease:"
# KEYS lease, entry; ARGV token, lease ms. 2: the entry is there; 1: the lease is ours; 0: another's.
_CLAIM = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 2 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0
"""
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


class RedisStore(CacheStore):
    """The local :class:`CacheStore` in ``directory`` with Redis at ``url`` beside it (a :class:`Store`).

    A local miss is read from Redis (and copied into the local store); what is put goes to both.
    Redis unreachable or lost: a warning and the local store alone (entries put meanwhile stay
    local, leases are not taken); Redis is tried again ``retry_s`` seconds after the loss, the wait
    doubling up to 30 s while it stays lost, and the first call that succeeds rejoins (logged).

    Args:
        directory: the local cache folder.
        url: ``redis://host:port/db`` (a ``?run=`` name is ignored here).
        lease_s: seconds a lease lasts without a heartbeat (renewed every third of it while held).
        poll_s: seconds between two looks of a shard waiting for another's verdict.
        max_connections: most connections to Redis.
        retry_s: seconds after a loss before Redis is tried again (the first wait; 0: at the next call).

    Raises:
        CacheUnusable, ValueError: as :class:`CacheStore`; ConfigError: a bad ``url``.
    """

    def __init__(self, directory: Path, url: str, *, lease_s: float = 30.0, poll_s: float = 0.05,
                 max_connections: int = 16, retry_s: float = 1.0) -> None:
        super().__init__(directory)
        self._pool, self.url, _ = connection_pool(url, max_connections)
        self.lease_s, self.poll_s = lease_s, poll_s
        self.link = Reconnect(retry_s)
        self._client: Redis | None = None
        self._scripts: dict[str, Any] = {}
        self._writes: set[asyncio.Task[None]] = set()
        self._held: dict[str, str] = {}  # lease key -> this shard's token
        self._heartbeat: asyncio.Task[None] | None = None
        self._reread: set[str] = set()  # keys found in Redis by a lease: read again before checking

    def _redis(self) -> Redis:
        if self._client is None:
            from redis.asyncio import Redis

            self._client = Redis(connection_pool=self._pool)
            self._scripts = {"claim": self._client.register_script(_CLAIM),
                             "release": self._client.register_script(_RELEASE)}
        return self._client

    @property
    def lost(self) -> BaseException | None:
        """The error that lost Redis, None while it answers."""
        return self.link.lost

    def _lose(self, exc: BaseException) -> None:
        """Go on with the local store alone; warn once an outage; try again after a backoff."""
        wait_s = self.link.wait_s
        if self.link.lose(exc):
            log.warning("the verdict store in Redis at %s is lost (%s): this process goes on with its local "
                        "cache alone and tries again in %g s", self.url, exc or type(exc).__name__, wait_s)

    def _answered(self) -> None:
        if self.link.answered():
            log.warning("the verdict store in Redis at %s answers again: this process shares it again", self.url)

    async def get_many(self, keys: Sequence[str], *, parser_version: str = "1") -> list[CachedEntry | None]:
        """Per key: the local entry, else the one in Redis (see :meth:`CacheStore.get_many`)."""
        found = await super().get_many(keys, parser_version=parser_version)
        missed = [i for i, entry in enumerate(found) if entry is None]
        if not missed or not self.link.usable():
            return found
        try:
            rows = await self._redis().mget([_STORE + keys[i] for i in missed])
        except lost_errors() as exc:
            self._lose(exc)
            return found
        self._answered()
        copies: list[tuple[str, Value, str | None]] = []
        for i, row in zip(missed, rows, strict=True):
            with contextlib.suppress(msgspec.DecodeError):
                if isinstance(row, bytes) and (entry := entry_of(ENVELOPE_DECODER.decode(row), parser_version)):
                    found[i] = entry
                    if entry.value is not None:
                        copies.append((keys[i], entry.value, None))
        if copies:
            super().put_many(copies, parser_version=parser_version)
        return found

    def put_many(self, items: Iterable[tuple[str, Value, str | None]], *, parser_version: str = "1") -> None:
        """Queue the entries locally and send them to Redis (never blocks; see :meth:`CacheStore.put_many`)."""
        items = list(items)
        super().put_many(items, parser_version=parser_version)
        if not items or not self.link.usable():
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # outside the event loop (maintenance commands): local only
        rows = {_STORE + key: encode_envelope(value, raw, parser_version) for key, value, raw in items}
        task = loop.create_task(self._send(rows))
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _send(self, rows: dict[str, bytes]) -> None:
        try:
            await self._redis().mset(rows)
        except lost_errors() as exc:
            self._lose(exc)
        else:
            self._answered()

    def after_miss(self, key: str, generation: int, *, parser_version: str = "1") -> Value | None | Literal[False]:
        """As :meth:`CacheStore.after_miss`; False (read again) for a key another shard stored meanwhile."""
        if key in self._reread:
            self._reread.discard(key)
            return False
        return super().after_miss(key, generation, parser_version=parser_version)

    def flight(self) -> SingleFlight[Any]:
        """A single flight over this process and, through leases, every shard."""
        return _LeasedFlight(self)

    @contextlib.asynccontextmanager
    async def lease(self, key: str) -> AsyncIterator[None]:
        """Hold ``key``'s lease for the body: wait while another shard holds it, unless its entry arrives
        (then the body finds it in the store). Without Redis the body runs at once."""
        token = None
        if self.link.usable():
            try:
                token = await self._claim(key)
            except lost_errors() as exc:
                self._lose(exc)
            else:
                self._answered()
        try:
            yield
        finally:
            if token is not None:
                self._held.pop(_LEASE + key, None)
                try:
                    if self._writes:  # this shard's entry reaches Redis before the others stop waiting
                        await asyncio.gather(*self._writes)
                    await self._scripts["release"](keys=[_LEASE + key], args=[token])
                except lost_errors() as exc:
                    self._lose(exc)

    async def _claim(self, key: str) -> str | None:
        self._redis()
        token, lease = uuid.uuid4().hex, _LEASE + key
        while (got := await self._scripts["claim"](keys=[lease, _STORE + key],
                                                   args=[token, int(self.lease_s * 1000)])) != 1:
            if got == 2:
                self._reread.add(key)
                return None
            await asyncio.sleep(self.poll_s)
        self._held[lease] = token
        if self._heartbeat is None:
            self._heartbeat = asyncio.get_running_loop().create_task(self._beat())
        return token

    async def _beat(self) -> None:
        """Renew every lease this shard holds, every third of the lease time (while Redis is usable)."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if self._held and self.link.usable():
                try:
                    async with self._redis().pipeline(transaction=False) as pipe:
                        for lease in list(self._held):
                            pipe.pexpire(lease, int(self.lease_s * 1000))
                        await pipe.execute()
                except lost_errors() as exc:
                    self._lose(exc)
                else:
                    self._answered()

    async def aclose(self) -> None:
        """Send what is queued for Redis, stop the heartbeat and close the connections (idempotent)."""
        with contextlib.suppress(*lost_errors()):
            if self._writes:
                await asyncio.gather(*self._writes)
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._heartbeat
            self._heartbeat = None
        if self._client is not None:
            client, self._client = self._client, None
            with contextlib.suppress(*lost_errors()):
                await client.aclose()
        await self._pool.disconnect()


class _LeasedFlight(SingleFlight[T]):
    """A :class:`SingleFlight` whose one call per key also holds the key's lease in Redis."""

    def __init__(self, store: RedisStore) -> None:
        super().__init__()
        self._store = store

    async def run(self, key: str, work: Callable[[], Awaitable[T]], on_shared: Callable[[], None]) -> T:
        """As :meth:`SingleFlight.run`, the call made under ``key``'s lease."""
        async def leased() -> T:
            async with self._store.lease(key):
                return await work()

        return await super().run(key, leased, on_shared)
