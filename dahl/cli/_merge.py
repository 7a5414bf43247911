"""``dahl merge``: join the folders of a run's shards; and ``dahl score --workers N``, which runs the
shards of one run as processes here and merges them."""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path
from types import FrameType
from typing import Any

import click

from dahl.cli._console import console, exit_finished, exit_stopped, out, run_stoppable
from dahl.cli._progress import count
from dahl.cli._summary import partial_message, result_table
from dahl.errors import DahlError
from dahl.exit_status import ExitStatus
from dahl.results import _manifest as manifest
from dahl.run._merge import merge_runs
from dahl.run._report import run_status

__all__ = ["merge", "merge_shards", "run_workers", "shard_command", "shard_coord"]

#: Exit statuses of a shard that leave it mergeable: finished, partly scored, or nothing to score.
_MERGEABLE = (ExitStatus.OK, ExitStatus.PARTIAL, ExitStatus.NOTHING_SCORED)


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Folder of the merged run: answers.jsonl (input order), verdicts/, summary.json.")
def merge(runs: tuple[Path, ...], out_dir: Path) -> None:
    """Join RUNS, the folders of every shard of one run (dahl score --shard I/N), into OUT as one
    process would have written it."""
    merge_into(list(runs), out_dir)


def merge_into(runs: list[Path], out_dir: Path) -> None:
    """Merge the shard folders ``runs`` into ``out_dir``, print the result table and exit as ``dahl score``
    does (0, 5 nothing scored, 6 partly scored; 2 when the folders are no complete set of one run's shards)."""
    try:
        report = run_stoppable(merge_runs, runs, out_dir)
    except (DahlError, KeyboardInterrupt) as exc:
        exit_stopped(exc, f"The shard folders are unchanged; re-run dahl merge to write {out_dir}.")
    summary, run = report.summary, report.summary["run"]
    out.print(result_table(summary, summary["config"]["k"], out.width))
    claims = sum(sum(model["labels"].values()) for model in summary["models"].values())  # resumed answers' too
    console.print(f"{count(len(runs), 'shard')} merged: {count(run['answers_done'] + run['answers_resumed'], 'answer')}"
                  f", {count(claims, 'claim')} -> {report.answers_path}, {report.summary_path}")
    exit_finished(run_status(summary, run["input_errors"]),
                  "[red]nothing scored:[/] no input record could be scored (exit status 5)",
                  lambda: f"[yellow]partly scored:[/] {partial_message(summary, run['input_errors'])}")


def run_workers(ctx: click.Context, workers: int, out_dir: Path) -> None:
    """Run ``dahl score`` (the arguments of ``ctx``) as ``workers`` processes, ``--shard I/N`` into
    ``out_dir/shards/I``, then merge them into ``out_dir`` (see :func:`merge_into`).

    A shard that stops (quota, API error, interrupt) stops the command with its exit status before the
    merge; a re-run resumes every shard.
    """
    folders = [out_dir / "shards" / str(i) for i in range(workers)]
    console.print(f"scoring in {count(workers, 'process', 'processes')}: {out_dir / 'shards'}/0..{workers - 1}")
    previous = signal.signal(signal.SIGTERM, _interrupt)
    run = uuid.uuid4().hex[:12]
    procs = [subprocess.Popen(shard_command(ctx.meta["dahl.args"], ctx.params, ctx.find_root().params.get("verbose", 0),
                                            folder, manifest.Shard(index=i, count=workers), run),
                              stdout=subprocess.DEVNULL) for i, folder in enumerate(folders)]
    try:
        statuses = [proc.wait() for proc in procs]
    except KeyboardInterrupt:
        for proc in procs:  # each writes its finished answers on SIGTERM
            proc.terminate()
        for proc in procs:
            proc.wait()
        exit_stopped(KeyboardInterrupt(), "Finished answers are in the shard folders; re-run the same command "
                                          "to continue.")
    finally:
        signal.signal(signal.SIGTERM, previous)
    merge_shards(statuses, folders, out_dir)


def merge_shards(statuses: list[int], folders: list[Path], out_dir: Path, reasons: list[str] | None = None) -> None:
    """Merge the shard folders ``folders`` into ``out_dir`` (see :func:`merge_into`) when every shard ended
    mergeable; else exit with the first failed shard's status (``statuses[i]``, an exit status; < 0: killed
    by a signal), naming it and, when given, ``reasons[i]``, why it stopped."""
    for i, status in enumerate(statuses):
        if status not in _MERGEABLE:
            why = f": {reasons[i]}" if reasons and reasons[i] else ""
            console.print(f"[red]stopped:[/] shard {i}/{len(folders)} ({folders[i]}) exited with status {status}"
                          f"{why}; re-run the same command to continue", emoji=False)
            sys.exit(status if status > 0 else ExitStatus.INTERRUPTED)  # < 0: killed by a signal
    merge_into(folders, out_dir)


def shard_command(args: list[str], params: dict[str, Any], verbose: int, folder: Path,
                  shard: manifest.Shard, run: str = "") -> list[str]:
    """The command line of one worker: ``dahl score`` with ``args`` (as given, ``params`` as parsed), into
    ``folder`` as ``shard``; with ``--coord``, under the run name ``run``. Each worker takes its share of the
    limits and the budget itself (see :class:`~dahl.run._score.ScoreConfig` ``shard``)."""
    named = shard_coord(params, run)
    coord = ["--coord", named] if named else []
    return [sys.executable, "-m", "dahl", *["-v"] * verbose, "score", *args, *coord, "-o", str(folder),
            "--shard", str(shard), "--workers", "1", "--no-progress"]


def shard_coord(params: dict[str, Any], run: str = "") -> str | None:
    """The ``--coord`` URL of the shards of a run (``params`` as parsed) naming the run ``run``, unless the
    URL names one or no ``--coord`` was given (None)."""
    url: str | None = params.get("coord")
    if url and run and "run=" not in url:
        return f"{url}{'&' if '?' in url else '?'}run={run}"
    return None


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    """SIGTERM while the shards run: stop them as Ctrl-C does."""
    raise KeyboardInterrupt
