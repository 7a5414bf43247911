"""Batch mode: a run's cache misses through provider batch APIs at the batch price.

``prepare`` (:mod:`dahl.batch.plan`, :mod:`dahl.batch.shards`) writes the misses of the
current wave as provider files; ``submit``, ``status``, ``collect``, ``resubmit`` and
``cancel`` (:mod:`dahl.batch.ops`) drive them through :mod:`dahl.batch.providers`,
recording every id in the ledger (:mod:`dahl.batch.ledger`); :mod:`dahl.batch.collect`
stores the results in the cache as the online adapters would, so a following
``dahl score`` completes from the cache.
"""
