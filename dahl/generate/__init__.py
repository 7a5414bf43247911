"""``dahl generate``: answers from models to questions, as dahl JSONL ready for ``dahl score``.

:mod:`~dahl.generate._questions` reads the questions, :mod:`~dahl.generate._templates`
holds the prompt templates, :mod:`~dahl.generate._sampler` builds and sends one
request, :mod:`~dahl.generate._answers` runs the pipeline (one engine stage).
"""

from dahl.generate._settings import GenerateCounters, GenerateReport, GenerateSettings

__all__ = ["GenerateCounters", "GenerateReport", "GenerateSettings"]
