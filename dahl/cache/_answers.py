"""Whole answers in the cache: a re-score skips splitting and checking of unchanged answers; only answers
whose claims all have a non-error verdict are stored."""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from pathlib import Path

import msgspec

from dahl.cache._keys import CheckKeyRecipe, split_key
from dahl.cache._store import CacheStore
from dahl.cache._wrap import Cached, CachingChecker, CachingSplitter
from dahl.results._assemble import FoundAnswer, label_counts
from dahl.records import LABELS, Answer, AnswerResult, Label

__all__ = ["WHOLE_VERSION", "AnswerCache", "StoredAnswer", "code_digest", "decode_whole_entry", "whole_key"]

log = logging.getLogger(__name__)

WHOLE_VERSION = 2  #: Bumped whenever what a whole-answer entry holds, or how its key is made, changes.


class StoredAnswer(msgspec.Struct, frozen=True, array_like=True):
    """A whole-answer entry (msgpack): the claims' JSON array as ``answers.jsonl`` holds them, the question's id,
    and the response as scored when preprocessing changed it."""

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

    A key hashes :data:`WHOLE_VERSION`, the Checker's key recipe, ``preprocess``, ``max_response_chars``, the
    Splitter's parser version and :func:`code_digest`, then the input hash (and a cached Splitter's split key).
"""

    def __init__(self, store: CacheStore, splitter: CachingSplitter, checker: CachingChecker, *, preprocess: bool,
                 max_response_chars: int) -> None:
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
        """An answer cache for this run, or None: no store, or the Checker is not cached or has no key recipe."""
        if store is None or not checker.can_look_up or checker.key_recipe() is None:
            return None
        return cls(store, splitter, checker, preprocess=preprocess, max_response_chars=max_response_chars)

    def _key_head(self) -> hashlib.blake2b | None:
        recipe = self._checker.key_recipe()
        if recipe is None:
            return None
        if recipe is not self._recipe or self._head is None:
            self._head = hashlib.blake2b(self._material(recipe), digest_size=16)
            self._recipe = recipe
        return self._head

    def _material(self, recipe: CheckKeyRecipe) -> bytes:
        parts = [WHOLE_VERSION, recipe.before, recipe.after, list(recipe.parts), recipe.parser_version]
        return _ENCODER.encode([*parts, *self._settings])

    def key_material(self) -> bytes | None:
        """The bytes a key hashes before the input hash, or None (the Checker has no recipe, or a Splitter is cached)."""
        recipe = self._checker.key_recipe()
        if recipe is None or self._split_inner is not None:
            return None
        return self._material(recipe)

    def keys(self, items: Sequence[tuple[Answer, str]]) -> list[str | None]:
        """Whole-answer keys of (answer, input hash) ``items``, or all None; TypeError as in ``split_key``."""
        head = self._key_head()
        if head is None:
            return [None] * len(items)
        split = self._split_inner
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
        """Store ``result`` under ``key`` unless it has no claim or an error claim (``cleaned``: with its response)."""
        if not result.claims or result.counts.get(Label.ERROR.value, 0):  # counted once, when the result was built
            return
        claims = _JSON_ENCODER.encode(result.claims)
        stored = StoredAnswer(claims, result.question_id, result.response if cleaned else None)
        self._cached.put(key, _ENCODER.encode(stored))
        self.kept += 1


def whole_key(head: hashlib.blake2b, input_hash: str, split: str | None = None) -> str:
    """A whole-answer key: ``head`` (hash of :meth:`AnswerCache.key_material`), the input hash, the split key."""
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
