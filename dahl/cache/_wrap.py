"""The caching, single-flight wrappers around a Checker and a Splitter.

What they read of the adapter they wrap is declared in :mod:`dahl.adapters._base`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Generic, TypeVar

from dahl.adapters._base import Checker, FramedKeys, Lookup, PreparedKeys, RawSplitter, ReparsingChecker, Splitter
from dahl.cache._cached import Cached
from dahl.cache._envelope import Value
from dahl.cache._keys import CheckKeyRecipe, check_key, check_key_recipe, check_keys, split_key
from dahl.cache._reparse import reparse_claims, reparse_verdict
from dahl.cache._store import CachedEntry, CacheStore
from dahl.results._counters import RunCounters
from dahl.errors import CacheError
from dahl.records import Answer, Claim, Label, Verdict

__all__ = ["CachingAdapter", "CachingChecker", "CachingSplitter", "Lookup"]

log = logging.getLogger(__name__)

A = TypeVar("A", Splitter, Checker)


class CachingAdapter(Generic[A]):
    """What both caching wrappers hold: the wrapped adapter, its store and the run's counters.

    Args:
        inner: the adapter doing the work (a Checker or a Splitter).
        store: the result store; kept only if ``inner`` is cacheable (a cheap adapter,
            ``cacheable = False``, is called directly, never cached).
        counters: the run's counters.

    Attributes:
        inner: the wrapped adapter.
        fingerprint, cacheable, parser_version: ``inner``'s.
    """

    def __init__(self, inner: A, store: CacheStore | None, counters: RunCounters) -> None:
        self.inner: A = inner
        self.fingerprint: str = inner.fingerprint
        self.cacheable: bool = inner.cacheable
        self.parser_version: str = inner.parser_version
        self._store = store if inner.cacheable else None
        self._direct = not inner.cacheable
        self._counters = counters
        self._parser_version = inner.parser_version


class CachingChecker(CachingAdapter[Checker]):
    """A Checker that answers from the cache, shares identical in-flight checks, and stores.

    Per claim exactly one counter is incremented: ``claims_cached`` (found, a re-parsed raw
    reply included, also when shared), ``claims_deduped`` (an identical check in flight was
    shared) or ``claims_checked``. Error verdicts and exceptions are never stored.

    Args:
        inner: the Checker doing the work.
        store: the result store, or None to disable caching (single flight stays).
        counters: the run's counters; updated on the event loop thread only.

    Attributes:
        fingerprint: ``inner.fingerprint``.
        inner: the wrapped Checker.
    """

    def __init__(self, inner: Checker, store: CacheStore | None, counters: RunCounters) -> None:
        super().__init__(inner, store, counters)
        self._prepare_keys = inner if isinstance(inner, PreparedKeys) else None
        self._reparser = inner if isinstance(inner, ReparsingChecker) else None
        self._framed = inner if isinstance(inner, FramedKeys) and inner.cache_request_covers_input else None
        self._recipe: tuple[object, CheckKeyRecipe | None] = (None, None)  # (frame it holds for, recipe)
        self._cached: Cached[Verdict] = Cached(self._store, self._parser_version, self._verdict_of)

    def __repr__(self) -> str:
        """Show the wrapped Checker and whether the store is used."""
        return f"<CachingChecker {self.inner!r} store={self._store is not None}>"

    @property
    def in_flight(self) -> int:
        """Distinct checks in flight now."""
        return len(self._cached.flight)

    @property
    def can_look_up(self) -> bool:
        """Whether :meth:`look_up` may be used (a store is in use)."""
        return self._store is not None

    async def look_up(self, claims: Sequence[Claim], answer: Answer) -> Lookup:
        """Look every claim of ``answer`` up at once (one batched read; found ones count as cached).

        Claims not found then go through :meth:`check_missed` with their key and the
        lookup's generation.

        Returns:
            The verdict per claim (None = not found), the keys, the generation read before.

        Raises:
            CacheError: the store is closed, or the wrapper has no store.
            TypeError: ``inner.cache_request`` returned material msgspec cannot encode.
        """
        store = self._store
        if store is None:
            raise CacheError("look_up needs a cache store")
        generation = store.generation  # read before the lookup, see CacheStore.generation
        await self._prepare(claims, answer)
        keys = check_keys(self.inner, claims, answer)
        verdicts = await self._cached.get_many(keys)
        self._counters.claims_cached += len(verdicts) - verdicts.count(None)
        return Lookup(verdicts, keys, generation)

    def key_recipe(self) -> CheckKeyRecipe | None:
        """The wrapped Checker's key recipe now (:func:`~dahl.cache._keys.check_key_recipe`), or None
        (no constant request frame); rebuilt only for a new frame object."""
        frame = self._framed.cache_request_frame() if self._framed is not None else None
        held_for, recipe = self._recipe
        if frame is None or frame is not held_for:  # the Checker hands out one frame while unchanged
            recipe = check_key_recipe(self.inner, self._parser_version) if frame is not None else None
            self._recipe = (frame, recipe)
        return recipe

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return the verdict on ``claim``: shared, cached, or from ``inner.check``.

        Raises:
            AdapterError: raised by ``inner.check`` (to every caller sharing it); never cached.
            TypeError: ``inner.cache_request`` returned material msgspec cannot encode.
        """
        if self._direct:  # cheap and deterministic: no key, no single flight
            self._counters.claims_checked += 1
            return await self.inner.check(claim, answer)
        await self._prepare((claim,), answer)
        return await self._check(check_key(self.inner, claim, answer), claim, answer, None)

    async def _prepare(self, claims: Sequence[Claim], answer: Answer) -> None:
        """Let the wrapped Checker do the blocking part of its keys off the loop (``prepare_keys``)."""
        if self._prepare_keys is not None:
            await self._prepare_keys.prepare_keys(claims, answer)

    async def check_missed(self, claim: Claim, answer: Answer, key: str, generation: int) -> Verdict:
        """:meth:`check` for a claim :meth:`look_up` did not find under ``key`` at ``generation``: the
        disk is read again only if the store may have written the key since.

        Raises:
            AdapterError: raised by ``inner.check``; never cached.
        """
        return await self._check(key, claim, answer, generation)

    async def _check(self, key: str, claim: Claim, answer: Answer, generation: int | None) -> Verdict:
        shared = False

        def share() -> None:
            nonlocal shared
            shared = True

        try:
            verdict, cached = await self._cached.flight.run(
                key, lambda: self._resolve(key, claim, answer, generation), share)
        except BaseException:
            if shared:
                self._counters.claims_deduped += 1
            raise
        if shared:  # a shared cache hit counts as one
            if cached:
                self._counters.claims_cached += 1
            else:
                self._counters.claims_deduped += 1
        return verdict

    async def _resolve(
        self, key: str, claim: Claim, answer: Answer, generation: int | None
    ) -> tuple[Verdict, bool]:
        """Return the verdict and whether it came from the store; count it."""
        store, cached = self._store, self._cached
        if store is not None:
            since = store.after_miss(key, generation, parser_version=cached.parser_version) if generation is not None else False
            if since is False:
                (stored,) = await cached.get_many((key,))
            else:
                stored = since if isinstance(since, Verdict) else None
            if stored is not None:
                self._counters.claims_cached += 1
                return stored, True
        self._counters.claims_checked += 1
        cached.counts.computed += 1
        verdict = await self.inner.check(claim, answer)
        if verdict.label is not Label.ERROR:
            cached.put(key, verdict, verdict.raw)
        return verdict, False

    def _verdict_of(self, key: str, entry: CachedEntry) -> Verdict | None:
        """The verdict a lookup found: the stored one, or its raw reply re-parsed (and put back with it)."""
        if isinstance(entry.value, Verdict):
            return entry.value
        verdict = reparse_verdict(self._reparser, entry.raw)
        if verdict is not None:  # the raw reply goes along: a later parser change re-parses it again
            self._cached.put(key, verdict, entry.raw)
        return verdict


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
