"""The caching, single-flight wrapper around a Splitter (the Checker's is in :mod:`dahl.cache._wrap`)."""

from __future__ import annotations

from dahl.adapters._base import RawSplitter, Splitter
from dahl.cache._cached import Cached
from dahl.cache._envelope import CachedEntry, Value
from dahl.cache._keys import split_key
from dahl.cache._reparse import reparse_claims
from dahl.cache._store import CacheStore
from dahl.cache._wrap import CachingAdapter
from dahl.results._counters import RunCounters
from dahl.records import Answer, Claim

__all__ = ["CachingSplitter"]


class CachingSplitter(CachingAdapter[Splitter]):
    """A Splitter that answers from the cache, shares identical in-flight splits, and stores.

    Only complete claim lists are stored, never exceptions; each caller gets its own list.

    Args:
        inner: the Splitter doing the work.
        store: the result store, or None to disable caching (single flight stays).
        counters: the run's counters (split counts live on this wrapper).

    Attributes:
        fingerprint: ``inner.fingerprint``.
        inner: the wrapped Splitter.
    """

    def __init__(self, inner: Splitter, store: CacheStore | None, counters: RunCounters) -> None:
        super().__init__(inner, store, counters)
        self._raw = inner if isinstance(inner, RawSplitter) else None
        self._cached: Cached[list[Claim]] = Cached(self._store, self._parser_version, _stored_claims)
        self._direct_calls = 0

    def __repr__(self) -> str:
        """Show the wrapped Splitter and whether the store is used."""
        return f"<CachingSplitter {self.inner!r} store={self._store is not None}>"

    @property
    def splits_called(self) -> int:
        """Answers split by ``inner`` in this run."""
        return self._cached.counts.computed + self._direct_calls

    @property
    def splits_cached(self) -> int:
        """Answers whose claims came from the store."""
        return self._cached.counts.hits

    @property
    def splits_deduped(self) -> int:
        """Answers that shared an identical in-flight split."""
        return self._cached.counts.shared

    async def split(self, answer: Answer) -> list[Claim]:
        """Return the claims of ``answer``: shared, cached, or from ``inner``.

        Raises:
            AdapterError: raised by ``inner`` (to every waiter of the same flight).
            ConfigError: raised by ``inner`` (e.g. the given Splitter without claims).
            TypeError: ``inner.cache_request`` returned material msgspec cannot encode.
        """
        if self._direct:  # cheap and deterministic: no key, no single flight
            self._direct_calls += 1
            return list(await self.inner.split(answer))

        async def call() -> tuple[list[Claim], Value | None, str | None]:
            raw: str | None = None
            if self._raw is not None:
                claims, raw = await self._raw.split_with_raw(answer)
            else:
                claims = await self.inner.split(answer)
            return claims, list(claims), raw

        def claims_of(key: str, entry: CachedEntry) -> list[Claim] | None:
            """The stored claims, or the stored raw reply re-parsed (and put back with it)."""
            if isinstance(entry.value, list):
                return entry.value
            claims = reparse_claims(self._raw, entry.raw, answer)
            if claims is not None:  # keep the raw reply for a later parser change
                self._cached.put(key, claims, entry.raw)
            return claims

        return list(await self._cached.resolve(split_key(self.inner, answer), call, claims_of))


def _stored_claims(key: str, entry: CachedEntry) -> list[Claim] | None:
    return entry.value if isinstance(entry.value, list) else None
