"""``dahl generate``: answers from models to questions, as dahl JSONL ready for ``dahl score``."""

from dahl.generate._settings import GenerateCounters, GenerateReport, GenerateSettings

__all__ = ["GenerateCounters", "GenerateReport", "GenerateSettings"]
