"""``dahl questions``: build a benchmark's exam questions from articles (``build``), and check
a question file (``lint``)."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

import click
import msgspec
from rich.markup import escape

from dahl.cli._progress import count, duration, run_ticking
from dahl.cli._options import FINITE, cache_and_progress_options, parse_template_options, template_option
from dahl.config import EndpointConfig
from dahl.errors import DahlError
from dahl.exit_status import ExitStatus
from dahl.questions._checks import NEAR_THRESHOLD
from dahl.questions._lint import LintReport, lint_questions

__all__ = ["questions"]


def _line(c: Any, elapsed_s: float) -> str:
    """One progress line of a build."""
    more = f" ({c.resumed:,} resumed)" if c.resumed else ""
    more += f" ({c.failed:,} failed)" if c.failed else ""
    return (f"questions: {c.articles:,} articles read · {c.done:,} done{more} · generate {c.generate_calls:,} "
            f"called · judge {c.judge_calls:,} called · {duration(elapsed_s)}")


async def _run(settings: Any, counters: Any, every_s: float | None) -> Any:
    from dahl.cli._console import console
    from dahl.questions._build import build_questions

    return await run_ticking(lambda: build_questions(settings, counters), lambda elapsed_s: _line(counters, elapsed_s), console, every_s)


def _stop(exc: BaseException, out: Path) -> NoReturn:
    from dahl.cli._console import exit_stopped

    exit_stopped(exc, f"Finished articles are in {out.name}.journal.jsonl; re-run the same command to continue.")


def _fetch(ids: Path, out: Path, eutils_url: str | None, key_env: str) -> Path:
    """Fetch the PMC ids of ``ids`` into ``OUT.articles.jsonl``; report metadata-only ones."""
    from dahl.cli._console import run_stoppable, console, out as stdout
    from dahl.questions._fetch import EUTILS_URL, FetchSettings, fetch_articles

    target = out.with_name(out.name + ".articles.jsonl")
    settings = FetchSettings(ids=ids, out=target, base_url=eutils_url or EUTILS_URL,
                             api_key=os.environ.get(key_env, "") if key_env else "")
    c = run_stoppable(fetch_articles, settings)
    stdout.print(f"fetched: {count(c.ok, 'article')} of {count(c.ids, 'id')} ({c.requests:,} requests"
                 + (f", {c.resumed:,} already fetched" if c.resumed else "") + f") into {target}",
                 highlight=False, soft_wrap=True)
    if c.metadata_only:
        console.print(f"[yellow]metadata only[/] (outside the PMC Open Access subset, not used): "
                      f"{c.metadata_only:,}: {', '.join(c.metadata_only_ids)}", highlight=False, soft_wrap=True)
    if c.not_found:
        console.print(f"[yellow]not found:[/] {c.not_found:,}", highlight=False, soft_wrap=True)
    if c.failed:
        console.print(f"[yellow]partly fetched:[/] {c.failed:,} ids failed; re-run to retry them", soft_wrap=True)
        sys.exit(ExitStatus.PARTIAL)
    return target


@click.group()
def questions() -> None:
    """Exam questions of a benchmark (DAHL's questions.csv)."""


@questions.command("build")
@click.argument("articles", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The questions CSV to write (its journal beside it lets a re-run continue).")
@click.option("--pmc-ids", is_flag=True,
              help="ARTICLES is a file of PMC ids (one a line): fetch them with NCBI E-utilities first.")
@click.option("--eutils-url", default=None, help="E-utilities root (default NCBI's).")
@click.option("--ncbi-api-key-env", default="NCBI_API_KEY", show_default=True,
              help="Environment variable holding an NCBI API key (10 requests/s instead of 3).")
@click.option("--per-article", default=5, show_default=True, type=click.IntRange(min=1),
              help="Questions generated per article.")
@click.option("--near-threshold", "near", default=95.0, show_default=True, type=click.FloatRange(0, 100),
              help="Near-duplicate questions: rapidfuzz ratio >= this (100: exact only).")
@click.option("--keep-flagged", is_flag=True, help="Keep flagged questions in the CSV (flags column filled).")
@click.option("--base-url", required=True, help="OpenAI-compatible API root of the generating LLM.")
@click.option("--model", required=True, help="Model name of the generating LLM.")
@click.option("--api-key-env", default=None, help="Environment variable holding the API key.")
@click.option("--rpm", type=FINITE, default=None, help="Request budget, requests per minute.")
@click.option("--tpm", type=FINITE, default=None, help="Token budget, tokens per minute.")
@click.option("--max-in-flight", type=int, default=None, help="Concurrent requests (default 64).")
@click.option("--temperature", type=FINITE, default=None, help="Sampling temperature (default 0).")
@click.option("--seed", type=int, default=None, help="Sampling seed sent to the server.")
@click.option("--max-tokens", type=int, default=None, help="Completion budget per call, tokens (default 1024).")
@click.option("--timeout", "timeout_s", type=FINITE, default=None, help="Timeout of one request, seconds.")
@template_option(("questions", "judge"))
@cache_and_progress_options
def build(articles: Path, out: Path, pmc_ids: bool, eutils_url: str | None, ncbi_api_key_env: str,
          per_article: int, near: float, keep_flagged: bool, base_url: str, model: str,
          api_key_env: str | None, rpm: float | None, tpm: float | None, max_in_flight: int | None,
          temperature: float | None, seed: int | None, max_tokens: int | None, timeout_s: float | None,
          template_options: tuple[str, ...],
          cache_dir: Path | None, no_cache: bool, no_progress: bool, progress_every_s: float) -> None:
    """Generate exam questions from ARTICLES (JSONL {id, title, text, license?, url?}) into OUT.

    Per article: --per-article questions from the LLM, each judged (answerable without
    the article? which of the 28 fields?) and flagged (context regexes, needs_article,
    ambiguous, duplicate). Flagged questions are dropped unless --keep-flagged; every
    flag is counted in the report.

    With --pmc-ids, ARTICLES lists PMC ids: they are fetched (JATS, 3 requests/s, 10
    with an NCBI API key) into OUT.articles.jsonl; articles outside the Open Access
    subset (metadata only) are reported and left out.
    """
    from dahl.cli._console import run_stoppable, console, out as stdout
    from dahl.questions._build import QuestionsCounters, QuestionsSettings  # aiohttp: before the loop runs

    fields: dict[str, Any] = {"base_url": base_url, "model": model, "api_key_env": api_key_env, "rpm": rpm,
                              "tpm": tpm, "max_in_flight": max_in_flight, "temperature": temperature,
                              "seed": seed, "max_tokens": max_tokens, "timeout_s": timeout_s}
    try:
        templates = parse_template_options(template_options, ("questions", "judge"))
        endpoint = EndpointConfig(**{k: v for k, v in fields.items() if v is not None}, templates=templates)
        settings = QuestionsSettings(articles=articles, out=out, endpoint=endpoint, per_article=per_article,
                                     near=None if near >= 100 else near, keep_flagged=keep_flagged,
                                     cache_dir=cache_dir, use_cache=not no_cache)
        counters = QuestionsCounters()
        if pmc_ids:
            articles = _fetch(articles, out, eutils_url, ncbi_api_key_env)
            settings = dataclasses.replace(settings, articles=articles)
        report = run_stoppable(_run, settings, counters, None if no_progress else progress_every_s)
    except (DahlError, KeyboardInterrupt) as exc:
        _stop(exc, out)
    c = report.counters
    if report.table is None:
        console.print(f"[yellow]partly built:[/] {count(c.failed, 'article')} failed; the CSV is written when "
                      "every article is done (exit status 6; re-running retries the failed ones)")
        sys.exit(ExitStatus.PARTIAL)
    t = report.table
    stdout.print(f"{count(t.written, 'question')} written to {out} from {count(c.articles, 'article')} "
                 f"({t.questions:,} generated, {t.flagged:,} flagged, "
                 f"{'kept' if keep_flagged else 'dropped'}"
                 + (f"; {c.resumed:,} articles already done" if c.resumed else "") + ")",
                 highlight=False, soft_wrap=True)
    stdout.print(f"calls: generate {c.generate_calls:,}, judge {c.judge_calls:,}", highlight=False, soft_wrap=True)
    for flag, n in sorted(t.flags.items()):
        stdout.print(f"  {flag}: {n:,}", highlight=False, soft_wrap=True)
    if t.written == 0:
        sys.exit(ExitStatus.NOTHING_SCORED)


@questions.command("lint")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--near", default=NEAR_THRESHOLD, show_default=True, type=click.FloatRange(0, 100),
              help="Near-duplicate threshold (rapidfuzz ratio, 0-100; 100: exact duplicates only).")
def lint(file: Path, as_json: bool, near: float) -> None:
    """Check the questions of FILE (CSV with question, category).

    Reports exact and near duplicates, context-dependent questions (the DAHL paper's
    regex families), categories outside the 28 fields + "other" or spelled otherwise,
    near-synonym categories used side by side, unused categories, and questions not
    ending in "?".

    Exit status: 0 when only informational findings (categories, no "?"); 6 when some
    rows would be dropped by `dahl questions build` (duplicates, near duplicates, empty
    or context-dependent questions); 2 when FILE cannot be read as a question CSV.
    """
    from dahl.cli._console import exit_stopped, out

    try:
        report = lint_questions(file, near=near)
    except DahlError as exc:
        exit_stopped(exc, "")
    if as_json:
        click.echo(msgspec.json.encode(report).decode())
    else:
        for line in report_lines(report):
            out.print(escape(line), highlight=False, soft_wrap=True)
    if report.dropping:
        sys.exit(ExitStatus.PARTIAL)


def report_lines(r: LintReport) -> list[str]:
    """The readable report of ``r``, one string per line."""
    lines = [
        f"file: {r.file}",
        f"rows: {r.rows:,}",
        f"unique questions: {r.unique_questions:,}",
        f"duplicate rows: {r.duplicate_rows:,} (exact, after NFC, case folding and whitespace)",
        f"near-duplicate rows: {r.near_duplicate_rows:,} (ratio >= {r.near:g})",
    ]
    if r.empty_questions:
        lines.append(f"empty questions: {r.empty_questions:,}")
    lines.append(f"context-dependent questions: {r.context_dependent:,}")
    for flag, n in r.context.items():
        lines.append(f"  {flag}: {n:,}")
        lines += [f"    e.g. {q}" for q in r.context_examples.get(flag, [])]
    lines.append(f"rows dropped by `dahl questions build`: {r.dropping:,}")
    lines.append(f"categories: {len(r.categories)}")
    lines += [f"  {name}: {n:,}" for name, n in r.categories.items()]
    for label, canonical in r.non_canonical.items():
        lines.append(f"non-canonical category: {label!r} " + (f"(canonical: {canonical!r})" if canonical
                                                               else "(names no category)"))
    for a, b in r.near_synonyms:
        lines.append(f"near-synonym categories: {a!r} beside {b!r}")
    if r.unused_categories:
        lines.append(f"unused categories: {', '.join(r.unused_categories)}")
    lines.append(f"questions not ending in '?': {r.no_question_mark:,} (informational: imperative prompts)")
    lines += [f"  e.g. {q}" for q in r.no_question_mark_examples]
    return lines
