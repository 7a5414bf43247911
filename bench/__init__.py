"""Benchmarks and the mock OpenAI-compatible server they run against (loopback only)."""
