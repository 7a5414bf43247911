"""Checks before run folders are reported together: stale folders
(:func:`dahl.results._manifest.stale_reason`) and runs scored by other Checkers, Splitters,
prompt templates or question sets.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from dahl.errors import ConfigError
from dahl.results._manifest import read_manifest, stale_reason

__all__ = ["RunInfo", "check_runs", "checker_label", "differences", "run_info"]

_TEMPLATE = re.compile(r"template=([^|]+)")


@dataclass(frozen=True)
class RunInfo:
    """What a run folder says about how it was scored (None: not recorded, e.g. an older run).

    Attributes:
        checker, splitter, coverage: the fingerprints of its Checker, Splitter and coverage judge.
        question_set: blake2b of its sorted question ids (:class:`dahl.results._manifest.QuestionSet`).
    """

    path: Path
    checker: str | None
    splitter: str | None
    question_set: str | None
    coverage: str | None = None

    @property
    def prompts(self) -> dict[str, str]:
        """Role -> prompt template version in its fingerprint (``{"split": "split/v1", ...}``)."""
        found = {}
        for role, fingerprint in (("split", self.splitter), ("check", self.checker), ("cover", self.coverage)):
            template = _TEMPLATE.search(fingerprint) if fingerprint else None
            if template:
                found[role] = template.group(1)
        return found


def _run_folder(path: Path) -> Path:
    """The run folder of ``path``, which may be the run's ``verdicts/`` folder itself."""
    path = Path(path)
    return path.parent if path.name == "verdicts" and (path / "meta.json").is_file() else path


def run_info(run_dir: Path) -> RunInfo:
    """Read :class:`RunInfo` from ``summary.json`` (else ``manifest.json``) of ``run_dir`` (blocking)."""
    folder = _run_folder(run_dir)
    data: dict[str, Any] | None
    try:
        data = orjson.loads((folder / "summary.json").read_bytes())
    except (OSError, orjson.JSONDecodeError):
        data = read_manifest(folder)
    data = data if isinstance(data, dict) else {}
    config = data.get("config") if isinstance(data.get("config"), dict) else {}
    questions = data.get("question_set") if isinstance(data.get("question_set"), dict) else {}
    recall = data.get("recall_settings") if isinstance(data.get("recall_settings"), dict) else {}
    assert isinstance(config, dict) and isinstance(questions, dict) and isinstance(recall, dict)
    coverage = recall.get("coverage")
    return RunInfo(folder, config.get("checker"), config.get("splitter"), questions.get("blake2b"),
                   coverage if isinstance(coverage, str) else None)


def checker_label(fingerprint: str | None) -> str:
    """A short name of a Checker fingerprint for a table cell: ``gpt-4o-mini (check/v3)``, ``fake/v1``."""
    if not fingerprint:
        return "—"
    model = re.search(r"model=([^|]+)", fingerprint)
    template = _TEMPLATE.search(fingerprint)
    if model:
        return f"{model.group(1)} ({template.group(1)})" if template else model.group(1)
    return fingerprint.split(":", 1)[0]


def differences(infos: Sequence[RunInfo]) -> list[str]:
    """One line per way the runs differ (Checker, Splitter, each role's prompt template, question set).

    A run without a value (not recorded, or no prompt in that role) is left out of that comparison.
    """
    out = []
    aspects: dict[str, list[str | None]] = {
        "Checker": [i.checker for i in infos],
        "Splitter": [i.splitter for i in infos],
        **{f"{role} prompt template": [i.prompts.get(role) for i in infos] for role in ("split", "check", "cover")},
        "question set": [i.question_set for i in infos],
    }
    for name, values in aspects.items():
        known = [(i.path, v) for i, v in zip(infos, values) if v is not None]
        if len({v for _, v in known}) > 1:
            out.append(f"runs differ in {name}: " + "; ".join(f"{path}: {v}" for path, v in known))
    return out


def check_runs(
    run_dirs: Sequence[Path], *, allow_stale: bool = False, strict: bool = False
) -> tuple[list[RunInfo], list[str]]:
    """Check that ``run_dirs`` (or their ``verdicts/``) can be ranked together (blocking): each
    folder's :class:`RunInfo` and the warnings to show.

    Args:
        allow_stale: warn about a stale folder instead of refusing it.
        strict: refuse runs that differ instead of warning.

    Raises:
        ConfigError: a stale folder (unless ``allow_stale``), or runs that differ under ``strict``.
    """
    infos = [run_info(d) for d in run_dirs]
    warnings: list[str] = []
    for info in infos:
        reason = stale_reason(info.path)
        if reason is None:
            continue
        if not allow_stale:
            raise ConfigError(f"{info.path}: {reason}; re-run dahl score -o {info.path} to finish it, "
                              "or pass --allow-stale to rank its numbers anyway")
        warnings.append(f"{info.path} is stale: {reason}")
    found = differences(infos)
    if found and strict:
        raise ConfigError(f"{found[0]}; --strict refuses runs that differ (drop --strict to rank them with a warning)")
    return infos, warnings + found
