"""``dahl score --dry-run``: the calls, tokens and time bound of a run, without calling anything.

Answers are streamed once and counted. Claims are known exactly when the input
carries them (``--splitter given``); otherwise they are estimated from the rule
Splitter's count on the first :data:`SAMPLE` answers, scaled to all answers.
Tokens per call are estimated on that sample from the exact request bodies the
``openai`` adapters would send (characters / 4 + ``max_tokens``, the amount the
lane reserves). The time bound comes from the configured limits only:
``max(calls / RPM, tokens / TPM)`` minutes per lane, stages on the same
endpoint sharing one lane; with no limits the run is latency-bound instead.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from dahl.config import EndpointConfig
from dahl.errors import InputError
from dahl.formats import read_answers
from dahl.preprocess import preprocess
from dahl.records import content_id
from dahl.run import ScoreConfig

__all__ = ["SAMPLE", "DryRunReport", "StageEstimate", "dry_run"]

#: Answers whose claims and request sizes are measured to estimate the rest.
SAMPLE = 200


@dataclass(frozen=True)
class StageEstimate:
    """Expected HTTP work of one stage.

    Attributes:
        stage: ``"split"`` or ``"check"``.
        endpoint: ``base_url model`` of the stage.
        calls: expected requests (first attempts; retries come on top).
        tokens_per_call: mean tokens reserved per request (prompt estimate + max_tokens).
        tokens: ``calls * tokens_per_call``.
    """

    stage: str
    endpoint: str
    calls: int
    tokens_per_call: float
    tokens: int


@dataclass(frozen=True)
class DryRunReport:
    """What a run would do.

    Attributes:
        answers: answers in the input (bad records excluded).
        claims: claims to check (exact or estimated, see ``claims_exact``).
        claims_exact: True when the input carries its claims.
        stages: per-stage HTTP estimates (empty for offline adapters).
        time_bound_s: lower bound on wall time from RPM/TPM limits, seconds; None
            when no stage has a limit.
        bound_by: what sets the bound, e.g. ``"check: 600 requests/min"``.
    """

    answers: int
    claims: int
    claims_exact: bool
    stages: tuple[StageEstimate, ...]
    time_bound_s: float | None
    bound_by: str | None


def dry_run(config: ScoreConfig) -> DryRunReport:
    """Estimate the calls, tokens and time of ``config`` without calling anything (blocking).

    Raises:
        ConfigError, InputError: as :func:`dahl.run.score` would for the same inputs.
    """
    from dahl.adapters.openai import check_request_body, estimate_tokens, split_request_body
    from dahl.adapters.rules import split_claims

    settings = config.adapters
    given = settings.splitter == "given"
    answers = 0
    known_claims = 0
    sample_claims = 0
    sampled = 0
    split_tokens: list[int] = []
    check_tokens: list[int] = []
    for path in config.inputs:
        for answer in read_answers(path, config.fmt, response_column=config.response_column, fields=config.fields,
                                   on_error=_skip, needs=settings.input_needs):  # counts what the run would score
            answers += 1
            if given:
                known_claims += len(answer.claims or ())
            if sampled >= SAMPLE:
                continue
            sampled += 1
            reason = answer.meta.get("finish_reason")  # as scoring reads it (dahl generate's answers)
            text = answer.response if given else preprocess(
                answer.question, answer.response, finish_reason=reason if isinstance(reason, str) else None).text
            texts = [c.text for c in answer.claims or ()] if given else [c[0] for c in split_claims(text)]
            sample_claims += len(texts)
            if settings.split_endpoint is not None and not given:
                split_tokens.append(estimate_tokens(split_request_body(settings.split_endpoint, answer.question, text)))
            if settings.check_endpoint is not None:
                check_tokens.extend(
                    estimate_tokens(check_request_body(settings.check_endpoint, answer.question, c)) for c in texts
                )
    claims = known_claims if given else round(sample_claims / max(sampled, 1) * answers)
    stages: list[tuple[StageEstimate, EndpointConfig]] = []
    cover = _cover_stage(config)
    if settings.splitter == "openai" and settings.split_endpoint is not None:
        stages.append((_estimate("split", settings.split_endpoint, answers, split_tokens), settings.split_endpoint))
    if settings.checker == "openai" and settings.check_endpoint is not None:
        stages.append((_estimate("check", settings.check_endpoint, claims, check_tokens), settings.check_endpoint))
    if cover is not None:
        stages.append(cover)
    bound, bound_by = _time_bound(stages)
    return DryRunReport(answers, claims, given, tuple(s for s, _ in stages), bound, bound_by)


def _cover_stage(config: ScoreConfig) -> tuple[StageEstimate, EndpointConfig] | None:
    """The ``openai`` coverage judge's calls: per answer with a reference set and not marked
    abstained, one per 30 facts of F* (answers the preprocessor finds abstained are counted)."""
    recall = config.recall
    if recall is None or recall.judge_name(config.adapters.checker) != "openai":
        return None
    from dahl.adapters.coverage_llm import MAX_FACTS, cover_request_body
    from dahl.adapters.openai import estimate_tokens
    from dahl.formats.refs import RefIndex, read_refs
    from dahl.metrics import fstar

    cfg = recall.endpoint or config.adapters.check_endpoint
    if cfg is None:
        return None
    cfg = dataclasses.replace(cfg, max_tokens=None) if recall.endpoint is None else cfg
    index = RefIndex(read_refs(recall.refs), file=str(recall.refs))
    calls = 0
    tokens: list[int] = []
    for path in config.inputs:
        for answer in read_answers(path, config.fmt, response_column=config.response_column, fields=config.fields,
                                   on_error=_skip, needs=config.adapters.input_needs):
            ref_set = index.find(content_id(answer.question), answer.question)
            if ref_set is None or answer.abstained:
                continue
            ranked = fstar(ref_set.facts, k=recall.fstar_k, min_importance=recall.fstar_min_importance,
                           alpha=recall.alpha, beta=recall.beta)
            facts = [f.text for f, _ in ranked]
            calls += math.ceil(len(facts) / MAX_FACTS)
            if facts and len(tokens) < SAMPLE:
                body = cover_request_body(cfg, answer.question, answer.response, facts[:MAX_FACTS],
                                          fmt=cfg.effective_format())
                tokens.append(estimate_tokens(body))
    return _estimate("cover", cfg, calls, tokens), cfg


def _skip(_: InputError) -> None:
    """Bad records are skipped here as in a real run."""


def _estimate(stage: str, cfg: EndpointConfig, calls: int, sample_tokens: list[int]) -> StageEstimate:
    per_call = sum(sample_tokens) / len(sample_tokens) if sample_tokens else 0.0
    return StageEstimate(stage, f"{cfg.base_url} {cfg.model}", calls, per_call, math.ceil(per_call * calls))


def _time_bound(stages: list[tuple[StageEstimate, EndpointConfig]]) -> tuple[float | None, str | None]:
    """Minutes each lane needs at its RPM and TPM; the slowest lane bounds the run."""
    lanes: dict[tuple[str, str, str | None], list[tuple[StageEstimate, EndpointConfig]]] = {}
    for est, cfg in stages:
        lanes.setdefault((cfg.base_url, cfg.model, cfg.api_key_env), []).append((est, cfg))
    best: tuple[float, str] | None = None
    for members in lanes.values():
        cfg = members[0][1]
        calls = sum(e.calls for e, _ in members)
        tokens = sum(e.tokens for e, _ in members)
        names = "+".join(e.stage for e, _ in members)
        for limit, amount, unit in ((cfg.rpm, calls, "requests/min"), (cfg.tpm, tokens, "tokens/min")):
            if limit:
                seconds = 60.0 * amount / limit
                if best is None or seconds > best[0]:
                    best = (seconds, f"{names}: {limit:g} {unit}")
    return (best[0], best[1]) if best else (None, None)
