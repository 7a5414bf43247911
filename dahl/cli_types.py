"""Click parameter types of the ``dahl`` commands."""

from __future__ import annotations

import math
from typing import Any

import click

__all__ = ["FINITE", "FiniteFloat"]


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
