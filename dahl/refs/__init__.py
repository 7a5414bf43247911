"""Building reference fact sets ("Beyond Precision" F): pooled from finished runs' answers,
from documents, or converted from a given file; each module builds one kind."""
