"""``dahl study``: studies over scored runs (``temperature``: the DAHL paper's §5.2, Fig. 5)."""

from __future__ import annotations

from pathlib import Path

import click
import orjson

from dahl.cli._console import exit_stopped
from dahl.cli._options import FINITE
from dahl.errors import DahlError
from dahl.results._log import writing

__all__ = ["study"]

_METRICS = ["dahl_score", "factscore", "factscore_init", "f1_at_k"]

#: The files ``dahl study temperature`` writes into its output folder.
TEMPERATURE_FILES = ("temperature.md", "temperature.csv", "temperature_tests.csv", "temperature.json",
                     "temperature.png")


@click.group()
def study() -> None:
    """Studies over scored runs (the DAHL paper's temperature study and sampling check)."""


@study.command("temperature")
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Folder for temperature.md, .csv, _tests.csv, .json and .png.")
@click.option("--metric", default="dahl_score", show_default=True,
              type=click.Choice(_METRICS),
              help="Per-answer metric averaged per model and temperature.")
@click.option("--compare", default="reference", show_default=True, type=click.Choice(["reference", "adjacent", "all"]),
              help="Temperature pairs tested: each against --reference, adjacent ones, or every pair.")
@click.option("--reference", default=0.6, show_default=True, type=FINITE,
              help="Reference temperature of --compare reference (the DAHL paper's generation setting).")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Bootstrap seed.")
@click.option("--n-boot", default=1000, show_default=True, type=click.IntRange(min=1), help="Bootstrap resamples.")
@click.option("--no-plot", is_flag=True, help="Do not draw temperature.png (no matplotlib needed).")
def temperature(run_dir: Path, out_dir: Path, metric: str, compare: str, reference: float, seed: int,
                n_boot: int, no_plot: bool) -> None:
    """Score against temperature per model in RUN_DIR (a dahl score run of dahl generate --temperatures answers).

    The samples of a question are not independent, so each question counts once: per model
    x temperature, the mean of the questions' mean scores, its 95% bootstrap CI over the
    questions, answers and questions; between temperatures, a paired t-test of the question
    means over the questions both scored. Prints the Markdown tables and writes them with
    the CSV, JSON and the plot (paper Fig. 5) into OUT.
    """
    from dahl.analysis._study import cells_csv, temperature_study, tests_csv, to_json, to_markdown

    try:
        result = temperature_study(run_dir, metric=metric, compare=compare,  # type: ignore[arg-type]  # click.Choice
                                   reference=reference, seed=seed, n_boot=n_boot)
        text = to_markdown(result)
        click.echo(text, nl=False)
        files = {
            "temperature.md": text.encode("utf-8"),
            "temperature.csv": cells_csv(result).encode("utf-8"),
            "temperature_tests.csv": tests_csv(result).encode("utf-8"),
            "temperature.json": orjson.dumps(to_json(result), option=orjson.OPT_INDENT_2) + b"\n",
        }
        for name, data in files.items():
            path = out_dir / name
            with writing(path):
                out_dir.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
        if not no_plot:
            from dahl.analysis._plots import plot_temperature

            with writing(out_dir / "temperature.png"):
                plot_temperature(result, out_dir / "temperature.png")
        click.echo(f"wrote {', '.join(n for n in TEMPERATURE_FILES if not (no_plot and n.endswith('.png')))} "
                   f"to {out_dir}", err=True)
    except DahlError as exc:
        exit_stopped(exc, "")


@study.command("sampling")
@click.argument("questions", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.argument("run_dir", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--fraction", default=0.1, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="Share of the questions in each sample (the paper's 10%).")
@click.option("--repeats", default=5, show_default=True, type=click.IntRange(min=2), help="Samples drawn.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Sampling seed.")
@click.option("--model", default=None, help="The model whose scores are used (needed when the run has several).")
@click.option("--metric", default="dahl_score", show_default=True, type=click.Choice(_METRICS),
              help="Per-answer metric; a question's score is its answers' mean.")
def sampling(questions: Path, run_dir: Path, fraction: float, repeats: int, seed: int, model: str | None,
             metric: str) -> None:
    """Check that random samples of QUESTIONS score alike in RUN_DIR (the DAHL paper's §5.2 check).

    Draws --repeats samples of --fraction of QUESTIONS (a dahl generate questions
    file), by category; each question's score is the mean of the model's answers to
    it in RUN_DIR. Prints the one-way ANOVA F-test across the samples and, for every
    pair, the paper's F-test of equal variances then Student's t-test.
    """
    from dahl.analysis._sampling import check_text, question_check
    from dahl.analysis._verdicts import load_verdicts

    try:
        check = question_check(questions, load_verdicts(run_dir), fraction=fraction, repeats=repeats, seed=seed,
                               model=model, metric=metric)
    except DahlError as exc:
        exit_stopped(exc, "")
    click.echo(check_text(check, metric=metric, fraction=fraction, seed=seed), nl=False)
