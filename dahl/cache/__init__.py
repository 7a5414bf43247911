"""Content-hash cache of split and check results.

- :mod:`dahl.cache.keys`: canonical, versioned keys (blake2b-128 of msgspec
  deterministic bytes).
- :mod:`dahl.cache.store`: one SQLite table behind one writer thread
  (:mod:`dahl.cache.writer`) and one reader thread (:mod:`dahl.cache.reader`); rows in
  :mod:`dahl.cache.database`; the table (dahl's own schema), its checks and its
  migration in :mod:`dahl.cache.schema`.
- :mod:`dahl.cache.cached`: the one caching wrapper (batched lookups, puts, single
  flight and counts) every stage's cache is built on; single flight itself in
  :mod:`dahl.cache.flight`.
- :mod:`dahl.cache.wrap`, :mod:`dahl.cache.splits`, :mod:`dahl.cache.coverage`: the
  caching Checker, Splitter and coverage judge used by the pipeline;
  :mod:`dahl.cache.refs`: blobs of the other jobs.
- :mod:`dahl.cache.answers`: finished answers stored whole, so a re-score of an
  unchanged answer skips splitting and checking.
"""

from __future__ import annotations

from dahl.cache.answers import AnswerCache
from dahl.cache.cached import CacheCounts, Cached
from dahl.cache.flight import SingleFlight
from dahl.cache.keys import KEY_VERSION, KeyMaterial, check_key, check_keys, key_of, split_key
from dahl.cache.schema import CacheUnusable
from dahl.cache.store import CACHE_DIR_ENV, CachedEntry, CacheStore, Store, default_cache_dir
from dahl.cache.splits import CachingSplitter
from dahl.cache.wrap import CachingChecker

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
