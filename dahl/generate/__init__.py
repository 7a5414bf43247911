"""``dahl generate``: answers from models to questions, as dahl JSONL ready for ``dahl score``.

:mod:`~dahl.generate.questions` reads the questions, :mod:`~dahl.generate.templates`
holds the prompt templates, :mod:`~dahl.generate.sampler` builds and sends one
request, :mod:`~dahl.generate.answers` runs the pipeline (one engine stage).
"""

from dahl.generate.settings import GenerateCounters, GenerateReport, GenerateSettings

__all__ = ["GenerateCounters", "GenerateReport", "GenerateSettings"]
