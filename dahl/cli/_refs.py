"""``dahl refs``: build reference fact sets (``refs.jsonl``) for recall, from QUESTIONS and
documents, ``--pool RUN_DIR...`` or ``--given FILE``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, NoReturn

import click

from dahl.cli._progress import count, duration, run_ticking, usd
from dahl.cli._options import FINITE, cache_and_progress_options, parse_template_options, template_option
from dahl.config import EndpointConfig
from dahl.errors import ConfigError, DahlError, OutputWriteError
from dahl.exit_status import ExitStatus
from dahl.refs._dedupe import NEAR_THRESHOLD
from dahl.refs._settings import DEFAULT_BATCH, EXTRACTORS, RATERS, BuildCounters, BuildReport, BuildSettings

__all__ = ["refs"]


def _line(c: BuildCounters, elapsed_s: float) -> str:
    """One progress line of a build."""
    done = f"{count(c.written, 'set')} written ({c.facts:,} facts)"
    more = [f"{c.resumed:,} resumed"] if c.resumed else []
    more += [f"{c.failed:,} failed"] if c.failed else []
    more += [f"{c.skipped:,} skipped"] if c.skipped else []
    calls = f"extract {c.chunks:,} chunks ({c.extract_calls:,} called)"
    if c.rated or c.rating_hits:
        calls += f" · rate {c.rated:,} facts called, {c.rating_hits:,} cached"
    extra = f" ({', '.join(more)})" if more else ""
    return f"refs: {c.questions:,} questions read · {done}{extra} · {calls} · {duration(elapsed_s)}"


async def _run(settings: BuildSettings, counters: BuildCounters, every_s: float | None) -> BuildReport:
    from dahl.cli._console import console
    from dahl.refs._documents import build_refs  # imported by build() before the loop runs

    return await run_ticking(lambda: build_refs(settings, counters), lambda elapsed_s: _line(counters, elapsed_s), console, every_s, last=True)


def _convert(pool: tuple[Path, ...], given: Path | None, near: float | None, out: Path) -> None:
    """The --pool and --given modes: no call to any model, so no engine."""
    from dahl.cli._console import out as stdout
    from dahl.formats._refs import write_refs
    from dahl.refs._given import convert_given
    from dahl.refs._pool import check_output, pool_runs

    try:
        if given is not None:
            n = convert_given(given, out)
            stdout.print(f"{count(n, 'reference set')} converted from {given} to {out}", highlight=False)
            return
        check_output(out, pool)
        sets = pool_runs(pool, near=near)
        n = write_refs(out, sets)
    except (DahlError, KeyboardInterrupt) as exc:
        _stop(exc, out)
    except OSError as exc:
        _stop(OutputWriteError(f"cannot write {out}: {exc.strerror}", path=str(out)), out)
    facts = sum(len(s.facts) for s in sets)
    empty = sum(1 for s in sets if not s.facts)
    stdout.print(f"{count(n, 'reference set')} pooled from {count(len(pool), 'run')} to {out} ({facts:,} facts"
                 + (f"; {empty:,} questions without a supported claim" if empty else "") + ")", highlight=False)
    if n == 0:
        sys.exit(ExitStatus.NOTHING_SCORED)


def _stop(exc: BaseException, out: Path) -> NoReturn:
    """Present a build that stopped early as one line and exit with its status."""
    from dahl.cli._console import exit_stopped

    exit_stopped(exc, f"Finished sets are in {out}; re-run the same command to continue.")


@click.group()
def refs() -> None:
    """Reference fact sets for recall (refs.jsonl)."""


@refs.command("build")
@click.argument("questions", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The refs.jsonl to write (a re-run continues it).")
@click.option("--pool", "pool", multiple=True, type=click.Path(path_type=Path, exists=True),
              help="Pool the supported claims of this finished run folder (repeatable).")
@click.option("--given", type=click.Path(path_type=Path, exists=True, dir_okay=False), default=None,
              help="Convert a given reference set (dahl refs.jsonl or FactRBench layout).")
@click.option("--pool-near", type=click.FloatRange(0, 100), default=None,
              help="With --pool: also merge near-duplicate facts at this rapidfuzz ratio (off by default).")
@click.option("--format", "fmt", default="auto", show_default=True,
              help="QUESTIONS format: auto, questions, or an answers format of dahl score.")
@click.option("--evidence", type=click.Path(path_type=Path), default=None,
              help="Corpus to retrieve documents from (and look doc_ids up in): JSONL {id, title?, text} "
                   "or a folder of .txt/.md files.")
@click.option("--docs-per-question", default=3, show_default=True, type=click.IntRange(min=1),
              help="Documents retrieved per question (BM25 over their passages).")
@click.option("--extractor", default="rules", show_default=True, type=click.Choice(EXTRACTORS),
              help="Fact extraction: the offline rule Splitter, or an LLM.")
@click.option("--granularity", default="chunk", show_default=True, type=click.Choice(("chunk", "sentence")),
              help="Extraction unit: a chunk of a few sentences, or one sentence.")
@click.option("--rater", default="none", show_default=True, type=click.Choice(RATERS),
              help="Relevance and salience ratings (1-5) by an LLM; none: facts weigh 1.")
@click.option("--rate-batch", default=DEFAULT_BATCH, show_default=True, type=click.IntRange(min=1),
              help="Facts per rating call.")
@click.option("--alpha", default=0.5, show_default=True, type=FINITE, help="α of importance = α·r̃ + β·s̃.")
@click.option("--beta", default=0.5, show_default=True, type=FINITE, help="β of importance = α·r̃ + β·s̃.")
@click.option("--near-threshold", "near", default=NEAR_THRESHOLD, show_default=True,
              type=click.FloatRange(0, 100), help="Near-duplicate facts: rapidfuzz ratio >= this (100: exact only).")
@click.option("--base-url", default=None, help="OpenAI-compatible API root for the LLM extractor/rater.")
@click.option("--model", default=None, help="Model name for the LLM extractor/rater.")
@click.option("--api-key-env", default=None, help="Environment variable holding the API key.")
@click.option("--rpm", type=FINITE, default=None, help="Request budget, requests per minute.")
@click.option("--tpm", type=FINITE, default=None, help="Token budget, tokens per minute.")
@click.option("--max-in-flight", type=int, default=None, help="Concurrent requests per endpoint (default 64).")
@click.option("--temperature", type=FINITE, default=None, help="Sampling temperature (default 0).")
@click.option("--max-tokens", type=int, default=None, help="Completion budget per call, tokens (default 1024).")
@click.option("--timeout", "timeout_s", type=FINITE, default=None, help="Timeout of one request, seconds.")
@click.option("--max-cost", "max_cost_usd", type=click.FloatRange(min=0), default=None, metavar="USD",
              help="Stop cleanly (exit 3, resumable) before this build's calls could cost more than USD.")
@click.option("--price", "price_options", multiple=True, metavar="MODEL=IN,OUT",
              help="Price of MODEL in USD per million input and output tokens (repeatable).")
@template_option(("extract", "rate"))
@cache_and_progress_options
def build(questions: Path | None, out: Path, pool: tuple[Path, ...], given: Path | None, pool_near: float | None,
          fmt: str, evidence: Path | None, docs_per_question: int,
          extractor: str, granularity: str, rater: str, rate_batch: int, alpha: float, beta: float, near: float,
          base_url: str | None, model: str | None, api_key_env: str | None, rpm: float | None, tpm: float | None,
          max_in_flight: int | None, temperature: float | None, max_tokens: int | None, timeout_s: float | None,
          template_options: tuple[str, ...],
          cache_dir: Path | None, no_cache: bool, no_progress: bool, progress_every_s: float,
          max_cost_usd: float | None, price_options: tuple[str, ...]) -> None:
    """Build one reference fact set per question into OUT (refs.jsonl).

    From documents (QUESTIONS): per question, documents given in QUESTIONS or retrieved
    from --evidence; atomic facts extracted, duplicates removed, relevance and salience
    rated, importance = α·(r−1)/4 + β·(s−1)/4.

    Pooled (--pool RUN_DIR, repeatable): per question, the union of the runs' supported
    claims, exact duplicates merged, support = how many answers stated each fact.

    Given (--given FILE): a dahl refs.jsonl or FactRBench file, checked and converted.
    """
    from dahl.cli._console import run_stoppable, console, exit_finished, out as stdout, price_overrides
    from dahl.refs import _documents as documents  # noqa: F401  (aiohttp, bm25s: imported here, not on the event loop)

    modes = {"QUESTIONS": questions is not None, "--pool RUN_DIR...": bool(pool), "--given FILE": given is not None}
    if sum(modes.values()) != 1:
        raise click.UsageError(f"give exactly one input: {' | '.join(modes)}")
    if pool or given is not None:
        _convert(pool, given, pool_near, out)
        return
    try:
        templates = parse_template_options(template_options, ("extract", "rate"))
        for stage, role, name in (("extract", "extractor", extractor), ("rate", "rater", rater)):
            if stage in templates and name != "openai":
                raise ConfigError(f"the {name} {role} uses no prompt (--template {stage} applies to --{role} openai)")
        endpoint = None
        if "openai" in (extractor, rater):
            fields: dict[str, Any] = {
                "base_url": base_url, "model": model, "api_key_env": api_key_env, "rpm": rpm, "tpm": tpm,
                "max_in_flight": max_in_flight, "temperature": temperature, "max_tokens": max_tokens,
                "timeout_s": timeout_s,
            }
            if not base_url or not model:
                raise click.UsageError(f"--{'extractor' if extractor == 'openai' else 'rater'} openai needs "
                                       "--base-url and --model")
            endpoint = EndpointConfig(**{k: v for k, v in fields.items() if v is not None}, templates=templates)
        assert questions is not None
        settings = BuildSettings(
            questions=questions, out=out, evidence=evidence, fmt=fmt, docs_per_question=docs_per_question,
            extractor=extractor,  # type: ignore[arg-type]  # click.Choice checked it
            granularity=granularity,  # type: ignore[arg-type]
            rater=rater,  # type: ignore[arg-type]
            extract_endpoint=endpoint if extractor == "openai" else None,
            rate_endpoint=endpoint if rater == "openai" else None,
            rate_batch=rate_batch, alpha=alpha, beta=beta, near=near, cache_dir=cache_dir, use_cache=not no_cache,
            prices=price_overrides(None, price_options), max_cost_usd=max_cost_usd,
        )
        every = None if no_progress else progress_every_s
        report = run_stoppable(_run, settings, BuildCounters(), every)  # kill stops it as Ctrl-C does
    except (DahlError, KeyboardInterrupt) as exc:
        _stop(exc, out)
    c = report.counters
    stdout.print(f"{count(c.written, 'reference set')} written to {out} ({c.facts:,} facts)"
                 + (f"; {c.resumed:,} already there" if c.resumed else ""), highlight=False)
    if c.spend is not None and any(m.calls for m in c.spend.stages.values()):
        stages = ", ".join(f"{name} {usd(m.usd)}" for name, m in c.spend.stages.items())
        console.print(f"money: {usd(c.spend.spent_usd())} ({stages}; prices of {c.spend.table.date})", highlight=False)
    exit_finished(report.exit_status, "[red]nothing built:[/] no question got a reference set (exit status 5)",
                  lambda: f"[yellow]partly built:[/] {c.failed:,} failed, {c.skipped:,} skipped "
                          "(exit status 6; re-running retries the failed ones)")
