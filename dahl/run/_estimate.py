"""The estimate of a run: per-stage calls, tokens, money and the time bound that limits
set; what ``dahl score --dry-run`` reports (counted by :mod:`dahl.run._dryrun`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dahl.config import EndpointConfig
from dahl.pricing import PER_TOKENS, Price

__all__ = ["DEFAULT_COMPLETION_TOKENS", "DryRunReport", "StageEstimate", "Tally", "stage_estimate", "time_bound"]

#: Completion tokens per call when the cache holds no reply of the stage: a split lists
#: ~20 claims of ~15 tokens; a check is a label and a one-sentence reason; a cover
#: labels up to 30 facts.
DEFAULT_COMPLETION_TOKENS = {"split": 300, "check": 40, "cover": 200}


@dataclass
class Tally:
    """Running counts of one stage, as the dry run finds them.

    Attributes:
        calls: requests the cache cannot answer.
        cached: requests the cache answers.
        estimated: of ``calls``, those for claims estimated by the rule Splitter.
        prompt_tokens: prompt tokens of ``calls`` (chars / 4).
        seen_completions: completion tokens of the cached replies seen.
    """

    calls: int = 0
    cached: int = 0
    estimated: int = 0
    prompt_tokens: int = 0
    seen_completions: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class StageEstimate:
    """Expected HTTP work and money of one stage.

    Attributes:
        stage: ``"split"``, ``"check"`` or ``"cover"``.
        endpoint: ``base_url model`` of the stage.
        model: the model called.
        calls: requests the cache cannot answer (first attempts; retries come on top).
        cached: requests the cache answers (not sent).
        estimated_calls: of ``calls``, those for claims estimated by the rule Splitter.
        prompt_tokens: prompt tokens of the ``calls`` (chars / 4).
        completion_per_call: completion tokens expected per call.
        completion_from: ``"mean of N cached replies"`` or ``"default: no cached reply"``.
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


def stage_estimate(stage: str, cfg: EndpointConfig, tally: Tally, cap: int) -> StageEstimate:
    """The :class:`StageEstimate` of ``tally`` (price unset): completions per call are the mean
    of the cached replies seen, else :data:`DEFAULT_COMPLETION_TOKENS` (at most ``cap``, the
    stage's completion budget)."""
    seen = tally.seen_completions
    if seen:
        per_call, source = sum(seen) / len(seen), f"mean of {len(seen):,} cached replies"
    else:
        per_call, source = float(min(DEFAULT_COMPLETION_TOKENS[stage], cap)), "default: no cached reply"
    return StageEstimate(stage, f"{cfg.base_url} {cfg.model}", cfg.model, tally.calls, tally.cached, tally.estimated,
                         tally.prompt_tokens, per_call, source, cap, None)


def time_bound(stages: list[tuple[StageEstimate, EndpointConfig]]) -> tuple[float | None, str | None]:
    """Minutes each lane needs at its RPM and TPM (upper-bound tokens); the slowest lane bounds the run."""
    lanes: dict[tuple[str, str, str | None], list[tuple[StageEstimate, EndpointConfig]]] = {}
    for est, cfg in stages:
        lanes.setdefault((cfg.base_url, cfg.model, cfg.api_key_env), []).append((est, cfg))
    best: tuple[float, str] | None = None
    for members in lanes.values():
        cfg = members[0][1]
        calls = sum(e.calls for e, _ in members)
        tokens = sum(e.tokens_upper for e, _ in members)
        names = "+".join(e.stage for e, _ in members)
        for limit, amount, unit in ((cfg.rpm, calls, "requests/min"), (cfg.tpm, tokens, "tokens/min")):
            if limit:
                seconds = 60.0 * amount / limit
                if best is None or seconds > best[0]:
                    best = (seconds, f"{names}: {limit:g} {unit}")
    return (best[0], best[1]) if best else (None, None)
