"""Report commands over finished runs: ``leaderboard``, ``pairs``, ``agree``, ``sample``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

import click
import orjson

from dahl.cli._console import exit_stopped
from dahl.cli._options import FINITE
from dahl.errors import DahlError
from dahl.exit_status import ExitStatus
from dahl.results._log import writing

__all__ = ["agree", "leaderboard", "pairs", "sample"]

EXIT_USAGE = ExitStatus.USAGE
_T = TypeVar("_T")


def _guard(fn: Callable[[], _T]) -> _T:
    """Run ``fn``; a DahlError exits through :func:`~dahl.cli._console.exit_stopped`."""
    try:
        return fn()
    except DahlError as exc:
        exit_stopped(exc, "")


def _num(x: float | None, digits: int = 4) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


_RUN_DIR = click.Path(path_type=Path, exists=True, file_okay=False)
# Per-answer recall metrics ("Beyond Precision"), for runs scored with reference facts.
_RECALL = ("recall", "recall_w", "f1", "f1_w")


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=_RUN_DIR)
@click.option("-o", "--out", "out_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the board to FILE.md, FILE.csv or FILE.json (markdown is also printed).")
@click.option("--by", "by", type=click.Choice(["category"]), default=None, help="Add the per-category table.")
@click.option("--metric", default="dahl_score", show_default=True,
              type=click.Choice(["dahl_score", "factscore", "factscore_init", "f1_at_k", *_RECALL]),
              help="Metric that ranks models and is compared between them (recall ones: runs scored with --refs).")
@click.option("--plot", "plot_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also draw scores with CI whiskers (+ category heatmap) to FILE.png (needs dahl[plot]).")
@click.option("--plot-recall", "recall_plot_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Also draw precision against recall per model, marker size ρ (claims per answer), to FILE.png "
                   "(runs scored with --refs; needs dahl[plot]).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Bootstrap seed.")
@click.option("--n-boot", default=1000, show_default=True, help="Bootstrap resamples.")
@click.option("--gamma", type=FINITE, default=None, help="FActScore length penalty γ (default: the run's).")
@click.option("--k", "k", type=int, default=None, help="K of F1@K (default: the run's).")
@click.option("--compare", type=click.Choice(["adjacent", "all"]), default="adjacent", show_default=True,
              help="Paired comparisons between rank-adjacent models or all pairs.")
@click.option("--allow-stale", is_flag=True,
              help="Rank a run folder whose summary does not match its answers (an interrupted re-run), with a warning.")
@click.option("--strict", is_flag=True,
              help="Refuse runs that differ in Checker, Splitter, prompt versions or question set (default: warn).")
def leaderboard(
    run_dirs: tuple[Path, ...], out_file: Path | None, by: str | None, metric: str, plot_file: Path | None,
    recall_plot_file: Path | None, seed: int, n_boot: int, gamma: float | None, k: int | None, compare: Literal["adjacent", "all"],
    allow_stale: bool, strict: bool,
) -> None:
    """Rank the models of one or more runs (RUN_DIR...) with bootstrap CIs and paired tests.

    A model may appear in only one of the runs. Ranks: 1 + number of models
    whose CI lies entirely above (models with overlapping CIs share a rank).
    A run folder whose last dahl score did not finish is refused (see
    --allow-stale); runs scored differently are ranked with a warning (see --strict).
    """
    from dahl.analysis._leaderboard import build_leaderboard, to_csv, to_json, to_markdown
    from dahl.analysis._runs import check_runs
    from dahl.analysis._verdicts import load_runs

    if out_file is not None and out_file.suffix.lower() not in (".md", ".csv", ".json"):
        click.echo(f"error: -o must end in .md, .csv or .json, got {out_file.name}", err=True)
        sys.exit(EXIT_USAGE)

    def run() -> None:
        infos, warnings = check_runs(run_dirs, allow_stale=allow_stale, strict=strict)
        for warning in warnings:
            click.echo(f"warning: {warning}", err=True)
        store = load_runs(run_dirs)
        if recall_plot_file is not None:
            store.scores("recall")  # no recall in a run: the ConfigError naming it, before any output
        board = build_leaderboard(store, metric=metric, gamma=gamma, k=k, seed=seed, n_boot=n_boot,
                                  by_category=by == "category", compare=compare,
                                  checkers=[info.checker for info in infos])
        text = to_markdown(board)
        click.echo(text, nl=False)
        if out_file is not None:
            suffix = out_file.suffix.lower()
            if suffix == ".json":
                data = orjson.dumps(to_json(board), option=orjson.OPT_INDENT_2) + b"\n"
            else:
                data = (to_csv(board) if suffix == ".csv" else text).encode("utf-8")
            with writing(out_file):
                out_file.parent.mkdir(parents=True, exist_ok=True)
                out_file.write_bytes(data)
            click.echo(f"wrote {out_file}", err=True)
        if plot_file is not None:
            from dahl.analysis._plots import plot_leaderboard

            plot_leaderboard(board, plot_file)
            click.echo(f"wrote {plot_file}", err=True)
        if recall_plot_file is not None:
            from dahl.analysis._plots import board_points, plot_precision_recall

            weighted = metric in ("recall_w", "f1_w")
            plot_precision_recall(board_points(board, "recall_w" if weighted else "recall"), recall_plot_file)
            click.echo(f"wrote {recall_plot_file}", err=True)

    _guard(run)


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, type=_RUN_DIR)
@click.option("-o", "--out", "out_file", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="JSONL file of {prompt, chosen, rejected, scores, ids, models, margin}.")
@click.option("--min-margin", default=0.0, show_default=True, help="Smallest score difference (fraction, 0.1 = 10 points).")
@click.option("--metric", default="precision", show_default=True,
              type=click.Choice(["precision", "dahl_score", "factscore", "factscore_init", "f1_at_k", *_RECALL]),
              help="Per-answer score that orders the answers (precision = the DAHL Score's; "
                   "recall, recall_w, f1, f1_w: runs scored with --refs).")
@click.option("--best-vs-worst", is_flag=True, help="One pair per question (best vs worst) instead of all pairs.")
def pairs(run_dirs: tuple[Path, ...], out_file: Path, min_margin: float, metric: str, best_vs_worst: bool) -> None:
    """Write DPO preference pairs (TRL prompt/chosen/rejected) from runs' scored answers.

    Every pair of answers to the same question from two different models whose
    scores differ by at least --min-margin (and by more than 0) is written,
    the better one as chosen; excluded and abstained answers never enter a pair.
    """
    from dahl.analysis._pairs import write_pairs

    n = _guard(lambda: write_pairs(list(run_dirs), out_file, metric=metric, min_margin=min_margin,
                                   best_vs_worst=best_vs_worst))
    click.echo(f"{n} pairs written to {out_file}")


@click.command()
@click.argument("a", type=click.Path(path_type=Path, exists=True))
@click.argument("b", type=click.Path(path_type=Path, exists=True))
@click.option("--metric", default="precision", show_default=True,
              type=click.Choice(["precision", "dahl_score", "factscore", "factscore_init", "f1_at_k", "n_claims",
                                 *_RECALL]),
              help="Per-answer value read from run folders (n_claims: claims per answer, to validate a Splitter).")
@click.option("--id-field", default="id", show_default=True, help="Id field of JSONL/CSV score files.")
@click.option("--score-field", default="score", show_default=True, help="Score field of JSONL/CSV score files.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
def agree(a: Path, b: Path, metric: str, id_field: str, score_field: str, as_json: bool) -> None:
    """Agreement between per-answer scores A and B, joined on answer id.

    A and B are run folders (the metric from their verdict store) or JSONL/CSV
    files of {id, score}. Reports Pearson r, Spearman rho, the paired t-test,
    the F-test of variances and the mean difference A − B with its 95% CI.
    """
    from dahl.analysis._agreement import agreement, join_scores, load_scores

    def run() -> tuple[Any, int, int]:
        sa = load_scores(a, metric=metric, id_field=id_field, score_field=score_field)
        sb = load_scores(b, metric=metric, id_field=id_field, score_field=score_field)
        _, x, y = join_scores(sa, sb)
        return agreement(x, y), len(sa), len(sb)

    stats, n_a, n_b = _guard(run)
    if as_json:
        payload = {**stats.__dict__, "metric": metric, "n_a": n_a, "n_b": n_b}
        click.echo(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode())
        return
    ci = stats.mean_diff_ci
    click.echo(f"metric: {metric}   paired answers: {stats.n} (A has {n_a}, B has {n_b})")
    click.echo(f"mean A {stats.mean_a:.4g}   mean B {stats.mean_b:.4g}   var A {_num(stats.var_a)}   var B {_num(stats.var_b)}")
    click.echo(f"Pearson r = {_num(stats.pearson_r)}   p = {_num(stats.pearson_p, 3)}")
    click.echo(f"Spearman rho = {_num(stats.spearman_rho)}   p = {_num(stats.spearman_p, 3)}")
    click.echo(f"paired t-test: t = {_num(stats.t_stat)}   df = {stats.t_df}   p = {_num(stats.t_p, 3)}")
    click.echo(f"F-test of variances: F = {_num(stats.f_stat)}   df = {stats.f_df}   p = {_num(stats.f_p, 3)}")
    ci_text = "—" if ci is None else f"[{ci[0]:.4g}, {ci[1]:.4g}]"
    click.echo(f"mean difference A − B = {stats.mean_diff:.4g}   {round(100 * stats.level)}% CI {ci_text}")


@click.command()
@click.argument("input_path", type=click.Path(path_type=Path, exists=True))
@click.option("--fraction", default=0.1, show_default=True, help="Sample fraction in (0, 1].")
@click.option("--stratify", default="category", show_default=True, help="Field/column holding the stratum.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Sampling seed.")
@click.option("-o", "--out", "out_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the sample here (same format as INPUT).")
@click.option("--repeats", type=int, default=None,
              help="INPUT is a run folder: draw N stratified samples of its answers and test every pair (F, t).")
@click.option("--model", default=None, help="With --repeats: the model whose answers are sampled.")
@click.option("--metric", default="precision", show_default=True,
              type=click.Choice(["precision", "dahl_score", "factscore", "factscore_init", "f1_at_k", *_RECALL]))
def sample(input_path: Path, fraction: float, stratify: str, seed: int, out_file: Path | None,
           repeats: int | None, model: str | None, metric: str) -> None:
    """Stratified sample of INPUT (JSONL/CSV questions or answers) keeping the category distribution.

    With --repeats N, INPUT is a run folder: N stratified samples (by category)
    of one model's answers are scored and compared pairwise with an F-test of
    variances and a Student t-test, as the DAHL paper did for its 10% sample.
    """
    if repeats is not None:
        if not input_path.is_dir():
            click.echo("error: --repeats needs a run folder (the output of dahl score) as INPUT", err=True)
            sys.exit(EXIT_USAGE)
        from dahl.analysis._sampling import check_text, repeat_check
        from dahl.analysis._verdicts import load_verdicts

        check = _guard(lambda: repeat_check(load_verdicts(input_path), fraction=fraction, repeats=repeats,
                                            seed=seed, model=model, metric=metric))
        click.echo(check_text(check, metric=metric, fraction=fraction, seed=seed), nl=False)
        return
    if input_path.is_dir():
        click.echo("error: INPUT must be a JSONL or CSV file (a run folder needs --repeats)", err=True)
        sys.exit(EXIT_USAGE)
    from dahl.analysis._sampling import sample_file

    content, per = _guard(lambda: sample_file(input_path, out_file, fraction=fraction, stratify=stratify, seed=seed))
    if out_file is None:
        sys.stdout.buffer.write(content)
        return
    total_in = sum(n for n, _ in per.values())
    total_out = sum(m for _, m in per.values())
    click.echo(f"{total_out} of {total_in} rows written to {out_file} ({len(per)} strata)")
    for name, (n, m) in per.items():
        click.echo(f"  {name or '(none)'}: {m} of {n}")
