"""``dahl batch``: a run's cache misses through provider batch APIs (over :mod:`dahl.batch._ops`).

Exit status: 0 done; 2 bad usage or settings, or a batch folder or file that cannot be read; 4 a
provider call failed (run it again); 5 ``prepare`` read no input record (all skipped); 6 ``collect``
left batches running, or ``prepare`` skipped bad input records; 130 interrupted.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click

from dahl.batch import _ops as ops
from dahl.batch._shards import LIMITS, Limits
from dahl.cli._score_options import RECALL_OPTION_NAMES, score_config
from dahl.errors import AdapterError, DahlError, FatalAPIError
from dahl.exit_status import ExitStatus
from dahl.pricing import PriceTable, cost_usd, price_for
from dahl.records import Usage

__all__ = ["batch"]

T = TypeVar("T")

#: ``dahl score`` options that change the requests (not ``--provider``: prepare's names the batch API).
SCORE_OPTIONS = ("fmt", "response_columns", "field_options", "splitter", "checker", "evidence", "top_k",
                 "config_file", "base_url", "model", "api_key_env", "auth", "header_options", "rpm", "tpm",
                 "max_in_flight", "temperature", "max_tokens", "timeout_s", "cache_dir", "template_options",
                 *RECALL_OPTION_NAMES)
_FOLDER = click.Path(path_type=Path, file_okay=False)
_AGAIN = "Run the same command again: the ledger in BATCHDIR keeps what was done."


def _run(work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` on an event loop; a DahlError or Ctrl-C ends the command with its exit status."""
    from dahl.cli._console import console, exit_stopped

    try:
        return anyio.run(work)
    except AdapterError as exc:
        if isinstance(exc, FatalAPIError):
            exit_stopped(exc, _AGAIN)
        console.print(f"[red]stopped:[/] {exc}. {_AGAIN}")
        sys.exit(ExitStatus.FATAL_API)
    except (DahlError, KeyboardInterrupt) as exc:
        exit_stopped(exc, _AGAIN)


def _echo(text: str) -> None:
    from dahl.cli._console import out

    out.print(text, soft_wrap=True, highlight=False, markup=False)


@click.group()
def batch() -> None:
    """Score through provider batch APIs (half price): prepare, submit, status, collect, resubmit, cancel."""


@batch.command("prepare")
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out", "folder", required=True, type=_FOLDER, help="The batch folder (BATCHDIR).")
@click.option("--provider", type=click.Choice(("openai", "anthropic", "file")), default="openai", show_default=True,
              help="openai: /v1/files + /v1/batches; anthropic: Message Batches; file: JSONL for `vllm run-batch`.")
@click.option("--max-requests", type=click.IntRange(min=1), default=None,
              help="Requests per batch file (default the provider's limit: 50,000 openai, 100,000 anthropic).")
def prepare(inputs: tuple[Path, ...], folder: Path, provider: str, max_requests: int | None, **values: Any) -> None:
    """Write the current wave's cache misses (split first, then check and cover) as batch files in BATCHDIR."""
    try:
        config = score_config({**values, "inputs": inputs, "out_dir": folder})
    except DahlError as exc:
        from dahl.cli._console import exit_stopped

        exit_stopped(exc, _AGAIN)
    limits = LIMITS[provider]
    if max_requests is not None:
        limits = Limits(min(max_requests, limits.max_requests), limits.max_bytes)
    done = _run(lambda: ops.prepare(config, folder, provider, limits))  # type: ignore[arg-type]
    _echo(f"answers: {done.answers:,}; splits cached: {done.splits_cached:,}; checks cached: {done.checks_cached:,}"
          + (f"; facts covered in the cache: {done.facts_cached:,}" if config.recall is not None else ""))
    if done.no_passage:
        _echo(f"{done.no_passage:,} claims match no corpus passage: dahl score labels them without a call")
    for path, stage, n in done.shards:
        _echo(f"wrote {path}: {n:,} {stage} requests")
    _echo(f"requests written: {done.requests:,}" + (f" ({done.pending:,} already in batches not yet collected)"
                                                      if done.pending else ""))
    if done.waiting:
        _echo(f"{done.waiting:,} answers wait for their split: after `collect`, run `prepare` again for their checks"
              + (" and covers" if config.recall is not None else ""))
    if done.skipped:  # the exit statuses of dahl score for bad input: 5 none read, 6 some skipped
        from dahl.cli._console import console

        status = ExitStatus.NOTHING_SCORED if done.answers == 0 else ExitStatus.PARTIAL
        console.print(f"[yellow]{done.skipped:,} input records skipped[/] (exit status {int(status)})")
        sys.exit(status)


@batch.command("submit")
@click.argument("folder", type=_FOLDER)
@click.option("--base-url", default=None, help="Batch API root (default the prepared endpoint's).")
@click.option("--api-key-env", default=None, help="Variable holding the key (default the prepared endpoint's).")
def submit(folder: Path, base_url: str | None, api_key_env: str | None) -> None:
    """Upload and start every prepared batch not yet submitted (each id is in the ledger before the next)."""
    done = _run(lambda: ops.submit(folder, base_url=base_url, api_key_env=api_key_env,
                                   on_submitted=lambda s: _echo(f"submitted {s.path}: {s.batch_id}")))
    _echo(f"batches submitted: {len(done)}")


@batch.command("status")
@click.argument("folder", type=_FOLDER)
@click.option("--base-url", default=None, help="Batch API root (default the prepared endpoint's).")
@click.option("--api-key-env", default=None, help="Variable holding the key (default the prepared endpoint's).")
def status(folder: Path, base_url: str | None, api_key_env: str | None, config_file: Path | None,
           price_options: tuple[str, ...]) -> None:
    """One line per batch file: stage, requests, batch id, state; tokens of what was collected and their cost."""
    from dahl.cli._console import exit_stopped, price_overrides

    try:
        prices = price_overrides(config_file, price_options)
    except DahlError as exc:
        exit_stopped(exc, "")
    rows = _run(lambda: ops.status(folder, base_url=base_url, api_key_env=api_key_env))
    table = PriceTable.shipped().with_overrides(prices)
    prompt = cached = completion = 0
    usd = 0.0
    unpriced: list[str] = []
    for row in rows:
        shard = row.shard
        if shard.collected is not None:
            got = shard.collected
            tokens = Usage(prompt_tokens=got["prompt_tokens"], completion_tokens=got["completion_tokens"],
                           cached_tokens=got.get("cached_tokens", 0), cache_write_tokens=got.get("cache_write_tokens", 0))
            prompt, cached, completion = (prompt + tokens.prompt_tokens, cached + tokens.cached_tokens,
                                          completion + tokens.completion_tokens)
            model = str((shard.wave["stages"].get(shard.stage) or {}).get("model"))
            cost = cost_usd(tokens, price_for(model, batch=True, table=table))  # each stage at its own model's price
            if cost is None:
                unpriced += [model] if model not in unpriced else []
            else:
                usd += cost
            errors = ", ".join(f"{k} {v:,}" for k, v in sorted(got["errors"].items())) or "none"
            state = f"collected: {got['succeeded']:,} stored, {got['expired']:,} unfinished, errors: {errors}"
        elif row.state is not None:
            state = f"{row.state.status} ({row.state.done:,}/{row.state.total:,} done)"
        else:
            state = "canceled" if shard.canceled else "not submitted"
        _echo(f"{shard.path} {shard.stage} {shard.requests:,} requests {shard.batch_id or '-'}: {state}")
    _echo(f"tokens collected: {_tokens(prompt, cached, completion)}; cost at batch price: "
          f"{_money(rows, usd, unpriced)}")


def _tokens(prompt: int, cached: int, completion: int) -> str:
    """``P prompt [(C cached)] + N completion`` (the cached part only when some were)."""
    return f"{prompt:,} prompt{f' ({cached:,} cached)' if cached else ''} + {completion:,} completion"


def _money(rows: list[ops.ShardStatus], usd: float, unpriced: list[str]) -> str:
    """``$usd``, the collected tokens' cost at each stage model's batch price; ``unknown`` (and why)
    without rows or when a model has no batch price."""
    if not rows:
        return "unknown"
    if unpriced:
        gives = " ".join(f"--price {m}=IN,OUT,BATCH_DISCOUNT" for m in unpriced)
        return f"unknown (no batch price for {', '.join(unpriced)}: give {gives})"
    return f"${usd:,.6f}"


@batch.command("collect")
@click.argument("folder", type=_FOLDER)
@click.option("--from-file", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
              help="Read results from this OpenAI batch output JSONL (`vllm run-batch -o`) instead of the API.")
@click.option("--cache-dir", type=_FOLDER, default=None, help="Verdict cache folder (default the prepared one).")
@click.option("--base-url", default=None, help="Batch API root (default the prepared endpoint's).")
@click.option("--api-key-env", default=None, help="Variable holding the key (default the prepared endpoint's).")
def collect(folder: Path, from_file: Path | None, cache_dir: Path | None, base_url: str | None,
            api_key_env: str | None) -> None:
    """Store the results of every ended batch in the cache (errors are counted by class, never stored)."""
    report = _run(lambda: ops.collect(folder, from_file=from_file, cache_dir=cache_dir, base_url=base_url,
                                      api_key_env=api_key_env))
    got = report.totals
    _echo(f"collected {len(report.collected)} batches: {got.stored:,} results stored, "
          f"{got.unfinished:,} unfinished (expired or canceled), {sum(got.errors.values()):,} failed")
    for kind, n in sorted(got.errors.items()):
        _echo(f"  {kind}: {n:,}")
    _echo(f"tokens: {_tokens(got.prompt_tokens, got.cached_tokens, got.completion_tokens)}")
    if report.running:
        _echo(f"{len(report.running)} batches still running: collect again later")
        sys.exit(ExitStatus.PARTIAL)


@batch.command("resubmit")
@click.argument("folder", type=_FOLDER)
@click.option("--only", type=click.Choice(("failed", "expired")), required=True,
              help="expired: the requests that never ran; failed: those that ran and failed.")
def resubmit(folder: Path, only: str) -> None:
    """Write batch files of exactly the failed or expired requests of collected batches (then `submit`)."""
    done = _run(lambda: ops.resubmit(folder, only))
    for path, stage, n in done.shards:
        _echo(f"wrote {path}: {n:,} {stage} requests")
    _echo(f"requests to resubmit: {done.requests:,} (send them with `dahl batch submit {folder}`)")


@batch.command("cancel")
@click.argument("folder", type=_FOLDER)
@click.option("--base-url", default=None, help="Batch API root (default the prepared endpoint's).")
@click.option("--api-key-env", default=None, help="Variable holding the key (default the prepared endpoint's).")
def cancel(folder: Path, base_url: str | None, api_key_env: str | None) -> None:
    """Cancel every submitted batch not yet collected (collect then stores their finished part)."""
    done = _run(lambda: ops.cancel(folder, base_url=base_url, api_key_env=api_key_env))
    _echo(f"batches canceled: {len(done)}")


def _take_score_options() -> None:
    """Give ``prepare`` the very options of ``dahl score`` that shape requests, and ``status`` its prices
    (``--config`` for ``[prices]``, ``--price``): one definition."""
    from dahl.cli._score import score

    prepare.params.extend(p for p in score.params if p.name in SCORE_OPTIONS)
    status.params.extend(p for p in score.params if p.name in ("config_file", "price_options"))


_take_score_options()
