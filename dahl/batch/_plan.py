"""The requests of one batch wave: what ``dahl score`` would send now that the cache cannot answer.

A wave is every request whose inputs are known: uncached splits, and the uncached checks and covers
of answers whose claims are known. A request's cache key (as the online run keys it) is its
``custom_id``; equal keys are one request.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace

import anyio

from dahl.adapters._base import Batched, Checker, PreparedKeys, Splitter
from dahl.adapters._bodies import split_request_body
from dahl.adapters._coverage import MAX_FACTS, OpenAICoverageJudge, cover_request_body
from dahl.adapters._recall import RecallSettings
from dahl.batch._requests import BatchRequest, StageMeta
from dahl.cache._keys import coverage_keys
from dahl.cache._keys import check_keys, split_key
from dahl.cache._store import open_store
from dahl.cache._wrap import reparse_claims, reparse_verdict
from dahl.cache._store import CacheStore, default_cache_dir
from dahl.config import EndpointConfig
from dahl.engine._scoring import prepare_answer
from dahl.errors import ConfigError
from dahl.formats import read_answers
from dahl.formats._refs import RefIndex
from dahl.lanes._lane import LanePool
from dahl.metrics import fstar
from dahl.records import Answer, Claim, Coverage, Verdict, content_id, normalize_text
from dahl.run._plan import open_adapters, open_judge
from dahl.run._recall import load_refs
from dahl.run._score import ScoreConfig
from dahl.run._source import InputErrors

__all__ = ["CoverPlanner", "Wave", "open_cover_planner", "plan_wave"]

#: Stored coverage values that answer a fact (``error`` is never stored).
_LABELS = frozenset(c.value.encode() for c in Coverage if c is not Coverage.ERROR)

@dataclass
class Wave:
    """The requests of a wave and what the cache already answered.

    Attributes:
        requests: the misses, de-duplicated by key, in input order.
        stages: :class:`StageMeta` of each stage that goes through an endpoint.
        answers: answers read (bad records skipped, as ``dahl score`` skips them).
        splits_cached: answers whose split the cache holds.
        checks_cached: claims whose verdict the cache holds.
        no_passage: claims no corpus passage matches (their verdict needs no call).
        facts_cached: facts of F* whose coverage the cache holds (recall's cover stage).
        waiting: answers whose checks (and covers) wait for their split (the next wave).
        skipped: bad input records skipped (each logged as ``dahl score`` logs it).
    """

    requests: list[BatchRequest] = field(default_factory=list)
    stages: dict[str, StageMeta] = field(default_factory=dict)
    answers: int = 0
    splits_cached: int = 0
    checks_cached: int = 0
    no_passage: int = 0
    facts_cached: int = 0
    waiting: int = 0
    skipped: int = 0


async def plan_wave(config: ScoreConfig) -> Wave:
    """Walk ``config``'s inputs as ``dahl score`` would and collect the requests of the current wave.

    Reads the cache (never writes it) and calls no endpoint.

    Raises:
        ConfigError: settings with nothing to batch (no ``openai`` Checker or coverage judge), or
            the cache is off or unusable.
        InputError: an adapter's own input is bad.
    """
    settings = config.adapters
    recall = config.recall
    judged = recall is not None and recall.judge_name(settings.checker) == "openai"
    if settings.checker != "openai" and not judged:
        raise ConfigError("batch mode needs --checker openai or --refs with --coverage openai: only their "
                          "requests go to a batch API")
    if not config.use_cache:
        raise ConfigError("batch mode needs the cache: collected results are stored there")
    if settings.evidence is not None and settings.index_dir is None:  # the corpus index dahl score saves
        root = config.cache_dir if config.cache_dir is not None else default_cache_dir()
        settings = replace(settings, index_dir=root / "corpus-index")
    wave = Wave()
    async with AsyncExitStack() as stack:
        splitter, checker, options, pool = await open_adapters(settings, stack)
        store, unusable = await open_store(stack, config.cache_dir)
        if store is None:
            raise ConfigError(f"batch mode needs the cache, which is unusable: {unusable}")
        split_cfg, check_cfg = settings.split_endpoint, settings.check_endpoint
        if settings.checker == "openai":
            assert check_cfg is not None  # open_adapters requires it for the openai Checker
            wave.stages["check"] = StageMeta(checker.fingerprint, checker.parser_version,
                                             check_cfg.base_url, check_cfg.model, check_cfg.api_key_env or "",
                                             with_evidence=settings.evidence is not None)
        cached_split = splitter.cacheable
        if cached_split and split_cfg is not None:
            wave.stages["split"] = StageMeta(splitter.fingerprint, splitter.parser_version,
                                             split_cfg.base_url, split_cfg.model, split_cfg.api_key_env or "")
        cover = None
        if recall is not None:
            cover = await open_cover_planner(recall, settings.checker, check_cfg, stack, pool, store)
            if cover is not None:
                wave.stages["cover"] = cover.meta
        planner = _Planner(wave, store, splitter, checker if settings.checker == "openai" else None,
                           split_cfg if cached_split else None, cover)
        errors = InputErrors()
        stream = _answers(config, errors)
        while chunk := await anyio.to_thread.run_sync(_prepared, stream, options.preprocess,
                                                      options.max_response_chars):
            for read, answer, skip in chunk:
                wave.answers += 1
                if not skip:  # too long (scored as ResponseTooLong, never sent) or abstained
                    await planner.add(read, answer)
        if cover is not None:
            wave.facts_cached = cover.facts_cached
        errors.log_suppressed()
        wave.skipped = errors.count
    return wave


class _Planner:
    """Adds each answer's missed requests to a wave (``checker``/``cover`` None: no call needed)."""

    def __init__(self, wave: Wave, store: CacheStore, splitter: Splitter, checker: Checker | None,
                 split_cfg: EndpointConfig | None, cover: CoverPlanner | None) -> None:
        self.wave, self.store, self.splitter, self.checker = wave, store, splitter, checker
        self.split_cfg, self.cover = split_cfg, cover
        self.split_version = splitter.parser_version
        self.check_version = checker.parser_version if checker is not None else "1"
        self.prepare = checker if isinstance(checker, PreparedKeys) else None
        self.batched = checker if isinstance(checker, Batched) else None
        self.seen: set[str] = set()

    async def add(self, read: Answer, answer: Answer) -> None:
        """Plan ``answer`` (``read`` preprocessed): its split request if not cached, else its missed checks and covers."""
        wave = self.wave
        if self.split_cfg is None:  # rules or given: claims known now
            claims = list(await self.splitter.split(answer))
        else:
            key = split_key(self.splitter, answer)
            found = await _cached_split(self.store, key, self.split_version, self.splitter, answer)
            if found is None:
                wave.waiting += 1
                if key not in self.seen:
                    self.seen.add(key)
                    body = split_request_body(self.split_cfg, answer.question, answer.response)
                    wave.requests.append(BatchRequest(key, "split", body))
                return
            wave.splits_cached += 1
            claims = found
        if self.cover is not None:  # the online run covers the answer as scored: as read when it has no claims
            for request in await self.cover.requests(answer, answer.response if claims else read.response):
                self._append(request)
        if claims and self.checker is not None:
            await self._checks(claims, answer, self.checker)

    async def _checks(self, claims: list[Claim], answer: Answer, checker: Checker) -> None:
        """The check requests of ``claims`` whose verdicts the cache does not hold."""
        wave = self.wave
        if self.prepare is not None:
            await self.prepare.prepare_keys(claims, answer)  # the passages' retrieval, in a worker thread
        keys = check_keys(checker, claims, answer)
        entries = await self.store.get_many(keys, parser_version=self.check_version)
        batched = self.batched
        if batched is None:
            raise ConfigError(f"batch mode cannot send the requests of {checker.fingerprint}")
        for claim, key, entry in zip(claims, keys, entries, strict=True):
            if entry is not None and (isinstance(entry.value, Verdict) or _reparses(checker, entry.raw)):
                wave.checks_cached += 1
            elif key not in self.seen:
                made = batched.request_of(claim, answer)
                if made is None:
                    self.seen.add(key)
                    wave.no_passage += 1
                    continue
                body, evidence = made
                self._append(BatchRequest(key, "check", body, evidence=evidence))

    def _append(self, request: BatchRequest) -> None:
        if request.custom_id not in self.seen:
            self.seen.add(request.custom_id)
            self.wave.requests.append(request)


#: Answers read and preprocessed per worker-thread hop.
CHUNK = 512


def _answers(config: ScoreConfig, errors: InputErrors) -> Iterator[Answer]:
    """Every answer of the inputs, bad records given to ``errors`` as a run gives them (lazy; blocking reads)."""
    for path in config.inputs:
        yield from read_answers(path, config.fmt, response_column=config.response_column, fields=config.fields,
                                on_error=errors, needs=config.adapters.input_needs)


def _prepared(stream: Iterator[Answer], preprocess: bool, max_chars: int) -> list[tuple[Answer, Answer, bool]]:
    """The next :data:`CHUNK` answers as the pipeline prepares them, with "skip it" (blocking)."""
    out: list[tuple[Answer, Answer, bool]] = []
    for read in itertools.islice(stream, CHUNK):
        if len(read.response) > max_chars:
            out.append((read, read, True))
            continue
        answer, abstained = read, read.abstained
        if not abstained:
            answer, abstained = prepare_answer(read, preprocess)
        out.append((read, answer, abstained))
    return out


async def _cached_split(store: CacheStore, key: str, version: str, splitter: object,
                        answer: Answer) -> list[Claim] | None:
    """The cached claims of ``key`` (a stored raw reply re-parsed), or None."""
    entry = await store.get(key, parser_version=version)
    if entry is None:
        return None
    if isinstance(entry.value, list):
        return entry.value
    return reparse_claims(splitter, entry.raw, answer)


def _reparses(checker: object, raw: str | None) -> bool:
    """Whether a stored raw reply (from an older parser) still parses: then the run needs no call."""
    return reparse_verdict(checker, raw) is not None


class CoverPlanner:
    """Adds the missed cover requests of answers to a wave.

    Args:
        index: the reference sets.
        judge: the run's openai coverage judge (its fingerprint keys the cache).
        cfg: the judge's endpoint.
        settings: F* cut and weights.
        store: the cache (read only).

    Attributes:
        meta: the stage's settings for ``collect``.
        facts_cached: facts of F* the cache already answers.
    """

    def __init__(self, index: RefIndex, judge: OpenAICoverageJudge, cfg: EndpointConfig, settings: RecallSettings,
                 store: CacheStore) -> None:
        self._index, self._judge, self._cfg, self._settings, self._store = index, judge, cfg, settings, store
        self._version = str(judge.parser_version)
        self.meta = StageMeta(judge.fingerprint, self._version, cfg.base_url, cfg.model, cfg.api_key_env or "")
        self.facts_cached = 0

    async def requests(self, answer: Answer, response: str) -> list[BatchRequest]:
        """The cover requests ``answer`` still needs, judging ``response`` (empty: none, or all cached)."""
        ref_set = self._index.find(content_id(answer.question), answer.question)
        if ref_set is None:
            return []
        s = self._settings
        ranked = fstar(ref_set.facts, k=s.fstar_k, min_importance=s.fstar_min_importance, alpha=s.alpha, beta=s.beta)
        facts = [f.text for f, _ in ranked]
        if not facts:
            return []
        fingerprint = self._judge.fingerprint
        keys = coverage_keys(fingerprint, answer.question, response, facts)
        found = await self._store.get_many(keys, parser_version=self._version)
        missing = [i for i, entry in enumerate(found) if entry is None or entry.value not in _LABELS]
        self.facts_cached += len(facts) - len(missing)
        question = normalize_text(answer.question)
        out = []
        for start in range(0, len(missing), MAX_FACTS):
            chunk = missing[start:start + MAX_FACTS]
            texts = [normalize_text(facts[i]) for i in chunk]
            body = cover_request_body(self._cfg, question, response, texts, fmt=self._cfg.effective_format())
            chunk_keys = tuple(keys[i] for i in chunk)
            custom_id = hashlib.blake2b("\n".join(("cover", *chunk_keys)).encode(), digest_size=16).hexdigest()
            out.append(BatchRequest(custom_id, "cover", body, keys=chunk_keys))
        return out


async def open_cover_planner(recall: RecallSettings, checker: str, check_endpoint: EndpointConfig | None,
                             stack: AsyncExitStack, pool: LanePool, store: CacheStore) -> CoverPlanner | None:
    """The cover planner of a run with the ``openai`` coverage judge, else None (refs read in a thread).

    Raises:
        ConfigError: the judge's key variable is unset; InputError: a malformed refs line.
    """
    if recall.judge_name(checker) != "openai":
        return None
    index, _ = await anyio.to_thread.run_sync(load_refs, recall.refs)
    cfg = recall.endpoint
    if cfg is None and check_endpoint is not None:
        cfg = dataclasses.replace(check_endpoint, max_tokens=None)
    judge = await open_judge("openai", cfg, stack, pool)
    assert isinstance(judge, OpenAICoverageJudge) and cfg is not None
    return CoverPlanner(index, judge, cfg, recall, store)
