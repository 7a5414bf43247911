"""The caching wrappers: :class:`Cached` (under every stage's cache), :class:`BlobCache`, those of a Checker,
a Splitter, a coverage judge; re-parse of stored raw replies; whole answers (:class:`AnswerCache`)."""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar, cast

import msgspec

from dahl.adapters._base import (
    Checker,
    FramedKeys,
    Lookup,
    PreparedKeys,
    RawSplitter,
    ReparsingChecker,
    Splitter,
)
from dahl.adapters._coverage import CoverageJudge, Judgement
from dahl.cache._keys import (
    CheckKeyRecipe,
    check_key,
    check_key_recipe,
    check_keys,
    coverage_keys,
    split_key,
)
from dahl.cache._store import CachedEntry, CacheStore, SingleFlight, Store
from dahl.cache._table import Value
from dahl.errors import CacheError, DahlError
from dahl.records import LABELS, Answer, AnswerResult, Claim, Coverage, Label, Verdict
from dahl.results._assemble import FoundAnswer, label_counts
from dahl.results._counters import RunCounters

__all__ = ["WHOLE_VERSION", "AnswerCache", "BlobCache", "CacheCounts", "Cached", "CachingAdapter",
           "CachingChecker", "CachingJudge", "CachingSplitter", "Decode", "Lookup", "StoredAnswer",
           "code_digest", "decode_whole_entry", "reparse_claims", "reparse_verdict", "whole_key"]

log = logging.getLogger(__name__)

V = TypeVar("V")

#: Turns the entry stored under a key into a value, or None (a miss); it may put a re-parsed value back.
Decode = Callable[[str, CachedEntry], "V | None"]


@dataclass
class CacheCounts:
    """What one :class:`Cached` did in this run: keys found (re-parsed included), missed, shared, computed."""

    hits: int = 0
    misses: int = 0
    shared: int = 0
    computed: int = 0


class Cached(Generic[V]):
    """One stage's values by key in ``store`` (None: no cache) under ``parser_version``, with single flight;
    ``decode`` turns a stored entry into a value or None, ``counts`` counts."""

    def __init__(self, store: Store | None, parser_version: str, decode: Decode[V]) -> None:
        self.store = store
        self.parser_version = parser_version
        self._decode = decode
        self.counts = CacheCounts()
        self.flight: SingleFlight[tuple[V, bool]] = store.flight() if store is not None else SingleFlight()

    async def get_many(self, keys: Sequence[str], decode: Decode[V] | None = None) -> list[V | None]:
        """The stored values of ``keys``, in order (None = a miss), by one batched read."""
        store = self.store
        if store is None or not keys:
            self.counts.misses += len(keys)
            return [None] * len(keys)
        decode = decode or self._decode
        entries = await store.get_many(keys, parser_version=self.parser_version)
        found = [decode(key, e) if e is not None else None for key, e in zip(keys, entries, strict=True)]
        hits = len(found) - found.count(None)
        self.counts.hits += hits
        self.counts.misses += len(found) - hits
        return found

    def put(self, key: str, value: Value, raw: str | None = None) -> None:
        """Queue ``value`` (never an error) and its raw reply as ``key``'s; CacheError if closed."""
        self.put_many(((key, value, raw),))

    def put_many(self, items: Iterable[tuple[str, Value, str | None]]) -> None:
        """Queue ``(key, value, raw)`` entries as :meth:`put` does."""
        if self.store is not None:
            self.store.put_many(items, parser_version=self.parser_version)

    async def resolve(self, key: str, compute: Callable[[], Awaitable[tuple[V, Value | None, str | None]]],
                      decode: Decode[V] | None = None, *,
                      lookup: Callable[[], Awaitable[V | None]] | None = None,
                      on_shared: Callable[[bool], None] | None = None) -> V:
        """The value of ``key``: shared in flight, stored (``lookup()``, else :meth:`get_many`), or
        ``compute()`` -> (value, to store or None, raw), whose error reaches all sharers; a sharer calls
        ``on_shared(from the store)``."""

        async def work() -> tuple[V, bool]:
            found = await lookup() if lookup is not None else (await self.get_many([key], decode))[0]
            if found is not None:
                return found, True
            value, stored, raw = await compute()
            self.counts.computed += 1
            if stored is not None:
                self.put(key, stored, raw)
            return value, False

        shared: list[bool] = []  # one item once this call took another's outcome
        from_store = False  # stays False when the shared call raised
        try:
            value, from_store = await self.flight.run(key, work, lambda: shared.append(True))
            return value
        finally:
            if shared:
                self.counts.shared += 1
                if on_shared is not None:
                    on_shared(from_store)


def _blob(key: str, entry: CachedEntry) -> bytes | None:
    return entry.value if isinstance(entry.value, bytes) else None


class BlobCache(Cached[bytes]):
    """Opaque results (bytes) by key in ``store`` (or None) under the caller's ``parser_version``."""

    def __init__(self, store: Store | None, parser_version: str) -> None:
        super().__init__(store, parser_version, _blob)

    async def get_or_compute(self, key: str, compute: Callable[[], Awaitable[tuple[bytes, str | None]]]) -> bytes:
        """The blob of ``key``, as :meth:`resolve` gives it; ``compute`` returns ``(blob, raw reply)``."""

        async def stored() -> tuple[bytes, bytes, str | None]:
            blob, raw = await compute()
            return blob, blob, raw

        return await self.resolve(key, stored)


A = TypeVar("A", Splitter, Checker)

# Whether a class has a methods-only protocol, decided once per class (a runtime check is ~10 µs).
_CLASS_HAS: dict[tuple[type, type], bool] = {}


def _has(cls: type, protocol: type) -> bool:
    known = _CLASS_HAS.get((cls, protocol))
    if known is None:
        known = _CLASS_HAS[cls, protocol] = issubclass(cls, protocol)
    return known


def reparse_claims(splitter: object, raw: str | None, answer: Answer) -> list[Claim] | None:
    """``splitter.parse_raw(raw, answer)``, or None: no raw reply or ``parse_raw``, or rejected."""
    if raw is None or not _has(type(splitter), RawSplitter):
        return None
    try:
        return cast(RawSplitter, splitter).parse_raw(raw, answer)
    except DahlError as exc:
        log.debug("stored split reply no longer parses (%s); splitting again", exc)
        return None


def reparse_verdict(checker: object, raw: str | None) -> Verdict | None:
    """``checker.parse_raw(raw)``, or None: no raw reply, no ``parse_raw``, rejected, or an error verdict."""
    if raw is None or not _has(type(checker), ReparsingChecker):
        return None
    try:
        verdict = cast(ReparsingChecker, checker).parse_raw(raw)
    except DahlError as exc:
        log.debug("stored reply no longer parses (%s); checking again", exc)
        return None
    return verdict if verdict.label is not Label.ERROR else None


class CachingAdapter(Generic[A]):
    """What both caching wrappers hold: ``inner`` (its ``fingerprint``, ``cacheable``, ``parser_version``),
    the store (unused if not ``cacheable``: called directly) and the run's counters."""

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
    """A Checker that answers from the cache, shares checks in flight and stores non-error verdicts; per claim
    one of ``claims_cached`` (also when shared), ``claims_deduped``, ``claims_checked`` is counted."""

    def __init__(self, inner: Checker, store: CacheStore | None, counters: RunCounters) -> None:
        super().__init__(inner, store, counters)
        self._prepare_keys = inner if isinstance(inner, PreparedKeys) else None
        self._reparser = inner if isinstance(inner, ReparsingChecker) else None
        self._framed = inner if isinstance(inner, FramedKeys) and inner.cache_request_covers_input else None
        self._recipe: tuple[object, CheckKeyRecipe | None] = (None, None)  # (frame it holds for, recipe)
        self._cached: Cached[Verdict] = Cached(self._store, self.parser_version, self._verdict_of)
        # This process's single flight: no other shard can store a key while its check is in flight
        # (a leased one re-reads the store once it holds the lease).
        self._local_flight = type(self._cached.flight) is SingleFlight

    @property
    def in_flight(self) -> int:
        """Distinct checks in flight now."""
        return len(self._cached.flight)

    @property
    def can_look_up(self) -> bool:
        """Whether :meth:`look_up` may be used (a store is in use)."""
        return self._store is not None

    async def look_up(self, claims: Sequence[Claim], answer: Answer) -> Lookup:
        """All claims in one read: verdicts (None: not found), keys, the generation before. CacheError:
        closed, no store; TypeError: ``cache_request`` material msgspec cannot encode."""
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
        """The wrapped Checker's key recipe now, or None; rebuilt only for a new frame object."""
        frame = self._framed.cache_request_frame() if self._framed is not None else None
        held_for, recipe = self._recipe
        if frame is None or frame is not held_for:  # the Checker hands out one frame while unchanged
            recipe = check_key_recipe(self.inner, self.parser_version) if frame is not None else None
            self._recipe = (frame, recipe)
        return recipe

    async def check(self, claim: Claim, answer: Answer) -> Verdict:
        """The verdict on ``claim``: shared, cached, or from ``inner.check``; TypeError as :meth:`look_up`."""
        if not self.cacheable:  # cheap and deterministic: no key, no single flight
            self._counters.claims_checked += 1
            return await self.inner.check(claim, answer)
        await self._prepare((claim,), answer)
        return await self._check(check_key(self.inner, claim, answer), claim, answer, None)

    async def _prepare(self, claims: Sequence[Claim], answer: Answer) -> None:
        if self._prepare_keys is not None:  # the blocking part of the keys, off the loop
            await self._prepare_keys.prepare_keys(claims, answer)

    async def check_missed(self, claim: Claim, answer: Answer, key: str, generation: int) -> Verdict:
        """:meth:`check` of a claim missed under ``key`` at ``generation`` (re-read only if written since)."""
        store, cached = self._store, self._cached
        if store is None or not self._local_flight or key in cached.flight or store.after_miss(
                key, generation, parser_version=self.parser_version) is not None:
            return await self._check(key, claim, answer, generation)
        # The usual miss: nothing stored under the key since the lookup and no identical check in
        # flight, so no lookup to make: the check under single flight, two frames fewer than resolve.
        verdict, _ = await cached.flight.run(key, lambda: self._checked(key, claim, answer), _never_shared)
        return verdict

    async def _checked(self, key: str, claim: Claim, answer: Answer) -> tuple[Verdict, bool]:
        """``inner.check`` counted and stored, as :meth:`Cached.resolve`'s compute step; (verdict, False)."""
        self._counters.claims_checked += 1
        verdict = await self.inner.check(claim, answer)
        cached = self._cached
        cached.counts.computed += 1
        if verdict.label is not Label.ERROR:
            cached.put(key, verdict, verdict.raw)
        return verdict, False

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
        if isinstance(entry.value, Verdict):
            return entry.value
        verdict = reparse_verdict(self._reparser, entry.raw)
        if verdict is not None:  # put back with its raw reply: a later parser change re-parses it again
            self._cached.put(key, verdict, entry.raw)
        return verdict


def _never_shared() -> None:
    """The sharing callback of a call that owns its key (never called: it shares no one's outcome)."""


class CachingSplitter(CachingAdapter[Splitter]):
    """A Splitter that answers from the cache, shares identical splits in flight, and stores claim lists."""

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
        """The claims of ``answer`` (a new list): shared, cached, or from ``inner``; TypeError as in check."""
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
        if isinstance(entry.value, list):
            return entry.value
        claims = reparse_claims(self._raw, entry.raw, answer) if answer is not None else None
        if claims is not None:  # put back with its raw reply, for a later parser change
            self._cached.put(key, claims, entry.raw)
        return claims


_BY_VALUE = {label.value.encode(): label for label in Coverage if label is not Coverage.ERROR}


def _label(key: str, entry: CachedEntry) -> Coverage | None:
    return _BY_VALUE.get(entry.value) if isinstance(entry.value, bytes) else None


class CachingJudge:
    """A coverage judge answering from the cache and storing each fact's label; ``inner`` judges the rest
    (``facts_judged``; found: ``facts_cached``)."""

    def __init__(self, inner: CoverageJudge, store: CacheStore | None) -> None:
        self.inner = inner
        self.fingerprint = inner.fingerprint
        self.cacheable = inner.cacheable
        self.parser_version = inner.parser_version
        cached = store is not None and inner.cacheable
        self._cached: Cached[Coverage] | None = Cached(store, self.parser_version, _label) if cached else None
        self.facts_cached = 0
        self.facts_judged = 0

    async def judge(self, result: AnswerResult, facts: Sequence[str]) -> list[Judgement]:
        """Stored labels for the facts found, one ``inner.judge`` call for the rest (its errors raised)."""
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


WHOLE_VERSION = 2  #: Bumped whenever what a whole-answer entry holds, or how its key is made, changes.


class StoredAnswer(msgspec.Struct, frozen=True, array_like=True):
    """A whole-answer entry (msgpack): the claims' JSON array, the question's id, and the response as
    scored when preprocessing changed it."""

    claims: bytes
    question_id: str
    response: str | None = None


class _Labelled(msgspec.Struct, frozen=True):
    label: Label


_ENCODER = msgspec.msgpack.Encoder()
_DECODER = msgspec.msgpack.Decoder(StoredAnswer)
_JSON_ENCODER = msgspec.json.Encoder()
# Reads a claim's label and skips the rest (text, evidence, raw reply) without building it.
_LABELS_DECODER = msgspec.json.Decoder(tuple[_Labelled, ...])
_ERROR_INDEX = LABELS.index(Label.ERROR)


class AnswerCache:
    """Finished answers stored whole (the pipeline's ``WholeAnswers``); build it with :meth:`for_run`.

    A key hashes :data:`WHOLE_VERSION`, the Checker's key recipe, ``preprocess``, ``max_response_chars``,
    the Splitter's parser version, :func:`code_digest`, the input hash and a cached Splitter's split key.
"""

    def __init__(self, store: CacheStore, splitter: CachingSplitter, checker: CachingChecker, *,
                 preprocess: bool, max_response_chars: int) -> None:
        self._cached: Cached[FoundAnswer] = Cached(store, "1", lambda key, entry: decode_whole_entry(entry.value))
        self._checker = checker
        # A cheap Splitter (given claims, rules) is a function of the answer, which the
        # input hash covers with its fingerprint; a cached one adds its request material.
        self._split_inner = splitter.inner if splitter.cacheable else None
        self._settings = (bool(preprocess), int(max_response_chars), splitter.parser_version, code_digest())
        self._recipe: CheckKeyRecipe | None = None
        self._head: hashlib.blake2b | None = None
        self._uncacheable = 0
        self.kept = 0

    @property
    def hits(self) -> int:
        """Answers found whole in this run."""
        return self._cached.counts.hits

    @property
    def misses(self) -> int:
        """Answers looked up and not found whole in this run (those that cannot be stored included)."""
        return self._cached.counts.misses + self._uncacheable

    @classmethod
    def for_run(cls, store: CacheStore | None, splitter: CachingSplitter, checker: CachingChecker, *,
                preprocess: bool, max_response_chars: int) -> AnswerCache | None:
        """An answer cache for this run, or None: no store, or a Checker not cached or without key recipe."""
        if store is None or not checker.can_look_up or checker.key_recipe() is None:
            return None
        return cls(store, splitter, checker, preprocess=preprocess, max_response_chars=max_response_chars)

    def _material(self, recipe: CheckKeyRecipe) -> bytes:
        parts = [WHOLE_VERSION, recipe.before, recipe.after, list(recipe.parts), recipe.parser_version]
        return _ENCODER.encode([*parts, *self._settings])

    def key_material(self) -> bytes | None:
        """The bytes a key hashes before the input hash, or None (no recipe, or a cached Splitter)."""
        recipe = self._checker.key_recipe()
        if recipe is None or self._split_inner is not None:
            return None
        return self._material(recipe)

    def keys(self, items: Sequence[tuple[Answer, str]]) -> list[str | None]:
        """Whole-answer keys of (answer, input hash) ``items``, or all None; TypeError as in ``split_key``."""
        recipe = self._checker.key_recipe()
        if recipe is None:
            return [None] * len(items)
        if recipe is not self._recipe or self._head is None:  # the hash state of all but the answer
            self._head = hashlib.blake2b(self._material(recipe), digest_size=16)
            self._recipe = recipe
        head, split = self._head, self._split_inner
        return [whole_key(head, input_hash, split_key(split, answer) if split is not None else None)
                for answer, input_hash in items]

    async def look_up(self, items: Sequence[tuple[Answer, str]]) -> tuple[list[str | None], list[FoundAnswer | None]]:
        """Per (answer, input hash), by one read: its key (None: not storable) and what is stored, or None."""
        keys = self.keys(items)
        wanted = [key for key in keys if key is not None]
        self._uncacheable += len(keys) - len(wanted)
        got = iter(await self._cached.get_many(wanted))
        return keys, [next(got) if key is not None else None for key in keys]

    def keep(self, key: str, result: AnswerResult, cleaned: bool) -> None:
        """Store ``result`` under ``key`` unless it has no or an error claim (``cleaned``: its response too)."""
        if not result.claims or result.counts.get(Label.ERROR.value, 0):  # counted when the result was built
            return
        claims = _JSON_ENCODER.encode(result.claims)
        stored = StoredAnswer(claims, result.question_id, result.response if cleaned else None)
        self._cached.put(key, _ENCODER.encode(stored))
        self.kept += 1


def whole_key(head: hashlib.blake2b, input_hash: str, split: str | None = None) -> str:
    """A whole-answer key: ``head`` (:meth:`AnswerCache.key_material`), input hash, split key."""
    hasher = head.copy()
    hasher.update(input_hash.encode())
    if split is not None:
        hasher.update(split.encode())
    return hasher.hexdigest()


@functools.cache
def code_digest() -> str:
    """blake2b-128 of the source of every module of the ``dahl`` package (hex; read once)."""
    root = Path(__file__).resolve().parents[1]
    hasher = hashlib.blake2b(digest_size=16)
    for path in sorted(root.rglob("*.py")):
        hasher.update(str(path.relative_to(root)).encode())
        hasher.update(path.read_bytes())
    return hasher.hexdigest()


def decode_whole_entry(value: object) -> FoundAnswer | None:
    """The whole answer in a stored ``value`` (:class:`StoredAnswer` bytes), or None (not one, or damaged)."""
    if not isinstance(value, bytes):
        return None
    try:
        stored = _DECODER.decode(value)
        counts = label_counts([c.label for c in _LABELS_DECODER.decode(stored.claims)])
    except msgspec.DecodeError as exc:
        log.debug("undecodable whole-answer entry (%s); treated as a miss", exc)
        return None
    if not sum(counts) or counts[_ERROR_INDEX]:
        return None
    return FoundAnswer(msgspec.Raw(stored.claims), counts, stored.question_id, stored.response)
