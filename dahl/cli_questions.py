"""``dahl questions``: build and check benchmark question sets.

``dahl questions lint FILE`` runs the checks of :mod:`dahl.questions.checks` on a DAHL
``questions.csv`` and prints the report of :mod:`dahl.questions.lint`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import msgspec
from rich.markup import escape

from dahl.errors import DahlError
from dahl.exit_status import ExitStatus
from dahl.questions.checks import NEAR_THRESHOLD
from dahl.questions.lint import LintReport, lint_questions

__all__ = ["questions"]


@click.group()
def questions() -> None:
    """Build and check benchmark question sets."""


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
    from dahl.cli import console, out

    try:
        report = lint_questions(file, near=near)
    except DahlError as exc:
        console.print(f"[red]error:[/] {escape(str(exc))}")
        sys.exit(ExitStatus.USAGE)
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
