"""Building reference fact sets (``refs.jsonl``) for importance-aware recall ("Beyond Precision"):
from documents, pooled from finished runs' answers, or converted from a given file.
"""
