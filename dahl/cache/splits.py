"""The caching, single-flight wrapper around a Splitter (DESIGN.md §5).

What it reads of the Splitter it wraps is declared in :mod:`dahl.adapters.base`
(``cacheable``, ``parser_version``; :class:`~dahl.adapters.base.RawSplitter`,
:class:`~dahl.adapters.base.RequestKeyedSplitter`); :class:`~dahl.cache.wrap.CachingChecker`
is its Checker counterpart.
"""

from __future__ import annotations

from dahl.adapters.base import RawSplitter, Splitter
from dahl.cache.flight import SingleFlight
from dahl.cache.keys import split_key
from dahl.cache.reparse import reparse_claims
from dahl.cache.store import CacheStore
from dahl.cache.wrap import CachingAdapter
from dahl.results._counters import RunCounters
from dahl.records import Answer, Claim

__all__ = ["CachingSplitter"]


class CachingSplitter(CachingAdapter[Splitter]):
    """A Splitter that answers from the cache, shares identical in-flight splits, and stores.

    Implements :class:`dahl.adapters.base.Splitter`. Only complete claim lists are
    stored (``inner.split`` returned); exceptions are never stored. Each caller gets
    its own list.

    Args:
        inner: the Splitter doing the work.
        store: the result store, or None to disable caching (single flight stays).
        counters: the run's counters (kept for symmetry; split counts live on this
            wrapper, see Attributes, since :class:`RunCounters` counts claims).

    Attributes:
        fingerprint: ``inner.fingerprint``.
        inner: the wrapped Splitter.
        splits_called: answers split by ``inner`` in this run.
        splits_cached: answers whose claims came from the store.
        splits_deduped: answers that shared an identical in-flight split.
    """

    def __init__(self, inner: Splitter, store: CacheStore | None, counters: RunCounters) -> None:
        super().__init__(inner, store, counters)
        self._raw = inner if isinstance(inner, RawSplitter) else None
        self._flights: SingleFlight[list[Claim]] = SingleFlight()
        self.splits_called = 0
        self.splits_cached = 0
        self.splits_deduped = 0

    def __repr__(self) -> str:
        """Show the wrapped Splitter and whether the store is used."""
        return f"<CachingSplitter {self.inner!r} store={self._store is not None}>"

    async def split(self, answer: Answer) -> list[Claim]:
        """Return the claims of ``answer``: shared, cached, or from ``inner``.

        Raises:
            AdapterError: raised by ``inner`` (to every waiter of the same flight).
            ConfigError: raised by ``inner`` (e.g. the given Splitter without claims).
            TypeError: ``inner.cache_request`` returned material msgspec cannot encode.
        """
        if self._direct:  # cheap and deterministic: no key, no single flight
            self.splits_called += 1
            return list(await self.inner.split(answer))
        key = split_key(self.inner, answer)
        claims = await self._flights.run(
            key, lambda: self._resolve(key, answer), self._count_deduped
        )
        return list(claims)

    def _count_deduped(self) -> None:
        self.splits_deduped += 1

    async def _resolve(self, key: str, answer: Answer) -> list[Claim]:
        store = self._store
        version = self._parser_version
        if store is not None:
            entry = await store.get(key, parser_version=version)
            if entry is not None:
                if isinstance(entry.value, list):
                    self.splits_cached += 1
                    return entry.value
                if entry.raw is not None:
                    claims = self._reparse(entry.raw, answer)
                    if claims is not None:  # keep the raw reply for a later parser change
                        store.put(key, claims, entry.raw, parser_version=version)
                        self.splits_cached += 1
                        return claims
        self.splits_called += 1
        raw: str | None = None
        if self._raw is not None:
            claims, raw = await self._raw.split_with_raw(answer)
        else:
            claims = await self.inner.split(answer)
        if store is not None:
            store.put(key, list(claims), raw, parser_version=version)
        return claims

    def _reparse(self, raw: str, answer: Answer) -> list[Claim] | None:
        return reparse_claims(self._raw, raw, answer)
