"""Cache keys and lookups of ``dahl refs build``: fact extraction and importance rating.

Keys follow :mod:`dahl.cache._keys` (blake2b-128 of the deterministic msgpack encoding of
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

import hashlib
from collections.abc import Awaitable, Callable
from typing import Literal

import msgspec

from dahl.cache._cached import Cached
from dahl.cache._envelope import CachedEntry
from dahl.cache._store import CacheStore
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


def _blob(key: str, entry: CachedEntry) -> bytes | None:
    return entry.value if isinstance(entry.value, bytes) else None


class BlobCache(Cached[bytes]):
    """Opaque results (bytes) by key, in the run's :class:`CacheStore`, with single flight.

    A :class:`~dahl.cache._cached.Cached` of blobs.

    Args:
        store: the cache, or None (``--no-cache``: nothing read or written, single flight kept).
        parser_version: version of the caller's parser/encoding of the blobs.

    Attributes:
        counters: hits, misses, shared and computed values (:class:`~dahl.cache._cached.CacheCounts`).
    """

    def __init__(self, store: CacheStore | None, parser_version: str) -> None:
        super().__init__(store, parser_version, _blob)
        self.counters = self.counts

    async def get_or_compute(self, key: str, compute: Callable[[], Awaitable[tuple[bytes, str | None]]]) -> bytes:
        """The blob of ``key``: from an identical call in flight, from the store, or ``compute()``.

        ``compute`` returns ``(blob, raw reply)``; its blob is put. Whatever it raises
        propagates (to every caller sharing the call) and nothing is put.

        Raises:
            CacheError: the store is closed.
        """

        async def stored() -> tuple[bytes, bytes, str | None]:
            blob, raw = await compute()
            return blob, blob, raw

        return await self.resolve(key, stored)
