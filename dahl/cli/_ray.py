"""``dahl score --ray [ADDRESS]``: the shards of one run as Ray tasks, one per shard, each running the
async engine in its Ray worker (as one ``--shard I/N`` run), then merged as ``--workers`` merges them."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any, TypedDict

import click

from dahl.cli._console import console, exit_stopped, stop_status
from dahl.cli._merge import merge_shards, shard_coord
from dahl.cli._progress import count
from dahl.cli._score_options import score_config
from dahl.errors import ConfigError
from dahl.results._manifest import Shard
from dahl.run._score import ScoreConfig, score

__all__ = ["LOCAL", "ShardRow", "ray_address", "run_ray", "score_shard"]

#: ``--ray`` without ADDRESS: a Ray instance started here for this run.
LOCAL = "local"


def ray_address(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--ray``'s callback: the address as given, refusing a file or folder that exists (a bare ``--ray``
    before the input files reads the first of them as its ADDRESS).

    Raises:
        click.BadParameter: ``value`` names an existing path.
    """
    if value is not None and value != LOCAL and Path(value).exists():
        raise click.BadParameter(f"{value!r} is a path, not a Ray address: a word after a bare --ray is its "
                                 "ADDRESS; put --ray after the input files, or give one (--ray auto)")
    return value


class ShardRow(TypedDict):
    """What one shard's Ray task returns: ``status`` ``"done"`` or ``"error"``, ``exit_status`` (as
    ``dahl score --shard`` would exit: see :mod:`dahl.exit_status`) and ``message`` (why it stopped; ``""``)."""

    shard: int
    status: str
    exit_status: int
    message: str


def score_shard(config: ScoreConfig) -> ShardRow:
    """Score the shard ``config.shard`` of a run into ``config.out_dir`` (:func:`dahl.score`) and return how
    it ended. Never raises: a stop (quota, API error, bad input, a bug) is returned as a row with status
    ``error``, so Ray does not run the task again and re-pay its calls."""
    index = config.shard.index if config.shard is not None else 0
    try:
        status = int(score(config).exit_status)
    except BaseException as exc:  # noqa: BLE001 - returned, never raised out of the task
        return ShardRow(shard=index, status="error", exit_status=int(stop_status(exc)), message=str(exc))
    return ShardRow(shard=index, status="done", exit_status=status, message="")


def run_ray(ctx: click.Context, address: str, out_dir: Path) -> None:
    """Score the run of ``dahl score`` (the parameters of ``ctx``) as shards on the Ray cluster at ``address``
    (:data:`LOCAL`: a Ray instance started here; a Ray instance this process already joined is used as it
    is), one Ray task per shard into ``out_dir/shards/I``, then merge them into ``out_dir`` (see
    :func:`dahl.cli._merge.merge_shards`).

    The number of shards is ``--workers`` when given, else the cluster's CPUs. Every shard takes 1/N of the
    limits (given, in ``--config`` or announced) and of ``--max-cost`` (with ``--coord`` they share the whole
    through Redis). The input and output paths must be readable and writable at the same paths on every node.

    Raises:
        ConfigError: Ray is not installed (the extra ``dahl[ray]``).
    """
    try:
        import ray
    except ImportError as exc:
        raise ConfigError("--ray needs Ray; install it with: pip install 'dahl[ray]'") from exc
    given = ctx.get_parameter_source("workers") != click.core.ParameterSource.DEFAULT
    if not ray.is_initialized():
        ray.init(address=address, num_cpus=ctx.params["workers"] if given and address == LOCAL else None)
    cpus = ray.cluster_resources().get("CPU", os.cpu_count() or 1)  # type: ignore[no-untyped-call]
    workers = ctx.params["workers"] if given else max(1, int(cpus))
    folders = [out_dir / "shards" / str(i) for i in range(workers)]
    run = uuid.uuid4().hex[:12]
    named = {"coord": url} if (url := shard_coord(ctx.params, run)) else {}
    configs = [score_config({**ctx.params, **named, "out_dir": folder, "shard": str(Shard(index=i, count=workers))})
               for i, folder in enumerate(folders)]
    console.print(f"scoring in {count(workers, 'Ray task')}: {out_dir / 'shards'}/0..{workers - 1}")
    task: Any = ray.remote(num_cpus=1, max_retries=0, retry_exceptions=False)(score_shard)
    refs = [task.remote(config) for config in configs]
    try:
        rows: list[ShardRow] = ray.get(refs)
    except KeyboardInterrupt:
        for ref in refs:
            ray.cancel(ref)
        exit_stopped(KeyboardInterrupt(), "Finished answers are in the shard folders; re-run the same command "
                                          "to continue.")
    merge_shards([row["exit_status"] for row in rows], folders, out_dir, [row["message"] for row in rows])
