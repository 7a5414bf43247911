"""``dahl score``'s options into a :class:`~dahl.run._score.ScoreConfig`, and the recall options.

``dahl batch prepare`` borrows ``score``'s click parameters and this builder, so a prepared batch
asks exactly what ``dahl score`` with those options would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar, get_args

import click

from dahl.adapters._coverage import COVERAGE_JUDGES
from dahl.adapters._recall import RecallSettings
from dahl.cli._options import FINITE, parse_template_options
from dahl.cli._templates import SCORE_STAGES, apply_score_templates
from dahl.config import EndpointConfig, endpoint_configs, load_fields, load_kinds, load_nli, load_templates
from dahl.errors import ConfigError
from dahl.formats._fields import parse_field_options
from dahl.metrics._recall import Partial
from dahl.results._manifest import Shard
from dahl.run._plan import CHECKERS, SPLITTERS, AdapterSettings
from dahl.run._score import ScoreConfig, check_input_paths

__all__ = ["ENDPOINT_OPTIONS", "RECALL_OPTION_NAMES", "recall_options", "recall_settings", "score_config"]

F = TypeVar("F", bound=Callable[..., Any])

#: Options that override the endpoint settings of ``--config`` (keyword names of ``dahl score``).
ENDPOINT_OPTIONS = ("base_url", "model", "api_key_env", "rpm", "tpm", "max_in_flight", "temperature", "max_tokens",
                    "timeout_s", "provider", "auth")


def score_config(values: Mapping[str, Any]) -> ScoreConfig:
    """The run settings of ``dahl score``'s option values.

    Args:
        values: ``{keyword name: value}`` of ``dahl score``'s parameters as click passes them;
            a missing name takes its option's default.

    Raises:
        ConfigError: a bad or inconsistent setting (the message names the option).
        InputError: a malformed ``--config`` file or template.
    """
    from dahl.cli._console import price_overrides

    get = values.get
    check_input_paths(values["inputs"], get("fmt", "auto"))  # a missing file before any option it would hide
    config_file: Path | None = get("config_file")
    kinds = load_kinds(config_file, {"split": SPLITTERS, "check": CHECKERS}) if config_file is not None else {}
    splitter = get("splitter") or kinds.get("split", "rules")  # the command line, then --config, then the default
    checker = get("checker") or kinds.get("check", "evidence")
    evidence = get("evidence")
    overrides = {name: get(name) for name in ENDPOINT_OPTIONS}
    overrides["headers"] = dict(get("header_options") or ()) or None
    given = {k: v for k, v in overrides.items() if v is not None}
    endpoints = endpoint_configs(
        config_file, given,
        stages=tuple(stage for stage, name in (("split", splitter), ("check", checker)) if name == "openai"),
    )
    fields = {**(load_fields(config_file) if config_file is not None else {}),
              **parse_field_options(get("field_options") or ())}
    recall = recall_settings(values, checker=checker, check_endpoint=endpoints.get("check"),
                             config_file=config_file, overrides=given)
    templates = {**(load_templates(config_file) if config_file is not None else {}),
                 **parse_template_options(get("template_options") or (), SCORE_STAGES)}
    endpoints, recall = apply_score_templates(templates, endpoints, recall, splitter=splitter, checker=checker,
                                              evidence=evidence)
    nli = {**(load_nli(config_file) if config_file is not None else {}),
           **{k: get(k) for k in ("nli_model", "nli_threshold", "nli_contradiction") if get(k) is not None}}
    return ScoreConfig(
        inputs=values["inputs"],
        out_dir=values["out_dir"],
        fmt=get("fmt", "auto"),
        response_column=get("response_columns") or None,
        fields=fields,
        adapters=AdapterSettings(
            splitter=splitter,
            checker=checker,
            evidence=evidence,
            split_endpoint=endpoints.get("split"),
            check_endpoint=endpoints.get("check"),
            top_k=get("top_k", 5),
            **nli,
        ),
        gamma=get("gamma", 10.0),
        k=get("k", 64),
        seed=get("seed", 0),
        cache_dir=get("cache_dir"),
        use_cache=not get("no_cache", False),
        recall=recall,
        prices=price_overrides(config_file, get("price_options") or ()),
        max_cost_usd=get("max_cost_usd"),
        shard=Shard.parse(str(get("shard"))) if get("shard") else None,
        coord=get("coord"),
    )


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
    click.option("--alpha", type=FINITE, default=None,
                 help="Importance weight of relevance: imp = α·(r−1)/4 + β·(s−1)/4, recomputed from the ratings "
                      "(default: the importance stored in the refs file; rated facts without one: 0.5)."),
    click.option("--beta", type=FINITE, default=None,
                 help="Importance weight of salience (default: as --alpha; dahl's default 0.5)."),
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
    """The run's :class:`RecallSettings` from the option ``values`` (None without ``--refs``); the
    openai judge runs on the Checker's endpoint, else the one the options give.

    Raises:
        ConfigError: recall options without ``--refs``; an openai judge without an endpoint.
    """
    refs = values.get("refs")
    if refs is None:
        if values.get("coverage") or values.get("coverage_model") or values.get("fstar_k") \
                or values.get("fstar_min_importance") is not None or values.get("partial", "strict") != "strict" \
                or values.get("alpha") is not None or values.get("beta") is not None:
            raise ConfigError("--coverage, --coverage-model, --fstar-*, --partial, --alpha and --beta need --refs")
        return None
    settings = RecallSettings(
        refs=refs,
        coverage=values.get("coverage"),
        partial=values.get("partial", "strict"),
        fstar_k=values.get("fstar_k"),
        fstar_min_importance=values.get("fstar_min_importance"),
        alpha=values.get("alpha"),
        beta=values.get("beta"),
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
            raise ConfigError(
                "--coverage openai needs --base-url and --model (or a [check] table in --config)") from None
    endpoint = dataclasses.replace(endpoint, max_tokens=None)
    if values.get("coverage_model"):
        endpoint = dataclasses.replace(endpoint, model=values["coverage_model"])
    return dataclasses.replace(settings, endpoint=endpoint)
