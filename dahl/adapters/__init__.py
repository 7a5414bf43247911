"""Splitters and Checkers: the protocols and their implementations."""
