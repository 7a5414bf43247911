"""``dahl report``: the static HTML site (leaderboard + answer explorer) of scored runs."""

from __future__ import annotations

from pathlib import Path

import click

from dahl.cli._console import exit_stopped
from dahl.errors import DahlError

__all__ = ["report"]


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Folder of the site (index.html, explorer.html, static/, data/).")
@click.option("--metric", default="dahl_score", show_default=True,
              type=click.Choice(["dahl_score", "factscore", "factscore_init", "f1_at_k", "recall", "recall_w", "f1", "f1_w"]),
              help="Metric that ranks the board first (the page re-sorts by any column).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Bootstrap seed.")
@click.option("--n-boot", default=1000, show_default=True, help="Bootstrap resamples.")
@click.option("--chunk-size", default=250, show_default=True, type=click.IntRange(min=1),
              help="Answers per data file loaded on demand by the explorer.")
@click.option("--allow-stale", is_flag=True, help="Report a run folder whose summary does not match its answers.")
@click.option("--strict", is_flag=True, help="Refuse runs that differ in Checker, Splitter, prompts or questions.")
def report(run_dirs: tuple[Path, ...], out_dir: Path, metric: str, seed: int, n_boot: int, chunk_size: int,
           allow_stale: bool, strict: bool) -> None:
    """Write a static HTML report of RUN_DIR... to OUT: a leaderboard and an answer explorer.

    The site needs no server and makes no network requests: open OUT/index.html
    from disk or put the folder on any static host.
    """
    from dahl.report import build_report

    try:
        site = build_report(list(run_dirs), out_dir, metric=metric, seed=seed, n_boot=n_boot,
                            allow_stale=allow_stale, strict=strict, chunk_size=chunk_size)
    except DahlError as exc:
        exit_stopped(exc, "")
    for warning in site.warnings:
        click.echo(f"warning: {warning}", err=True)
    files = "data file" if site.n_chunks == 1 else "data files"
    click.echo(f"{site.n_answers:,} answers, {site.n_claims:,} claims in {site.n_chunks} {files}, "
               f"{site.size_bytes / 1e6:.1f} MB -> {site.out_dir / 'index.html'}")
