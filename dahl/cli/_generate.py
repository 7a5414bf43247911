"""``dahl generate``: answers from models to questions (dahl JSONL for ``dahl score``);
``dahl templates``: the shipped prompt templates of every stage."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from dahl.cli._progress import count, duration, run_ticking, usd
from dahl.cli._options import FINITE, cache_and_progress_options
from dahl.cli._options import parse_template_options
from dahl.config import EndpointConfig
from dahl.errors import ConfigError, DahlError
from dahl.generate._settings import PAPER_MAX_TOKENS, PAPER_TEMPERATURE, GenerateCounters, GenerateReport, GenerateSettings
from dahl.generate._templates import load_template, shipped_prompt_templates, shipped_templates

__all__ = ["generate", "parse_temperatures", "templates"]


def _done(c: GenerateCounters) -> str:
    """What a run did: ``"N answers written of M (... resumed, ... from cache, ...)"``."""
    more = [f"{c.resumed:,} resumed"] if c.resumed else []
    more += [f"{c.cached:,} from cache"] if c.cached else []
    more += [f"{c.truncated:,} cut at max tokens"] if c.truncated else []
    more += [f"{c.refused:,} refused (abstained)"] if c.refused else []
    more += [f"{c.empty:,} empty (abstained)"] if c.empty else []
    more += [f"{c.duplicates:,} duplicate"] if c.duplicates else []
    more += [f"{c.failed:,} failed"] if c.failed else []
    extra = f" ({', '.join(more)})" if more else ""
    return f"{count(c.written, 'answer')} written of {c.answers:,}{extra}"


def _line(c: GenerateCounters, elapsed_s: float) -> str:
    """One progress line of a run."""
    return f"generate: {c.questions:,} questions read · {_done(c)} · {duration(elapsed_s)}"


def parse_temperatures(text: str) -> tuple[float, ...]:
    """The temperatures of ``--temperatures 0.1,0.2,...``, in the order given.

    Raises:
        ConfigError: an item is not a finite number, or one is given twice.
    """
    values: list[float] = []
    for item in text.split(","):
        try:
            value = float(item)
        except ValueError:
            raise ConfigError(f"--temperatures: {item.strip()!r} is not a number") from None
        if not math.isfinite(value):
            raise ConfigError(f"--temperatures: {item.strip()!r} is not a finite number")
        if value in values:
            raise ConfigError(f"--temperatures: {value:g} is given twice")
        values.append(value)
    return tuple(values)


def _unescape(text: str) -> str:
    """A stop sequence as typed in a shell: ``\\n`` and ``\\t`` stand for a newline and a tab."""
    return text.replace("\\n", "\n").replace("\\t", "\t")


async def _run(settings: GenerateSettings, counters: GenerateCounters, every_s: float | None) -> GenerateReport:
    from dahl.cli._console import console
    from dahl.generate._answers import generate_answers

    return await run_ticking(lambda: generate_answers(settings, counters), lambda elapsed_s: _line(counters, elapsed_s), console, every_s)


@click.command()
@click.argument("questions", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@click.option("--model", "models", multiple=True, required=True, help="Model to answer with (repeatable).")
@click.option("--base-url", required=True, help="OpenAI-compatible API root, e.g. http://localhost:8000/v1.")
@click.option("-o", "--out", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The answers JSONL to write (a re-run continues it).")
@click.option("--mode", default="completion", show_default=True, type=click.Choice(("completion", "chat")),
              help="completion: /completions with a plain prompt (pretrained base models, as the DAHL paper); "
                   "chat: /chat/completions (instruct models).")
@click.option("--temperature", default=PAPER_TEMPERATURE, show_default=True, type=FINITE,
              help="Sampling temperature (the DAHL paper's 0.6).")
@click.option("--temperatures", "temperatures_text", default=None, metavar="T1,T2,...",
              help="Comma list of temperatures, e.g. 0.1,0.2,...,1.0 (the DAHL paper's study, §5.2): every "
                   "question x model x temperature x sample; instead of --temperature.")
@click.option("--max-tokens", default=PAPER_MAX_TOKENS, show_default=True, type=click.IntRange(min=1),
              help="Completion budget per answer, tokens (the DAHL paper's 256).")
@click.option("--top-p", default=None, type=FINITE, help="Nucleus sampling mass in (0, 1]; omitted by default.")
@click.option("--seed", default=None, type=int, help="Sampling seed (sample i sends seed + i); omitted by default.")
@click.option("--stop", "stop", multiple=True,
              help='Stop sequence (repeatable), e.g. "\\nQuestion:" for a base model; none by default.')
@click.option("--samples", default=1, show_default=True, type=click.IntRange(min=1),
              help="Answers per question and model.")
@click.option("--template", "template_file", default=None, type=click.Path(path_type=Path, dir_okay=False),
              help="Your generation template file (holding {question}); its content hash versions the answers.")
@click.option("--api-key-env", default=None, help="Environment variable holding the API key.")
@click.option("--rpm", type=FINITE, default=None, help="Request budget per model, requests per minute.")
@click.option("--tpm", type=FINITE, default=None, help="Token budget per model, tokens per minute.")
@click.option("--max-in-flight", type=click.IntRange(min=1), default=None,
              help="Concurrent requests per model (default 64).")
@click.option("--timeout", "timeout_s", type=FINITE, default=None, help="Timeout of one request, seconds.")
@click.option("--max-cost", "max_cost_usd", type=click.FloatRange(min=0), default=None, metavar="USD",
              help="Stop cleanly (exit 3, resumable) before this run's calls could cost more than USD.")
@click.option("--price", "price_options", multiple=True, metavar="MODEL=IN,OUT",
              help="Price of MODEL in USD per million input and output tokens (repeatable).")
@cache_and_progress_options
@click.pass_context
def generate(ctx: click.Context, questions: Path, models: tuple[str, ...], base_url: str, out: Path, mode: str,
             temperature: float, temperatures_text: str | None, max_tokens: int, top_p: float | None, seed: int | None, stop: tuple[str, ...], samples: int,
             template_file: Path | None,
             api_key_env: str | None, rpm: float | None, tpm: float | None, max_in_flight: int | None,
             timeout_s: float | None, cache_dir: Path | None, no_cache: bool, no_progress: bool,
             progress_every_s: float, max_cost_usd: float | None, price_options: tuple[str, ...]) -> None:
    """Answer every question of QUESTIONS with each --model into OUT (dahl JSONL for dahl score).

    QUESTIONS: CSV/TSV or JSONL with question (or LongFact's prompt), optional
    category and question_id. Each answer records its model, template version,
    sampling settings, sample index, usage and finish_reason ("length": cut at
    --max-tokens, so scoring drops its cut-off last sentence). With --temperatures
    each model is asked at every temperature; meta.sampling.temperature tells the
    answers apart (dahl study temperature groups by it).
    """
    from dahl.cli._console import run_stoppable, console, exit_finished, exit_stopped, out as stdout, price_overrides
    from dahl.generate import _answers as answers  # noqa: F401  (aiohttp: imported here, not on the event loop)

    try:
        fields: dict[str, Any] = {"api_key_env": api_key_env, "rpm": rpm, "tpm": tpm,
                                  "max_in_flight": max_in_flight, "timeout_s": timeout_s}
        extra = {k: v for k, v in fields.items() if v is not None}
        if temperatures_text is not None and \
                ctx.get_parameter_source("temperature") != click.core.ParameterSource.DEFAULT:
            raise click.UsageError("give --temperature or --temperatures, not both")
        grid = (temperature,) if temperatures_text is None else parse_temperatures(temperatures_text)
        endpoints = tuple(EndpointConfig(base_url=base_url, model=m, temperature=t, seed=seed,
                                         max_tokens=max_tokens, **extra) for m in models for t in grid)
        settings = GenerateSettings(
            questions=questions, out=out, endpoints=endpoints,
            mode=mode,  # type: ignore[arg-type]  # click.Choice checked it
            top_p=top_p, stop=tuple(_unescape(s) for s in stop), samples=samples,
            template=load_template(template_file) if template_file is not None else None,
            cache_dir=cache_dir, use_cache=not no_cache,
            prices=price_overrides(None, price_options), max_cost_usd=max_cost_usd,
        )
        every = None if no_progress else progress_every_s
        counters = GenerateCounters()
        report = run_stoppable(_run, settings, counters, every)  # kill stops it as Ctrl-C does
    except (DahlError, KeyboardInterrupt) as exc:
        exit_stopped(exc, f"Finished answers are in {out}; re-run the same command to continue.")
    c = report.counters
    stdout.print(escape(f"{_done(c)} to {out}"), highlight=False)
    if c.spend is not None and any(m.calls for m in c.spend.stages.values()):
        console.print(f"money: {usd(c.spend.spent_usd())} (prices of {c.spend.table.date})", highlight=False)
    exit_finished(report.exit_status, "[red]nothing generated:[/] no answer was written (exit status 5)",
                  lambda: f"[yellow]partly generated:[/] {c.failed:,} failed (exit status 6; re-running retries them)")


@click.command()
@click.option("--show", "show", default=None, metavar="STAGE",
              help="Print the shipped template of STAGE (or of a version, e.g. generate-chat/v1) as a "
                   "TOML template file to copy and edit.")
@click.option("--check", "check", default=None, metavar="STAGE=FILE",
              help="Validate your template FILE for STAGE and print its version.")
def templates(show: str | None, check: str | None) -> None:
    """List the shipped prompt template of every stage, with its version."""
    from dahl.cli._console import exit_stopped
    from dahl.cli._console import out as stdout
    from dahl.templates import STAGES, to_toml

    if show is not None and check is not None:
        exit_stopped(ConfigError("give --show or --check, not both"), "")
    if check is not None:
        try:
            template = parse_template_options((check,), tuple(STAGES))[check.partition("=")[0].strip()]
        except DahlError as exc:
            exit_stopped(exc, "")
        parts = "system and user parts" if template.system else "a user part, no system message"
        stdout.print(escape(f"ok: {check.partition('=')[2]} is a {template.stage} template, version "
                            f"{template.version}, with {parts}"), highlight=False)
        return
    if show is not None:
        found = [t for t in shipped_prompt_templates() if show in (t.stage, t.version)]
        if not found:
            exit_stopped(ConfigError(f"--show {show}: no such stage or version (stages: {', '.join(STAGES)})"), "")
        stdout.print(escape(to_toml(found[0])), end="", highlight=False, soft_wrap=True)
        return
    for stage, version, what in shipped_templates():
        stdout.print(f"{stage:<14} {version:<22} {what}", highlight=False)
