"""The commands of a batch folder: prepare, submit, status, collect, resubmit, cancel.

Each appends what it did to the ledger before moving on, so a restart submits and collects
nothing twice.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import orjson

from dahl.batch._collect import Collected, parse_outcomes, read_results, store_puts, write_results
from dahl.batch._extras import Extra, read_extras, write_extras
from dahl.batch._ledger import Ledger, Shard
from dahl.batch._plan import plan_wave
from dahl.batch._requests import StageMeta
from dahl.batch._providers import (BATCH_RETRY, BatchClient, BatchState, Outcome, ShardTag, client_for,
                                   parse_openai_line)
from dahl.batch._shards import LIMITS, Limits, Provider, write_lines, write_shards
from dahl.cache._store import open_store
from dahl.cache._store import default_cache_dir
from dahl.config import resolve_api_key, EndpointConfig
from dahl.lanes._retry import RetryPolicy
from dahl.errors import ConfigError, InputError
from dahl.formats._rows import jsonl_rows
from dahl.run._score import ScoreConfig

__all__ = ["CollectReport", "Prepared", "ShardStatus", "cancel", "collect", "prepare", "resubmit", "status", "submit"]

log = logging.getLogger(__name__)

#: Seconds of one provider HTTP call before it is given up (uploads of 200 MB take a while).
HTTP_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Prepared:
    """What ``prepare`` wrote.

    Attributes:
        shards: ``(path relative to BATCHDIR, stage, requests)`` per file written.
        requests: requests written (all shards).
        answers, splits_cached, checks_cached, waiting: as :class:`~dahl.batch._plan.Wave`.
        no_passage, facts_cached: as :class:`~dahl.batch._plan.Wave`.
        pending: misses left out because a shard not yet collected holds them.
        skipped: bad input records skipped (logged one by one, as ``dahl score`` does).
    """

    shards: tuple[tuple[str, str, int], ...]
    requests: int
    answers: int
    splits_cached: int
    checks_cached: int
    waiting: int
    pending: int
    no_passage: int = 0
    facts_cached: int = 0
    skipped: int = 0


async def prepare(config: ScoreConfig, folder: Path, provider: Provider, limits: Limits | None = None) -> Prepared:
    """Write the current wave's cache misses as shards of ``provider`` in ``folder``.

    Raises:
        ConfigError: see :func:`~dahl.batch._plan.plan_wave`; a folder prepared for another provider.
    """
    ledger = await anyio.to_thread.run_sync(Ledger.read, folder)
    if ledger.waves and ledger.waves[0]["provider"] != provider:
        raise ConfigError(f"{folder} holds {ledger.waves[0]['provider']} batches; prepare {provider} in another folder")
    wave = await plan_wave(config)
    open_ids = await anyio.to_thread.run_sync(_open_ids, ledger)
    requests = [r for r in wave.requests if r.custom_id not in open_ids]
    pending = len(wave.requests) - len(requests)
    written: list[tuple[str, str, int]] = []
    if requests:
        number = ledger.next_wave
        extras = [Extra(r.custom_id, r.keys, r.evidence) for r in requests if r.keys or r.evidence]
        await anyio.to_thread.run_sync(write_extras, folder / f"wave-{number:02d}", extras)
        for stage in ("split", "check", "cover"):
            chosen = [r for r in requests if r.stage == stage]
            if chosen:
                files = await anyio.to_thread.run_sync(write_shards, folder / f"wave-{number:02d}", stage, provider,
                                                       chosen, limits or LIMITS[provider])
                written.extend((str(p.relative_to(folder)), stage, n) for p, n in files)
        cache_dir = config.cache_dir if config.cache_dir is not None else default_cache_dir()
        event = {"event": "wave", "wave": number, "provider": provider, "resubmit_of": None, "only": None,
                 "cache_dir": str(cache_dir),
                 "stages": {k: dataclasses.asdict(v) for k, v in wave.stages.items()},
                 "shards": [{"path": p, "stage": s, "requests": n} for p, s, n in written]}
        await anyio.to_thread.run_sync(ledger.append, event)
    return Prepared(tuple(written), len(requests), wave.answers, wave.splits_cached, wave.checks_cached,
                    wave.waiting, pending, wave.no_passage, wave.facts_cached, wave.skipped)


def _open_ids(ledger: Ledger) -> set[str]:
    """custom_ids of shards not collected: their results are still to come (blocking)."""
    ids: set[str] = set()
    for shard in ledger.shards.values():
        if shard.collected is None:
            ids.update(_ids_of(ledger.folder / shard.path))
    return ids


def _shard_lines(path: Path) -> list[bytes]:
    """The non-blank lines of the prepared shard ``path`` (blocking).

    Raises:
        InputError: the file is missing or unreadable (named).
    """
    try:
        return [line for line in path.read_bytes().splitlines() if line.strip()]
    except OSError as exc:
        raise InputError(f"cannot read the prepared batch file the ledger names: {exc.strerror}",
                         file=str(path)) from None


def _ids_of(path: Path) -> list[str]:
    return [orjson.loads(line)["custom_id"] for line in _shard_lines(path)]


async def _open_client(stack: AsyncExitStack, ledger: Ledger, base_url: str | None,
                       api_key_env: str | None, retry: RetryPolicy) -> BatchClient:
    """The provider's client: base URL and key variable as given, else as prepared (the check endpoint's)."""
    first = ledger.waves[0]
    stage = first["stages"].get("check") or next(iter(first["stages"].values()))
    url = base_url or stage["base_url"]
    env = stage["api_key_env"] if api_key_env is None else api_key_env
    if first["provider"] == "anthropic" and api_key_env is None and env == "OPENAI_API_KEY":
        env = "ANTHROPIC_API_KEY"  # the default for an OpenAI-style URL is not Anthropic's key
    key = resolve_api_key(EndpointConfig(base_url=url, model=stage["model"], api_key_env=env))
    session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=HTTP_TIMEOUT_S))
    stack.push_async_callback(session.close)
    return client_for(first["provider"], session, url, key, retry=retry)


async def submit(folder: Path, *, base_url: str | None = None, api_key_env: str | None = None,
                 on_submitted: Callable[[Shard], None] | None = None,
                 retry: RetryPolicy = BATCH_RETRY) -> list[Shard]:
    """Upload and start a batch of every shard not yet submitted; each id is in the ledger before the next call.

    A shard's ``submitting`` event (its :class:`~dahl.batch._providers.ShardTag`) is in the ledger
    before its first provider call; a shard resumed with one uses the upload and adopts the batch
    the provider already holds for it (killed before their ledger lines) instead of making them again.

    Returns:
        The shards submitted by this call (already submitted ones are skipped).

    Raises:
        ConfigError: nothing prepared, the key is unset, or the folder is ``file`` provider's.
        AdapterError: a provider call failed after its retries (what was recorded stays recorded).
    """
    ledger = await anyio.to_thread.run_sync(Ledger.read_prepared, folder)
    done: list[Shard] = []
    async with AsyncExitStack() as stack:
        client = await _open_client(stack, ledger, base_url, api_key_env, retry)
        for shard in list(ledger.shards.values()):
            if shard.batch_id is not None or shard.canceled:
                continue
            path = folder / shard.path
            await anyio.to_thread.run_sync(_shard_lines, path)  # a missing file is named, before any call
            tag = await _tag(ledger, shard)
            if shard.file_id is None:
                file_id = await client.upload(path, tag)
                if file_id is not None:
                    await anyio.to_thread.run_sync(ledger.append, {"event": "uploaded", "shard": shard.path,
                                                                   "file_id": file_id})
            batch_id = await client.create(path, shard.file_id, tag)
            await anyio.to_thread.run_sync(ledger.append, {"event": "submitted", "shard": shard.path,
                                                           "batch_id": batch_id})
            done.append(shard)
            if on_submitted is not None:
                on_submitted(shard)
    return done


async def _tag(ledger: Ledger, shard: Shard) -> ShardTag:
    """The shard's :class:`ShardTag`: its ``submitting`` event, appended first when the ledger has none."""
    resumed = shard.submitting is not None
    if shard.submitting is None:
        await anyio.to_thread.run_sync(ledger.append, {"event": "submitting", "shard": shard.path,
                                                       "key": uuid.uuid4().hex, "at": time.time()})
    event = shard.submitting
    assert event is not None
    known = frozenset(s.batch_id for s in ledger.shards.values() if s.batch_id is not None)
    return ShardTag(str(event["key"]), float(event["at"]), shard.requests, resumed, known)


@dataclass(frozen=True)
class ShardStatus:
    """One shard's state.

    Attributes:
        shard: the ledger's view.
        state: the provider's state now (None: not submitted, or collected already).
    """

    shard: Shard
    state: BatchState | None


async def status(folder: Path, *, base_url: str | None = None, api_key_env: str | None = None,
                 retry: RetryPolicy = BATCH_RETRY) -> list[ShardStatus]:
    """Every shard with its provider state (asked only for submitted shards not yet collected).

    Raises:
        ConfigError, AdapterError: as :func:`submit`.
    """
    ledger = await anyio.to_thread.run_sync(Ledger.read_prepared, folder)
    out: list[ShardStatus] = []
    async with AsyncExitStack() as stack:
        live = [s for s in ledger.shards.values() if s.batch_id is not None and s.collected is None]
        client = await _open_client(stack, ledger, base_url, api_key_env, retry) if live else None
        for shard in ledger.shards.values():
            state = None
            if client is not None and shard in live:
                assert shard.batch_id is not None
                state = await client.retrieve(shard.batch_id)
            out.append(ShardStatus(shard, state))
    return out


@dataclass
class CollectReport:
    """What ``collect`` did.

    Attributes:
        collected: shards collected now.
        running: shards whose batch has not ended (collect again later).
        totals: counts over the shards collected now.
    """

    collected: list[str] = field(default_factory=list)
    running: list[str] = field(default_factory=list)
    totals: Collected = field(default_factory=Collected)


async def collect(folder: Path, *, from_file: Path | None = None, cache_dir: Path | None = None,
                  base_url: str | None = None, api_key_env: str | None = None,
                  retry: RetryPolicy = BATCH_RETRY) -> CollectReport:
    """Store the results of every ended batch (or of ``from_file``, ``vllm run-batch``'s output) in the cache.

    Raises:
        ConfigError: nothing prepared; the cache is unusable; as :func:`submit`.
        InputError: ``from_file`` holds a line that is not JSON (file and line named).
    """
    ledger = await anyio.to_thread.run_sync(Ledger.read_prepared, folder)
    report = CollectReport()
    async with AsyncExitStack() as stack:
        recorded = ledger.waves[0].get("cache_dir")
        store, unusable = await open_store(stack, cache_dir or (Path(recorded) if recorded else None))
        if store is None:
            raise ConfigError(f"the cache is unusable ({unusable}); collected results go there")
        by_shard: dict[str, list[Outcome]] = {}
        if from_file is not None:
            lines = await anyio.to_thread.run_sync(_read_jsonl, from_file)
            owner = await anyio.to_thread.run_sync(_owners, ledger)
            for line in lines:
                outcome = parse_openai_line(line)
                by_shard.setdefault(owner.get(outcome.custom_id, ""), []).append(outcome)
            _warn_foreign(str(from_file), "the batch files not yet collected", by_shard.pop("", []))
        else:
            live = [s for s in ledger.shards.values() if s.batch_id is not None and s.collected is None]
            client = await _open_client(stack, ledger, base_url, api_key_env, retry) if live else None
            for shard in live:
                assert client is not None and shard.batch_id is not None
                state = await client.retrieve(shard.batch_id)
                if not state.ended:
                    report.running.append(shard.path)
                    continue
                by_shard[shard.path] = await client.results(state)
        for path, outcomes in by_shard.items():
            shard = ledger.shards[path]
            if shard.collected is not None:
                continue
            ids = await anyio.to_thread.run_sync(_ids_of, folder / path)
            known = set(ids)
            _warn_foreign(f"batch {shard.batch_id or 'file'}", path, [o for o in outcomes if o.custom_id not in known])
            outcomes = [o for o in outcomes if o.custom_id in known]
            seen = {o.custom_id for o in outcomes}
            outcomes += [Outcome(i, None, "expired") for i in ids if i not in seen]
            stage_of = dict.fromkeys(ids, shard.stage)
            extras = await anyio.to_thread.run_sync(read_extras, (folder / path).parent, set(ids))
            puts, got = await anyio.to_thread.run_sync(parse_outcomes, outcomes, stage_of, _stages(shard.wave), extras)
            store_puts(store, puts)
            await store.flush()  # on disk before the ledger says collected: a kill now loses nothing
            results = f"results/{Path(path).stem}-{shard.batch_id or 'file'}.jsonl"
            await anyio.to_thread.run_sync(write_results, folder / results, got.classes)
            await anyio.to_thread.run_sync(ledger.append, {
                "event": "collected", "shard": path, "batch_id": shard.batch_id, "results": results,
                "succeeded": got.stored, "errors": dict(got.errors), "expired": got.unfinished,
                "prompt_tokens": got.prompt_tokens, "completion_tokens": got.completion_tokens,
                "cached_tokens": got.cached_tokens, "cache_write_tokens": got.cache_write_tokens})
            report.collected.append(path)
            report.totals.add(got)
    return report


def _warn_foreign(source: str, where: str, outcomes: list[Outcome]) -> None:
    """Warn that ``outcomes`` of ``source`` have a custom_id no request of ``where`` has (they are ignored)."""
    if outcomes:
        ids = ", ".join(o.custom_id for o in outcomes[:5]) + (", ..." if len(outcomes) > 5 else "")
        log.warning("%s: %d results ignored, their custom_id is in no request of %s: %s", source, len(outcomes),
                    where, ids)


def _stages(wave: dict[str, Any]) -> dict[str, StageMeta]:
    return {name: StageMeta(**meta) for name, meta in wave["stages"].items()}


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of ``path``'s non-blank lines (blocking).

    Raises:
        InputError: a line is not valid UTF-8 or not a JSON object (names the file and line).
    """
    return [row for _, row in jsonl_rows(path, on_error=None)]


def _owners(ledger: Ledger) -> dict[str, str]:
    """custom_id -> the path of the last shard holding it, over shards not collected (blocking)."""
    owner: dict[str, str] = {}
    for shard in ledger.shards.values():
        if shard.collected is None:
            owner.update(dict.fromkeys(_ids_of(ledger.folder / shard.path), shard.path))
    return owner


async def resubmit(folder: Path, only: str, limits: Limits | None = None) -> Prepared:
    """Write a shard of exactly the ``only`` requests of every collected shard (once per kind).

    ``expired``: the requests that never ran (expired, canceled); ``failed``: those that ran and
    failed (HTTP errors, unparseable replies).

    Raises:
        ConfigError: ``only`` is neither, or nothing is prepared.
    """
    if only not in ("failed", "expired"):
        raise ConfigError(f"--only must be failed or expired, got {only!r}")
    ledger = await anyio.to_thread.run_sync(Ledger.read_prepared, folder)
    written: list[tuple[str, str, int]] = []
    for shard in list(ledger.shards.values()):
        if shard.collected is None or only in shard.resubmitted:
            continue
        classes = await anyio.to_thread.run_sync(read_results, folder / shard.collected["results"])
        chosen = {k for k, v in classes.items() if v is not None and (v in ("expired", "canceled")) == (only == "expired")}
        if not chosen:
            continue
        lines = await anyio.to_thread.run_sync(_lines_of, folder / shard.path, chosen)
        prefix = f"{Path(shard.path).stem}-{only}"
        files = await anyio.to_thread.run_sync(write_lines, (folder / shard.path).parent, prefix, lines,
                                               limits or LIMITS[shard.provider])
        made = [(str(p.relative_to(folder)), shard.stage, n) for p, n in files]
        event = {**shard.wave, "resubmit_of": shard.path, "only": only,
                 "shards": [{"path": p, "stage": s, "requests": n} for p, s, n in made]}
        await anyio.to_thread.run_sync(ledger.append, event)
        written.extend(made)
    return Prepared(tuple(written), sum(n for _, _, n in written), 0, 0, 0, 0, 0)


def _lines_of(path: Path, ids: set[str]) -> list[bytes]:
    """The lines of shard ``path`` whose custom_id is in ``ids``, as they were written (blocking)."""
    return [line for line in _shard_lines(path) if orjson.loads(line)["custom_id"] in ids]


async def cancel(folder: Path, *, base_url: str | None = None, api_key_env: str | None = None,
                 retry: RetryPolicy = BATCH_RETRY) -> list[str]:
    """Cancel every submitted batch not yet collected; collect then gets their finished part.

    Returns:
        The batch ids canceled.
    """
    ledger = await anyio.to_thread.run_sync(Ledger.read_prepared, folder)
    out: list[str] = []
    async with AsyncExitStack() as stack:
        live = [s for s in ledger.shards.values() if s.batch_id and s.collected is None and not s.canceled]
        client = await _open_client(stack, ledger, base_url, api_key_env, retry) if live else None
        for shard in live:
            assert client is not None and shard.batch_id is not None
            await client.cancel(shard.batch_id)
            await anyio.to_thread.run_sync(ledger.append, {"event": "canceled", "shard": shard.path,
                                                           "batch_id": shard.batch_id})
            out.append(shard.batch_id)
    return out
