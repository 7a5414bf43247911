"""The recall options of ``dahl score`` (``--refs`` and friends) and the settings built from them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, get_args

import click

from dahl.adapters._coverage import COVERAGE_JUDGES
from dahl.adapters._recall import RecallSettings
from dahl.cli._options import FINITE
from dahl.config import EndpointConfig, endpoint_configs
from dahl.errors import ConfigError
from dahl.metrics._recall import Partial

__all__ = ["RECALL_OPTION_NAMES", "recall_options", "recall_settings"]

F = TypeVar("F", bound=Callable[..., Any])

#: Keyword names the options add to the command function.
RECALL_OPTION_NAMES = ("refs", "coverage", "partial", "fstar_k", "fstar_min_importance", "alpha", "beta",
                       "coverage_model")

_OPTIONS = (
    click.option("--refs", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="Reference facts (refs.jsonl): add recall, weighted recall and F1 to the run."),
    click.option("--coverage", type=click.Choice(COVERAGE_JUDGES), default=None,
                 help="Coverage judge: exact (a fact is covered iff it is one of the answer's supported "
                      "claims), lexical (offline word overlap), openai (an LLM). Default: exact with "
                      "--checker replay, openai with --checker openai, else lexical."),
    click.option("--partial", type=click.Choice(get_args(Partial)), default="strict", show_default=True,
                 help="Credit of a partially covered fact: strict 0, half 0.5, lenient 1."),
    click.option("--fstar-k", type=click.IntRange(min=1), default=None,
                 help="F* = the K most important facts (default: all)."),
    click.option("--fstar-min-importance", type=FINITE, default=None,
                 help="F* = the facts with importance >= T (default: all)."),
    click.option("--alpha", type=FINITE, default=0.5, show_default=True,
                 help="Importance weight of relevance: imp = α·(r−1)/4 + β·(s−1)/4."),
    click.option("--beta", type=FINITE, default=0.5, show_default=True, help="Importance weight of salience."),
    click.option("--coverage-model", default=None,
                 help="Model of the openai coverage judge (default: the Checker's), on the Checker's endpoint "
                      "or --base-url."),
)


def recall_options(command: F) -> F:
    """Decorate a click command with the recall options (:data:`RECALL_OPTION_NAMES`)."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def recall_settings(
    values: Mapping[str, Any],
    *,
    checker: str,
    check_endpoint: EndpointConfig | None,
    config_file: Path | None,
    overrides: Mapping[str, Any],
) -> RecallSettings | None:
    """The run's :class:`RecallSettings` from the option ``values`` (None without ``--refs``).

    The ``openai`` judge's endpoint is the Checker's (its ``max_tokens`` left to the
    judge's own default), else the one ``--base-url``/``--model``/``--config`` give;
    ``--coverage-model`` replaces its model.

    Raises:
        ConfigError: recall options without ``--refs`` (``--partial``, ``--alpha``, ``--beta``
            when not their defaults); an openai judge without an endpoint.
    """
    refs = values.get("refs")
    if refs is None:
        if values.get("coverage") or values.get("coverage_model") or values.get("fstar_k") \
                or values.get("fstar_min_importance") is not None or values.get("partial", "strict") != "strict" \
                or values.get("alpha", 0.5) != 0.5 or values.get("beta", 0.5) != 0.5:
            raise ConfigError("--coverage, --coverage-model, --fstar-*, --partial, --alpha and --beta need --refs")
        return None
    settings = RecallSettings(
        refs=refs,
        coverage=values.get("coverage"),
        partial=values.get("partial", "strict"),
        fstar_k=values.get("fstar_k"),
        fstar_min_importance=values.get("fstar_min_importance"),
        alpha=values.get("alpha", 0.5),
        beta=values.get("beta", 0.5),
    )
    if settings.judge_name(checker) != "openai":
        return settings
    endpoint = check_endpoint
    if endpoint is None:
        model = values.get("coverage_model")
        merged = {**overrides, **({"model": model} if model else {})}
        try:
            endpoint = endpoint_configs(config_file, merged, stages=("check",))["check"]
        except ConfigError as exc:
            if "needs --" not in str(exc):  # a bad value, not a missing one
                raise
            # Its message names the Checker; say which option needs the endpoint.
            raise ConfigError(
                "--coverage openai needs --base-url and --model (or a [check] table in --config)") from None
    endpoint = dataclasses.replace(endpoint, max_tokens=None)
    if values.get("coverage_model"):
        endpoint = dataclasses.replace(endpoint, model=values["coverage_model"])
    return dataclasses.replace(settings, endpoint=endpoint)
