"""The ``dahl`` command line: a thin layer over the public API (no business logic)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import NoReturn, TypeVar

import anyio
import click
from rich.console import Console
from rich.logging import RichHandler
from rich.markup import escape

from dahl.adapters.factory import CHECKERS, SPLITTERS
from dahl.cache import CacheStore, default_cache_dir
from dahl.cache.database import DB_NAME
from dahl.cli_recall import recall_options
from dahl.cli_progress import ProgressMode, run_with_progress, usd
from dahl.cli_score_config import score_config
from dahl.cli_summary import partial_message, print_summary, result_table
from dahl.cli_templates import SCORE_STAGES
from dahl.cli_types import FINITE, HEADER, template_option
from dahl.config import AUTH_SCHEMES, PROVIDERS
from dahl.dryrun import DryRunReport
from dahl.dryrun import dry_run as estimate
from dahl.engine.counters import RunCounters
from dahl.errors import CostCapReached, DahlError, FatalAPIError, OutputWriteError, QuotaExhausted
from dahl.exit_status import ExitStatus
from dahl.formats import FORMATS, describe_input
from dahl.formats.fields import parse_field_options
from dahl.pricing import Price, load_price_overrides, parse_price_option
from dahl.run import ScoreReport

# Piped output gets a wide fixed width so tables are not cut to 80 columns.
class _Console(Console):
    """A rich Console whose reader going away (``dahl inspect FILE | head -1``) ends the
    command with status 0: the reader took what it wanted (rich's default exits 1, which
    here means an internal error)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(ExitStatus.OK)


# Not a terminal (a log): lines are neither padded nor wrapped, so they can be grepped.
console = _Console(stderr=True, width=None if sys.stderr.isatty() else 160, soft_wrap=not sys.stderr.isatty())
out = _Console(width=None if sys.stdout.isatty() else 160)

T = TypeVar("T")

# Kept for scripts and tests that import them; the table is dahl.exit_status.ExitStatus.
EXIT_USAGE = ExitStatus.USAGE
EXIT_QUOTA = ExitStatus.QUOTA
EXIT_INTERRUPTED = ExitStatus.INTERRUPTED


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    root = logging.getLogger()
    handler = next((h for h in root.handlers if isinstance(h, _Handler)), None)
    if handler is None and root.handlers:  # the embedding program set up logging: keep it, unless -v
        if verbose:
            root.setLevel(level)
        return
    if handler is None:
        handler = _Handler(console=console, show_path=False, show_time=False)
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    # The handler's own level also filters records of libraries that set their logger to
    # DEBUG themselves (bm25s does), which the root level alone does not.
    handler.setLevel(level)
    root.setLevel(level)


class _Handler(RichHandler):
    """dahl's own log handler, told apart from an embedding program's when -v is given twice.

    On a terminal it draws rich's columns; elsewhere (a batch job's log) each record is
    one plain line, ``LEVEL message``, neither padded nor wrapped, so a log can be grepped.
    """

    def emit(self, record: logging.LogRecord) -> None:
        if self.console.is_terminal:
            super().emit(record)
            return
        try:
            line = f"{record.levelname} {self.format(record)}"
        except Exception:  # as logging.Handler does: a bad record must not stop the run
            self.handleError(record)
            return
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)


def _more_verbose(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    """``-v`` given after a subcommand (``dahl score -vv``): add it to the group's ``-v``."""
    if value:
        total = ctx.find_root().params.get("verbose", 0) + value
        _setup_logging(total)


def _with_verbose(command: click.Command) -> None:
    """Accept ``-v/--verbose`` on ``command`` (and its subcommands) as on the group."""
    command.params.append(click.Option(["-v", "--verbose", "more_verbose"], count=True, expose_value=False,
                                       callback=_more_verbose, help="More log output (-v info, -vv debug)."))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_verbose(sub)


@click.group()
@click.version_option(package_name="dahl")
@click.option("-v", "--verbose", count=True, help="More log output (-v info, -vv debug).")
def main(verbose: int) -> None:
    """dahl: score long-form LLM answers for factual hallucination."""
    _setup_logging(verbose)


@main.command()
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
@click.option("--splitter", default="rules", show_default=True, type=click.Choice(SPLITTERS),
              help="rules: offline rule-based; given: claims from the input; openai: an LLM endpoint.")
@click.option("--checker", default="evidence", show_default=True, type=click.Choice(CHECKERS),
              help="evidence: offline BM25 over --evidence; replay: labels from the input; "
                   "fake: deterministic; openai: an LLM endpoint.")
@click.option("--evidence", type=click.Path(path_type=Path), default=None,
              help="Corpus: JSONL {id, title?, text, url?} or a folder of .txt/.md files; the evidence "
                   "Checker's passages, or with --checker openai the passages each claim is judged against.")
@click.option("--top-k", default=5, show_default=True, type=click.IntRange(min=1),
              help="Passages per claim for --checker openai --evidence.")
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
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Verdict cache folder (default $DAHL_CACHE_DIR or the platform cache folder).")
@click.option("--no-cache", is_flag=True, help="Do not read or write the verdict cache.")
@click.option("--no-progress", is_flag=True, help="Do not show progress.")
@click.option("--progress-every", "progress_every_s", default=10.0, show_default=True, type=click.FloatRange(min=0.1),
              help="Seconds between two progress lines when stderr is not a terminal.")
@click.option("--dry-run", is_flag=True,
              help="Print the calls the cache cannot answer, their tokens, money and time bound; call nothing.")
@click.option("--max-cost", "max_cost_usd", type=click.FloatRange(min=0), default=None, metavar="USD",
              help="Stop cleanly (exit 3, resumable) before this run's calls could cost more than USD.")
@click.option("--price", "price_options", multiple=True, metavar="MODEL=IN,OUT",
              help="Price of MODEL in USD per million input and output tokens (repeatable); "
                   "over the shipped table and [prices] in --config.")
@template_option(SCORE_STAGES)
@recall_options
def score(
    inputs: tuple[Path, ...],
    out_dir: Path,
    fmt: str,
    response_columns: tuple[str, ...],
    field_options: tuple[str, ...],
    splitter: str,
    checker: str,
    evidence: Path | None,
    top_k: int,
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
    **recall_values: object,  # the options of dahl.cli_recall.RECALL_OPTION_NAMES
) -> None:
    """Score INPUTS (answer files) and write OUT/answers.jsonl and OUT/summary.json."""
    try:
        config = score_config(click.get_current_context().params)
        if dry_run:
            _print_dry_run(estimate(config))
            return
        counters = RunCounters()
        mode: ProgressMode = "off" if no_progress else "bar" if console.is_terminal else "lines"
        report = run_stoppable(lambda: run_with_progress(config, counters, console, mode=mode, every_s=progress_every_s))
    except (DahlError, KeyboardInterrupt) as exc:
        _stop(exc, out_dir)
    out.print(result_table(report.summary, k, out.width))
    print_summary(console, report, out_dir)
    _finish(report)


def run_stoppable(func: Callable[..., Awaitable[T]], *args: object) -> T:
    """``anyio.run(func, *args)``, where SIGTERM (``kill``, a job scheduler) stops the run as Ctrl-C does.

    The event loop's SIGTERM handler cancels the run's main task once, as asyncio's own SIGINT
    handler does; the task's cleanup writes the finished answers, then KeyboardInterrupt is raised
    (exit 130 via the caller's handler) instead of the process dying mid-write. SIGINT is left as
    it was: a background job (``dahl ... &`` in a script) keeps ignoring Ctrl-C. Off the main
    thread, where signals cannot be handled, this is plain ``anyio.run``.

    Raises:
        KeyboardInterrupt: SIGTERM (or Ctrl-C) stopped the run.
    """

    async def main() -> T:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        stopped: list[bool] = []

        def stop() -> None:
            if task is not None and not stopped:  # a second SIGTERM must not cut the cleanup short
                stopped.append(True)
                task.cancel()

        try:
            loop.add_signal_handler(signal.SIGTERM, stop)
            handled = True
        except (RuntimeError, ValueError, NotImplementedError):  # not the main thread, or no signals
            handled = False
        try:
            return await func(*args)
        except asyncio.CancelledError:
            if stopped:
                raise KeyboardInterrupt from None
            raise
        finally:
            if handled:
                loop.remove_signal_handler(signal.SIGTERM)

    return anyio.run(main)


def _stop(exc: BaseException, out_dir: Path) -> NoReturn:
    """Present a run that stopped early as one line and exit with its status (:class:`ExitStatus`)."""
    nothing = None if (out_dir / "answers.jsonl").exists() else \
        "[yellow]interrupted[/] before any answer was written; nothing to resume."
    exit_stopped(exc, f"Finished answers are in {out_dir}; re-run the same command to continue.", nothing)


def price_overrides(config_file: Path | None, options: tuple[str, ...]) -> dict[str, Price]:
    """Prices of ``[prices."MODEL"]`` in ``config_file``, then of ``--price`` options (which win).

    Raises:
        ConfigError: a malformed table or option.
    """
    prices = load_price_overrides(config_file) if config_file is not None else {}
    for text in options:
        price = parse_price_option(text)
        prices[price.model] = price
    return prices


def exit_stopped(exc: BaseException, again: str, interrupted: str | None = None) -> NoReturn:
    """Print why a command stopped early in one line and exit with its :class:`ExitStatus`.

    Args:
        exc: what stopped it: QuotaExhausted or CostCapReached (3), FatalAPIError (4), OutputWriteError (8),
            KeyboardInterrupt (130), any other DahlError (2).
        again: the sentence telling how to continue (where finished work is).
        interrupted: the line for an interrupt instead of ``interrupted. {again}``.
    """
    if isinstance(exc, CostCapReached):
        console.print(f"[red]stopped:[/] {escape(str(exc))}. {again}")
        sys.exit(ExitStatus.QUOTA)
    if isinstance(exc, QuotaExhausted):
        console.print(f"[red]stopped:[/] API quota exhausted ({escape(str(exc))}). {again}")
        sys.exit(ExitStatus.QUOTA)
    if isinstance(exc, FatalAPIError):
        console.print(f"[red]stopped:[/] {escape(str(exc).rstrip('.'))}. {again}")
        sys.exit(ExitStatus.FATAL_API)
    if isinstance(exc, OutputWriteError):
        console.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(ExitStatus.WRITE_FAILED)
    if isinstance(exc, KeyboardInterrupt):
        console.print(interrupted or f"[yellow]interrupted.[/] {again}")
        sys.exit(ExitStatus.INTERRUPTED)
    console.print(f"[red]error:[/] {escape(str(exc))}")
    sys.exit(ExitStatus.USAGE)


def _finish(report: ScoreReport) -> None:
    """Exit with the status of a run that finished (0, 5 or 6), saying why when it is not 0."""
    status = report.exit_status
    if status == ExitStatus.NOTHING_SCORED:
        console.print("[red]nothing scored:[/] no input record could be scored (exit status 5)")
    elif status == ExitStatus.PARTIAL:
        console.print(f"[yellow]partly scored:[/] {partial_message(report.summary, report.counters.input_errors)}")
    if status != ExitStatus.OK:
        sys.exit(status)


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


@main.group()
def cache() -> None:
    """Inspect or empty the verdict cache."""


@cache.command("stats")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Cache folder (default $DAHL_CACHE_DIR or the platform cache folder).")
def cache_stats(cache_dir: Path | None) -> None:
    """Print the cache folder, its entries and size."""
    directory = cache_dir or default_cache_dir()
    if not (directory / DB_NAME).exists():  # nothing cached there: do not create a cache to report on
        out.print(f"directory: {directory}")
        out.print("entries: 0 (no cache there yet)")
        return
    try:
        with CacheStore(directory) as store:
            stats = store.stats()
    except DahlError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(EXIT_USAGE)
    out.print(f"directory: {stats['directory']}")
    out.print(f"entries: {stats['entries']}")
    out.print(f"size: {stats['size_bytes'] / 2**20:.1f} MiB")


@cache.command("clear")
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Cache folder (default $DAHL_CACHE_DIR or the platform cache folder).")
@click.confirmation_option(prompt="Remove every cached split and verdict?")
def cache_clear(cache_dir: Path | None) -> None:
    """Remove every cached split and verdict."""
    directory = cache_dir or default_cache_dir()
    if not (directory / DB_NAME).exists():
        out.print(f"removed 0 entries (no cache in {directory})")
        return
    try:
        with CacheStore(directory) as store:
            removed = store.clear()
    except DahlError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(EXIT_USAGE)
    out.print(f"removed {removed} entries")


@main.command()
@click.argument("input_file", type=click.Path(path_type=Path))
@click.option("--format", "fmt", default="auto", show_default=True, type=click.Choice(("auto", *FORMATS)))
@click.option("--response-column", "response_columns", multiple=True,
              help="Column (field) holding the responses (repeatable: one model per column).")
@click.option("--field", "field_options", multiple=True, metavar="TARGET=SOURCE",
              help="Read dahl's field TARGET from the input's SOURCE, e.g. question=prompt (repeatable).")
def inspect(input_file: Path, fmt: str, response_columns: tuple[str, ...], field_options: tuple[str, ...]) -> None:
    """Count rows, unique questions, categories and models of INPUT_FILE."""
    try:
        stats = describe_input(input_file, fmt, response_column=response_columns or None,
                               fields=parse_field_options(field_options))
    except DahlError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(EXIT_USAGE)
    out.print(f"rows: {stats.rows}")
    if stats.invalid:
        out.print(f"invalid records (skipped by dahl score): {stats.invalid}")
        for why in stats.invalid_examples:
            out.print(f"  {escape(why)}", soft_wrap=True)
        if stats.invalid > len(stats.invalid_examples):
            out.print(f"  ... and {stats.invalid - len(stats.invalid_examples):,} more")
    out.print(f"unique questions: {stats.unique_questions}")
    out.print(f"with response: {stats.with_response}")
    out.print(f"categories: {len(stats.categories)}")
    for name, n in sorted(stats.categories.items(), key=lambda kv: (-kv[1], kv[0])):
        out.print(f"  {name}: {n}")
    if stats.models:
        out.print(f"models: {len(stats.models)}")
        for name, n in sorted(stats.models.items()):
            out.print(f"  {name}: {n}")


from dahl import cli_reports  # noqa: E402  (leaderboard, pairs, agree, sample)
for _report in (cli_reports.leaderboard, cli_reports.pairs, cli_reports.agree, cli_reports.sample): main.add_command(_report)
from dahl.cli_report import report as _report_site  # noqa: E402  (dahl report: the HTML site)
main.add_command(_report_site)
from dahl.cli_refs import refs as _refs  # noqa: E402
main.add_command(_refs)
from dahl.cli_questions import questions as _questions  # noqa: E402
main.add_command(_questions)
from dahl import cli_generate  # noqa: E402
for _command in (cli_generate.generate, cli_generate.templates): main.add_command(_command)
from dahl.cli_eval import eval_command as _eval  # noqa: E402
main.add_command(_eval)
from dahl.cli_batch import batch as _batch  # noqa: E402
main.add_command(_batch)
from dahl.cli_study import study as _study  # noqa: E402
main.add_command(_study)
for _command in main.commands.values():
    _with_verbose(_command)


if __name__ == "__main__":  # pragma: no cover
    main()
