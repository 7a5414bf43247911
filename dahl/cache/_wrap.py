"""The caching, single-flight wrappers around a Checker, a Splitter and a coverage judge, and
the re-parse of a stored raw reply by the adapter's current parser (also used by the dry run
and the batch planner). What they read of the adapters is declared in :mod:`dahl.adapters._base`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Generic, TypeGuard, TypeVar

from dahl.adapters._base import Checker, FramedKeys, Lookup, PreparedKeys, RawSplitter, ReparsingChecker, Splitter
from dahl.adapters._coverage import CoverageJudge, Judgement
from dahl.cache._cached import Cached
from dahl.cache._envelope import Value
from dahl.cache._keys import CheckKeyRecipe, check_key, check_key_recipe, check_keys, coverage_keys, split_key
from dahl.cache._store import CachedEntry, CacheStore
from dahl.errors import CacheError, DahlError
from dahl.records import Answer, AnswerResult, Claim, Coverage, Label, Verdict
from dahl.results._counters import RunCounters

__all__ = [
    "CachingAdapter",
    "CachingChecker",
    "CachingJudge",
    "CachingSplitter",
    "Lookup",
    "reparse_claims",
    "reparse_verdict",
]

log = logging.getLogger(__name__)

A = TypeVar("A", Splitter, Checker)

_CLASS_HAS: dict[tuple[type, type], bool] = {}


def _has(cls: type, protocol: type) -> bool:
    """Whether instances of ``cls`` have ``protocol``'s methods (methods-only protocols), decided once per class."""
    known = _CLASS_HAS.get((cls, protocol))
    if known is None:
        known = _CLASS_HAS[cls, protocol] = issubclass(cls, protocol)
    return known


def _is_raw_splitter(splitter: object) -> TypeGuard[RawSplitter]:
    return _has(type(splitter), RawSplitter)


def _is_reparsing(checker: object) -> TypeGuard[ReparsingChecker]:
    return _has(type(checker), ReparsingChecker)


def reparse_claims(splitter: object, raw: str | None, answer: Answer) -> list[Claim] | None:
    """``splitter.parse_raw(raw, answer)``, or None when there is no raw reply, the Splitter
    is no :class:`~dahl.adapters._base.RawSplitter`, or the current parser rejects the reply."""
    if raw is None or not _is_raw_splitter(splitter):
        return None
    try:
        return splitter.parse_raw(raw, answer)
    except DahlError as exc:
        log.debug("stored split reply no longer parses (%s); splitting again", exc)
        return None


def reparse_verdict(checker: object, raw: str | None) -> Verdict | None:
    """``checker.parse_raw(raw)``, or None when there is no raw reply, the Checker is no
    :class:`~dahl.adapters._base.ReparsingChecker` (or None), the current parser rejects
    the reply, or it parses to an error verdict."""
    if raw is None or not _is_reparsing(checker):
        return None
    try:
        verdict = checker.parse_raw(raw)
    except DahlError as exc:
        log.debug("stored reply no longer parses (%s); checking again", exc)
        return None
    return verdict if verdict.label is not Label.ERROR else None


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
        self._counters = counters

    def __repr__(self) -> str:
        """Show the wrapped adapter and whether the store is used."""
        return f"<{type(self).__name__} {self.inner!r} store={self._store is not None}>"


class CachingChecker(CachingAdapter[Checker]):
    """A Checker that answers from the cache, shares identical in-flight checks, and stores.

    Per claim exactly one counter is incremented: ``claims_cached`` (found, a re-parsed raw
    reply included, also when shared), ``claims_deduped`` (an identical check in flight was
    shared) or ``claims_checked``. Error verdicts and exceptions are never stored.

    Args:
        inner: the Checker doing the work.
        store: the result store, or None to disable caching (single flight stays).
        counters: the run's counters; updated on the event loop thread only.
    """

    def __init__(self, inner: Checker, store: CacheStore | None, counters: RunCounters) -> None:
        super().__init__(inner, store, counters)
        self._prepare_keys = inner if isinstance(inner, PreparedKeys) else None
        self._reparser = inner if isinstance(inner, ReparsingChecker) else None
        self._framed = inner if isinstance(inner, FramedKeys) and inner.cache_request_covers_input else None
        self._recipe: tuple[object, CheckKeyRecipe | None] = (None, None)  # (frame it holds for, recipe)
        self._cached: Cached[Verdict] = Cached(self._store, self.parser_version, self._verdict_of)

    @property
    def in_flight(self) -> int:
        """Distinct checks in flight now."""
        return len(self._cached.flight)

    @property
    def can_look_up(self) -> bool:
        """Whether :meth:`look_up` may be used (a store is in use)."""
        return self._store is not None

    async def look_up(self, claims: Sequence[Claim], answer: Answer) -> Lookup:
        """Look every claim of ``answer`` up in one batched read (found ones count as cached); the
        others go through :meth:`check_missed` with their key and the lookup's generation.

        Returns:
            The verdict per claim (None = not found), the keys, the generation read before.

        Raises:
            CacheError: the store is closed, or the wrapper has no store.
            TypeError: ``inner.cache_request`` returned material msgspec cannot encode.
        """
        store = self._store
        if store is None:
            raise CacheError("look_up needs a cache store")
        generation = store.generation  # read before the lookup, see CacheStore.after_miss
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
            recipe = check_key_recipe(self.inner, self.parser_version) if frame is not None else None
            self._recipe = (frame, recipe)
        return recipe

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """Return the verdict on ``claim``: shared, cached, or from ``inner.check``.

        Raises:
            AdapterError: raised by ``inner.check`` (to every caller sharing it); never cached.
            TypeError: ``inner.cache_request`` returned material msgspec cannot encode.
        """
        if not self.cacheable:  # cheap and deterministic: no key, no single flight
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
        store, counters = self._store, self._counters

        async def lookup() -> Verdict | None:
            since = False if store is None or generation is None else store.after_miss(
                key, generation, parser_version=self.parser_version)
            if since is False:
                (found,) = await self._cached.get_many((key,))
            else:
                found = since if isinstance(since, Verdict) else None
            if found is not None:
                counters.claims_cached += 1
            return found

        async def call() -> tuple[Verdict, Value | None, str | None]:
            counters.claims_checked += 1
            verdict = await self.inner.check(claim, answer)
            return verdict, verdict if verdict.label is not Label.ERROR else None, verdict.raw

        return await self._cached.resolve(key, call, lookup=lookup, on_shared=self._shared)

    def _shared(self, from_store: bool) -> None:
        if from_store:  # a shared cache hit counts as one
            self._counters.claims_cached += 1
        else:
            self._counters.claims_deduped += 1

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
    """

    def __init__(self, inner: Splitter, store: CacheStore | None, counters: RunCounters) -> None:
        super().__init__(inner, store, counters)
        self._raw = inner if isinstance(inner, RawSplitter) else None
        self._cached: Cached[list[Claim]] = Cached(self._store, self.parser_version, self._claims_of)
        self._direct_calls = 0

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
        if not self.cacheable:  # cheap and deterministic: no key, no single flight
            self._direct_calls += 1
            return list(await self.inner.split(answer))

        async def call() -> tuple[list[Claim], Value | None, str | None]:
            if self._raw is None:
                claims = await self.inner.split(answer)
                return claims, list(claims), None
            claims, raw = await self._raw.split_with_raw(answer)
            return claims, list(claims), raw

        def claims_of(key: str, entry: CachedEntry) -> list[Claim] | None:
            return self._claims_of(key, entry, answer)

        return list(await self._cached.resolve(split_key(self.inner, answer), call, claims_of))

    def _claims_of(self, key: str, entry: CachedEntry, answer: Answer | None = None) -> list[Claim] | None:
        """The stored claims, or (given ``answer``) the stored raw reply re-parsed and put back with it."""
        if isinstance(entry.value, list):
            return entry.value
        claims = reparse_claims(self._raw, entry.raw, answer) if answer is not None else None
        if claims is not None:  # keep the raw reply for a later parser change
            self._cached.put(key, claims, entry.raw)
        return claims


_BY_VALUE = {label.value.encode(): label for label in Coverage if label is not Coverage.ERROR}


def _label(key: str, entry: CachedEntry) -> Coverage | None:
    return _BY_VALUE.get(entry.value) if isinstance(entry.value, bytes) else None


class CachingJudge:
    """A coverage judge (:class:`~dahl.adapters._coverage.CoverageJudge`) that answers from the cache
    and stores each fact's label (bytes, no raw reply) under :func:`~dahl.cache._keys.coverage_keys`.

    Args:
        inner: the judge doing the work; a cheap one (``cacheable = False``) is called directly.
        store: the result store, or None (then every fact goes to ``inner``).

    Attributes:
        fingerprint, cacheable, parser_version: ``inner``'s.
        facts_cached: facts answered from the store.
        facts_judged: facts handed to ``inner``.
    """

    def __init__(self, inner: CoverageJudge, store: CacheStore | None) -> None:
        self.inner = inner
        self.fingerprint = inner.fingerprint
        self.cacheable = inner.cacheable
        self.parser_version = inner.parser_version
        self._cached: Cached[Coverage] | None = (
            Cached(store, inner.parser_version, _label) if store is not None and inner.cacheable else None
        )
        self.facts_cached = 0
        self.facts_judged = 0

    async def judge(self, result: AnswerResult, facts: Sequence[str]) -> list[Judgement]:
        """Stored labels for the facts found, ``inner.judge`` for the rest (one call for all misses).

        Raises:
            AdapterError: from ``inner`` (nothing is stored then).
        """
        cached = self._cached
        if cached is None:
            self.facts_judged += len(facts)
            return await self.inner.judge(result, facts)
        keys = coverage_keys(self.fingerprint, result.question, result.response, facts)
        out = [Judgement(label=label) if label is not None else None for label in await cached.get_many(keys)]
        missing = [i for i, j in enumerate(out) if j is None]
        self.facts_cached += len(facts) - len(missing)
        if missing:
            self.facts_judged += len(missing)
            judged = await self.inner.judge(result, [facts[i] for i in missing])
            for i, judgement in zip(missing, judged, strict=True):
                out[i] = judgement
            cached.put_many((keys[i], j.label.value.encode(), None) for i, j in zip(missing, judged, strict=True)
                            if j.label is not Coverage.ERROR)
        return [j for j in out if j is not None]
