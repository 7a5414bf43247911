"""``dahl eval CONFIG.toml``: generate -> score -> leaderboard in one command (:mod:`dahl.run._eval`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from dahl.cli._options import cache_and_progress_options
from dahl.results._counters import RunCounters
from dahl.errors import DahlError
from dahl.exit_status import ExitStatus
from dahl.generate._settings import GenerateCounters, GenerateReport, GenerateSettings
from dahl.run._score import ScoreConfig
from dahl.run._report import ScoreReport

__all__ = ["eval_command"]


@click.command("eval")
@click.argument("config_file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("-o", "--out", "out_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Output folder (default: the config's output, beside the config file); re-use it to resume.")
@cache_and_progress_options
def eval_command(config_file: Path, out_dir: Path | None, cache_dir: Path | None, no_cache: bool,
                 no_progress: bool, progress_every_s: float) -> None:
    """Run the benchmark of CONFIG_FILE: generate answers with every model, score them, rank them.

    Writes OUT/answers/ (one JSONL per model), OUT/score/ (as dahl score -o),
    OUT/leaderboard/ (board.md, .csv, .json, board.png, paired tests between
    the models). Re-running continues where it stopped and repeats no finished
    step; the exit status is dahl score's (0 ok, 5 nothing scored, 6 partial,
    3/4/130 stopped). The config layout: docs/benchmark.md, "The whole benchmark in one command".
    """
    from dahl.cli._console import run_stoppable, console, exit_finished, exit_stopped, out as stdout
    from dahl.cli._generate import _done, _run as generate_ticking
    from dahl.cli._progress import ProgressMode, count, run_with_progress
    from dahl.cli._summary import partial_message, print_summary
    from dahl.run._eval_config import load_eval_config
    from dahl.run._eval import run_eval  # imports aiohttp here, not on the event loop

    every = None if no_progress else progress_every_s
    mode: ProgressMode = "off" if no_progress else "bar" if console.is_terminal else "lines"

    async def generate(settings: GenerateSettings, counters: GenerateCounters) -> GenerateReport:
        report = await generate_ticking(settings, counters, every)
        name = settings.endpoints[0].model
        console.print(escape(f"generate {name}: {_done(report.counters)} -> {settings.out}"), highlight=False)
        return report

    async def score(config: ScoreConfig, counters: RunCounters) -> ScoreReport:
        return await run_with_progress(config, counters, console, mode=mode, every_s=progress_every_s)

    target = out_dir
    try:
        config = load_eval_config(config_file, out_dir=out_dir, cache_dir=cache_dir, use_cache=not no_cache)
        target = config.out_dir
        report = run_stoppable(lambda: run_eval(config, generate_runner=generate, score_runner=score))
    except (DahlError, KeyboardInterrupt) as exc:
        where = f"in {target}" if target is not None else "kept"
        exit_stopped(exc, f"Finished work is {where}; re-run dahl eval {config_file} to continue.")
    if report.score is None:
        console.print("[red]nothing generated:[/] no model wrote an answer (exit status 5)")
        sys.exit(ExitStatus.NOTHING_SCORED)
    print_summary(console, report.score, config.out_dir / "score")
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}")
    stdout.print(escape(report.board_markdown), end="", highlight=False, soft_wrap=True)
    state = "up to date" if report.board_reused else "written"
    console.print(escape(f"leaderboard {state}: {', '.join(str(p) for p in report.board_files)}"), highlight=False)

    scored = report.score

    def partly() -> str:
        failed = sum(r.counters.failed for r in report.generated.values())
        why = f"{count(failed, 'answer')} failed to generate" if failed else \
            partial_message(scored.summary, scored.counters.input_errors)
        return f"[yellow]partly done:[/] {escape(why)} (exit status 6; re-running retries them)"

    exit_finished(report.exit_status, "[red]nothing scored:[/] no answer could be scored (exit status 5)", partly)
