"""Click parameter types, shared options and the grouped ``--help`` of the ``dahl`` commands."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

import click

from dahl.errors import ConfigError
from dahl.templates import PromptTemplate, load_prompt_template

__all__ = ["CACHE_DIR", "FINITE", "HEADER", "FiniteFloat", "GroupedCommand", "HeaderOption",
           "cache_and_progress_options", "cache_progress_options", "parse_template_options",
           "template_option"]

_F = TypeVar("_F", bound=Callable[..., Any])


class FiniteFloat(click.ParamType[float]):
    """A float option that refuses ``nan`` and ``±inf``, which ``float()`` accepts."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        """The option's value as a finite float.

        Raises:
            click.BadParameter: not a number, or not finite (a usage error, exit 2).
        """
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


FINITE = FiniteFloat()


class HeaderOption(click.ParamType[tuple[str, str]]):
    """A ``NAME=VALUE`` request header option (``--header 'X-Proxy-Token=${PROXY_TOKEN}'``)."""

    name = "NAME=VALUE"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, str]:
        """The option's ``(name, value)``.

        Raises:
            click.BadParameter: no ``=``, or an empty name (a usage error, exit 2).
        """
        if isinstance(value, tuple):
            return value  # already converted (a default)
        name, sep, text = str(value).partition("=")
        if not sep or not name.strip():
            self.fail(f"{value!r} is not NAME=VALUE", param, ctx)
        return name.strip(), text


HEADER = HeaderOption()


#: ``--cache-dir``, as every command that reads or writes the cache takes it.
CACHE_DIR = click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
                         help="Cache folder (default $DAHL_CACHE_DIR or the platform cache folder).")


def cache_progress_options(no_cache_help: str, every_help: str) -> Callable[[_F], _F]:
    """``--cache-dir``, ``--no-cache``, ``--no-progress`` and ``--progress-every`` (seconds)."""
    options = [
        CACHE_DIR,
        click.option("--no-cache", is_flag=True, help=no_cache_help),
        click.option("--no-progress", is_flag=True, help="Do not show progress."),
        click.option("--progress-every", "progress_every_s", default=10.0, show_default=True,
                     type=click.FloatRange(min=0.1), help=every_help),
    ]

    def decorate(command: _F) -> _F:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


#: The cache and progress options of every command that calls a model through the engine.
cache_and_progress_options = cache_progress_options("Do not read or write the cache.",
                                                    "Seconds between two progress lines.")


def template_option(stages: Collection[str]) -> Callable[[_F], _F]:
    """``--template STAGE=FILE`` (repeatable) for a command whose prompts are ``stages``."""
    return click.option(
        "--template", "template_options", multiple=True, metavar="STAGE=FILE",
        help=f"Your prompt template file for STAGE ({', '.join(stages)}), repeatable; its content hash "
             "versions the cache keys. See dahl templates --show STAGE.")


def parse_template_options(values: Collection[str], stages: Collection[str]) -> dict[str, PromptTemplate]:
    """Load and validate each ``STAGE=FILE`` of ``--template`` (up front, before any call).

    Args:
        values: the option's values, e.g. ``("split=my-split.toml",)``.
        stages: the stages the command has prompts for.

    Returns:
        ``{stage: PromptTemplate}``.

    Raises:
        ConfigError: not ``STAGE=FILE``, a stage without a prompt, a stage given twice, or a bad file.
    """
    out: dict[str, PromptTemplate] = {}
    for value in values:
        stage, sep, file = value.partition("=")
        stage = stage.strip()
        if not sep or not stage or not file:
            raise ConfigError(f"--template {value!r}: expected STAGE=FILE, e.g. split=my-split.toml")
        if stage not in stages:
            raise ConfigError(f"--template {value}: this command has no {stage!r} prompt "
                              f"(its stages: {', '.join(stages)})")
        if stage in out:
            raise ConfigError(f"--template {stage}= is given twice")
        out[stage] = load_prompt_template(stage, Path(file))
    return out


class GroupedCommand(click.Command):
    """A command whose ``--help`` lists its options in named sections: ``sections`` maps a heading
    to parameter names (the help option is ``"help"``); the rest come last under "Other options"."""

    def __init__(self, *args: Any, sections: dict[str, tuple[str, ...]], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sections = sections

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Parse ``args``, kept as given in ``ctx.meta["dahl.args"]`` (for a command that runs itself again)."""
        ctx.meta["dahl.args"] = list(args)
        return super().parse_args(ctx, args)

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Write one definition list per section, then the options no section claims."""
        help_option = self.get_help_option(ctx)
        records = {"help" if param is help_option else param.name: param.get_help_record(ctx)
                   for param in self.get_params(ctx) if isinstance(param, click.Option)}
        placed: set[str | None] = set()
        for heading, names in [*self.sections.items(), ("Other options", ())]:
            if heading == "Other options":
                names = tuple(name for name in records if name not in placed and name is not None)
            rows = [record for name in names if (record := records.get(name)) is not None]
            placed.update(names)
            if rows:
                with formatter.section(heading):
                    formatter.write_dl(rows)
