"""Content-hash cache of split, check, coverage and other jobs' results: keys (:mod:`~dahl.cache._keys`),
the store (:mod:`~dahl.cache._store`), caching wrappers (:mod:`~dahl.cache._wrap`), whole answers."""

from __future__ import annotations

from dahl.cache._keys import KEY_VERSION, KeyMaterial, check_key, check_keys, key_of, split_key
from dahl.cache._store import CACHE_DIR_ENV, CachedEntry, CacheStore, SingleFlight, Store, default_cache_dir
from dahl.cache._table import CacheUnusable
from dahl.cache._wrap import AnswerCache, CacheCounts, Cached, CachingChecker, CachingSplitter

__all__ = ["AnswerCache", "CACHE_DIR_ENV", "CacheCounts", "CacheStore", "CacheUnusable", "Cached",
           "CachedEntry", "CachingChecker", "CachingSplitter", "KEY_VERSION", "KeyMaterial", "SingleFlight",
           "Store", "check_key", "check_keys", "default_cache_dir", "key_of", "split_key"]
