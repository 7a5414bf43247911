"""The :class:`~dahl.run._score.ScoreConfig` of ``dahl score``'s options: one builder for ``dahl score`` and ``dahl batch prepare``.

Both commands take the same options (``prepare`` borrows ``score``'s click parameters),
so both build their run settings here, and a batch prepared with some options asks
exactly what ``dahl score`` with those options would ask.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dahl.run._plan import AdapterSettings
from dahl.cli._recall_options import recall_settings
from dahl.cli._templates import SCORE_STAGES, apply_score_templates
from dahl.cli._options import parse_template_options
from dahl.config import endpoint_configs, load_fields, load_templates
from dahl.formats._fields import parse_field_options
from dahl.run._score import ScoreConfig

__all__ = ["ENDPOINT_OPTIONS", "score_config"]

#: Options that override the endpoint settings of ``--config`` (keyword names of ``dahl score``).
ENDPOINT_OPTIONS = ("base_url", "model", "api_key_env", "rpm", "tpm", "max_in_flight", "temperature", "max_tokens",
                    "timeout_s", "provider", "auth")


def score_config(values: Mapping[str, Any]) -> ScoreConfig:
    """The run settings of ``dahl score``'s option values.

    Args:
        values: ``{keyword name: value}`` of ``dahl score``'s parameters as click passes
            them (``inputs``, ``out_dir``, ``splitter``, ..., and the recall options of
            :data:`dahl.cli._recall_options.RECALL_OPTION_NAMES`); a missing name takes its
            option's default (so a command taking only some of the options can call this).

    Returns:
        The :class:`ScoreConfig`.

    Raises:
        ConfigError: a bad or inconsistent setting (the message names the option).
        InputError: a malformed ``--config`` file or template.
    """
    from dahl.cli._console import price_overrides

    get = values.get
    config_file: Path | None = get("config_file")
    splitter, checker, evidence = get("splitter", "rules"), get("checker", "evidence"), get("evidence")
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
        ),
        gamma=get("gamma", 10.0),
        k=get("k", 64),
        seed=get("seed", 0),
        cache_dir=get("cache_dir"),
        use_cache=not get("no_cache", False),
        recall=recall,
        prices=price_overrides(config_file, get("price_options") or ()),
        max_cost_usd=get("max_cost_usd"),
    )
