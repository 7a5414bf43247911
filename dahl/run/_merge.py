"""``dahl merge``: the folders of a run's shards (``dahl score --shard I/N``) joined into the run folder
one process would have written: ``answers.jsonl`` in input order, ``verdicts/``, ``summary.json``."""

from __future__ import annotations

import heapq
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import reduce
from pathlib import Path
from typing import Any

import anyio
import msgspec
import numpy as np

from dahl.analysis._summary import Summary, SummaryBuilder, SummaryStatistics
from dahl.analysis._verdicts import VerdictWriter
from dahl.errors import ConfigError
from dahl.records import ResultDigest
from dahl.results import _manifest as manifest
from dahl.results._counters import RunCounters
from dahl.results._log import AnswerLog, writing
from dahl.run._outputs import Collected, write_summary
from dahl.run._report import ScoreReport
from dahl.run._score import _lock_output

__all__ = ["merge_runs"]

_DIGEST = msgspec.json.Decoder(ResultDigest)


@dataclass(frozen=True, eq=False)
class _ShardRun:
    """One shard's finished folder: its manifest, summary (no statistics) and line positions."""

    path: Path
    record: dict[str, Any]
    shard: manifest.Shard
    summary: Summary
    positions: np.ndarray[tuple[int], np.dtype[np.int64]]


async def merge_runs(runs: Sequence[Path], out_dir: Path) -> ScoreReport:
    """Join the folders ``runs`` of every shard of one run into ``out_dir`` (created and locked).

    Args:
        runs: the shards' output folders, in any order, each of a finished ``dahl score --shard I/N``.
        out_dir: the merged run folder: ``answers.jsonl`` (input order), ``verdicts/``, ``summary.json``
            (figures recomputed through :meth:`Summary.merge`) and the manifest.

    Returns:
        The merged run's report (its ``counters`` are empty: the shards' are in ``summary["run"]``).

    Raises:
        ConfigError: a folder is no finished shard, the shards are of different runs (configuration,
            inputs or shard count), a shard is missing or given twice, or ``out_dir`` is one of them.
        OutputWriteError: a file of ``out_dir`` cannot be written.
    """
    shards = await anyio.to_thread.run_sync(_read_all, runs, out_dir)
    lock = await anyio.to_thread.run_sync(_lock_output, out_dir)
    try:
        config_hash = shards[0].record["config_hash"]
        previous = await anyio.to_thread.run_sync(manifest.read_manifest, out_dir)
        await anyio.to_thread.run_sync(manifest.mark_started, out_dir, previous, manifest.now_utc(), config_hash)
        summary, lines = await anyio.to_thread.run_sync(_join, shards, out_dir)
        answer_log = AnswerLog(out_dir / "answers.jsonl")
        assert not isinstance(summary.statistics, msgspec.UnsetType)
        collected = Collected(summary.statistics.builder, summary.statistics.questions,
                              sum(int(s.record.get("answers", 0)) for s in shards), lines, 0)
        summary_path = await write_summary(summary, out_dir, answer_log, collected, config_hash)
    finally:
        lock.release()
    return ScoreReport(summary.as_builtins(), RunCounters(), [], answer_log.path, summary_path, summary)


def _read_all(runs: Sequence[Path], out_dir: Path) -> list[_ShardRun]:
    """Every shard of ``runs``, sorted by index, checked to be one whole run."""
    if not runs:
        raise ConfigError("dahl merge needs the folders of a run's shards")
    shards = sorted((_read_shard(Path(p), out_dir) for p in runs), key=lambda s: s.shard.index)
    first = shards[0]
    for before, other in itertools.pairwise(shards):
        if other.record.get("config_hash") != first.record.get("config_hash"):
            raise ConfigError(f"{other.path} and {first.path} are shards of different runs: scored with other "
                              f"settings (config hash {other.record.get('config_hash')} and "
                              f"{first.record.get('config_hash')}); merge the shards of one run")
        if other.summary.inputs != first.summary.inputs:
            raise ConfigError(f"{other.path} and {first.path} are shards of different runs: they read other inputs "
                              "(paths or contents); merge the shards of one run")
        if other.shard.count != first.shard.count:
            raise ConfigError(f"{other.path} is shard {other.shard} but {first.path} is shard {first.shard}: "
                              "shards of one run have the same N")
        if other.shard == before.shard:
            raise ConfigError(f"shard {other.shard} is given twice ({before.path} and {other.path})")
    missing = sorted(set(range(first.shard.count)) - {s.shard.index for s in shards})
    if missing:
        raise ConfigError(f"incomplete set of shards: {', '.join(f'{i}/{first.shard.count}' for i in missing)} "
                          "missing; merge every shard of the run")
    return shards


def _read_shard(path: Path, out_dir: Path) -> _ShardRun:
    """The finished shard in ``path``; ConfigError naming the folder if it is none."""
    if path.resolve() == out_dir.resolve():
        raise ConfigError(f"{path} is both a shard and the merged folder; give dahl merge another -o")
    record = manifest.read_manifest(path)
    if record is None:
        raise ConfigError(f"{path} has no readable {manifest.MANIFEST_NAME}: not a dahl score folder")
    stale = manifest.stale_reason(path)
    if record.get("state") != manifest.COMPLETE or stale is not None:
        raise ConfigError(f"{path} holds no finished run ({stale or 'it did not finish'}); re-run its dahl score "
                          "--shard command")
    if "shard" not in record:
        raise ConfigError(f"{path} was scored without --shard: it is a whole run, not a shard")
    try:
        shard = msgspec.convert(record["shard"], manifest.Shard)
        summary = Summary.decode((path / "summary.json").read_bytes())
        positions = np.fromfile(path / manifest.POSITIONS_NAME, dtype="<i8").astype(np.int64)
    except (OSError, msgspec.ValidationError, ValueError) as exc:
        raise ConfigError(f"cannot read shard {path}: {exc}") from exc
    if len(positions) != record.get("answers_file", {}).get("lines"):
        raise ConfigError(f"{path}: {manifest.POSITIONS_NAME} does not match answers.jsonl; re-run its dahl score "
                          "--shard command")
    return _ShardRun(path, record, shard, summary, positions)


def _join(shards: list[_ShardRun], out_dir: Path) -> tuple[Summary, int]:
    """Write the merged ``answers.jsonl`` and ``verdicts/``; the merged summary and its line count (blocking)."""
    config = shards[0].summary.config
    recall = shards[0].summary.recall_settings
    builders = [SummaryBuilder(gamma=config.gamma, k=config.k, seed=config.seed,
                               recall_settings=None if isinstance(recall, msgspec.UnsetType) else recall)
                for _ in shards]
    questions = [manifest.QuestionSet() for _ in shards]
    verdicts = VerdictWriter(out_dir, gamma=config.gamma, k=config.k)
    path = out_dir / "answers.jsonl"
    tmp = path.with_suffix(".jsonl.tmp")
    lines = 0
    with writing(path):
        with tmp.open("wb", buffering=1 << 20) as dst:
            for _, i, line in heapq.merge(*(_lines(s, i) for i, s in enumerate(shards))):
                dst.write(line)
                digest = _DIGEST.decode(line)
                builders[i].add(digest)
                questions[i].add((digest.question_id or digest.question,))
                verdicts.add(digest)
                lines += 1
            dst.flush()
            os.fsync(dst.fileno())
        os.replace(tmp, path)
    with writing(out_dir / "verdicts"):
        verdicts.close()
    parts = [msgspec.structs.replace(s.summary, statistics=SummaryStatistics(b, q))
             for s, b, q in zip(shards, builders, questions, strict=True)]
    merged = reduce(Summary.merge, parts)
    first = shards[0].summary  # every shard read the same inputs
    return msgspec.structs.replace(merged, config=first.config, inputs=first.inputs), lines


def _lines(shard: _ShardRun, i: int) -> Iterator[tuple[int, int, bytes]]:
    """``(input position, i, line)`` of each line of the shard's ``answers.jsonl``, in file order."""
    with (shard.path / "answers.jsonl").open("rb") as f:
        for position, line in zip(shard.positions.tolist(), f, strict=True):
            yield position, i, line
