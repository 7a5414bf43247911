"""Test support for the report modules: FActScore replay runs with verdict stores, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from dahl.run._plan import AdapterSettings
from dahl.run._score import ScoreConfig, score
from dahl.analysis._verdicts import STORE_DIR, rebuild
from tests.conftest import shared_data_dir

MODELS = ("InstructGPT", "ChatGPT", "PerplexityAI")


def factscore_run(base: Path, model: str, splitter: str = "given", checker: str = "replay") -> Path:
    """Score shared/data/factscore/labeled/<model>.jsonl into base/<splitter>-<checker>-<model> (once).

    Skips the calling test when the data is absent. The verdict store is rebuilt
    from answers.jsonl when the run did not write it.
    """
    src = shared_data_dir() / "factscore" / "labeled" / f"{model}.jsonl"
    if not src.is_file():
        pytest.skip(f"FActScore data {src} not found (set DAHL_SHARED_DATA)")
    out = base / f"{splitter}-{checker}-{model}"
    if not (out / STORE_DIR / "meta.json").is_file():
        if not (out / "summary.json").is_file():
            score(ScoreConfig(inputs=(src,), out_dir=out, fmt="factscore",
                              adapters=AdapterSettings(splitter=splitter, checker=checker)))
        if not (out / STORE_DIR / "meta.json").is_file():
            rebuild(out)
    return out


def replay_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three FActScore human-label replay runs, keyed by model."""
    base = tmp_path_factory.getbasetemp() / "factscore-runs"
    base.mkdir(exist_ok=True)
    return {m: factscore_run(base, m) for m in MODELS}
