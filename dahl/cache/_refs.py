"""Cache keys and blobs of ``dahl refs build`` (extraction, rating) and the other jobs.

Keys follow :mod:`dahl.cache._keys`: ``extract`` = extractor fingerprint + the document's
title and chunk text (a chunk shared by many questions is extracted once); ``rate`` =
rater fingerprint + the normalized question and fact (one entry per fact, whatever batch).
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
    """What an extraction or rating key is computed from (a fixed-order array): context is
    the document title (extract) or the normalized question (rate); text the chunk verbatim
    (fact spans index it) or the normalized fact."""

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
    """Opaque results (bytes) by key, with single flight: a :class:`~dahl.cache._cached.Cached` of blobs.

    Args:
        store: the cache, or None (``--no-cache``: nothing read or written, single flight kept).
        parser_version: version of the caller's parser/encoding of the blobs.
    """

    def __init__(self, store: CacheStore | None, parser_version: str) -> None:
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
