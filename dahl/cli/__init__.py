"""The ``dahl`` command line: a thin layer over the public API, one module per command.

``main`` is the click group; each command lives in its own private module and is added here.
The console and the exit statuses of a command that stopped early are in ``_console``.
"""

from __future__ import annotations

import click

from dahl.cli import _generate, _runs
from dahl.cli._batch import batch
from dahl.cli._cache import cache
from dahl.cli._eval import eval_command
from dahl.cli._inspect import inspect
from dahl.cli._merge import merge
from dahl.cli._models import models
from dahl.cli._questions import questions
from dahl.cli._refs import refs
from dahl.cli._report import report
from dahl.cli._score import score
from dahl.cli._study import study
from dahl.cli._console import EXIT_INTERRUPTED, EXIT_QUOTA, EXIT_USAGE, setup_logging

__all__ = ["EXIT_INTERRUPTED", "EXIT_QUOTA", "EXIT_USAGE", "main"]


def _more_verbose(ctx: click.Context, _param: click.Parameter, value: int) -> None:
    """``-v`` given after a subcommand (``dahl score -vv``): add it to the group's ``-v``."""
    if value:
        total = ctx.find_root().params.get("verbose", 0) + value
        setup_logging(total)


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
    setup_logging(verbose)


for _command in (score, merge, cache, inspect, _runs.leaderboard, _runs.pairs, _runs.agree, _runs.sample, report, refs,
                 questions, _generate.generate, _generate.templates, eval_command, batch, study, models):
    main.add_command(_command)
for _command in main.commands.values():
    _with_verbose(_command)
