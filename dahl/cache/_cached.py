"""The one caching wrapper every stage's cache goes through (:class:`Cached`), and its blob form
for the other jobs (:class:`BlobCache`).

A failed read is a miss; only finished, non-error values are put; without a store
(``--no-cache``) nothing is read or written and identical calls in flight are still made once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from dahl.cache._envelope import CachedEntry, Value
from dahl.cache._store import SingleFlight, Store

__all__ = ["BlobCache", "CacheCounts", "Cached", "Decode"]

V = TypeVar("V")

#: Turns the entry stored under a key into a value, or None (a miss). It may put a
#: re-parsed value back (see :meth:`Cached.put`).
Decode = Callable[[str, CachedEntry], "V | None"]


@dataclass
class CacheCounts:
    """What one :class:`Cached` did in this run.

    Attributes:
        hits: keys whose value came from the store (a re-parsed raw reply included).
        misses: keys looked up and not found.
        shared: calls that took the outcome of an identical call in flight.
        computed: values computed (the stage's call was made).
    """

    hits: int = 0
    misses: int = 0
    shared: int = 0
    computed: int = 0


class Cached(Generic[V]):
    """One stage's values by key in the run's store, with single flight and counts.

    Args:
        store: the run's store, or None (no cache).
        parser_version: stored with each value (another version gets the raw reply alone).
        decode: the value of a stored entry, or None for a miss.

    Attributes:
        store, parser_version: as given.
        counts: this wrapper's counts.
        flight: the stage's single flight (the store's): value and whether it came from the store.
    """

    def __init__(self, store: Store | None, parser_version: str, decode: Decode[V]) -> None:
        self.store = store
        self.parser_version = parser_version
        self._decode = decode
        self.counts = CacheCounts()
        self.flight: SingleFlight[tuple[V, bool]] = store.flight() if store is not None else SingleFlight()

    async def get_many(self, keys: Sequence[str], decode: Decode[V] | None = None) -> list[V | None]:
        """The stored values of ``keys``, in order (None = a miss); one batched read, counted.
        ``decode`` replaces the wrapper's for this call (a re-parse that needs the input).

        Raises:
            CacheError: the store is closed.
        """
        store = self.store
        if store is None or not keys:
            self.counts.misses += len(keys)
            return [None] * len(keys)
        decode = decode or self._decode
        entries = await store.get_many(keys, parser_version=self.parser_version)
        found = [decode(key, entry) if entry is not None else None for key, entry in zip(keys, entries, strict=True)]
        hits = len(found) - found.count(None)
        self.counts.hits += hits
        self.counts.misses += len(found) - hits
        return found

    def put(self, key: str, value: Value, raw: str | None = None) -> None:
        """Queue ``value`` (finished, never an error) with its raw reply as ``key``'s; never blocks.

        Raises:
            CacheError: the store is closed.
        """
        self.put_many(((key, value, raw),))

    def put_many(self, items: Iterable[tuple[str, Value, str | None]]) -> None:
        """Queue ``(key, value, raw)`` entries as :meth:`put` does; never blocks.

        Raises:
            CacheError: the store is closed.
        """
        if self.store is not None:
            self.store.put_many(items, parser_version=self.parser_version)

    async def resolve(
        self,
        key: str,
        compute: Callable[[], Awaitable[tuple[V, Value | None, str | None]]],
        decode: Decode[V] | None = None,
        *,
        lookup: Callable[[], Awaitable[V | None]] | None = None,
        on_shared: Callable[[bool], None] | None = None,
    ) -> V:
        """The value of ``key``: from an identical call in flight (counted ``shared``), from the
        store, or ``compute()``, which returns ``(value, what to store or None, raw reply)``.
        What it raises reaches every caller sharing the call, and nothing is put.

        Args:
            lookup: reads the store instead of :meth:`get_many` of ``key``.
            on_shared: called for a shared call with whether its value came from the store
                (False when it raised).

        Raises:
            CacheError: the store is closed.
        """

        async def work() -> tuple[V, bool]:
            found = await lookup() if lookup is not None else (await self.get_many([key], decode))[0]
            if found is not None:
                return found, True
            value, stored, raw = await compute()
            self.counts.computed += 1
            if stored is not None:
                self.put(key, stored, raw)
            return value, False

        shared = False

        def share() -> None:
            nonlocal shared
            shared = True
            self.counts.shared += 1

        try:
            value, from_store = await self.flight.run(key, work, share)
        except BaseException:
            if shared and on_shared is not None:
                on_shared(False)
            raise
        if shared and on_shared is not None:
            on_shared(from_store)
        return value


def _blob(key: str, entry: CachedEntry) -> bytes | None:
    return entry.value if isinstance(entry.value, bytes) else None


class BlobCache(Cached[bytes]):
    """Opaque results (bytes) by key, with single flight (the jobs of ``refs``, ``generate``, ``questions``).

    Args:
        store: the cache, or None (``--no-cache``: nothing read or written, single flight kept).
        parser_version: version of the caller's parser/encoding of the blobs.
    """

    def __init__(self, store: Store | None, parser_version: str) -> None:
        super().__init__(store, parser_version, _blob)

    async def get_or_compute(self, key: str, compute: Callable[[], Awaitable[tuple[bytes, str | None]]]) -> bytes:
        """The blob of ``key``, as :meth:`resolve` gives it; ``compute`` returns ``(blob, raw reply)``.

        Raises:
            CacheError: the store is closed.
        """

        async def stored() -> tuple[bytes, bytes, str | None]:
            blob, raw = await compute()
            return blob, blob, raw

        return await self.resolve(key, stored)
