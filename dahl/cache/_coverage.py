"""The caching wrapper around a coverage judge (like :class:`~dahl.cache._wrap.CachingChecker`).

One entry per (answer text, fact, judge); the value is the label (bytes), no raw reply
(one reply holds up to 30 facts' labels). A cheap judge (``cacheable = False``) is called
directly; a batch of misses goes to the judge in one call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import msgspec

from dahl.adapters._coverage import CoverageJudge, Judgement
from dahl.cache._cached import Cached
from dahl.cache._envelope import CachedEntry
from dahl.cache._keys import KEY_VERSION
from dahl.cache._store import CacheStore
from dahl.records import AnswerResult, Coverage, normalize_text

__all__ = ["CachingJudge", "coverage_key", "coverage_keys"]

_ENCODER = msgspec.msgpack.Encoder(order="deterministic")
_BY_VALUE = {label.value.encode(): label for label in Coverage if label is not Coverage.ERROR}


def _label(key: str, entry: CachedEntry) -> Coverage | None:
    return _BY_VALUE.get(entry.value) if isinstance(entry.value, bytes) else None


def coverage_keys(fingerprint: str, question: str, response: str, facts: Sequence[str]) -> list[str]:
    """The cache keys of each fact's coverage by ``response`` under the judge ``fingerprint``
    (32 hex digits each, in the order of ``facts``); the answer's part is hashed once."""
    answer = hashlib.blake2b(normalize_text(response).encode("utf-8"), digest_size=16).hexdigest()
    head = [KEY_VERSION, "cover", fingerprint, answer, normalize_text(question)]
    return [hashlib.blake2b(_ENCODER.encode([*head, normalize_text(fact)]), digest_size=16).hexdigest()
            for fact in facts]


def coverage_key(fingerprint: str, question: str, response: str, fact: str) -> str:
    """The cache key of one ``fact``'s coverage by ``response`` (:func:`coverage_keys`)."""
    return coverage_keys(fingerprint, question, response, [fact])[0]


class CachingJudge:
    """A coverage judge that answers from the cache and stores what its inner judge decides.

    Implements :class:`~dahl.adapters._coverage.CoverageJudge`.

    Args:
        inner: the judge doing the work.
        store: the result store, or None (then every fact goes to ``inner``).

    Attributes:
        fingerprint: ``inner.fingerprint``.
        cacheable: ``inner.cacheable``.
        parser_version: ``inner.parser_version``.
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
