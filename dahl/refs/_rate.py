"""Relevance and salience ratings (1-5) of reference facts, batched, with their cache.

Importance is imp = α·(r − 1)/4 + β·(s − 1)/4 ("Beyond Precision"; :func:`dahl.metrics.importance`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from dahl.adapters._endpoint import CountMismatch, Endpoint
from dahl.adapters._parse import parse_json_object
from dahl.cache._wrap import BlobCache
from dahl.cache._keys import rate_key
from dahl.errors import OutputParseError
from dahl.refs import _prompts as prompts
from dahl.refs._settings import DEFAULT_BATCH, BuildCounters

__all__ = ["DEFAULT_BATCH", "CachedRater", "CountMismatch", "OpenAIRater", "Rater", "Rating", "parse_ratings"]

class Rating(msgspec.Struct, frozen=True, array_like=True):
    """A fact's ratings: relevance r and salience s, integers 1-5."""

    relevance: int
    salience: int


_RATING = msgspec.msgpack.Encoder()
_RATING_DECODER = msgspec.msgpack.Decoder(Rating)


def _score(item: dict[str, object], name: str, n: int, raw: str) -> int:
    value = item.get(name)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 5:
        raise OutputParseError(f"ratings[{n}].{name} must be an integer 1-5, got {value!r}", raw=raw)
    return value


def parse_ratings(raw: str, count: int) -> list[Rating]:
    """The ratings of a reply ``{"ratings": [{"id", "relevance", "salience"}, ...]}``, in fact order.

    Raises:
        CountMismatch: an id outside 1..``count``, an id twice, or a fact left unrated.
        OutputParseError: not a JSON object, no ``ratings`` list, a rating not 1-5.
    """
    value = parse_json_object(raw)
    items = value.get("ratings")
    if not isinstance(items, list):
        raise OutputParseError('the reply has no "ratings" list', raw=raw)
    found: dict[int, Rating] = {}
    for n, item in enumerate(items):
        if not isinstance(item, dict):
            raise OutputParseError(f"ratings[{n}] is not an object", raw=raw)
        fact_id = item.get("id")
        if not isinstance(fact_id, int) or isinstance(fact_id, bool):
            raise OutputParseError(f"ratings[{n}].id must be an integer, got {fact_id!r}", raw=raw)
        if not 1 <= fact_id <= count or fact_id in found:
            raise CountMismatch(f"ratings[{n}].id {fact_id} is not a fact numbered 1-{count} rated once", raw=raw)
        found[fact_id] = Rating(_score(item, "relevance", n, raw), _score(item, "salience", n, raw))
    if len(found) != count:
        raise CountMismatch(f"{len(found)} ratings for {count} facts", raw=raw)
    return [found[i] for i in range(1, count + 1)]


class Rater(Protocol):
    """Rates facts for a question."""

    fingerprint: str

    async def rate(self, question: str, facts: Sequence[str]) -> list[Rating]:
        """One rating per fact, in order.

        Raises:
            AdapterError: a call failed or its reply could not be parsed.
        """
        ...


class OpenAIRater:
    """LLM rater over an LLM endpoint (template ``refs-rate/v1``).

    Args:
        endpoint: the endpoint client with the rating task (:func:`dahl.refs._prompts.task`).
        batch: facts per call (>= 1).

    Raises:
        ValueError: ``batch < 1``.
    """

    def __init__(self, endpoint: Endpoint, *, batch: int = DEFAULT_BATCH) -> None:
        if batch < 1:
            raise ValueError(f"rating batch must be >= 1, got {batch}")
        self._endpoint = endpoint
        self.batch = batch
        self.fingerprint = endpoint.fingerprint

    async def _ask(self, question: str, facts: Sequence[str]) -> list[Rating]:
        endpoint = self._endpoint
        messages = prompts.rate_messages(question, facts, template=endpoint.cfg.templates.get("rate"))
        parsed = await endpoint.ask(lambda fmt: endpoint.body(messages, fmt), lambda raw: parse_ratings(raw, len(facts)))
        return parsed.get()

    async def rate(self, question: str, facts: Sequence[str]) -> list[Rating]:
        """Ratings of ``facts`` for ``question``, ``batch`` facts per call (a count mismatch: one by one).

        Raises:
            OutputParseError: a reply (after its re-ask) could not be parsed.
            AdapterError: an HTTP call failed after the lane's retries.
        """
        out: list[Rating] = []
        for start in range(0, len(facts), self.batch):
            part = facts[start : start + self.batch]
            try:
                out.extend(await self._ask(question, part))
            except CountMismatch:
                if len(part) == 1:
                    raise
                for fact in part:  # never pad: ask each fact alone
                    out.extend(await self._ask(question, [fact]))
        return out


class CachedRater:
    """A :class:`Rater` whose ratings are cached per (fingerprint, question, fact).

    Args:
        inner: the rater.
        cache: the run's blob cache for ratings.
        counters: the build's; ``rated`` counts cache misses, ``rating_hits`` hits.
    """

    def __init__(self, inner: Rater, cache: BlobCache, counters: BuildCounters) -> None:
        self._inner = inner
        self._cache = cache
        self._counters = counters
        self.fingerprint = inner.fingerprint

    async def rate(self, question: str, facts: Sequence[str]) -> list[Rating]:
        """One rating per fact, in order; only facts without a cached rating are sent.

        Raises:
            AdapterError: the inner rater failed (nothing of that call is cached).
        """
        keys = [rate_key(self.fingerprint, question, fact) for fact in facts]
        found = await self._cache.get_many(keys)
        ratings: list[Rating | None] = [None if b is None else _RATING_DECODER.decode(b) for b in found]
        missing = [i for i, r in enumerate(ratings) if r is None]
        self._counters.rating_hits += len(keys) - len(missing)
        if missing:
            self._counters.rated += len(missing)
            fresh = await self._inner.rate(question, [facts[i] for i in missing])
            for i, rating in zip(missing, fresh, strict=True):
                ratings[i] = rating
                self._cache.put(keys[i], _RATING.encode(rating))
        return [r for r in ratings if r is not None]
