"""What ``dahl score --dry-run`` reports: per-stage calls, tokens and money (:mod:`dahl.run._dryrun`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dahl.pricing import PER_TOKENS, Price

__all__ = ["DryRunReport", "StageEstimate"]


@dataclass(frozen=True)
class StageEstimate:
    """Expected HTTP work and money of one stage.

    Attributes:
        stage: ``"split"``, ``"check"`` or ``"cover"``.
        endpoint: ``base_url model`` of the stage.
        model: the model called.
        calls: requests the cache cannot answer (first attempts; retries come on top).
        cached: requests the cache answers (not sent).
        estimated_calls: of ``calls``, those for claims estimated by the rule Splitter
            (their answers' split is not cached); 0 when every claim is known.
        prompt_tokens: prompt tokens of the ``calls``, from the request bodies (chars / 4).
        completion_per_call: completion tokens expected per call.
        completion_from: where ``completion_per_call`` comes from: ``"mean of N cached
            replies"`` or ``"default: no cached reply"`` (:data:`DEFAULT_COMPLETION_TOKENS`).
        max_tokens: completion cap per call, tokens.
        price: the model's price, None when unknown.
    """

    stage: str
    endpoint: str
    model: str
    calls: int
    cached: int
    estimated_calls: int
    prompt_tokens: int
    completion_per_call: float
    completion_from: str
    max_tokens: int
    price: Price | None

    @property
    def tokens(self) -> int:
        """Estimated tokens of the calls: prompts + expected completions."""
        return self.prompt_tokens + math.ceil(self.completion_per_call * self.calls)

    @property
    def tokens_upper(self) -> int:
        """Upper bound: prompts + ``max_tokens`` per call (what the lane reserves)."""
        return self.prompt_tokens + self.max_tokens * self.calls

    @property
    def tokens_per_call(self) -> float:
        """Mean upper-bound tokens per call (prompt estimate + max_tokens)."""
        return self.tokens_upper / self.calls if self.calls else 0.0

    @property
    def usd(self) -> float | None:
        """Estimated money of the calls, USD; None when the price is unknown."""
        return self._usd(self.completion_per_call * self.calls)

    @property
    def usd_upper(self) -> float | None:
        """Upper bound of the money, USD (completions at ``max_tokens``); None when the price is unknown."""
        return self._usd(float(self.max_tokens * self.calls))

    def _usd(self, completion: float) -> float | None:
        p = self.price
        return None if p is None else (self.prompt_tokens * p.input_usd + completion * p.output_usd) / PER_TOKENS


@dataclass(frozen=True)
class DryRunReport:
    """What a run would do.

    Attributes:
        answers: answers in the input (bad records excluded).
        claims: claims to check (known, plus estimated for answers whose split is a miss).
        claims_exact: True when every claim is known (given, rule-split or cached splits).
        stages: per-stage HTTP estimates (empty for offline adapters).
        time_bound_s: lower bound on wall time from RPM/TPM limits, seconds; None
            when no stage has a limit.
        bound_by: what sets the bound, e.g. ``"check: 600 requests/min"``.
        cache: ``"on"``, ``"off"`` (``--no-cache``) or why it was not consulted.
        price_table_date: date of the shipped price table.
    """

    answers: int
    claims: int
    claims_exact: bool
    stages: tuple[StageEstimate, ...]
    time_bound_s: float | None
    bound_by: str | None
    cache: str = "off"
    price_table_date: str = ""

    @property
    def calls(self) -> int:
        """Requests of every stage the cache cannot answer."""
        return sum(s.calls for s in self.stages)

    @property
    def usd(self) -> float | None:
        """Estimated money of the run, USD; None when a stage that calls has no price."""
        return _total([s.usd for s in self.stages if s.calls])

    @property
    def usd_upper(self) -> float | None:
        """Upper bound of the money, USD; None when a stage that calls has no price."""
        return _total([s.usd_upper for s in self.stages if s.calls])


def _total(values: list[float | None]) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)
