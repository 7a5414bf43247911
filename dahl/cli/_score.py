"""``dahl score``: score answer files into a run folder (answers.jsonl, summary.json, verdicts/)."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import click

from dahl.cli._console import console, exit_finished, exit_stopped, out, run_stoppable
from dahl.cli._merge import run_workers
from dahl.cli._options import (
    FINITE,
    HEADER,
    GroupedCommand,
    cache_progress_options,
    template_option,
)
from dahl.cli._progress import ProgressMode, run_with_progress, usd
from dahl.cli._ray import LOCAL, ray_address, run_ray
from dahl.cli._score_options import RECALL_OPTION_NAMES, recall_options, score_config
from dahl.cli._summary import partial_message, print_summary, result_table
from dahl.cli._templates import SCORE_STAGES
from dahl.config import AUTH_SCHEMES, PROVIDERS
from dahl.errors import ConfigError, DahlError
from dahl.formats import FORMATS
from dahl.formats._lines import STDIN
from dahl.results._counters import RunCounters
from dahl.run._dryrun import DryRunReport
from dahl.run._dryrun import dry_run as estimate
from dahl.run._plan import CHECKERS, SPLITTERS
from dahl.run._score import ScoreConfig

__all__ = ["score"]


@click.command(cls=GroupedCommand, sections={
    "Options": ("out_dir", "splitter", "checker", "evidence", "nli_model", "config_file", "base_url", "model",
                "dry_run", "max_cost_usd", "shard", "workers", "coord", "ray_address", "more_verbose", "help"),
    "Input": ("fmt", "response_columns", "field_options"),
    "Endpoint and limits": ("api_key_env", "provider", "auth", "header_options", "rpm", "tpm", "max_in_flight",
                            "temperature", "max_tokens", "timeout_s", "top_k", "nli_threshold", "nli_contradiction", "template_options",
                            "price_options"),
    "Scores": ("gamma", "k", "seed"),
    "Recall": RECALL_OPTION_NAMES,
    "Cache and progress": ("cache_dir", "no_cache", "no_progress", "progress_every_s"),
})
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              help="Output folder for answers.jsonl and summary.json (re-use it to resume).")
@click.option("--format", "fmt", default="auto", show_default=True,
              type=click.Choice(("auto", *FORMATS)), help="Input format.")
@click.option("--response-column", "response_columns", multiple=True,
              help="Column (field) holding the responses; repeat it for one model per column "
                   "(the model is named after its column).")
@click.option("--field", "field_options", multiple=True, metavar="TARGET=SOURCE",
              help="Read dahl's field TARGET from the input's SOURCE, e.g. question=prompt (repeatable).")
@click.option("--splitter", default=None, type=click.Choice(SPLITTERS),
              help="rules: offline rule-based; given: claims from the input; openai: an LLM endpoint. "
                   "[default: [split] kind of --config, else rules]")
@click.option("--checker", default=None, type=click.Choice(CHECKERS),
              help="evidence: offline BM25 over --evidence; nli: an entailment model (--nli-model) over "
                   "--evidence; replay: labels from the input; fake: deterministic; openai: an LLM endpoint. "
                   "[default: [check] kind of --config, else evidence]")
@click.option("--evidence", type=click.Path(path_type=Path), default=None,
              help="Corpus: JSONL {id, title?, text, url?} or a folder of .txt/.md files; the evidence "
                   "Checker's passages, or with --checker openai the passages each claim is judged against.")
@click.option("--top-k", default=5, show_default=True, type=click.IntRange(min=1),
              help="Passages per claim for --checker openai --evidence and --checker nli.")
@click.option("--nli-model", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Model folder of --checker nli: model.onnx, tokenizer.json, config.json, or a transformers "
                   "folder with the transformers extra (dahl models check DIR).")
@click.option("--nli-threshold", type=click.FloatRange(0, 1), default=None,
              help="P(entailment) at or above which --checker nli says supported (default 0.5).")
@click.option("--nli-contradiction", type=click.FloatRange(0, 1), default=None,
              help="P(contradiction) at or above which --checker nli gives reason contradicted (default 0.5).")
@click.option("--config", "config_file", type=click.Path(path_type=Path), default=None,
              help="TOML file with [split]/[check] (and [default]) endpoint settings.")
@click.option("--base-url", default=None, help="OpenAI-compatible API root for the openai adapters.")
@click.option("--model", default=None, help="Model name for the openai adapters.")
@click.option("--api-key-env", default=None,
              help="Environment variable holding the key (default OPENAI_API_KEY, or PERPLEXITY_API_KEY "
                   "for perplexity.ai; '' for keyless local servers).")
@click.option("--provider", type=click.Choice(PROVIDERS), default=None,
              help="Wire protocol: openai (chat completions) or anthropic (Messages API); default from the "
                   "host (anthropic for api.anthropic.com).")
@click.option("--auth", type=click.Choice(AUTH_SCHEMES), default=None,
              help="Header carrying the key: bearer, api-key (Azure OpenAI), x-api-key (Anthropic's default) "
                   "or none (keyless local servers).")
@click.option("--header", "header_options", multiple=True, type=HEADER,
              help="Extra request header NAME=VALUE (repeatable); ${VAR} in VALUE reads the environment.")
@click.option("--rpm", type=FINITE, default=None, help="Request budget, requests per minute.")
@click.option("--tpm", type=FINITE, default=None, help="Token budget, tokens per minute.")
@click.option("--max-in-flight", type=int, default=None, help="Concurrent requests per endpoint (default 64).")
@click.option("--temperature", type=FINITE, default=None, help="Sampling temperature (default 0).")
@click.option("--max-tokens", type=int, default=None, help="Completion budget per call, tokens.")
@click.option("--timeout", "timeout_s", type=FINITE, default=None, help="Timeout of one request, seconds.")
@click.option("--gamma", default=10.0, show_default=True, type=FINITE,
              help="FActScore length-penalty γ (0 disables).")
@click.option("--k", default=64, show_default=True, type=int, help="K of F1@K.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0), help="Bootstrap seed.")
@cache_progress_options("Do not read or write the verdict cache.",
                        "Seconds between two progress lines when stderr is not a terminal.")
@click.option("--dry-run", is_flag=True,
              help="Print the calls the cache cannot answer, their tokens, money and time bound; call nothing.")
@click.option("--max-cost", "max_cost_usd", type=click.FloatRange(min=0), default=None, metavar="USD",
              help="Stop cleanly (exit 3, resumable) before this run's calls could cost more than USD.")
@click.option("--price", "price_options", multiple=True, metavar="MODEL=IN,OUT",
              help="Price of MODEL in USD per million input and output tokens (repeatable); "
                   "over the shipped table and [prices] in --config.")
@click.option("--shard", default=None, metavar="I/N",
              help="Score only shard I of N (0 <= I < N): the answers whose id hashes to I, at 1/N of the "
                   "limits and --max-cost (unless --coord shares them); join the N folders with dahl merge.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(min=1),
              help="Score in N processes here (shards in OUT/shards/I), merged into OUT.")
@click.option("--coord", default=None, metavar="URL",
              help="Share the limits, pause, breaker and --max-cost of every shard through Redis at URL "
                   "(redis://host:port/db[?run=NAME]).")
@click.option("--ray", "ray_address", is_flag=False, flag_value=LOCAL, default=None, metavar="[ADDRESS]",
              callback=ray_address,
              help="Score the shards as Ray tasks on the Ray cluster at ADDRESS (without it: a Ray instance "
                   "started here), merged into OUT; --workers shards, default the cluster's CPUs. Needs dahl[ray].")
@template_option(SCORE_STAGES)
@recall_options
def score(
    inputs: tuple[Path, ...],
    out_dir: Path,
    fmt: str,
    response_columns: tuple[str, ...],
    field_options: tuple[str, ...],
    splitter: str | None,
    checker: str | None,
    evidence: Path | None,
    top_k: int,
    nli_model: Path | None,
    nli_threshold: float | None,
    nli_contradiction: float | None,
    gamma: float,
    k: int,
    seed: int,
    cache_dir: Path | None,
    no_cache: bool,
    no_progress: bool,
    progress_every_s: float,
    dry_run: bool,
    config_file: Path | None,
    base_url: str | None,
    model: str | None,
    api_key_env: str | None,
    rpm: float | None,
    tpm: float | None,
    max_in_flight: int | None,
    temperature: float | None,
    max_tokens: int | None,
    timeout_s: float | None,
    max_cost_usd: float | None,
    price_options: tuple[str, ...],
    provider: str | None,
    auth: str | None,
    header_options: tuple[tuple[str, str], ...],
    template_options: tuple[str, ...],
    shard: str | None,
    workers: int,
    coord: str | None,
    ray_address: str | None,
    **recall_values: object,  # the options of dahl.cli._score_options.RECALL_OPTION_NAMES
) -> None:
    """Score INPUTS (answer files) and write OUT/answers.jsonl and OUT/summary.json."""
    try:
        config = score_config(click.get_current_context().params)
        if dry_run:
            _print_dry_run(estimate(config))
            return
        if ray_address is not None:
            _check_workers(config)
            run_ray(click.get_current_context(), ray_address, out_dir)
            return
        if workers > 1:
            _check_workers(config)
            run_workers(click.get_current_context(), workers, out_dir)
            return
        counters = RunCounters()
        mode: ProgressMode = "off" if no_progress else "bar" if console.is_terminal else "lines"
        report = run_stoppable(lambda: run_with_progress(config, counters, console, mode=mode, every_s=progress_every_s))
    except (DahlError, KeyboardInterrupt) as exc:
        _stop(exc, out_dir)
    out.print(result_table(report.summary, k, out.width))
    print_summary(console, report, out_dir)
    exit_finished(report.exit_status, "[red]nothing scored:[/] no input record could be scored (exit status 5)",
                  lambda: f"[yellow]partly scored:[/] {partial_message(report.summary, report.counters.input_errors)}")


def _check_workers(config: ScoreConfig) -> None:
    """ConfigError unless ``--workers`` can run ``config``: no ``--shard``, no standard input."""
    if config.shard is not None:
        raise ConfigError("--workers runs every shard of the run; give --shard or --workers, not both")
    if STDIN in config.inputs:
        raise ConfigError("--workers cannot share standard input (-) between processes; give a file")


def _stop(exc: BaseException, out_dir: Path) -> NoReturn:
    """Present a run that stopped early as one line and exit with its status (:class:`ExitStatus`)."""
    nothing = None if (out_dir / "answers.jsonl").exists() else \
        "[yellow]interrupted[/] before any answer was written; nothing to resume."
    exit_stopped(exc, f"Finished answers are in {out_dir}; re-run the same command to continue.", nothing)


def _print_dry_run(report: DryRunReport) -> None:
    estimated = "" if report.claims_exact else " (some estimated with the rule Splitter: their split is not cached)"
    out.print(f"answers: {report.answers:,}")
    out.print(f"claims: {report.claims:,}{estimated}")
    if not report.stages:
        out.print("no API calls: the Splitter and Checker run offline")
        return
    out.print(f"cache: {report.cache}")
    for st in report.stages:
        known = f", {st.estimated_calls:,} of them for estimated claims" if st.estimated_calls else ""
        out.print(f"{st.stage}: {st.calls:,} requests to {st.endpoint} ({st.cached:,} answered by the cache{known})")
        out.print(f"  tokens ~{st.tokens:,} ({st.prompt_tokens:,} prompt + ~{st.completion_per_call:,.0f} completion "
                  f"per call, {st.completion_from}), at most {st.tokens_upper:,} with max_tokens {st.max_tokens:,}; "
                  f"money ~{usd(st.usd)}, at most {usd(st.usd_upper)}")
    unpriced = sorted({st.model for st in report.stages if st.price is None and st.calls})
    note = f"; no price for {', '.join(unpriced)} (give one with --price MODEL=IN,OUT)" if unpriced else ""
    out.print(f"calls: {report.calls:,}; money: ~{usd(report.usd)} estimated, at most {usd(report.usd_upper)} "
              f"(prices of {report.price_table_date}{note})")
    if report.time_bound_s is None:
        out.print("time bound: none from limits (set --rpm/--tpm); the run is bound by latency and --max-in-flight")
    else:
        out.print(f"time bound: at least {report.time_bound_s / 60:,.1f} min ({report.bound_by})")
