"""Content-hash cache of split and check results.

- :mod:`dahl.cache._keys`: canonical, versioned keys (blake2b-128 of msgspec deterministic bytes).
- :mod:`dahl.cache._store`: the store interface (get_many, put_many, flight) and its local
  backend, one SQLite table (:mod:`dahl.cache._schema`) of envelopes (:mod:`dahl.cache._envelope`).
- :mod:`dahl.cache._cached`: the one caching wrapper (batched lookups, puts, single flight,
  counts) under the caching Checker and Splitter (:mod:`dahl.cache._wrap`),
  coverage judge (:mod:`dahl.cache._coverage`), whole answers (:mod:`dahl.cache._answers`)
  and the other jobs' blobs (:mod:`dahl.cache._refs`).
"""

from __future__ import annotations

from dahl.cache._answers import AnswerCache
from dahl.cache._cached import CacheCounts, Cached
from dahl.cache._keys import KEY_VERSION, KeyMaterial, check_key, check_keys, key_of, split_key
from dahl.cache._schema import CacheUnusable
from dahl.cache._store import CACHE_DIR_ENV, CachedEntry, CacheStore, SingleFlight, Store, default_cache_dir
from dahl.cache._wrap import CachingChecker, CachingSplitter

__all__ = [
    "AnswerCache",
    "CACHE_DIR_ENV",
    "CacheCounts",
    "CacheStore",
    "CacheUnusable",
    "Cached",
    "CachedEntry",
    "CachingChecker",
    "CachingSplitter",
    "KEY_VERSION",
    "KeyMaterial",
    "SingleFlight",
    "Store",
    "check_key",
    "check_keys",
    "default_cache_dir",
    "key_of",
    "split_key",
]
