"""``dahl score --template STAGE=FILE``: put a user's template into the stage's
:class:`~dahl.config.EndpointConfig`; a template for a stage the run does not prompt is an error."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from dahl.adapters._recall import RecallSettings
from dahl.config import EndpointConfig
from dahl.errors import ConfigError
from dahl.templates import PromptTemplate

__all__ = ["SCORE_STAGES", "apply_score_templates"]

#: The prompted stages of ``dahl score``.
SCORE_STAGES = ("split", "check", "check-evidence", "cover")


def _with(cfg: EndpointConfig, templates: Mapping[str, PromptTemplate], stages: tuple[str, ...]) -> EndpointConfig:
    own = {s: templates[s] for s in stages if s in templates}
    return dataclasses.replace(cfg, templates={**cfg.templates, **own}) if own else cfg


def _unused(templates: Mapping[str, PromptTemplate], *, splitter: str, checker: str, evidence: Path | None,
            recall: RecallSettings | None) -> str | None:
    """Why one of ``templates`` would not be used by this run, or None when each is."""
    if "split" in templates and splitter != "openai":
        return f"the {splitter} Splitter uses no prompt (--template split applies to --splitter openai)"
    for stage in ("check", "check-evidence"):
        if stage in templates and checker != "openai":
            return f"the {checker} Checker uses no prompt (--template {stage} applies to --checker openai)"
    if "check" in templates and evidence is not None:
        return "with --evidence the openai Checker uses the check-evidence template: give --template check-evidence=FILE"
    if "check-evidence" in templates and evidence is None:
        return "--template check-evidence applies to --checker openai --evidence CORPUS; without it the check template is used"
    if "cover" in templates:
        if recall is None:
            return "--template cover needs --refs (the cover prompt is recall's coverage judge)"
        if recall.judge_name(checker) != "openai":
            return f"the {recall.judge_name(checker)} coverage judge uses no prompt (--template cover applies to --coverage openai)"
    return None


def apply_score_templates(
    templates: Mapping[str, PromptTemplate],
    endpoints: Mapping[str, EndpointConfig],
    recall: RecallSettings | None,
    *,
    splitter: str,
    checker: str,
    evidence: Path | None,
) -> tuple[dict[str, EndpointConfig], RecallSettings | None]:
    """The run's endpoints and recall settings with the user's ``templates`` in place.

    Args:
        templates: ``{stage: PromptTemplate}`` from ``--template`` and ``[templates]`` of ``--config``.
        endpoints: ``{"split"|"check": EndpointConfig}`` of the openai adapters.
        recall: the recall settings, or None.
        splitter, checker: the adapter names; evidence: the ``--evidence`` corpus, if any.

    Raises:
        ConfigError: a template for a stage this run does not prompt.
    """
    for stage in templates:
        if stage not in SCORE_STAGES:
            raise ConfigError(f"dahl score has no {stage!r} prompt (its stages: {', '.join(SCORE_STAGES)})")
    why = _unused(templates, splitter=splitter, checker=checker, evidence=evidence, recall=recall)
    if why is not None:
        raise ConfigError(why)
    out = dict(endpoints)
    if "split" in out:
        out["split"] = _with(out["split"], templates, ("split",))
    if "check" in out:
        out["check"] = _with(out["check"], templates, ("check", "check-evidence"))
    if recall is not None and "cover" in templates:
        # No endpoint of its own: the judge runs on the Checker's.
        judge = recall.endpoint or dataclasses.replace(out["check"], max_tokens=None)
        recall = dataclasses.replace(recall, endpoint=_with(judge, templates, ("cover",)))
    return out, recall
