"""Settings, live counters and the report of one ``dahl generate`` run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from dahl.config import EndpointConfig
from dahl.engine._options import CallSettings
from dahl.errors import ConfigError
from dahl.generate._templates import GENERATE_TEMPLATES, Mode, Template
from dahl.results._counters import JobCounters, JobReport

__all__ = ["GenerateCounters", "GenerateReport", "GenerateSettings"]

#: The DAHL paper's generation settings (Seo et al. 2024, §3.3 and Fig. 8).
PAPER_TEMPERATURE = 0.6
PAPER_MAX_TOKENS = 256


@dataclasses.dataclass(frozen=True)
class GenerateSettings(CallSettings):
    """What to generate.

    Attributes:
        questions: the questions file (:func:`dahl.generate._questions.read_questions`).
        out: the answers JSONL to write; a re-run continues it.
        endpoints: one endpoint per model, or per (model, temperature), answered in this order;
            endpoints of one model share its lane.
        mode: ``"completion"`` (``/completions``, base models, as the DAHL paper) or ``"chat"``.
        top_p: nucleus sampling mass in (0, 1], or None to omit it.
        stop: stop sequences sent with every request (OpenAI allows up to 4), or ``()``.
        samples: answers per (question, model), >= 1; sample ``i`` sends ``seed + i``.
        template: the generation template; None = the shipped one of ``mode``.
        cache_dir, use_cache, prices, max_cost_usd: keyword-only, see
            :class:`~dahl.engine._options.CallSettings`.

    Raises:
        ConfigError: no endpoint, two endpoints for one (model, temperature), ``samples < 1``,
            ``top_p`` outside (0, 1], or an empty stop sequence.
    """

    questions: Path
    out: Path
    endpoints: tuple[EndpointConfig, ...]
    mode: Mode = "completion"
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    samples: int = 1
    template: Template | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.endpoints:
            raise ConfigError("give at least one --model")
        keys = [(cfg.model, cfg.temperature) for cfg in self.endpoints]
        if len(set(keys)) != len(keys):
            raise ConfigError(f"a model is given twice: {', '.join(cfg.model for cfg in self.endpoints)}")
        if self.samples < 1:
            raise ConfigError(f"samples must be >= 1, got {self.samples}")
        if self.top_p is not None and not 0.0 < self.top_p <= 1.0:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p}")
        if any(not s for s in self.stop):
            raise ConfigError("a stop sequence must not be empty")
        if self.mode not in GENERATE_TEMPLATES:
            raise ConfigError(f"mode must be chat or completion, got {self.mode!r}")

    @property
    def effective_template(self) -> Template:
        """The template used: the user's, else the shipped one of ``mode``."""
        return self.template if self.template is not None else GENERATE_TEMPLATES[self.mode]


@dataclasses.dataclass
class GenerateCounters(JobCounters):
    """What a run did so far (read by the progress line); items are answers.

    Attributes:
        questions: questions read.
        answers: answers asked for (questions x models x temperatures x samples).
        cached: of the written answers, those taken from the cache.
        truncated: written answers whose reply ended at the token limit.
        refused: written answers the model refused (written as abstained).
        empty: written answers with no text (written as abstained).
        duplicates: answers asked for twice (a question repeated in the file): answered once.
        resumed, written, failed, spend: see :class:`~dahl.results._counters.JobCounters`.
    """

    questions: int = 0
    answers: int = 0
    cached: int = 0
    truncated: int = 0
    refused: int = 0
    empty: int = 0
    duplicates: int = 0


class GenerateReport(JobReport[GenerateCounters]):
    """The outcome of a finished run (``out``: the answers file)."""
