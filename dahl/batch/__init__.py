"""Batch mode: a run's cache misses through provider batch APIs at the batch price.

``prepare`` writes the current wave's misses as provider files; ``submit``, ``status``,
``collect``, ``resubmit`` and ``cancel`` drive them, recording every id in the ledger, and
``collect`` stores the results in the cache so a following ``dahl score`` completes from it.
"""
