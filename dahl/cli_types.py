"""Click parameter types of the ``dahl`` commands."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = ["FINITE", "HEADER", "FiniteFloat", "HeaderOption", "cache_and_progress_options"]

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


def cache_and_progress_options(command: _F) -> _F:
    """``--cache-dir``, ``--no-cache``, ``--no-progress``, ``--progress-every`` (seconds),
    as every command that calls a model through the engine takes them besides ``dahl score``."""
    options = [
        click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
                     help="Cache folder (default $DAHL_CACHE_DIR or the user cache dir)."),
        click.option("--no-cache", is_flag=True, help="Do not read or write the cache."),
        click.option("--no-progress", is_flag=True, help="Do not show progress."),
        click.option("--progress-every", "progress_every_s", default=10.0, show_default=True,
                     type=click.FloatRange(min=0.1), help="Seconds between two progress lines."),
    ]
    for option in reversed(options):
        command = option(command)
    return command
