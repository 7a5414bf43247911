"""``dahl inspect``: what an answer file holds (rows, questions, categories, models)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.markup import escape

from dahl.cli._console import exit_stopped, out
from dahl.errors import DahlError
from dahl.formats import FORMATS, describe_input
from dahl.formats._fields import parse_field_options

__all__ = ["inspect"]


@click.command()
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
        exit_stopped(exc, "")
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
