"""Building reference fact sets (``refs.jsonl``) for importance-aware recall ("Beyond Precision"):
from documents (:mod:`dahl.refs._documents`), pooled from finished runs' answers
(:mod:`dahl.refs._pool`), or converted from a given file (:mod:`dahl.refs._given`)."""
