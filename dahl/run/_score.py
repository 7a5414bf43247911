"""One scoring run: inputs -> pipeline -> ``answers.jsonl`` + ``summary.json``.

:func:`score` is the public entry point; the CLI is a thin layer over it.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import logging
import math
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import orjson

from dahl.results import _manifest as manifest
from dahl.run._plan import AdapterSettings, open_adapters, used_templates
from dahl.adapters._recall import RecallCoverer, RecallSettings
from dahl.cache import AnswerCache, CacheStore, CachingChecker, CachingSplitter, default_cache_dir
from dahl.cache._wrap import code_digest
from dahl.cache._store import open_store
from dahl.results._counters import RunCounters
from dahl.results._index import InputIndex
from dahl.results._log import AnswerLog
from dahl.engine._options import CallSettings
from dahl.engine._pipeline import PipelineOptions, run_pipeline
from dahl.lanes._limiter import LimiterFactory
from dahl.lanes._memory import MemoryLimiters
from dahl.lanes._spend import Spend
from dahl.run._source import InputErrors, answer_source
from dahl.errors import ConfigError, OutputWriteError
from dahl.formats import FORMATS, read_answers
from dahl.formats._arrow import is_saved_dataset
from dahl.formats._inline import Input, as_inputs
from dahl.formats._lines import STDIN, check_input_path
from dahl.locking import FolderLock
from dahl.records import AnswerResult
from dahl.run._recall import RunRecall, open_recall
from dahl.run._report import ScoreReport, run_status, single_error
from dahl.analysis._summary import RunConfig, Summary, SummaryBuilder, TemplateUse
from dahl.analysis._verdicts import VerdictWriter
from dahl.run._outputs import collect, run_summary, write_summary

__all__ = ["ScoreConfig", "ScoreReport", "check_input_paths", "run_status", "score", "score_async"]

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ScoreConfig(CallSettings):
    """Everything one ``dahl score`` run needs, built at the edge (CLI or caller).

    Attributes:
        inputs: answer files and in-memory :class:`~dahl.formats._inline.Records`, read in order
            (a path, paths, or an iterable of Answers or dicts); ``-`` is standard input.
        out_dir: where ``answers.jsonl`` and ``summary.json`` go.
        fmt: input format name (see :data:`dahl.formats.FORMATS`) or ``"auto"``.
        response_column: column (field) holding the responses, or several (one answer each).
        fields: ``{dahl field: the input's field}`` (``--field question=prompt``).
        adapters: which Splitter and Checker, and their settings.
        gamma: FActScore length-penalty γ (10 in FActScore; 0 disables).
        k: K of F1@K (64 in SAFE).
        seed: seed of the bootstrap generator.
        n_boot: bootstrap resamples for confidence intervals.
        pipeline: concurrency and batching; None picks defaults from the adapters.
        recall: reference facts and recall settings (``--refs``); None = precision only.
        shard: score only this shard's answers (``--shard I/N``; see :class:`~dahl.results._manifest.Shard`);
            None = all. Without ``coord`` shard I of N takes 1/N of every limit, whether given,
            set in a config file or announced by the server, and of ``max_cost_usd``: the limits
            are the account's, and the N shards together stay within them.
        coord: ``redis://host:port/db[?run=NAME]``: the lanes' limits, pause, breaker trip and cost cap
            are shared with the run's other shards through Redis (:class:`~dahl.lanes._redis.RedisLimiters`);
            None = this process alone.
        cache_dir, use_cache, prices, max_cost_usd: keyword-only, see
            :class:`~dahl.engine._options.CallSettings`.
    """

    inputs: tuple[Input, ...]
    out_dir: Path
    fmt: str = "auto"
    response_column: str | tuple[str, ...] | None = None
    fields: dict[str, str] = field(default_factory=dict)
    adapters: AdapterSettings = field(default_factory=AdapterSettings)
    gamma: float = 10.0
    k: int = 64
    seed: int = 0
    n_boot: int = 1000
    pipeline: PipelineOptions | None = None
    recall: RecallSettings | None = None
    shard: manifest.Shard | None = None
    coord: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        object.__setattr__(self, "inputs", as_inputs(self.inputs))  # frozen: normalised once, here
        if not self.inputs:
            raise ConfigError("no input files given")
        if self.fmt != "auto" and self.fmt not in FORMATS:
            raise ConfigError(f"unknown format {self.fmt!r}; choose one of auto, {', '.join(FORMATS)}")
        check_input_paths(self.inputs, self.fmt)
        if self.inputs.count(STDIN) > 1:
            raise ConfigError("standard input (-) can be an input once only")
        if not math.isfinite(self.gamma) or self.gamma < 0:
            raise ConfigError(f"gamma must be a finite number >= 0 (0 disables the length penalty), got {self.gamma}")
        if self.k < 1:
            raise ConfigError("--k must be >= 1")
        if self.k >= 2**63:  # summary.json and verdicts/ hold it as a 64-bit integer
            raise ConfigError(f"--k must be below 2**63 claims, got {self.k}")


def check_input_paths(inputs: Iterable[Input], fmt: str) -> None:
    """Check that every path among ``inputs`` can be read as format ``fmt`` (``"auto"`` detects):
    a file, ``-`` or a FIFO; a folder only as a saved dataset. In-memory records pass.

    Raises:
        ConfigError: a path that does not exist, or is a folder or another kind of file.
    """
    for path in inputs:
        # hf reads save_to_disk folders, and hub names that are no path at all
        if isinstance(path, Path) and not (fmt == "hf" or (fmt == "auto" and is_saved_dataset(path))):
            check_input_path(path)


def _run_fingerprint(config: ScoreConfig, splitter_fp: str, checker_fp: str, recall_fp: str | None = None) -> bytes:
    """Bytes of everything that changes a result besides the answer (recall only when it is on)."""
    material: dict[str, object] = {"splitter": splitter_fp, "checker": checker_fp, "gamma": config.gamma,
                                   "k": config.k}
    if recall_fp is not None:
        material["recall"] = recall_fp
    return orjson.dumps(material, option=orjson.OPT_SORT_KEYS)


async def score_async(
    config: ScoreConfig,
    *,
    counters: RunCounters | None = None,
    on_result: Callable[[AnswerResult], None] | None = None,
) -> ScoreReport:
    """Score every answer of ``config.inputs``; resume what an earlier run finished.

    Args:
        config: the run's settings.
        counters: counters to update (pass your own to drive a progress bar).
        on_result: called on the event loop for every newly written result.

    Returns:
        The report; ``summary.json`` and ``answers.jsonl`` are on disk.

    Raises:
        ConfigError: bad settings, missing files or keys.
        InputError: only from adapters' own inputs; bad answer records are skipped and
            reported in ``ScoreReport.input_errors``.
        QuotaExhausted: the API quota ran out (or, as CostCapReached, the next call could pass
            ``config.max_cost_usd``); finished results are on disk and a re-run continues.
        FatalAPIError: an endpoint cannot work (bad key, unreachable, breaker tripped).
        OutputWriteError: an output file cannot be written; answers already written are kept.
    """
    counters = counters if counters is not None else RunCounters()
    out_dir = config.out_dir
    # Fail on an unreadable input (empty file, no response column) before touching OUTDIR.
    await anyio.to_thread.run_sync(_check_inputs, config)
    lock = await anyio.to_thread.run_sync(_lock_output, out_dir)
    try:
        return await _score_locked(config, counters, on_result)
    except BaseExceptionGroup as group:
        raise single_error(group) from group
    finally:
        lock.release()


@dataclass(frozen=True)
class _Parts:
    """The opened parts of one run (closed by the run's exit stack)."""

    splitter: CachingSplitter
    checker: CachingChecker
    options: PipelineOptions
    recall: RunRecall | None
    cache: CacheStore | None
    cache_state: str
    spend: Spend
    run_fp: bytes
    whole: AnswerCache | None

    @property
    def coverer(self) -> RecallCoverer | None:
        """The run's Coverer, None without reference facts."""
        return self.recall.coverer if self.recall is not None else None

    @property
    def config_hash(self) -> str:
        """Hex blake2b-128 of :attr:`run_fp`: the manifest's ``config_hash``."""
        return hashlib.blake2b(self.run_fp, digest_size=16).hexdigest()


@dataclass
class _Reading:
    """What the answer source records as it reads the input: rejected ``errors`` and the ``index`` of its answers."""

    errors: InputErrors
    index: InputIndex = field(default_factory=InputIndex)


async def _score_locked(
    config: ScoreConfig, counters: RunCounters, on_result: Callable[[AnswerResult], None] | None
) -> ScoreReport:
    """The body of :func:`score_async`, run while this process holds the output folder."""
    out_dir = config.out_dir
    started_at = manifest.now_utc()
    previous = await anyio.to_thread.run_sync(manifest.read_manifest, out_dir)
    # Input hashes are read beside the run (a thread of their own, not the loop's pool).
    hasher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dahl-input-hash")
    input_files = hasher.submit(manifest.hash_inputs, config.inputs)
    hasher.shutdown(wait=False)
    answer_log = AnswerLog(out_dir / "answers.jsonl")
    reading = _Reading(InputErrors(counters))
    async with AsyncExitStack() as stack:
        parts = await _open_parts(config, counters, stack)
        # From here answers.jsonl changes: the folder is stale until the run completes
        # (not before: a run refused for its settings leaves the last summary valid).
        await anyio.to_thread.run_sync(manifest.mark_started, out_dir, previous, started_at, parts.config_hash)
        await _run_stages(config, parts, counters, on_result, answer_log, reading)
    reading.errors.log_suppressed()
    summary, summary_path = await _summarize(config, parts, counters, answer_log, reading, input_files, previous,
                                             started_at)
    return ScoreReport(summary.as_builtins(), counters, reading.errors.first, answer_log.path, summary_path, summary)


async def _open_parts(config: ScoreConfig, counters: RunCounters, stack: AsyncExitStack) -> _Parts:
    """Open the run's adapters, lanes, spend meter, verdict store and Coverer on ``stack``.

    Raises:
        ConfigError: bad adapter or recall settings, missing files or keys.
    """
    adapters = config.adapters
    if adapters.evidence is not None and adapters.index_dir is None and config.use_cache:
        cache_root = config.cache_dir if config.cache_dir is not None else default_cache_dir()
        adapters = replace(adapters, index_dir=cache_root / "corpus-index")
    shards = config.shard.count if config.shard else 1
    limiters: LimiterFactory
    if config.coord is not None:
        from dahl.lanes._redis import RedisLimiters  # the redis package only when asked for

        spend = counters.spend = await config.open_spend()
        limiters = RedisLimiters(config.coord, shards=shards)
        stack.push_async_callback(limiters.aclose)
    else:  # shards pacing alone split the account's limits and the cap evenly
        spend = counters.spend = await config.open_spend(share=1.0 / shards)
        limiters = MemoryLimiters(shards=shards)
    inner_splitter, inner_checker, options, lanes = await open_adapters(adapters, stack, spend=spend,
                                                                        limiters=limiters)
    if len(lanes):
        counters.lane_statistics = lanes.statistics
    cache: CacheStore | None = None
    cache_state = "on" if config.use_cache else "off"
    if config.use_cache:  # an unusable cache folder warns and the run goes on without it
        opener: Callable[[Path], CacheStore] = CacheStore
        if config.coord is not None:  # the local store with Redis beside it, closed before it
            from dahl.cache._redis import RedisStore

            opener = functools.partial(RedisStore, url=config.coord)
        cache, unusable = await open_store(stack, config.cache_dir, opener=opener)
        if config.coord is not None and isinstance(cache, RedisStore):
            stack.push_async_callback(cache.aclose)
        if unusable is not None:
            cache_state = f"disabled ({unusable})"
    splitter = CachingSplitter(inner_splitter, cache, counters)
    checker = CachingChecker(inner_checker, cache, counters)
    if config.pipeline is not None:
        options = config.pipeline
    options = replace(options, gamma=config.gamma, k=config.k)
    recall = await open_recall(config.recall, config.adapters, stack, lanes, cache) if config.recall else None
    coverer = recall.coverer if recall is not None else None
    if recall is not None:
        if len(lanes):
            counters.lane_statistics = lanes.statistics
        if recall.endpoint is not None and config.pipeline is None:  # an LLM judge: as many covers as requests
            options = replace(options, cover_concurrency=recall.endpoint.max_in_flight)
    run_fp = _run_fingerprint(config, splitter.fingerprint, checker.fingerprint,
                              coverer.fingerprint if coverer is not None else None)
    if cache is not None:
        await anyio.to_thread.run_sync(code_digest)  # reads dahl's source once, off the loop
    whole = None if coverer is not None else AnswerCache.for_run(
        cache, splitter, checker, preprocess=options.preprocess, max_response_chars=options.max_response_chars
    )
    return _Parts(splitter, checker, options, recall, cache, cache_state, spend, run_fp, whole)


async def _run_stages(
    config: ScoreConfig,
    parts: _Parts,
    counters: RunCounters,
    on_result: Callable[[AnswerResult], None] | None,
    answer_log: AnswerLog,
    reading: _Reading,
) -> None:
    """Read the input and run split, check and cover into ``answers.jsonl``, which is closed on the way out.

    Raises:
        QuotaExhausted, FatalAPIError, OutputWriteError: as :func:`score_async`.
    """
    finished = await anyio.to_thread.run_sync(answer_log.finished_keys)
    await anyio.to_thread.run_sync(answer_log.open)
    # A full cyclic-GC pass over everything imported and built so far (modules,
    # a corpus index) takes ~50-100 ms and would stall the event loop mid-run:
    # leave those long-lived objects out of the collector until the run ends.
    gc.freeze()
    stopped = True  # until the pipeline returns: a failing close must not hide why it stopped
    try:
        await run_pipeline(
            answer_source(config.inputs, config.fmt, config.response_column, parts.run_fp, finished, reading.index,
                          reading.errors, config.adapters.input_needs, counters,
                          fields=config.fields, shard=config.shard),
            parts.splitter,
            parts.checker,
            answer_log,
            options=parts.options,
            counters=counters,
            on_result=on_result,
            whole=parts.whole,
            coverer=parts.coverer,
        )
        stopped = False
    finally:
        gc.unfreeze()
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_close_log, answer_log, stopped)


async def _summarize(
    config: ScoreConfig,
    parts: _Parts,
    counters: RunCounters,
    answer_log: AnswerLog,
    reading: _Reading,
    input_files: Future[list[dict[str, Any]]],
    previous: dict[str, Any] | None,
    started_at: str,
) -> tuple[Summary, Path]:
    """Read ``answers.jsonl`` into ``verdicts/`` and the summary; write summary.json and the manifest."""
    recall = parts.recall
    recall_settings = recall.settings(config.recall) if recall is not None and config.recall is not None else None
    builder = SummaryBuilder(gamma=config.gamma, k=config.k, seed=config.seed, n_boot=config.n_boot,
                             recall_settings=recall_settings)
    store = VerdictWriter(config.out_dir, gamma=config.gamma, k=config.k)
    collected = await collect(answer_log, reading.index, builder, store)
    run_config = RunConfig(
        inputs=[manifest.json_text(str(p)) for p in config.inputs], splitter=parts.splitter.fingerprint,
        checker=parts.checker.fingerprint, gamma=config.gamma, k=config.k, seed=config.seed,
        templates=[TemplateUse(**t) for t in used_templates(config.adapters,
                                                             recall.endpoint if recall is not None else None)],
    )
    summary = await run_summary(
        run_config, collected, counters, spend=parts.spend, cache_state=parts.cache_state, input_files=input_files,
        input_errors=reading.errors.first, previous=previous, started_at=started_at, config_hash=parts.config_hash,
        shard=config.shard,
    )
    return summary, await write_summary(summary, config.out_dir, answer_log, collected, parts.config_hash)


def _check_inputs(config: ScoreConfig) -> None:
    """Open every input as the run will (not a stream); raise ConfigError early."""
    for path in config.inputs:
        read_answers(path, config.fmt, response_column=config.response_column, fields=config.fields,
                     needs=config.adapters.input_needs)  # detects at call time


def _lock_output(out_dir: Path) -> FolderLock:
    """Create ``out_dir`` and lock it: two runs appending to one answers.jsonl would pay twice."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return FolderLock(
        out_dir,
        name=".dahl.lock",
        what="output folder",
        hint="wait for it to finish, or write to another folder with -o",
        error=ConfigError,
    )


def _close_log(answer_log: AnswerLog, stopped: bool) -> None:
    """Close ``answers.jsonl``; when the run is already stopping, a failure to close is logged, not raised."""
    try:
        answer_log.close()
    except OutputWriteError as exc:
        if not stopped:
            raise
        log.debug("closing after the run stopped: %s", exc)


def score(config: ScoreConfig) -> ScoreReport:
    """Blocking wrapper of :func:`score_async` (runs its own event loop).

    Raises:
        RuntimeError: called inside a running event loop (``await score_async(config)`` there).
        DahlError: as :func:`score_async`.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return anyio.run(score_async, config)
    raise RuntimeError(
        "dahl.score() cannot run inside a running event loop (a notebook or an async program); "
        "use `report = await dahl.score_async(config)` there"
    )
