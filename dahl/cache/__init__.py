"""Content-hash cache of split and check results.

- :mod:`dahl.cache._keys`: canonical, versioned keys (blake2b-128 of msgspec
  deterministic bytes).
- :mod:`dahl.cache._store`: one SQLite table behind one writer thread
  (:mod:`dahl.cache._writer`) and one reader thread (:mod:`dahl.cache._reader`); rows in
  :mod:`dahl.cache._database`; the table (dahl's own schema), its checks and its
  migration in :mod:`dahl.cache._schema`.
- :mod:`dahl.cache._cached`: the one caching wrapper (batched lookups, puts, single
  flight and counts) every stage's cache is built on; single flight itself in
  :mod:`dahl.cache._flight`.
- :mod:`dahl.cache._wrap`, :mod:`dahl.cache._splits`, :mod:`dahl.cache._coverage`: the
  caching Checker, Splitter and coverage judge used by the pipeline;
  :mod:`dahl.cache._refs`: blobs of the other jobs.
- :mod:`dahl.cache._answers`: finished answers stored whole, so a re-score of an
  unchanged answer skips splitting and checking.
"""

from __future__ import annotations

from dahl.cache._answers import AnswerCache
from dahl.cache._cached import CacheCounts, Cached
from dahl.cache._flight import SingleFlight
from dahl.cache._keys import KEY_VERSION, KeyMaterial, check_key, check_keys, key_of, split_key
from dahl.cache._schema import CacheUnusable
from dahl.cache._store import CACHE_DIR_ENV, CachedEntry, CacheStore, Store, default_cache_dir
from dahl.cache._splits import CachingSplitter
from dahl.cache._wrap import CachingChecker

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
