"""Benchmark scenarios: one module per scenario, each runnable as ``python -m bench.scenarios.NAME``."""
