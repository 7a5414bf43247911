"""Content-hash cache of split, check, coverage and other jobs' results.

Keys in :mod:`dahl.cache._keys`; the store interface and its SQLite backend in
:mod:`dahl.cache._store`; the caching wrappers (the one under every stage's cache, and the
Checker's, Splitter's and coverage judge's) in :mod:`dahl.cache._wrap`; whole answers in
:mod:`dahl.cache._answers`.
"""

from __future__ import annotations

from dahl.cache._answers import AnswerCache
from dahl.cache._keys import KEY_VERSION, KeyMaterial, check_key, check_keys, key_of, split_key
from dahl.cache._store import CACHE_DIR_ENV, CachedEntry, CacheStore, SingleFlight, Store, default_cache_dir
from dahl.cache._table import CacheUnusable
from dahl.cache._wrap import CacheCounts, Cached, CachingChecker, CachingSplitter

__all__ = ["AnswerCache", "CACHE_DIR_ENV", "CacheCounts", "CacheStore", "CacheUnusable", "Cached", "CachedEntry",
           "CachingChecker", "CachingSplitter", "KEY_VERSION", "KeyMaterial", "SingleFlight", "Store", "check_key",
           "check_keys", "default_cache_dir", "key_of", "split_key"]
