"""Cache keys and lookups of ``dahl refs build``: fact extraction and importance rating.

Keys follow :mod:`dahl.cache.keys` (blake2b-128 of the deterministic msgpack encoding of
a versioned struct, never an API key, timeouts or limits):

- ``extract``: extractor fingerprint + the document's title and the chunk's text, so a
  document (or chunk) shared by many questions is extracted once, whatever question
  retrieved it. The request body (messages after templating) is in the fingerprint's
  template version and the texts.
- ``rate``: rater fingerprint + the normalized question + the normalized fact: one entry
  per fact, whatever batch the fact was rated in.

Values are opaque blobs (msgpack bytes chosen by the caller, with a parser version);
errors are never put, and a failed read is a miss (the store's policy).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Literal

import msgspec

from dahl.cache.flight import SingleFlight
from dahl.cache.store import CacheStore
from dahl.records import normalize_text

__all__ = ["REFS_KEY_VERSION", "BlobCache", "RefsKeyMaterial", "extract_key", "rate_key"]

#: Bumped whenever the layout of :class:`RefsKeyMaterial` changes (old entries become misses).
REFS_KEY_VERSION = 1

_ENCODER = msgspec.msgpack.Encoder(order="deterministic")


class RefsKeyMaterial(msgspec.Struct, frozen=True, array_like=True):
    """What an extraction or rating key is computed from (a fixed-order array).

    Attributes:
        version: :data:`REFS_KEY_VERSION`.
        stage: ``"extract"`` or ``"rate"``.
        fingerprint: the extractor's or rater's fingerprint.
        context: extract: the document title; rate: the normalized question.
        text: extract: the chunk text verbatim (fact spans index it); rate: the normalized fact.
    """

    version: int
    stage: Literal["extract", "rate"]
    fingerprint: str
    context: str
    text: str


def _key(material: RefsKeyMaterial) -> str:
    return hashlib.blake2b(_ENCODER.encode(material), digest_size=16).hexdigest()


def extract_key(fingerprint: str, title: str, text: str) -> str:
    """Key of the facts extracted from chunk ``text`` of a document titled ``title`` (32 hex digits)."""
    return _key(RefsKeyMaterial(REFS_KEY_VERSION, "extract", fingerprint, title, text))


def rate_key(fingerprint: str, question: str, fact: str) -> str:
    """Key of the rating of ``fact`` for ``question`` (both normalized; 32 hex digits)."""
    return _key(RefsKeyMaterial(REFS_KEY_VERSION, "rate", fingerprint, normalize_text(question), normalize_text(fact)))


@dataclasses.dataclass
class BlobCounters:
    """Lookups of one :class:`BlobCache`.

    Attributes:
        hits: values found in the store.
        misses: values not found (then computed, and put unless they failed).
        shared: values another caller was computing at the same time (single flight).
    """

    hits: int = 0
    misses: int = 0
    shared: int = 0


class BlobCache:
    """Opaque results (bytes) by key, in the run's :class:`CacheStore`, with single flight.

    Args:
        store: the cache, or None (``--no-cache``: nothing read or written, single flight kept).
        parser_version: version of the caller's parser/encoding of the blobs.
    """

    def __init__(self, store: CacheStore | None, parser_version: str) -> None:
        self._store = store
        self._version = parser_version
        self._flight: SingleFlight[bytes] = SingleFlight()
        self.counters = BlobCounters()

    async def get_many(self, keys: Sequence[str]) -> list[bytes | None]:
        """The stored blobs of ``keys`` (None = a miss), counting hits and misses.

        Raises:
            CacheError: the store is closed.
        """
        if self._store is None:
            self.counters.misses += len(keys)
            return [None] * len(keys)
        found: list[bytes | None] = []
        for entry in await self._store.get_many(keys, parser_version=self._version):
            value = entry.value if entry is not None else None
            found.append(value if isinstance(value, bytes) else None)
        hits = sum(v is not None for v in found)
        self.counters.hits += hits
        self.counters.misses += len(found) - hits
        return found

    def put(self, key: str, blob: bytes, raw: str | None = None) -> None:
        """Queue ``blob`` (a finished, non-error result) as ``key``'s value; never blocks."""
        if self._store is not None:
            self._store.put(key, blob, raw, parser_version=self._version)

    async def get_or_compute(self, key: str, compute: Callable[[], Awaitable[tuple[bytes, str | None]]]) -> bytes:
        """The blob of ``key``: from the store, from an identical call in flight, or ``compute()``.

        ``compute`` returns ``(blob, raw reply)``; its blob is put. Whatever it raises
        propagates (to every caller sharing the call) and nothing is put.
        """
        (found,) = await self.get_many([key])
        if found is not None:
            return found

        async def work() -> bytes:
            if self._store is not None:  # an identical call may have ended while we looked up
                recent = self._store.recent(key, parser_version=self._version)
                if isinstance(recent, bytes):
                    return recent
            blob, raw = await compute()
            self.put(key, blob, raw)
            return blob

        def on_shared() -> None:
            self.counters.shared += 1

        return await self._flight.run(key, work, on_shared)
