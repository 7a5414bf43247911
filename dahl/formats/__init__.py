"""Readers for answer files (dahl JSONL, DAHL CSV, FActScore labeled JSONL)."""
