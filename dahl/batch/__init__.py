"""Batch mode: a run's cache misses through provider batch APIs at the batch price.

``prepare`` (:mod:`dahl.batch._plan`, :mod:`dahl.batch._shards`) writes the misses of the
current wave as provider files; ``submit``, ``status``, ``collect``, ``resubmit`` and
``cancel`` (:mod:`dahl.batch._ops`) drive them through :mod:`dahl.batch._providers`,
recording every id in the ledger (:mod:`dahl.batch._ledger`); :mod:`dahl.batch._collect`
stores the results in the cache as the online adapters would, so a following
``dahl score`` completes from the cache.
"""
