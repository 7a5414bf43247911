"""``dahl score --dry-run``: the calls the cache cannot answer, their tokens, money and time bound.

The cache is read-only here; split misses have their claims estimated with the rule Splitter
(the first :data:`SAMPLE` answers, the rest scaled). Prompt tokens are characters / 4 of the
exact bodies; the time bound is ``max(calls / RPM, upper-bound tokens / TPM)`` per lane.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import anyio

from dahl.adapters._base import Checker, PreparedKeys
from dahl.adapters._bodies import max_tokens
from dahl.run._plan import AdapterSettings, open_adapters
from dahl.cache._table import DB_NAME
from dahl.cache._wrap import reparse_claims, reparse_verdict
from dahl.cache._store import CachedEntry, default_cache_dir
from dahl.cache._table import BatchReader
from dahl.config import EndpointConfig
from dahl.run._estimate import DEFAULT_COMPLETION_TOKENS, DryRunReport, StageEstimate, Tally, stage_estimate, time_bound
from dahl.errors import InputError
from dahl.formats import read_answers
from dahl.engine._scoring import prepare_answer
from dahl.pricing import PriceTable
from dahl.records import Answer, Claim, Verdict, content_id
from dahl.run._score import ScoreConfig


__all__ = ["CHUNK", "DEFAULT_COMPLETION_TOKENS", "SAMPLE", "DryRunReport", "StageEstimate", "dry_run", "dry_run_async"]

#: Answers read and prepared per worker-thread call.
CHUNK = 256
#: Answers rule-split to estimate the claims of splits not cached (the rest is scaled).
SAMPLE = 200


def dry_run(config: ScoreConfig) -> DryRunReport:
    """Estimate the calls, tokens, money and time of ``config`` without calling anything (blocking).

    Raises:
        ConfigError, InputError: as :func:`dahl.run._score.score` would for the same inputs
            (except an unset API key variable: nothing is sent).
        RuntimeError: called inside a running event loop (use :func:`dry_run_async`).
    """
    return anyio.run(dry_run_async, config)


async def dry_run_async(config: ScoreConfig) -> DryRunReport:
    """:func:`dry_run` in a running event loop (file and cache reads go to worker threads)."""
    settings = _keyless(config.adapters)
    table = (await anyio.to_thread.run_sync(PriceTable.shipped)).with_overrides(config.prices)
    split_cfg = settings.split_endpoint if settings.splitter == "openai" else None
    check_cfg = settings.check_endpoint if settings.checker == "openai" else None
    split_cap = 0 if split_cfg is None else max_tokens(split_cfg, "split")
    check_cap = 0 if check_cfg is None else max_tokens(check_cfg, "check")
    split, check = Tally(), Tally()
    answers = claims = estimated_claims = 0
    missing_checks: set[str] = set()  # keys of checks counted as calls (identical claims share one)
    missing_splits: set[str] = set()
    sample = Tally()  # split misses rule-split for the estimate: answers, claims, their check prompt tokens
    unsampled = 0  # split misses past the sample
    rules_sample = Tally()  # rule-split answers prepared (cached = answers): claims, check calls, prompt tokens
    unsampled_rules = 0  # rule-split answers past the sample (no cache: counted, not split)
    cache = "off"
    async with AsyncExitStack() as stack:
        splitter, checker, options, _ = await open_adapters(settings, stack)  # builds, sends nothing
        reader: BatchReader | None = None
        if config.use_cache and (split_cfg is not None or check_cfg is not None):
            reader, cache = await anyio.to_thread.run_sync(_open_reader, config.cache_dir)
            if reader is not None:
                stack.push_async_callback(anyio.to_thread.run_sync, reader.close)  # joins its thread
        split_version, check_version = splitter.parser_version, checker.parser_version
        prepare = checker if isinstance(checker, PreparedKeys) else None
        # Without a cache every call is a miss: past the sample, answers are counted, not prepared.
        chunks = _chunks(config, settings, options.preprocess, options.max_response_chars, exact=reader is not None)
        rules = settings.splitter == "rules"
        while chunk := await anyio.to_thread.run_sync(next, chunks, None):
            answers += chunk.read
            known: list[tuple[Answer, list[Claim]]] = []
            if split_cfg is not None:
                from dahl.adapters._bodies import estimate_tokens, split_request_body
                from dahl.cache._keys import split_key

                keys = [split_key(splitter, a) for a, _ in chunk.answers]
                found = await _look_up(reader, keys, split_version)
                for (answer, rule_claims), key, entry in zip(chunk.answers, keys, found, strict=True):
                    parts = _claims_of(splitter, entry, answer)
                    if parts is not None:
                        split.cached += 1
                        split.seen_completions.append(_split_completion(parts))
                        known.append((answer, parts))
                        continue
                    if key in missing_splits:  # an identical answer: one split, its checks shared
                        split.cached += 1
                        estimated_claims += len(rule_claims) if rule_claims is not None else 0
                        continue
                    missing_splits.add(key)
                    split.calls += 1
                    body = split_request_body(split_cfg, answer.question, answer.response)
                    split.prompt_tokens += estimate_tokens(body) - split_cap
                    if rule_claims is None:  # past the sample: scaled from it below
                        unsampled += 1
                        continue
                    estimated_claims += len(rule_claims)
                    sample.calls += 1
                    sample.estimated += len(rule_claims)
                    if check_cfg is not None:
                        before = check.prompt_tokens
                        _count_unknown(check, check_cfg, check_cap, answer, rule_claims)
                        sample.prompt_tokens += check.prompt_tokens - before
            else:
                for answer, prepared in chunk.answers:
                    if prepared is None and rules:  # past the sample: scaled from it below
                        unsampled_rules += 1
                        continue
                    known.append((answer, list(await splitter.split(answer))))
            for answer, parts in known:
                claims += len(parts)
                calls_before, prompt_before = check.calls, check.prompt_tokens
                if check_cfg is not None and parts:
                    await _count_checks(check, check_cfg, check_cap, checker, prepare, reader, check_version, answer,
                                        parts, missing_checks)
                if rules:
                    rules_sample.cached += 1  # answers
                    rules_sample.estimated += len(parts)
                    rules_sample.calls += check.calls - calls_before
                    rules_sample.prompt_tokens += check.prompt_tokens - prompt_before
    if unsampled and sample.calls:  # misses past the sample: its claims per answer and tokens per claim
        extra = round(unsampled * sample.estimated / sample.calls)
        estimated_claims += extra
        if check_cfg is not None:
            check.calls += extra
            check.estimated += extra
            check.prompt_tokens += round(extra * sample.prompt_tokens / max(sample.estimated, 1))
    if unsampled_rules and rules_sample.cached:  # rule-split answers past the sample, scaled per answer
        per = unsampled_rules / rules_sample.cached
        estimated_claims += round(per * rules_sample.estimated)
        check.calls += round(per * rules_sample.calls)
        check.estimated += round(per * rules_sample.calls)
        check.prompt_tokens += round(per * rules_sample.prompt_tokens)
    stages: list[tuple[StageEstimate, EndpointConfig]] = []
    if split_cfg is not None:
        stages.append((stage_estimate("split", split_cfg, split, split_cap), split_cfg))
    if check_cfg is not None:
        stages.append((stage_estimate("check", check_cfg, check, check_cap), check_cfg))
    cover = _cover_stage(config)
    if cover is not None:
        stages.append(cover)
    for i, (est, cfg) in enumerate(stages):
        stages[i] = (dataclasses.replace(est, price=table.price_for(cfg.model)), cfg)
    bound, bound_by = time_bound(stages)
    return DryRunReport(answers, claims + estimated_claims, estimated_claims == 0, tuple(s for s, _ in stages),
                        bound, bound_by, cache, table.date)


def _keyless(settings: AdapterSettings) -> AdapterSettings:
    """The settings with no API key read: nothing is sent, and keys are no part of cache keys."""
    def strip(cfg: EndpointConfig | None) -> EndpointConfig | None:
        return None if cfg is None else dataclasses.replace(cfg, api_key_env="")
    return dataclasses.replace(settings, split_endpoint=strip(settings.split_endpoint),
                               check_endpoint=strip(settings.check_endpoint))


def _open_reader(cache_dir: Path | None) -> tuple[BatchReader | None, str]:
    """A read-only reader of the cache database (blocking), or None and why not."""
    directory = cache_dir if cache_dir is not None else default_cache_dir()
    path = directory / DB_NAME
    if not path.is_file():
        return None, f"empty (no cache at {directory})"
    return BatchReader(path, read_only=True), "on"


async def _look_up(reader: BatchReader | None, keys: list[str], version: str) -> list[CachedEntry | None]:
    if reader is None or not keys:
        return [None] * len(keys)
    return await reader.read([(i, key, version) for i, key in enumerate(keys)])


def _claims_of(splitter: Any, entry: CachedEntry | None, answer: Answer) -> list[Claim] | None:
    """The claims a run takes from this cache entry (a raw reply re-parsed), or None (a split call)."""
    if entry is None:
        return None
    if isinstance(entry.value, list):
        return entry.value
    return reparse_claims(splitter, entry.raw, answer)


def _split_completion(parts: list[Claim]) -> int:
    """Completion tokens of a split reply that listed ``parts``: its JSON characters / 4."""
    return math.ceil((14 + sum(len(c.text) + 4 for c in parts)) / 4)


def _count_unknown(tally: Tally, cfg: EndpointConfig, cap: int, answer: Answer, texts: list[Claim]) -> None:
    """Checks of estimated claims: all calls (keys unknown before their split); ``cap``: their budget."""
    from dahl.adapters._bodies import check_request_body, estimate_tokens

    for claim in texts:
        tally.calls += 1
        tally.estimated += 1
        tally.prompt_tokens += estimate_tokens(check_request_body(cfg, answer.question, claim.text)) - cap


async def _count_checks(tally: Tally, cfg: EndpointConfig, cap: int, checker: Checker, prepare: PreparedKeys | None,
                        reader: BatchReader | None,
                        version: str, answer: Answer, parts: list[Claim], missing: set[str]) -> None:
    """Look the claims' check keys up as :meth:`dahl.cache.CachingChecker.look_up` does; ``cap``: a check's budget."""
    from dahl.adapters._bodies import check_request_body, estimate_tokens
    from dahl.cache._keys import check_keys

    if prepare is not None:
        await prepare.prepare_keys(parts, answer)
    keys = check_keys(checker, parts, answer)
    found = await _look_up(reader, keys, version)
    for claim, key, entry in zip(parts, keys, found, strict=True):
        verdict = _verdict_of(checker, entry)
        if verdict is not None:
            tally.cached += 1
            if verdict.usage is not None:
                tally.seen_completions.append(verdict.usage.completion_tokens)
            elif verdict.raw:
                tally.seen_completions.append(math.ceil(len(verdict.raw) / 4))
        elif key in missing:  # an identical claim is checked once
            tally.cached += 1
        else:
            missing.add(key)
            tally.calls += 1
            tally.prompt_tokens += estimate_tokens(check_request_body(cfg, answer.question, claim.text)) - cap


def _verdict_of(checker: Any, entry: CachedEntry | None) -> Verdict | None:
    if entry is None:
        return None
    if isinstance(entry.value, Verdict):
        return entry.value
    return reparse_verdict(checker, entry.raw)


@dataclass
class _Chunk:
    """Answers read in one thread call: how many, and those that need a split (with rule claims)."""

    read: int
    answers: list[tuple[Answer, list[Claim] | None]]


def _chunks(config: ScoreConfig, settings: AdapterSettings, clean: bool, limit: int, *,
            exact: bool) -> Iterator[_Chunk]:
    """Chunks of prepared answers (blocking: run each ``next`` in a worker thread).

    An answer over ``limit`` characters, or abstained, is left out (counted in ``read``). With the
    ``openai`` Splitter the first :data:`SAMPLE` answers come with their rule-split claims, the
    others with None (without ``exact`` those are not even preprocessed).
    """
    from dahl.adapters._rules import split_claims

    llm_split = settings.splitter == "openai"
    sampled = 0
    stream = (a for path in config.inputs
              for a in read_answers(path, config.fmt, response_column=config.response_column, fields=config.fields,
                                    on_error=_skip, needs=settings.input_needs))
    while batch := list(islice(stream, CHUNK)):
        kept: list[tuple[Answer, list[Claim] | None]] = []
        for answer in batch:
            if len(answer.response) > limit:
                continue
            in_sample = sampled < SAMPLE
            abstained = answer.abstained
            if not abstained and (exact or in_sample):  # as the split stage prepares it
                answer, abstained = prepare_answer(answer, clean)
            if abstained:
                continue
            sampled += 1
            parts: list[Claim] | None = None
            if in_sample:
                parts = [Claim(text=t, index=i) for i, (t, _, _) in enumerate(split_claims(answer.response))] \
                    if llm_split else []
            kept.append((answer, parts))
        yield _Chunk(len(batch), kept)


def _cover_stage(config: ScoreConfig) -> tuple[StageEstimate, EndpointConfig] | None:
    """The ``openai`` coverage judge's calls: per answer with a reference set and not marked
    abstained, one per 30 facts of F* (answers the preprocessor finds abstained are counted)."""
    recall = config.recall
    if recall is None or recall.judge_name(config.adapters.checker) != "openai":
        return None
    from dahl.adapters._bodies import budget
    from dahl.adapters._coverage import COVER_MAX_TOKENS, MAX_FACTS, cover_request_body
    from dahl.adapters._bodies import estimate_tokens
    from dahl.formats._refs import RefIndex, read_refs
    from dahl.metrics import fstar

    cfg = recall.endpoint or config.adapters.check_endpoint
    if cfg is None:
        return None
    cfg = dataclasses.replace(cfg, max_tokens=None) if recall.endpoint is None else cfg
    cap = budget(cfg, COVER_MAX_TOKENS)
    index = RefIndex(read_refs(recall.refs), file=str(recall.refs))
    tally = Tally()
    for path in config.inputs:
        for answer in read_answers(path, config.fmt, response_column=config.response_column, fields=config.fields,
                                   on_error=_skip, needs=config.adapters.input_needs):
            ref_set = index.find(content_id(answer.question), answer.question)
            if ref_set is None or answer.abstained:
                continue
            ranked = fstar(ref_set.facts, k=recall.fstar_k, min_importance=recall.fstar_min_importance,
                           alpha=recall.alpha, beta=recall.beta)
            facts = [f.text for f, _ in ranked]
            for start in range(0, len(facts), MAX_FACTS):
                body = cover_request_body(cfg, answer.question, answer.response, facts[start:start + MAX_FACTS],
                                          fmt=cfg.effective_format())
                tally.calls += 1
                tally.prompt_tokens += estimate_tokens(body) - cap
    return stage_estimate("cover", cfg, tally, cap), cfg


def _skip(_: InputError) -> None:
    """Bad records are skipped here as in a real run."""
