"""Benchmark questions: built from articles, checked (context dependence, duplicates, categories)
and linted.
"""
