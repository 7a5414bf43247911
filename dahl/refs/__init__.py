"""Building reference fact sets (``refs.jsonl``) for importance-aware recall ("Beyond Precision")."""
