"""The requests of one batch wave: what ``dahl score`` would send now that the cache cannot answer.

A wave is every request whose inputs are known: the split request of each answer
whose split is not cached, and the check request of each claim (of an answer whose
claims are known: cached split, rule or given Splitter) whose verdict is not cached.
Once a split wave is collected, the next wave holds those answers' checks. Each
request is keyed exactly as the online run keys it (:mod:`dahl.cache.keys`), and
that key becomes the provider's ``custom_id``; equal keys are one request.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from dahl.adapters.base import Checker, Splitter
from dahl.adapters.bodies import check_request_body, split_request_body
from dahl.adapters.factory import open_adapters
from dahl.cache.keys import check_keys, split_key
from dahl.cache.opening import open_store
from dahl.cache.store import CacheStore
from dahl.config import EndpointConfig
from dahl.engine.scoring import prepare_answer
from dahl.errors import ConfigError, DahlError, InputError
from dahl.formats import read_answers
from dahl.records import Answer, Claim, Verdict, normalize_text
from dahl.run import ScoreConfig

__all__ = ["BatchRequest", "Stage", "StageMeta", "Wave", "plan_wave"]

Stage = Literal["split", "check"]


@dataclass(frozen=True)
class BatchRequest:
    """One request of a wave.

    Attributes:
        custom_id: the result's cache key (32 hex digits, :mod:`dahl.cache.keys`).
        stage: ``"split"`` or ``"check"``.
        body: the chat-completions body the online adapter would send.
    """

    custom_id: str
    stage: Stage
    body: dict[str, Any]


@dataclass(frozen=True)
class StageMeta:
    """What :mod:`dahl.batch.collect` needs to store a stage's replies as the online adapter would.

    Attributes:
        fingerprint: the adapter's fingerprint (a verdict's ``checker``).
        parser_version: the adapter's parser version (names the stored value).
        base_url: the endpoint's API root.
        model: the endpoint's model.
        api_key_env: the environment variable holding its key (``""``: keyless).
    """

    fingerprint: str
    parser_version: str
    base_url: str
    model: str
    api_key_env: str


@dataclass
class Wave:
    """The requests of a wave and what the cache already answered.

    Attributes:
        requests: the misses, de-duplicated by key, in input order.
        stages: :class:`StageMeta` of each stage that goes through an endpoint.
        answers: answers read (bad records skipped, as ``dahl score`` skips them).
        splits_cached: answers whose split the cache holds.
        checks_cached: claims whose verdict the cache holds.
        waiting: answers whose checks wait for their split (the next wave).
    """

    requests: list[BatchRequest] = field(default_factory=list)
    stages: dict[str, StageMeta] = field(default_factory=dict)
    answers: int = 0
    splits_cached: int = 0
    checks_cached: int = 0
    waiting: int = 0


async def plan_wave(config: ScoreConfig) -> Wave:
    """Walk ``config``'s inputs as ``dahl score`` would and collect the requests of the current wave.

    Reads the cache (never writes it) and calls no endpoint.

    Args:
        config: the run's settings; the Checker must be ``openai`` without ``--evidence``
            and the Splitter ``rules``, ``given`` or ``openai``.

    Returns:
        The wave.

    Raises:
        ConfigError: settings batch mode does not support (another Checker, a corpus,
            recall), or the cache is off or unusable.
        InputError: an adapter's own input is bad.
    """
    settings = config.adapters
    if settings.checker != "openai" or settings.evidence is not None:
        raise ConfigError("batch mode needs --checker openai (without --evidence): only its requests go to a batch API")
    if config.recall is not None:
        raise ConfigError("batch mode does not batch recall's cover stage yet; score recall online")
    if not config.use_cache:
        raise ConfigError("batch mode needs the cache: collected results are stored there")
    wave = Wave()
    async with AsyncExitStack() as stack:
        splitter, checker, options, _ = await open_adapters(settings, stack)
        store, unusable = await open_store(stack, config.cache_dir)
        if store is None:
            raise ConfigError(f"batch mode needs the cache, which is unusable: {unusable}")
        split_cfg, check_cfg = settings.split_endpoint, settings.check_endpoint
        assert check_cfg is not None  # open_adapters requires it for the openai Checker
        check_version = str(getattr(checker, "parser_version", "1"))
        split_version = str(getattr(splitter, "parser_version", "1"))
        wave.stages["check"] = StageMeta(checker.fingerprint, check_version, check_cfg.base_url, check_cfg.model,
                                         check_cfg.api_key_env or "")
        cached_split = getattr(splitter, "cacheable", True)
        if cached_split and split_cfg is not None:
            wave.stages["split"] = StageMeta(splitter.fingerprint, split_version, split_cfg.base_url, split_cfg.model,
                                             split_cfg.api_key_env or "")
        planner = _Planner(wave, store, splitter, checker, split_cfg if cached_split else None, check_cfg)
        stream = _answers(config)
        while chunk := await anyio.to_thread.run_sync(_prepared, stream, options.preprocess,
                                                      options.max_response_chars):
            for answer, skip in chunk:
                wave.answers += 1
                if not skip:  # too long (scored as ResponseTooLong, never sent) or abstained
                    await planner.add(answer)
    return wave


class _Planner:
    """Adds each answer's missed requests to a wave (split, or the checks of known claims)."""

    def __init__(self, wave: Wave, store: CacheStore, splitter: Splitter, checker: Checker,
                 split_cfg: EndpointConfig | None, check_cfg: EndpointConfig) -> None:
        self.wave, self.store, self.splitter, self.checker = wave, store, splitter, checker
        self.split_cfg, self.check_cfg = split_cfg, check_cfg
        self.split_version = str(getattr(splitter, "parser_version", "1"))
        self.check_version = str(getattr(checker, "parser_version", "1"))
        self.seen: set[str] = set()

    async def add(self, answer: Answer) -> None:
        """Plan ``answer`` (preprocessed): its split request if not cached, else its missed checks."""
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
        if not claims:
            return
        keys = check_keys(self.checker, claims, answer)
        entries = await self.store.get_many(keys, parser_version=self.check_version)
        question = normalize_text(answer.question)
        for claim, key, entry in zip(claims, keys, entries, strict=True):
            if entry is not None and (isinstance(entry.value, Verdict) or _reparses(self.checker, entry.raw)):
                wave.checks_cached += 1
            elif key not in self.seen:
                self.seen.add(key)
                body = check_request_body(self.check_cfg, question, normalize_text(claim.text))
                wave.requests.append(BatchRequest(key, "check", body))


#: Answers read and preprocessed per worker-thread hop.
CHUNK = 512


def _answers(config: ScoreConfig) -> Iterator[Answer]:
    """Every answer of the inputs, bad records skipped as a run skips them (lazy; blocking reads)."""
    for path in config.inputs:
        yield from read_answers(path, config.fmt, response_column=config.response_column, fields=config.fields,
                                on_error=_skip, needs=config.adapters.input_needs)


def _prepared(stream: Iterator[Answer], preprocess: bool, max_chars: int) -> list[tuple[Answer, bool]]:
    """The next :data:`CHUNK` answers, preprocessed as the pipeline does, each with "skip it" (blocking).

    Skipped: a response over ``max_chars`` (the run scores it ResponseTooLong) or an
    abstention (no claims).
    """
    out: list[tuple[Answer, bool]] = []
    for answer in itertools.islice(stream, CHUNK):
        if len(answer.response) > max_chars:
            out.append((answer, True))
            continue
        abstained = answer.abstained
        if preprocess and not abstained:
            answer, abstained = prepare_answer(answer)
        out.append((answer, abstained))
    return out


def _skip(_: InputError) -> None:
    """A bad record is reported by ``dahl score``; here it makes no request."""


async def _cached_split(store: CacheStore, key: str, version: str, splitter: object,
                        answer: Answer) -> list[Claim] | None:
    """The cached claims of ``key`` (a stored raw reply re-parsed), or None."""
    entry = await store.get(key, parser_version=version)
    if entry is None:
        return None
    if isinstance(entry.value, list):
        return entry.value
    parse = getattr(splitter, "parse_raw", None)
    if entry.raw is None or parse is None:
        return None
    try:
        claims: list[Claim] = parse(entry.raw, answer)
    except DahlError:
        return None
    return claims


def _reparses(checker: object, raw: str | None) -> bool:
    """Whether a stored raw reply (from an older parser) still parses: then the run needs no call."""
    parse = getattr(checker, "parse_raw", None)
    if raw is None or parse is None:
        return False
    try:
        parse(raw)
    except DahlError:
        return False
    return True
